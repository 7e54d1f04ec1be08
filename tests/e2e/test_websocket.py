"""OpenAI Responses WebSocket mode through a reverse listener (`--mode reverse:…`), with
the OpenAI SDK's `responses.connect()` against a local `websockets` server."""

from __future__ import annotations

import json
import time

import pytest

from tests.e2e import harness
from tests.e2e.conftest import WS_CASE
from tests.e2e.harness import Proxy
from tests.e2e.wsupstream import WsUpstream

openai = pytest.importorskip("openai")
pytest.importorskip("websockets", reason="Responses WebSocket mode needs the websockets package")


# openai's responses.connect() calls websockets' connect() outside a `with`, which
# websockets 17 deprecates; that is the SDK's business, not this test's.
@pytest.mark.filterwarnings("ignore:connect\\(\\) must be used as a context manager:DeprecationWarning")
def test_responses_websocket_mode(proxy: Proxy, ws_upstream: WsUpstream) -> None:
    c = harness.case(WS_CASE)
    key = proxy.key(harness.OPENAI_KEY)
    client = openai.OpenAI(api_key=key, base_url=proxy.base("ws") + "/v1", max_retries=0)
    frames: list[tuple[float, bytes]] = []
    sent_before = len(ws_upstream.sent)
    with client.responses.connect(extra_headers={"X-LLMTap-Team": "sockets"}) as connection:
        connection.response.create(model="gpt-4o-mini", input="Say hello")
        while True:
            frame = connection.recv_bytes()
            frames.append((time.time(), frame))
            if json.loads(frame)["type"] in ("response.completed", "response.failed", "response.incomplete"):
                break

    deadline = time.monotonic() + 5  # the server's thread notes a frame just after sending it
    while len(ws_upstream.sent) - sent_before < len(frames) and time.monotonic() < deadline:
        time.sleep(0.01)
    sent = ws_upstream.sent[sent_before:]
    assert [f.decode() for _, f in frames] == [text for _, text in sent]  # every frame, unchanged
    assert frames[0][0] < sent[-1][0], "the first frame should reach the client before the last is sent"
    assert "x-llmtap-team" not in ws_upstream.headers[-1]
    assert ws_upstream.headers[-1]["authorization"] == f"Bearer {key}"

    row = proxy.record(key)
    harness.assert_matches_case(row, c, status=None)  # frames have no HTTP status of their own
    harness.assert_timings(row)
    harness.assert_key_fields(row, proxy, key)
    assert row["source"] == "websocket" and row["protocol"] == "openai.responses"
    assert row["team"] == "sockets"
    assert row["request_message_count"] is not None  # the response.create was read as the request
