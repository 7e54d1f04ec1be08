"""The stream tee: every chunk goes to the client unchanged whatever the decoder or the
sink make of it, and an interrupted stream still becomes a (partial) record."""

from __future__ import annotations

import gzip
import json
import logging
import os
import random
import time

import pytest
from mitmproxy import http
from mitmproxy.test import taddons, tflow, tutils
from sqlalchemy import select

from llmtap.addon.tee import ExchangeMeta, PendingExchange, StreamTee
from llmtap.protocols import ExchangeDecoder
from llmtap.storage import schema
from tests.addon.conftest import Rig
from tests.addon.flows import request_flow, start_stream
from tests.protocols.corpus import differences, load_cases
from tests.records import canonical


def _sse(name: str, data: dict[str, object]) -> bytes:
    return b"event: %s\ndata: %s\n\n" % (name.encode(), json.dumps(data, separators=(",", ":")).encode())


def _delta(text: str) -> bytes:
    return _sse(
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
    )


_START = {
    "id": "msg_1",
    "model": "claude-x",
    "role": "assistant",
    "content": [],
    "usage": {"input_tokens": 12, "output_tokens": 1},
}
ANTHROPIC_STREAM = [
    _sse("message_start", {"type": "message_start", "message": _START}),
    _sse(
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ),
    _delta("Hel"),
    _delta("lo"),
    _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
    _sse(
        "message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}
    ),
    _sse("message_stop", {"type": "message_stop"}),
]

GARBAGE = {
    "sse-not-json": (
        "text/event-stream",
        None,
        [b"data: {not json\n\n", b"data: \xff\xfe\xfd\n\n", b"event: x\ndata: [1,\n\n"],
    ),
    "gzip-garbage": (
        "text/event-stream",
        "gzip",
        [gzip.compress(b"data: {}\n\n")[:10], b"\x00junk" * 50, os.urandom(300)],
    ),
    "br-garbage": ("text/event-stream", "br", [os.urandom(64), os.urandom(64)]),
    "unknown-encoding": ("application/json", "x-weird", [b'{"id": 1}']),
    "json-garbage": ("application/json", None, [b"<html>", b"\x00\x01 not json </html>"]),
    "binary": ("application/octet-stream", None, [bytes(range(256)) * 8]),
}


def _feed(tee: StreamTee, chunks: list[bytes]) -> list[bytes]:
    out = [tee(chunk) for chunk in chunks]
    assert tee(b"") == b""  # the end-of-stream call, whose result is the client's last write
    return out


@pytest.mark.parametrize("name", GARBAGE)
def test_every_chunk_returned_unchanged_with_garbage(rig: Rig, name: str) -> None:
    content_type, encoding, chunks = GARBAGE[name]
    tee = start_stream(rig.recorder, request_flow(), content_type, encoding)
    out = _feed(tee, chunks)
    assert out == chunks and all(a is b for a, b in zip(out, chunks, strict=True))  # the same objects
    (row,) = rig.rows()
    assert row["decode_error"], "garbage must be named on the record"
    assert row["protocol"] == "anthropic.messages"


def test_random_chunking_of_a_real_stream(rig: Rig) -> None:
    body = b"".join(ANTHROPIC_STREAM)
    rng = random.Random(7)
    cuts = sorted(rng.sample(range(1, len(body)), 40))
    chunks = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    tee = start_stream(rig.recorder, request_flow(), "text/event-stream")
    assert b"".join(_feed(tee, chunks)) == body
    (row,) = rig.rows()
    assert (row["text"], row["finish_reason"], row["complete"]) == ("Hello", "end_turn", True)
    assert (row["usage_input_tokens"], row["usage_output_tokens"], row["usage_provenance"]) == (12, 5, "reported")
    assert row["started_at"] <= row["first_byte_at"] <= row["first_token_at"] <= row["ended_at"]


@pytest.mark.parametrize("encoding", [None, "gzip"])
def test_corpus_streams_byte_by_byte(rig: Rig, encoding: str | None) -> None:
    cases = [c for c in load_cases() if c.case["streamed"] and c.case["protocol"] == "anthropic.messages"][:3]
    for case in cases:
        wire = gzip.compress(case.response) if encoding else case.response
        path = case.case["path"]
        tee = start_stream(rig.recorder, request_flow(path, case.request or b"{}"), case.case["content_type"], encoding)
        out = _feed(tee, [wire[i : i + 1] for i in range(len(wire))])
        assert b"".join(out) == wire
    rows = rig.rows()
    assert len(rows) == len(cases)


