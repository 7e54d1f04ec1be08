"""OpenAI Responses WebSocket mode through a reverse listener (`--mode reverse:…`), with
the OpenAI SDK's `responses.connect()` against a local `websockets` server; and a Codex
CLI-shaped session (warmup, a custom tool call, an error event) through an `openai`
reverse listener (`--reverse openai=PORT --upstream openai=…`) of a proxy of its own."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llmtap.storage.engine import make_engine
from tests.e2e import harness
from tests.e2e.conftest import WS_CASE, _assert_no_keys
from tests.e2e.harness import Proxy
from tests.e2e.wsupstream import WsUpstream, sse_events
from tests.helpers import free_port

CODEX = Path(__file__).parents[1] / "fixtures" / "codex"
TERMINAL = ("response.completed", "response.failed", "response.incomplete", "error")

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
    harness.assert_matches_case(row, c, status=101)  # frames have no status of their own: the upgrade's
    harness.assert_timings(row)
    harness.assert_key_fields(row, proxy, key)
    assert row["source"] == "websocket" and row["protocol"] == "openai.responses"
    assert row["team"] == "sockets"
    assert row["request_message_count"] is not None  # the response.create was read as the request
    # a `--mode reverse:` listener names no provider: the host names it, as for HTTP
    assert row["provider"] == "127.0.0.1" and row["host"] == "127.0.0.1"
    assert row["warmup"] is False


def _codex_frames(create: dict[str, Any]) -> list[str]:
    """What the scripted upstream answers a Codex `response.create` with."""
    if create.get("generate") is False:
        return sse_events((CODEX / "stream_warmup.sse").read_bytes())
    if create.get("model") == "fail-me":
        error = {"type": "error", "code": "rate_limit_exceeded", "message": "Slow down.", "param": None}
        return [json.dumps(error)]
    return sse_events((CODEX / "stream_turn1_exec.sse").read_bytes())


class _OpenAIListenerProxy(Proxy):
    """`llmtap proxy` with one `openai` reverse listener whose upstream is a WebSocket server."""

    def start(self, ws_upstream: str) -> None:
        args = [
            str(harness.LLMTAP), "proxy", "--quiet",
            "--db", f"sqlite:///{self.db}",
            "--confdir", str(self.confdir),
            "--reverse", f"openai={self.ports['openai']},team-codex",
            "--upstream", f"openai={ws_upstream}",
        ]  # fmt: skip
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                args,
                env=harness.clean_env(LLMTAP_HOME=str(self.home)),
                stdout=subprocess.DEVNULL,
                stderr=log,
                cwd=self.root,
            )
        harness.wait_for_port(self.ports["openai"], self.proc, self.log)
        self.engine = make_engine(f"sqlite:///{self.db}")


@pytest.fixture(scope="module")
def codex_proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    if not harness.LLMTAP.exists():
        pytest.skip(f"the llmtap console script is not at {harness.LLMTAP}")
    root = tmp_path_factory.mktemp("e2e-codex-ws")
    with WsUpstream(_codex_frames, delay=0.02) as upstream:
        proxy = _OpenAIListenerProxy(
            root=root,
            upstream=None,  # type: ignore[arg-type]  # no HTTP upstream: WebSocket only
            tls_upstream=None,  # type: ignore[arg-type]
            routes=harness.Routes(),
            ports={"openai": free_port()},
        )
        proxy.start(upstream.url)
        try:
            yield proxy
        finally:
            code = proxy.stop()
    log = proxy.log.read_text(errors="replace")
    assert code == 0, f"llmtap proxy exited {code}:\n{log[-3000:]}"
    _assert_no_keys(root, proxy.keys)
    assert "Traceback" not in log, log[-3000:]


def _create(connection: Any, body: dict[str, Any]) -> list[dict[str, Any]]:
    connection.send(json.dumps({"type": "response.create", **body}))
    events = []
    while True:
        event = json.loads(connection.recv(timeout=10))
        events.append(event)
        if event.get("type") in TERMINAL:
            return events


def _rows(proxy: Proxy, key: str, count: int, timeout: float = 15.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        rows = proxy.rows(key)
        if len(rows) >= count or time.monotonic() > deadline:
            return sorted(rows, key=lambda r: r["started_at"])
        time.sleep(0.05)


def test_codex_session_over_an_openai_listener(codex_proxy: Proxy) -> None:
    from websockets.sync.client import connect

    key = codex_proxy.key(harness.OPENAI_KEY)
    url = f"ws://127.0.0.1:{codex_proxy.ports['openai']}/v1/responses"
    warmup = json.loads((CODEX / "request_warmup.json").read_text())
    turn = json.loads((CODEX / "request_turn1.json").read_text())
    with connect(url, additional_headers={"Authorization": f"Bearer {key}"}) as connection:
        assert _create(connection, warmup)[-1]["type"] == "response.completed"
        assert _create(connection, turn)[-1]["type"] == "response.completed"
        assert _create(connection, {"model": "fail-me", "input": "x"})[-1]["type"] == "error"

    rows = _rows(codex_proxy, key, 3)
    assert len(rows) == 3
    for row in rows:
        # as this listener's HTTP exchanges would be: provider from the listener, the
        # upstream's host, and the upgrade's status for every response on the socket
        assert (row["provider"], row["host"], row["status"]) == ("openai", "127.0.0.1", 101)
        assert (row["source"], row["protocol"], row["team"], row["streamed"]) == (
            "websocket",
            "openai.responses",
            "team-codex",
            True,
        )
        assert row["key_fingerprint"] == codex_proxy.fingerprint(key)
    warm, exec_turn, failed = rows
    assert (warm["warmup"], exec_turn["warmup"], failed["warmup"]) == (True, False, False)
    assert (warm["finish_reason"], warm["usage_input_tokens"], warm["complete"]) == ("end_turn", 2310, True)
    assert warm["decode_error"] is None and exec_turn["decode_error"] is None

    assert exec_turn["finish_reason"] == "tool_use"
    [call] = exec_turn["tool_calls"]
    assert (call["name"], call["kind"], call["status"], call["arguments_raw"]) == ("exec", "custom", "valid", "echo hi")
    assert [t["name"] for t in exec_turn["request_tools"]] == [
        "exec",
        "apply_patch",
        "view_image",
        "note",
        "update_plan",
        "collaboration.send_message",
    ]
    assert exec_turn["request_messages_by_role"] == {"developer": 2, "user": 2}
    assert exec_turn["request_system_chars"] > 0

    # an error event: the record's error, and still the upgrade's status
    assert (failed["error_code"], failed["error_message"], failed["finish_reason"]) == (
        "rate_limit_exceeded",
        "Slow down.",
        "error",
    )
