"""Streams that end badly and bodies that do not decode: the client still gets every byte
the upstream sent, and the store gets a record that says what happened."""

from __future__ import annotations

import gzip

import anthropic
import httpx2
import pytest

from tests.e2e import harness
from tests.e2e.harness import Proxy, Reply, Wire


def _anthropic(proxy: Proxy, wire: Wire, key: str, token: str) -> object:
    return anthropic.Anthropic(
        api_key=key,
        base_url=proxy.base("anthropic"),
        http_client=wire.client(),
        max_retries=0,
        default_headers={harness.CASE_HEADER: token},
    )


def _assert_cut(row: dict[str, object]) -> None:
    assert row["complete"] is False
    assert row["interrupted"]
    assert row["finish_reason"] is None  # how it would have ended is unknown
    assert row["usage_provenance"] in ("partial", "missing")


def test_client_hangs_up_mid_stream(proxy: Proxy, wire: Wire) -> None:
    c = harness.case("a_anth_stream_cache_read")
    token = proxy.routes.add(harness.stream_reply(c))
    key = proxy.key(harness.ANTHROPIC_KEY)
    client = _anthropic(proxy, wire, key, token)
    body = harness.sdk_body(c)
    body.pop("stream")
    with client.messages.create(**harness.sdk_kwargs(client.messages.create, body), stream=True) as stream:  # type: ignore[attr-defined]
        first = next(iter(stream))
    assert first.type == "message_start"

    row = proxy.record(key)
    _assert_cut(row)
    assert row["usage_provenance"] == "partial"  # message_start carried the input side
    assert row["usage_input_tokens"] == c.expect["usage"]["input_tokens"]
    assert row["model"] == c.expect["model"]
    harness.assert_timings(row)
    (seen,) = proxy.routes.seen(token)
    assert not seen.finished  # the upstream was cut off too, not left streaming


def test_upstream_resets_mid_stream(proxy: Proxy, wire: Wire) -> None:
    c = harness.case("a_anth_stream_parallel_tools_empty_input")
    token = proxy.routes.add(harness.stream_reply(c, reset_after=2))
    key = proxy.key(harness.ANTHROPIC_KEY)
    client = wire.client()
    assert c.request is not None
    got = bytearray()
    headers = {"x-api-key": key, "content-type": "application/json", harness.CASE_HEADER: token}
    with pytest.raises(httpx2.RemoteProtocolError):
        with client.stream("POST", proxy.base("anthropic") + "/v1/messages", content=c.request, headers=headers) as r:
            for chunk in r.iter_raw():
                got += chunk

    (seen,) = proxy.routes.seen(token)
    assert len(seen.sent) == 2 and bytes(got) == harness.sent_bytes(seen)  # all that was sent, and no more
    row = proxy.record(key)
    _assert_cut(row)
    assert row["usage_provenance"] == "partial"
    assert row["tool_call_count"] < len(c.expect["tool_calls"])
    harness.assert_timings(row)


def test_invalid_sse_json_is_a_decode_error_not_a_broken_stream(proxy: Proxy) -> None:
    chunks = [
        b'event: message_start\ndata: {"type": "message_start", "message": {"model": "claude-x"\n\n',
        b"event: content_block_delta\ndata: {this is not json}\n\n",
        b"event: content_block_delta\ndata: \xff\xfe not utf-8 either\n\n",
        b'event: message_stop\ndata: {"type": "message_stop"}\n\n',
    ]
    token = proxy.routes.add(Reply(content_type="text/event-stream", chunks=chunks, delay=harness.DELAY))
    key = proxy.key(harness.ANTHROPIC_KEY)
    body = b'{"model": "claude-x", "max_tokens": 10, "stream": true, "messages": [{"role": "user", "content": "hi"}]}'
    raw, times = harness.curl(
        [f"{proxy.base('anthropic')}/v1/messages", "-H", f"{harness.CASE_HEADER}: {token}", "-H", f"x-api-key: {key}",
         "-H", "content-type: application/json", "--data-binary", body.decode()]
    )  # fmt: skip

    (seen,) = proxy.routes.done(token)
    assert harness.dechunk(raw) == chunks
    harness.assert_streamed(times[0], seen)
    row = proxy.record(key)
    assert row["decode_error"], "the bad events should be named on the record"
    assert row["protocol"] == "anthropic.messages" and row["status"] == 200


def test_gzip_header_with_garbage_body(proxy: Proxy) -> None:
    chunks = [gzip.compress(b'data: {"a": 1}\n\n')[:12], b"this is not deflate data at all " * 4, b"\x00\x01\x02 more"]
    token = proxy.routes.add(
        Reply(
            content_type="text/event-stream", chunks=chunks, delay=harness.DELAY, headers=[("content-encoding", "gzip")]
        )
    )
    key = proxy.key(harness.OPENAI_KEY)
    body = b'{"model": "gpt-4o", "stream": true, "messages": [{"role": "user", "content": "hi"}]}'
    raw, times = harness.curl(
        [f"{proxy.base('openai')}/v1/chat/completions", "-H", f"{harness.CASE_HEADER}: {token}",
         "-H", f"authorization: Bearer {key}", "-H", "content-type: application/json", "--data-binary", body.decode()]
    )  # fmt: skip

    (seen,) = proxy.routes.done(token)
    assert harness.dechunk(raw) == chunks  # still "gzip", still garbage, byte for byte
    harness.assert_streamed(times[0], seen)
    row = proxy.record(key)
    assert row["decode_error"] and row["protocol"] == "openai.chat"
    assert row["team"] == "team-openai"
    harness.assert_key_fields(row, proxy, key)


def test_error_labelled_event_stream_through_the_proxy(proxy: Proxy) -> None:
    """Google's 429 on `?alt=sse`: one JSON error object labelled `text/event-stream`
    (SPEC §1). The client gets it untouched; the record is that error, not a cut stream."""
    error = (
        b'{\n  "error": {\n    "code": 429,\n    "message": "Resource has been exhausted (e.g. check quota).",\n'
        b'    "status": "RESOURCE_EXHAUSTED"\n  }\n}\n'
    )
    chunks = [error[:9], error[9:40], error[40:]]
    token = proxy.routes.add(Reply(status=429, content_type="text/event-stream", chunks=chunks, delay=harness.DELAY))
    key = proxy.key(harness.GOOGLE_KEY)
    body = b'{"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}'
    path = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    raw, _ = harness.curl(
        [f"{proxy.base('gemini')}{path}", "-H", f"{harness.CASE_HEADER}: {token}", "-H", f"x-goog-api-key: {key}",
         "-H", "content-type: application/json", "--data-binary", body.decode()]
    )  # fmt: skip

    assert harness.dechunk(raw) == chunks
    row = proxy.record(key)
    assert row["protocol"] == "gemini.generate" and row["status"] == 429
    assert (row["error_type"], row["error_code"]) == ("RESOURCE_EXHAUSTED", "429")
    assert (row["finish_reason"], row["complete"], row["streamed"]) == ("error", True, False)
    assert row["decode_error"] is None and row["interrupted"] is None