class _Exploding(ExchangeDecoder):
    """A decoder with a bug: it raises on every chunk."""

    def feed(self, chunk: bytes) -> bool:
        raise RuntimeError("decoder bug")


def _meta() -> ExchangeMeta:
    return ExchangeMeta(
        method="POST", host="h", path="/v1/messages", team="t", key_fingerprint=None, key_last4=None,
        client_addr=None, request_body=b"{}", request_headers=[], started=0.0,
    )  # fmt: skip


def test_exception_in_decoder_or_sink_drops_nothing(caplog: pytest.LogCaptureFixture) -> None:
    def sink(pending: PendingExchange) -> None:
        raise OSError("sink is down")

    with taddons.context():
        tee = StreamTee(_Exploding("anthropic.messages"), _meta(), sink)
        with caplog.at_level(logging.ERROR, logger="llmtap.addon"):
            out = _feed(tee, ANTHROPIC_STREAM)
    assert out == ANTHROPIC_STREAM
    assert "tee failure" in caplog.text
    assert tee.finished  # it tried once; a second b"" does not retry or raise
    assert tee(b"") == b""


def test_error_after_partial_chunks_is_a_partial_record(rig: Rig) -> None:
    flow = request_flow()
    tee = start_stream(rig.recorder, flow, "text/event-stream")
    for chunk in ANTHROPIC_STREAM[:3]:
        assert tee(chunk) == chunk
    flow.error = tflow.terr("Client disconnected.")
    rig.recorder.error(flow)
    rig.recorder.error(flow)  # mitmproxy never does this twice; the record is still one
    (row,) = rig.rows()
    assert row["complete"] is False
    assert row["interrupted"] == "Client disconnected."
    assert row["finish_reason"] is None
    assert row["usage_provenance"] == "partial" and row["usage_input_tokens"] == 12
    assert row["text"] == "Hel"
    assert rig.recorder.counts["interrupted"] == 1


def test_error_before_any_response(rig: Rig) -> None:
    flow = request_flow()
    rig.recorder.request(flow)
    flow.error = tflow.terr("Connection refused")
    rig.recorder.error(flow)
    (row,) = rig.rows()
    assert row["complete"] is False and row["interrupted"] == "Connection refused"
    assert row["status"] is None and row["usage_provenance"] == "missing"


def test_json_response_through_the_whole_cycle(rig: Rig) -> None:
    body = (
        b'{"id":"msg_2","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"Hi"}],'
        b'"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}'
    )
    flow = request_flow()
    flow.response = tutils.tresp(headers=http.Headers([(b"content-type", b"application/json")]), content=body)
    rig.tctx.master.event_loop.run_until_complete(rig.tctx.cycle(rig.recorder, flow))
    (row,) = rig.rows()
    assert (row["text"], row["model"], row["complete"], row["streamed"]) == ("Hi", "claude-x", True, False)


def test_corpus_case_record_matches_expect(rig: Rig) -> None:
    (case,) = [c for c in load_cases() if c.id == "a_anth_stream_thinking_then_tool_use"]
    tee = start_stream(rig.recorder, request_flow(body=case.request or b"{}"), case.case["content_type"])
    _feed(tee, [case.response[i : i + 97] for i in range(0, len(case.response), 97)])
    (row,) = rig.rows()
    with rig.engine.connect() as conn:
        row["tool_calls"] = [dict(r._mapping) for r in conn.execute(select(schema.tool_calls))]
    assert differences(case.expect, canonical(row)) == []


GEMINI_REQUEST = b'{"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}'
GEMINI_QUOTA = b"""{
  "error": {
    "code": 429,
    "message": "Resource has been exhausted (e.g. check quota).",
    "status": "RESOURCE_EXHAUSTED"
  }
}
"""


@pytest.mark.parametrize("wrapped", [False, True], ids=["object", "array"])
def test_an_error_labelled_event_stream_is_recorded_as_the_error(rig: Rig, wrapped: bool) -> None:
    """Google's 429 on `?alt=sse`: one JSON error labelled `text/event-stream` (SPEC §1).
    The tee is set from the headers alone; the first bytes tell the decoder what it is."""
    body = b"[" + GEMINI_QUOTA + b"]" if wrapped else GEMINI_QUOTA
    flow = request_flow(path="/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", body=GEMINI_REQUEST)
    rig.recorder.request(flow)
    fields = [(b"content-type", b"text/event-stream"), (b"content-length", str(len(body)).encode())]
    flow.response = tutils.tresp(
        status_code=429, headers=http.Headers(fields), content=None, timestamp_start=time.time()
    )
    rig.recorder.responseheaders(flow)
    tee = flow.response.stream
    assert isinstance(tee, StreamTee)
    assert b"".join(_feed(tee, [body[i : i + 5] for i in range(0, len(body), 5)])) == body
    rig.recorder.response(flow)
    (row,) = rig.rows()
    assert row["protocol"] == "gemini.generate" and row["decode_error"] is None
    assert (row["error_type"], row["error_code"]) == ("RESOURCE_EXHAUSTED", "429")
    assert row["error_message"] == "Resource has been exhausted (e.g. check quota)."
    assert (row["finish_reason"], row["complete"], row["streamed"], row["status"]) == ("error", True, False, 429)


