"""The test package's AWS event-stream encoder against real Bedrock bytes: every message of
a recorded invoke-with-response-stream body (the project's copy of corpus-next) passes the
parser's CRC checks and is written back byte for byte by `eventstream.message`, so the
frames the scripted upstream sends Claude Code are the real framing."""

from __future__ import annotations

import base64
import json

import pytest

from tests.corpus_tools import CORPUS_NEXT
from tests.e2e.agents import eventstream

CASES = ("c_bedrock_invoke_stream_tool_use", "c_bedrock_invoke_stream_text")


@pytest.mark.parametrize("name", CASES)
def test_recorded_bedrock_frames_are_written_back_byte_for_byte(name: str) -> None:
    body = (CORPUS_NEXT / name / "response.body").read_bytes()
    messages = eventstream.parse(body)
    assert len(messages) > 3
    assert b"".join(eventstream.message(headers, payload) for headers, payload in messages) == body
    events = [json.loads(base64.b64decode(json.loads(payload)["bytes"])) for _, payload in messages]
    assert events[0]["type"] == "message_start" and events[-1]["type"] == "message_stop"


def test_a_chunk_carries_one_anthropic_event() -> None:
    event = {"type": "message_stop", "amazon-bedrock-invocationMetrics": {"inputTokenCount": 3}}
    [(headers, payload)] = eventstream.parse(eventstream.chunk(event))
    assert headers == {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"}
    assert json.loads(base64.b64decode(json.loads(payload)["bytes"])) == event


def test_a_corrupt_frame_fails_the_crc() -> None:
    frame = bytearray(eventstream.chunk({"type": "ping"}))
    frame[20] ^= 0xFF
    with pytest.raises(AssertionError, match="message CRC"):
        eventstream.parse(bytes(frame))
