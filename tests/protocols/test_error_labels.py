"""SPEC §1: an error answer is an error body whatever its label. Google answers an error on
`:streamGenerateContent?alt=sse` with one JSON error object (sometimes wrapped in a
one-element array) labelled `text/event-stream`; it decodes as the error it is, complete as
an error body is, never as an empty cut stream. The rule is the framing's, so it holds for
every protocol's stream route, and a real stream is never mistaken for one.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmtap.protocols import Exchange, ExchangeDecoder

GEMINI_SSE = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
GEMINI_ARRAY = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
VERTEX_SSE = "/v1/projects/p/locations/l/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
QUOTA = {
    "error": {
        "code": 429,
        "message": "Resource has been exhausted (e.g. check quota).",
        "status": "RESOURCE_EXHAUSTED",
    }
}
BAD_REQUEST = {"error": {"code": 400, "message": "Invalid JSON payload received.", "status": "INVALID_ARGUMENT"}}
FEEDS = {
    "whole": lambda body: [body],
    "lines": lambda body: body.splitlines(keepends=True),
    "bytes": lambda body: [body[i : i + 1] for i in range(len(body))],
}


def decode(protocol: str, path: str, body: bytes, *, status: int, content_type: str, feed: str = "whole") -> Exchange:
    decoder = ExchangeDecoder(protocol, path=path, status=status, content_type=content_type)
    for chunk in FEEDS[feed](body):
        decoder.feed(chunk)
    return decoder.finish()


def assert_error_body(ex: Exchange, type_: str | None, code: str, message: str) -> None:
    assert ex.decode_error is None
    assert ex.error is not None
    assert (ex.error.type, ex.error.code, ex.error.message) == (type_, code, message)
    assert ex.finish_reason == "error"
    assert ex.complete is True  # the whole error body arrived
    assert ex.streamed is False  # one JSON document, not a stream
    assert ex.interrupted is None


@pytest.mark.parametrize("feed", FEEDS)
@pytest.mark.parametrize("path", [GEMINI_SSE, VERTEX_SSE])
@pytest.mark.parametrize(
    ("body", "status"),
    [(QUOTA, 429), (BAD_REQUEST, 400), ([QUOTA], 429), ([BAD_REQUEST], 400)],
    ids=["429", "400", "429-in-array", "400-in-array"],
)
def test_gemini_error_labelled_event_stream(body: Any, status: int, path: str, feed: str) -> None:
    raw = json.dumps(body, indent=2).encode()  # Google pretty-prints its error bodies
    ex = decode("gemini.generate", path, raw, status=status, content_type="text/event-stream", feed=feed)
    error = (body[0] if isinstance(body, list) else body)["error"]
    assert_error_body(ex, error["status"], str(error["code"]), error["message"])


@pytest.mark.parametrize("feed", FEEDS)
def test_gemini_array_route_error_is_an_error_body(feed: str) -> None:
    """Without `alt=sse` Google streams a JSON array: an error alone in it is the answer."""
    raw = json.dumps([QUOTA]).encode()
    ex = decode("gemini.generate", GEMINI_ARRAY, raw, status=429, content_type="application/json", feed=feed)
    assert_error_body(ex, "RESOURCE_EXHAUSTED", "429", QUOTA["error"]["message"])


def test_a_leading_byte_order_mark_does_not_hide_the_error() -> None:
    raw = b"\xef\xbb\xbf" + json.dumps(QUOTA).encode()
    ex = decode("gemini.generate", GEMINI_SSE, raw, status=429, content_type="text/event-stream; charset=UTF-8")
    assert_error_body(ex, "RESOURCE_EXHAUSTED", "429", QUOTA["error"]["message"])


def test_interactions_error_labelled_event_stream() -> None:
    raw = json.dumps(QUOTA).encode()
    ex = decode("gemini.interactions", "/v1beta/interactions", raw, status=429, content_type="text/event-stream")
    assert_error_body(ex, "RESOURCE_EXHAUSTED", "429", QUOTA["error"]["message"])


@pytest.mark.parametrize(
    ("protocol", "path", "body", "want"),
    [
        (
            "anthropic.messages",
            "/v1/messages",
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            ("overloaded_error", None, "Overloaded"),
        ),
        (
            "openai.chat",
            "/v1/chat/completions",
            {"error": {"type": "requests", "code": "rate_limit_exceeded", "message": "Rate limit reached"}},
            ("requests", "rate_limit_exceeded", "Rate limit reached"),
        ),
        (
            "openai.responses",
            "/v1/responses",
            {"error": {"type": "invalid_request_error", "code": None, "message": "Bad input"}},
            ("invalid_request_error", None, "Bad input"),
        ),
    ],
    ids=["anthropic", "chat", "responses"],
)
def test_other_stream_routes_read_a_json_error_the_same_way(
    protocol: str, path: str, body: dict[str, Any], want: tuple[Any, ...]
) -> None:
    """A gateway in front of any provider may answer a stream request's error the same way."""
    ex = decode(protocol, path, json.dumps(body).encode(), status=429, content_type="text/event-stream")
    assert_error_body(ex, *want)


def test_a_real_stream_is_still_a_stream() -> None:
    events = [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hi"}]}, "index": 0}]},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "."}]}, "finishReason": "STOP", "index": 0}]},
    ]
    raw = b"".join(b"data: " + json.dumps(e).encode() + b"\r\n\r\n" for e in events)
    ex = decode("gemini.generate", GEMINI_SSE, raw, status=200, content_type="text/event-stream")
    assert (ex.streamed, ex.complete, ex.text, ex.finish_reason, ex.error) == (True, True, "Hi.", "end_turn", None)


def test_an_error_event_in_a_real_stream_is_still_mid_stream() -> None:
    """`data: {"error": …}` is SSE framing: a stream that ended with an error, not a body."""
    raw = b"data: " + json.dumps(QUOTA).encode() + b"\n\n"
    ex = decode("gemini.generate", GEMINI_SSE, raw, status=200, content_type="text/event-stream")
    assert ex.streamed is True and ex.complete is False
    assert ex.error is not None and ex.error.type == "RESOURCE_EXHAUSTED"
    assert ex.finish_reason == "error"


def test_an_array_whose_error_follows_chunks_is_a_mid_stream_error() -> None:
    chunk = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hi"}]}, "index": 0}]}
    raw = json.dumps([chunk, QUOTA]).encode()
    ex = decode("gemini.generate", GEMINI_ARRAY, raw, status=200, content_type="application/json")
    assert ex.streamed is True and ex.complete is False and ex.text == "Hi"
    assert ex.error is not None and ex.finish_reason == "error"


def test_a_cut_error_body_still_says_its_status() -> None:
    raw = json.dumps(QUOTA).encode()[:30]
    ex = decode("gemini.generate", GEMINI_SSE, raw, status=429, content_type="text/event-stream")
    assert ex.error is not None and ex.error.code == "429"
    assert ex.finish_reason == "error"