# -- small bodies of known length: left to mitmproxy, recorded at `response` ------------------

JSON_BODY = (
    b'{"id":"msg_held","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"Hi"}],'
    b'"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}'
)


def _held(rig: Rig, flow: http.HTTPFlow, body: bytes, content_type: str = "application/json", **headers: str) -> None:
    rig.recorder.request(flow)
    fields = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
    fields += [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()]
    flow.response = tutils.tresp(headers=http.Headers(fields), content=None, timestamp_start=time.time())
    rig.recorder.responseheaders(flow)


def test_small_json_of_known_length_is_left_to_mitmproxy(rig: Rig) -> None:
    flow = request_flow()
    _held(rig, flow, JSON_BODY, retry_after="7")
    assert flow.response is not None and flow.response.stream is False  # mitmproxy holds it, as it would alone
    flow.response.content = JSON_BODY  # what mitmproxy has read when it runs `response`
    rig.recorder.response(flow)
    (row,) = rig.rows()
    assert (row["text"], row["model"], row["complete"], row["streamed"], row["status"]) == (
        "Hi",
        "claude-x",
        True,
        False,
        200,
    )
    assert row["retry_after_s"] == 7.0
    assert row["started_at"] <= row["first_byte_at"] <= row["ended_at"]


@pytest.mark.parametrize(
    ("content_type", "length"),
    [("text/event-stream", 100), ("application/json", 64 * 1024 + 1), ("application/json", None)],
)
def test_streams_and_big_or_unsized_bodies_are_teed(rig: Rig, content_type: str, length: int | None) -> None:
    flow = request_flow()
    rig.recorder.request(flow)
    fields = [(b"content-type", content_type.encode())]
    if length is not None:
        fields.append((b"content-length", str(length).encode()))
    flow.response = tutils.tresp(headers=http.Headers(fields), content=None, timestamp_start=time.time())
    rig.recorder.responseheaders(flow)
    assert isinstance(flow.response.stream, StreamTee)


def test_held_response_cut_short_is_recorded_with_its_status(rig: Rig) -> None:
    flow = request_flow()
    _held(rig, flow, JSON_BODY)
    flow.error = tflow.terr("HTTP/1 protocol error: peer closed connection")
    rig.recorder.error(flow)
    rig.recorder.response(flow)  # mitmproxy sends one of the two; neither adds a second record
    (row,) = rig.rows()
    assert row["complete"] is False and row["interrupted"].startswith("HTTP/1 protocol error")
    assert row["status"] == 200


@pytest.mark.parametrize("rig", ["full"], indirect=True)
def test_full_bodies_keep_the_held_body_and_redact_headers(rig: Rig) -> None:
    key = "sk-ant-api03-HELDCANARY000000000000000000000"
    flow = request_flow(headers=[("content-type", "application/json"), ("x-api-key", key), ("X-LLMTap-Team", "t")])
    _held(rig, flow, JSON_BODY)
    assert flow.response is not None
    flow.response.content = JSON_BODY
    rig.recorder.response(flow)
    (row,) = rig.rows()
    assert row["response_body_ref"] and row["request_body_ref"]
    blobs = rig.blobs()
    assert JSON_BODY in blobs
    assert not any(key.encode() in blob for blob in blobs)
    assert any(b"x-api-key" in blob for blob in blobs)  # the header is there, its value redacted


def test_a_body_another_addon_streams_is_teed(rig: Rig) -> None:
    """`stream_large_bodies` decides before us: a body it streams must go through the tee."""
    flow = request_flow()
    rig.recorder.request(flow)
    fields = [(b"content-type", b"application/json"), (b"content-length", str(len(JSON_BODY)).encode())]
    flow.response = tutils.tresp(headers=http.Headers(fields), content=None, timestamp_start=time.time())
    flow.response.stream = True
    rig.recorder.responseheaders(flow)
    assert isinstance(flow.response.stream, StreamTee)
