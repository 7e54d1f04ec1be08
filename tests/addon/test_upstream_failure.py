"""An upstream that gave no response (issue 26), at the recorder's `error` hook: the
failure as mitmproxy words it, classified; the answer in the request protocol's error
shape, recorded through the usual path with its status and `error_code`, and one line on
stderr naming the record; nothing of the kind for a request that is no LLM exchange, or
for a flow cut short by its client. (End to end: tests/e2e/test_upstream_down.py.)"""

from __future__ import annotations

import json

import pytest
from mitmproxy import flow as mflow

from llmtap.addon.answering import FAILURE_KEY, WATCH_KEY
from llmtap.addon.upstream_failure import TIMEOUT, UNREACHABLE, failure, timed_out
from tests.addon.flows import request_flow


@pytest.mark.parametrize(
    ("error", "detail", "reason"),
    [
        ("[Errno 111] Connect call failed ('127.0.0.1', 9)", UNREACHABLE, "connection refused"),
        ("[Errno -2] Name or service not known", UNREACHABLE, "the name h does not resolve"),
        ("[Errno -3] Temporary failure in name resolution", UNREACHABLE, "the name h does not resolve"),
        ("[Errno 110] Connect call failed ('10.0.0.1', 443)", TIMEOUT, "the connection timed out"),
        ("TLS handshake failed: certificate verify failed", UNREACHABLE, "TLS failed (TLS handshake failed: "
         "certificate verify failed)"),
        ("[Errno 101] Network is unreachable", UNREACHABLE, "network unreachable"),
        ("HTTP/1 protocol error: Server disconnected", UNREACHABLE, "HTTP/1 protocol error: Server disconnected"),
    ],
)  # fmt: skip
def test_a_failure_as_mitmproxy_words_it(error: str, detail: str, reason: str) -> None:
    found = failure("h", 443, error)
    assert (found.detail, found.reason) == (detail, reason)
    assert found.status == (504 if detail == TIMEOUT else 502)


CASES = {
    "anthropic.messages": (
        "/v1/messages",
        b'{"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}',
    ),
    "openai.chat": ("/v1/chat/completions", b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}'),
    "openai.responses": ("/v1/responses", b'{"model": "gpt-5", "input": "hi"}'),
    "gemini.generate": (
        "/v1beta/models/gemini-2.5-pro:generateContent",
        b'{"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}',
    ),
}


@pytest.mark.parametrize("protocol", list(CASES))
@pytest.mark.parametrize("timeout", [False, True], ids=["refused", "timeout"])
def test_the_answer_and_its_record(rig, capsys, protocol: str, timeout: bool) -> None:
    path, body = CASES[protocol]
    flow = request_flow(path=path, body=body)
    rig.recorder.request(flow)
    assert flow.metadata[WATCH_KEY] is True  # the upstream timeout applies to it
    found = (
        timed_out("api.example", 443, 2) if timeout else failure("api.example", 443, "[Errno 111] Connect call failed")
    )
    flow.metadata[FAILURE_KEY] = found
    flow.error = mflow.Error(found.message())
    rig.recorder.error(flow)

    assert flow.response is not None and flow.response.status_code == found.status
    assert flow.response.headers["content-type"] == "application/json"
    answer = json.loads(flow.response.content or b"")
    message = found.message()
    assert message in json.dumps(answer)
    (row,) = rig.rows()
    assert (row["protocol"], row["status"], row["error_code"]) == (protocol, found.status, found.detail)
    assert row["error_message"] == message and row["interrupted"] is None
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"{message} -> {found.status} to the client, recorded as {row['id']}"]


@pytest.mark.parametrize(
    ("method", "body"), [("GET", b""), ("POST", b'{"text": "another API on the same path"}')], ids=["get", "other_api"]
)
def test_a_request_that_is_no_llm_exchange_is_left_to_mitmproxy(rig, method: str, body: bytes) -> None:
    flow = request_flow(path="/v1/models" if method == "GET" else "/v1/messages", method=method, body=body)
    rig.recorder.request(flow)
    flow.metadata[FAILURE_KEY] = failure("api.example", 443, "[Errno 111] Connect call failed")
    flow.error = mflow.Error("[Errno 111] Connect call failed")
    rig.recorder.error(flow)
    assert flow.response is None  # mitmproxy's own 502 goes
    assert rig.rows() == []


def test_a_flow_its_client_cut_short_is_recorded_as_before(rig) -> None:
    flow = request_flow()
    rig.recorder.request(flow)
    flow.error = mflow.Error("Client disconnected.")
    rig.recorder.error(flow)
    assert flow.response is None
    (row,) = rig.rows()
    assert row["interrupted"] == "Client disconnected." and row["error_code"] is None
