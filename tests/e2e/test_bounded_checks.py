"""One hostile exchange holds up nothing behind it, through the real `llmtap proxy` (SPEC §5,
§6; issue 24).

Found by probing: a custom tool's regex grammar (`(a|a)*b`) or a function schema's
`pattern` ran with Python's backtracking `re` in the writer process, and one request
stalled it for good (150 later requests completed, none was stored); a 236 KB Gemini
answer of `partialArgs` padding took the writer down. Here, on a proxy of this module's
own: those requests, then normal ones. Every one is stored, the regex ones with their
verdicts (`schema_violation` where RE2 decides it, `unchecked` where no linear-time engine
can run the pattern), the Gemini one with arguments a small multiple of its body.

Not responsible for the checks' rules (tests/protocols/test_bounded_checks.py) or the
decoding bounds in detail (tests/protocols/test_decode_bounds.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx2
import pytest

from llmtap.simulator.upstream import Reply, Upstream
from tests.e2e import harness
from tests.helpers import free_port
from tests.protocols.test_decode_bounds import padding_stream

pytestmark = pytest.mark.slow

HOSTILE = "a" * 30 + "!"  # 2^30 ways for `(a+)+` to fail on it
NORMAL = 20

RESPONSES_REQUEST = {
    "model": "gpt-5",
    "input": "go",
    "tools": [
        {
            "type": "custom",
            "name": "pattern",
            "format": {"type": "grammar", "syntax": "regex", "definition": "(a|a)*b"},
        },
        {
            "type": "function",
            "name": "lookup",
            "parameters": {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(?=a)(a+)+$"}}},
        },
    ],
}
RESPONSES_ANSWER = {
    "id": "resp_hostile",
    "object": "response",
    "status": "completed",
    "model": "gpt-5",
    "output": [
        {"type": "custom_tool_call", "call_id": "call_1", "name": "pattern", "input": HOSTILE},
        {"type": "function_call", "call_id": "call_2", "name": "lookup", "arguments": json.dumps({"s": HOSTILE})},
    ],
    "usage": {"input_tokens": 20, "output_tokens": 10},
}
NORMAL_REQUEST = '{"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}'
NORMAL_ANSWER = (
    b'{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",'
    b' "content": [{"type": "text", "text": "hello"}], "stop_reason": "end_turn",'
    b' "usage": {"input_tokens": 12, "output_tokens": 3}}'
)
GEMINI = "/v1beta/models/gemini-3-pro-preview:streamGenerateContent?alt=sse"


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.Proxy]:
    if not harness.LLMTAP.exists():
        pytest.skip(f"the llmtap console script is not at {harness.LLMTAP}")
    routes = harness.Routes()
    with Upstream(routes) as upstream:
        ports = {name: free_port() for name in ("anthropic", "openai", "gemini", "regular", "ws")}
        own = harness.Proxy(tmp_path_factory.mktemp("bounded"), upstream, upstream, routes, ports)
        own.start(upstream.url)  # no WebSocket traffic here: any upstream will do
        try:
            yield own
        finally:
            code = own.stop()
        log = own.log.read_text(errors="replace")
        assert code == 0, f"llmtap proxy exited {code}:\n{log[-3000:]}"
        for sign in ("Traceback", "has crashed", "tee failure", "could not be stored"):
            assert sign not in log, f"{sign!r} in the proxy's log:\n{log[-3000:]}"


def post(proxy: harness.Proxy, listener: str, path: str, body: bytes, reply: Reply, **headers: str) -> bytes:
    token = proxy.routes.add(reply)
    headers = {"content-type": "application/json", harness.CASE_HEADER: token, **headers}
    response = httpx2.post(proxy.base(listener) + path, content=body, headers=headers, timeout=30)
    assert response.status_code == 200
    return response.content


def test_hostile_exchanges_are_stored_and_hold_up_nothing_behind_them(proxy: harness.Proxy) -> None:
    responses_key = proxy.key(harness.OPENAI_KEY)
    answer = json.dumps(RESPONSES_ANSWER).encode()
    post(
        proxy,
        "openai",
        "/v1/responses",
        json.dumps(RESPONSES_REQUEST).encode(),
        Reply(chunks=[answer]),
        authorization=f"Bearer {responses_key}",
    )
    gemini_key = proxy.key(harness.GOOGLE_KEY)
    stream = padding_stream(236_000)
    got = post(
        proxy,
        "gemini",
        GEMINI,
        b'{"contents": [{"role": "user", "parts": [{"text": "go"}]}]}',
        Reply(content_type="text/event-stream", chunks=harness.spaced(stream, 8)),
        **{"x-goog-api-key": gemini_key},
    )
    assert got == stream  # the client got every byte
    normal_keys = [proxy.key(harness.ANTHROPIC_KEY) for _ in range(NORMAL)]
    for key in normal_keys:
        post(
            proxy,
            "anthropic",
            "/v1/messages",
            NORMAL_REQUEST.encode(),
            Reply(chunks=[NORMAL_ANSWER]),
            **{"x-api-key": key},
        )

    for key in normal_keys:  # completed = stored
        assert proxy.record(key, timeout=30)["text"] == "hello"
    hostile = proxy.record(responses_key)
    calls = [(c["name"], c["status"]) for c in hostile["tool_calls"]]
    assert calls == [("pattern", "schema_violation"), ("lookup", "unchecked")], calls
    assert HOSTILE not in (hostile["tool_calls"][1]["status_detail"] or "")
    padded = proxy.record(gemini_key)
    assert padded["decode_error"] is None and padded["complete"] is True
    stored = sum(len(c["arguments_raw"] or "") + len(json.dumps(c["arguments"])) for c in padded["tool_calls"])
    assert stored < 8 * len(stream)
