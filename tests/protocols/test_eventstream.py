"""`protocols/eventstream.py`: AWS event-stream frames decoded incrementally, CRCs checked,
memory bounded; and its framing mode in `ExchangeDecoder` (a bad frame is the record's
decode error, a cut frame a cut stream, an exception frame the record's error).

The recorded Bedrock streams (corpus-next) are the oracle for the format: their frames'
CRCs check and botocore's EventStreamBuffer reads the same messages. The frames built
here (`frame`) are for the edge cases the recordings lack."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from pathlib import Path

import pytest

from llmtap.protocols import ExchangeDecoder, decode_exchange
from llmtap.protocols.errors import DecodeError
from llmtap.protocols.eventstream import EventMessage, EventStreamDecoder, payload_event, prelude_ok

ROOT = Path(__file__).resolve().parents[2]
NEXT = ROOT / "tests" / "corpus_next"  # the project's copy of ../shared/corpus-next
STREAM_CASES = (
    "c_bedrock_invoke_stream_text",
    "c_bedrock_invoke_stream_tool_use",
    "c_bedrock_converse_stream_cache_write",
)
INVOKE_PATH = "/model/anthropic.claude-3-haiku-20240307-v1%3A0/invoke-with-response-stream"
CONTENT_TYPE = "application/vnd.amazon.eventstream"


def _header(name: str, value: str) -> bytes:
    raw = value.encode()
    return bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(raw)) + raw


def frame(payload: bytes, **headers: str) -> bytes:
    """One event-stream message with string headers (`event_type` -> `:event-type`)."""
    block = b"".join(_header(":" + k.replace("_", "-"), v) for k, v in headers.items())
    total = 12 + len(block) + len(payload) + 4
    prelude = struct.pack(">II", total, len(block))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + block + payload
    return body + struct.pack(">I", zlib.crc32(body))


def chunk_event(event: dict) -> bytes:
    inner = base64.b64encode(json.dumps(event).encode()).decode()
    return frame(json.dumps({"bytes": inner, "p": "abcd"}).encode(), event_type="chunk", message_type="event")


ANTHROPIC_EVENTS = [
    {
        "type": "message_start",
        "message": {"id": "msg_bdrk_1", "model": "claude-3-haiku-20240307", "usage": {"input_tokens": 12}},
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hé there"}},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}},
    {"type": "message_stop", "amazon-bedrock-invocationMetrics": {"inputTokenCount": 12, "outputTokenCount": 99}},
]
STREAM = b"".join(chunk_event(e) for e in ANTHROPIC_EVENTS)


def _recorded(case: str) -> bytes:
    return (NEXT / case / "response.body").read_bytes()


@pytest.mark.parametrize("case", STREAM_CASES)
def test_recorded_streams_split_anywhere_give_the_same_messages(case: str):
    body = _recorded(case)
    whole = EventStreamDecoder().decode(body)
    assert whole and all(m.message_type == "event" for m in whole)
    one = EventStreamDecoder()
    split = [m for i in range(len(body)) for m in one.decode(body[i : i + 1])]
    assert split == whole
    assert not one.pending
    # every frame ends exactly where the next begins: the lengths add up to the body
    assert sum(12 + len(_block(m)) + len(m.payload) + 4 for m in whole) == len(body)


def _block(message: EventMessage) -> bytes:
    return b"".join(_header(k, v) for k, v in message.headers.items())


def test_botocore_reads_the_same_messages():
    from botocore import eventstream  # AWS's own reader, as the oracle (a test dependency)

    body = _recorded("c_bedrock_converse_stream_cache_write")
    buffer = eventstream.EventStreamBuffer()
    buffer.add_data(body)
    theirs = [(m.headers, m.payload) for m in buffer]
    assert [(m.headers, m.payload) for m in EventStreamDecoder().decode(body)] == theirs


def test_chunk_events_unwrap_to_the_provider_events():
    messages = EventStreamDecoder().decode(STREAM)
    assert [payload_event(m, "t") for m in messages] == [(e, "") for e in ANTHROPIC_EVENTS]
    converse = frame(b'{"p":"xyz","role":"assistant"}', event_type="messageStart", message_type="event")
    (message,) = EventStreamDecoder().decode(converse)
    assert payload_event(message, "t") == ({"role": "assistant"}, "messageStart")


def test_bad_prelude_crc_is_a_decode_error():
    bad = bytearray(STREAM)
    bad[8] ^= 0xFF
    with pytest.raises(DecodeError, match="prelude CRC"):
        EventStreamDecoder().decode(bytes(bad))
    assert not prelude_ok(bytes(bad))
    assert prelude_ok(STREAM)


def test_bad_message_crc_is_a_decode_error_after_the_good_frames():
    first = chunk_event(ANTHROPIC_EVENTS[0])
    second = bytearray(chunk_event(ANTHROPIC_EVENTS[1]))
    second[40] ^= 0x01  # a payload byte: the message CRC no longer checks
    decoder = EventStreamDecoder()
    assert len(decoder.decode(first)) == 1
    with pytest.raises(DecodeError, match="message CRC"):
        decoder.decode(bytes(second))


def test_oversize_frame_is_refused_at_its_prelude():
    decoder = EventStreamDecoder(max_frame=1024)
    big = frame(b"x" * 2000, event_type="chunk")
    with pytest.raises(DecodeError, match="exceeds 1024"):
        decoder.decode(big[:12])  # the prelude alone: nothing of the frame is held
    assert len(decoder._buffer) <= 12  # noqa: SLF001 - the bound under test


def test_inconsistent_lengths_are_refused():
    prelude = struct.pack(">II", 20, 30)
    prelude += struct.pack(">I", zlib.crc32(prelude))
    with pytest.raises(DecodeError, match="inconsistent"):
        EventStreamDecoder().decode(prelude + b"\x00" * 20)


def test_malformed_headers_are_a_decode_error():
    block = b"\x05:oops\x07\x00\xff"  # a string header whose length runs past the block
    total = 12 + len(block) + 4
    prelude = struct.pack(">II", total, len(block))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + block
    with pytest.raises(DecodeError, match="headers are malformed"):
        EventStreamDecoder().decode(body + struct.pack(">I", zlib.crc32(body)))


def _decode(body: bytes, *, pieces: int = 0, **kw) -> dict:
    decoder = ExchangeDecoder(
        "anthropic.messages", path=kw.pop("path", INVOKE_PATH), host="bedrock-runtime.us-east-1.amazonaws.com", **kw
    )
    if pieces:
        for i in range(0, len(body), pieces):
            decoder.feed(body[i : i + pieces])
    else:
        decoder.feed(body)
    return decoder.finish().to_dict()


@pytest.mark.parametrize("pieces", [0, 1, 7, 4096])
@pytest.mark.parametrize("content_type", [CONTENT_TYPE, None])  # None: sniffed by the prelude's CRC
def test_invoke_stream_decodes_however_it_is_split(pieces: int, content_type: str | None):
    got = _decode(STREAM, pieces=pieces, content_type=content_type, status=200)
    assert got["decode_error"] is None
    assert got["streamed"] and got["complete"]
    assert got["text"] == "Hé there"
    assert got["model"] == "claude-3-haiku-20240307"
    assert got["model_requested"] == "anthropic.claude-3-haiku-20240307-v1:0"
    assert got["provider"] == "aws"
    # message_delta's usage is final; invocationMetrics (99) is not usage
    assert got["usage"]["output_tokens"] == 3
    assert got["usage"]["input_tokens"] == 12
    assert got["finish_reason"] == "end_turn"


def test_cut_frame_is_a_cut_stream():
    cut = STREAM[:-30]
    got = _decode(cut, pieces=5, content_type=CONTENT_TYPE, status=200)
    assert got["complete"] is False
    assert got["finish_reason"] is None
    assert got["interrupted"] == "stream ended inside an event"
    assert got["text"] == "Hé there"


def test_bad_crc_mid_stream_is_the_records_decode_error_not_a_crash():
    bad = bytearray(STREAM)
    bad[len(chunk_event(ANTHROPIC_EVENTS[0])) + 50] ^= 0x01
    got = _decode(bytes(bad), content_type=CONTENT_TYPE, status=200)
    assert "message CRC" in got["decode_error"]
    assert got["complete"] is False
    assert got["finish_reason"] is None


def test_exception_frame_is_the_records_error():
    error = frame(
        json.dumps({"message": "Too many requests, please wait", "originalStatusCode": 429}).encode(),
        message_type="exception",
        exception_type="throttlingException",
        content_type="application/json",
    )
    got = _decode(b"".join(chunk_event(e) for e in ANTHROPIC_EVENTS[:3]) + error, content_type=CONTENT_TYPE)
    assert got["error"] == {"type": "throttlingException", "code": "429", "message": "Too many requests, please wait"}
    assert got["finish_reason"] == "error"
    assert got["decode_error"] is None
    assert got["text"] == "Hé there"


def test_a_bad_chunk_payload_is_recorded_and_the_rest_still_read():
    bad = frame(b'{"bytes": "not base64!!"}', event_type="chunk", message_type="event")
    body = (
        b"".join(chunk_event(e) for e in ANTHROPIC_EVENTS[:3])
        + bad
        + b"".join(chunk_event(e) for e in ANTHROPIC_EVENTS[3:])
    )
    got = _decode(body, content_type=CONTENT_TYPE)
    assert "base64" in got["decode_error"]
    assert got["complete"] is True
    assert got["usage"]["output_tokens"] == 3


def test_json_error_body_on_the_stream_route_is_not_framed():
    got = decode_exchange(
        "anthropic.messages",
        response=b'{"message":"The security token included in the request is invalid."}',
        path=INVOKE_PATH,
        status=403,
        content_type="application/json",
    )
    assert got.streamed is False
    assert got.error is not None and got.finish_reason == "error"


def test_an_event_stream_decoder_pickles_once_the_response_ended():
    """The proxy finishes decoding in the writer's process: the framing state travels."""
    import pickle

    decoder = ExchangeDecoder("anthropic.messages", path=INVOKE_PATH, content_type=CONTENT_TYPE, status=200)
    decoder.feed(STREAM[:100])
    decoder.feed(STREAM[100:])
    decoder.end_response()
    ex = pickle.loads(pickle.dumps(decoder)).finish()
    assert (ex.text, ex.complete, ex.provider, ex.usage.output_tokens) == ("Hé there", True, "aws", 3)
