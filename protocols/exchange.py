"""One exchange, decoded incrementally: request facts, then response bytes as they arrive.

`ExchangeDecoder` takes raw response chunks (still content-encoded), undoes the encoding,
frames them (SSE, streamed JSON array, AWS event-stream, or one JSON document), feeds the
protocol's fold,
and at `finish()` decodes the folded body through the same path a JSON response takes.
Then it applies, once for every protocol, the finish-reason rules SPEC §2 states for all
of them. It never raises: whatever goes wrong becomes the record's `decode_error`.
Everything one exchange assembles is paid from one `ExchangeBudget`, and its tool checks
share one `CheckClock` sized by its bytes (budget.py, SPEC §6).
`decode_exchange` does the same for a whole body at once.

The one response header a record needs is passed in as a word, not as headers: Gemini
states the tier it served in `x-gemini-service-tier` (`SERVED_TIER_HEADER`; Priority and
Flex fall back to standard quietly), so a caller that has the response headers passes
that header's value as `served_tier`.

Not responsible for where the bytes come from (proxy, HAR, file), where records go, or
any one protocol's rules (its `Translator` module has them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from llmtap.protocols import (
    anthropic_messages,
    bedrock_converse,
    gemini_generate,
    gemini_interactions,
    openai_chat,
    openai_responses,
)
from llmtap.protocols.budget import MAX_TOOL_CALLS, CheckClock
from llmtap.protocols.canonical import ApiError, Exchange
from llmtap.protocols.common import new_budget, parse_json, tier_word
from llmtap.protocols.content import ContentDecoder
from llmtap.protocols.contract import Fold, Folded, Translator
from llmtap.protocols.errors import DecodeError
from llmtap.protocols.eventstream import CONTENT_TYPE as EVENTSTREAM_TYPE
from llmtap.protocols.eventstream import EventMessage, EventStreamDecoder, exception_fields, payload_event, prelude_ok
from llmtap.protocols.jsonarray import JSONArraySplitter
from llmtap.protocols.routing import path_model, provider_for
from llmtap.protocols.sse import SSEDecoder, SSEEvent
from llmtap.protocols.toolcheck import check_tool_calls

# Typed as the contract, so mypy checks each module (and its Fold) against it.
TRANSLATORS: Mapping[str, Translator] = {
    anthropic_messages.PROTOCOL: anthropic_messages,
    openai_chat.PROTOCOL: openai_chat,
    openai_responses.PROTOCOL: openai_responses,
    gemini_generate.PROTOCOL: gemini_generate,
    gemini_interactions.PROTOCOL: gemini_interactions,
    bedrock_converse.PROTOCOL: bedrock_converse,
}

# The response header Gemini states its served tier in (`standard`, `flex`, `priority`):
# https://ai.google.dev/gemini-api/docs/priority-inference. Only the Gemini protocols
# take it; it outranks the body's own statement and the requested tier.
SERVED_TIER_HEADER = "x-gemini-service-tier"
SERVED_TIER_PROTOCOLS = frozenset((gemini_generate.PROTOCOL, gemini_interactions.PROTOCOL))

# A non-streamed body is buffered to be parsed at the end; past this it is not decoded.
MAX_JSON_BODY = 64 * 1024 * 1024
_SNIFF_SSE = (b"event:", b"data:", b":", b"id:", b"retry:")
# How a JSON document opens. No SSE stream can open so (its first line would be a field
# named `{…`, which SSE ignores), so a body labelled `text/event-stream` that opens so is a
# JSON document: Google answers errors on `?alt=sse` that way (SPEC §1).
_JSON_OPENERS = (b"{", b"[")
_BOM = b"\xef\xbb\xbf"
# The keys an error body holds, and nothing else: `{"error": …}` (Google, OpenAI) or
# Anthropic's `{"type": "error", "error": …}`.
_ERROR_BODY_KEYS = frozenset(("error", "type", "request_id"))
_SNIFF_BYTES = max(map(len, _SNIFF_SSE))
_PRELUDE_BYTES = 12  # an AWS event-stream frame's prelude, whose CRC tells it apart


class ExchangeDecoder:
    """Feed response chunks with `feed`, then call `finish` once for the record."""

    def __init__(
        self,
        protocol: str,
        *,
        request: bytes | dict[str, Any] | None = None,
        path: str = "",
        host: str | None = None,
        status: int | None = None,
        content_type: str | None = None,
        content_encoding: str | None = None,
        provider: str | None = None,
        served_tier: str | None = None,
        max_json_body: int = MAX_JSON_BODY,
    ) -> None:
        """`served_tier` is the value of the response's `x-gemini-service-tier` header, if
        it had one: the served tier of a Gemini exchange when it is a short plain word;
        ignored for every other protocol."""
        self.module: Translator = TRANSLATORS[protocol]
        self.ex = Exchange(protocol=protocol, provider=provider or provider_for(protocol, host, path))
        self.ex.status = status
        self._path = path
        self._content_type = (content_type or "").lower()
        self._max_json = max_json_body
        self._budget = new_budget()
        self._size = len(request) if isinstance(request, (bytes, bytearray)) else 0  # bytes, for the check clock
        self.fold: Fold = self.module.Fold(self._budget)
        self._mode: str | None = None
        self._sse: SSEDecoder | None = None
        self._array: JSONArraySplitter | None = None
        self._frames: EventStreamDecoder | None = None
        self._stream_error: ApiError | None = None  # an event-stream exception message
        self._body = bytearray()
        self._too_big = False
        self._broken = False
        self._token_seen = False
        self._cut_tail = False
        self._lone_error = False  # the first event was an error body (and may be the only one)
        self._request = request  # decoded in finish(), off the path bytes travel
        self._requested_tier: str | None = None
        self._served_tier = tier_word(served_tier) if protocol in SERVED_TIER_PROTOCOLS else None
        self._ended = False
        try:
            self._content: ContentDecoder | None = ContentDecoder(content_encoding)
        except DecodeError as exc:
            self._content = None
            self._fail(exc)

    def __getstate__(self) -> dict[str, Any]:
        if not self._ended:
            raise TypeError("an ExchangeDecoder is picklable once end_response() has run")
        state = dict(self.__dict__)
        del state["module"]  # a module: looked up again by protocol name
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.setdefault("_requested_tier", None)  # pickled before requested tiers were kept
        state.setdefault("_served_tier", None)  # pickled before the served-tier header was read
        state.setdefault("_frames", None)  # pickled before event-stream framing was read
        state.setdefault("_stream_error", None)
        state.setdefault("_size", 0)
        state.setdefault("_lone_error", False)
        self.__dict__.update(state)
        self.module = TRANSLATORS[self.ex.protocol]

    # -- request -------------------------------------------------------------------------

    def _decode_request(self, request: bytes | dict[str, Any] | None) -> None:
        body: Any = request
        if isinstance(request, (bytes, bytearray)):
            if not request.strip():
                body = None
            else:
                try:
                    body = parse_json(bytes(request), "request")
                except DecodeError as exc:
                    self._fail(exc)
                    body = None
        if body is not None and not isinstance(body, dict):
            self._fail(DecodeError("request body is not a JSON object", "request"))
            body = None
        try:
            if body is not None:
                self.ex.request = self.module.decode_request(body, self._path)
                self._requested_tier = self.module.requested_tier(body)
        except DecodeError as exc:
            self._fail(exc)
        except Exception as exc:  # a translator bug must not lose the record
            self._fail(DecodeError(f"internal error decoding the request: {exc!r}", "request"))
        # A cloud route's body names no model: the path's model id or deployment does (SPEC §1).
        self.ex.model_requested = self.module.requested_model(body or {}, self._path) or path_model(self._path)
        self.ex.model = self.ex.model_requested

    # -- response ------------------------------------------------------------------------

    def feed(self, chunk: bytes) -> bool:
        """Take one chunk as it came off the wire. True when it carried the first token."""
        if not chunk or self._broken or self._content is None:
            return False
        try:
            self._frame(self._content.decode(chunk))
        except DecodeError as exc:
            self._fail(exc)
            self._broken = True
        except Exception as exc:  # noqa: BLE001 - a translator bug must not lose the record
            self._fail(DecodeError(f"internal error: {exc!r}", f"event {self.ex.events}"))
            self._broken = True
        if not self._token_seen and self.fold.saw_token:
            self._token_seen = True
            return True
        return False

    def feed_message(self, obj: Any) -> bool:
        """Take one already-framed message (a WebSocket text frame's JSON)."""
        self._mode = "messages"
        self.ex.streamed = True
        self._event(obj, "")
        if not self._token_seen and self.fold.saw_token:
            self._token_seen = True
            return True
        return False

    def end_response(self, interrupted: str | None = None) -> None:
        """The response's last bytes are in: flush what the content coding and the framing
        still hold. Cheap, and done once (`finish` calls it if nobody did); afterwards the
        decoder holds only plain data and can be pickled to finish in another process."""
        if self._ended:
            return
        self._ended = True
        if not self._broken and self._content is not None:
            try:
                self._frame(self._content.flush(strict=interrupted is None), final=True)
            except DecodeError as exc:
                self._fail(exc)
            except Exception as exc:  # noqa: BLE001
                self._fail(DecodeError(f"internal error: {exc!r}", "end of stream"))
        self._content = None  # zlib and brotli state: not picklable, and done with

    def finish(self, interrupted: str | None = None) -> Exchange:
        """The record. `interrupted` says why the response stopped short, if it did."""
        ex = self.ex
        self.end_response(interrupted)
        self._decode_request(self._request)
        self._request = None
        ex.interrupted = interrupted
        try:
            self._decode_body()
        except DecodeError as exc:
            self._fail(exc)
        except Exception as exc:  # noqa: BLE001
            self._fail(DecodeError(f"internal error: {exc!r}", "response"))
        self._settle()
        return ex

    def _frame(self, data: bytes, final: bool = False) -> None:
        self._size += len(data)
        if self._mode is None:
            self._body += data
            if not final and self._undecided():
                return  # too few bytes yet to tell the framing, however the chunks fell
            data, self._body = bytes(self._body), bytearray()
            self._choose_mode(data)
        if self._mode == "sse":
            assert self._sse is not None
            for event in self._sse.decode(data) if data else []:
                self._sse_event(event)
            if final:
                for event in self._sse.flush():
                    self._sse_event(event, last=True)
        elif self._mode == "array":
            assert self._array is not None
            for element in self._array.decode(data):
                self._event(parse_json(element, f"element {self.ex.events}"), "")
            if final and self._array.pending:
                self._cut_tail = True
        elif self._mode == "eventstream":
            self._event_stream(data, final)
        else:
            self._buffer(data)

    def _event_stream(self, data: bytes, final: bool) -> None:
        assert self._frames is not None
        for message in self._frames.decode(data):
            self._aws_message(message)
        if final and self._frames.pending:
            self._cut_tail = True  # the bytes ended inside a frame

    def _undecided(self) -> bool:
        if EVENTSTREAM_TYPE in self._content_type:
            return False
        if not self._content_type and self._body[:1] == b"\x00":
            return len(self._body) < _PRELUDE_BYTES  # binary: an event-stream prelude, maybe
        return len(self._body.lstrip()) < _SNIFF_BYTES

    def _aws_message(self, message: EventMessage) -> None:
        """One event-stream message: an exception is the record's error (the stream ends
        with it); an event goes to the fold, a bad one recorded and the rest still read."""
        where = f"event {self.ex.events}"
        if message.message_type in ("exception", "error"):
            self.ex.events += 1
            if self._stream_error is None:
                self._stream_error = ApiError(*exception_fields(message))
            return
        try:
            obj, name = payload_event(message, where)
        except DecodeError as exc:
            self.ex.events += 1
            self._fail(exc)
            return
        self._event(obj, name)

    def _choose_mode(self, head: bytes) -> None:
        """The framing, from the label and the first bytes: a JSON document is one whatever
        its label says (SPEC §1), an AWS event-stream only by its label or its prelude."""
        streaming_path = ":streamGenerateContent" in self._path or ":streamgeneratecontent" in self._path
        start = head.lstrip()[:8]
        if EVENTSTREAM_TYPE in self._content_type or (not self._content_type and prelude_ok(head)):
            self._mode = "eventstream"
            self._frames = EventStreamDecoder()
        elif "text/event-stream" in self._content_type and head.removeprefix(_BOM).lstrip().startswith(_JSON_OPENERS):
            self._mode = "json"  # an error body labelled as a stream (a streamed array if `[`)
        elif "text/event-stream" in self._content_type or (not self._content_type and start.startswith(_SNIFF_SSE)):
            self._mode = "sse"
            self._sse = SSEDecoder()
        elif streaming_path and "alt=sse" not in self._path and start.startswith(b"["):
            self._mode = "array"
            self._array = JSONArraySplitter()
        elif streaming_path and start.startswith(_SNIFF_SSE):
            self._mode = "sse"
            self._sse = SSEDecoder()
        else:
            self._mode = "json"
        self.ex.streamed = self._mode != "json"

    def _sse_event(self, event: SSEEvent, last: bool = False) -> None:
        data = event.data
        if not data.strip():
            return
        if data.strip() == "[DONE]":
            self.ex.events += 1
            self.fold.end_marker()
            return
        try:
            obj = parse_json(data, f"event {self.ex.events}")
        except DecodeError as exc:
            self.ex.events += 1
            if last:  # an unterminated, unparsable last event: the stream was cut mid-event
                self._cut_tail = True
                return
            self._fail(exc)  # one bad event is recorded; the rest of the stream still counts
            return
        self._event(obj, event.event)

    def _event(self, obj: Any, name: str) -> None:
        if self.ex.events == 0:
            self._lone_error = _is_error_body(obj)
        self.ex.events += 1
        self.fold.feed(obj, name)

    def _error_document(self) -> bool:
        """A JSON array (streamed or whole) that holds one error body and nothing else: the
        answer is that error, as a bare error body would be (Google wraps its errors on a
        stream route so), not a stream that stopped short."""
        return self._lone_error and self.ex.events == 1 and not self._cut_tail

    def _buffer(self, data: bytes) -> None:
        if self._too_big:
            return
        if len(self._body) + len(data) > self._max_json:
            self._too_big = True
            self._body = bytearray()
            raise DecodeError(f"response body exceeds {self._max_json} bytes; not decoded", "response")
        self._body += data

    def _decode_body(self) -> None:
        ex = self.ex
        if self._mode in ("sse", "array", "messages", "eventstream"):
            self._decode(self.fold.result())
            if self._stream_error is not None and ex.error is None:
                ex.error = self._stream_error
            ex.complete = self.fold.complete and not self._cut_tail
            if self._cut_tail and ex.interrupted is None:
                ex.interrupted = "stream ended inside an event"
            if self._mode == "array" and self._error_document():
                ex.streamed, ex.complete = False, True
            return
        if self._too_big or self._broken:
            return
        raw = bytes(self._body)
        if not raw.strip():
            if (ex.status is not None and ex.status >= 400) or ex.interrupted:
                return  # an error without a body, or no response at all
            raise DecodeError("response body is empty", "response")
        try:
            body = parse_json(raw, "response")
        except DecodeError:
            if ex.status is not None and ex.status >= 400:
                # A gateway's HTML error page is an upstream failure, not ours to decode.
                ex.error = ApiError(type=None, code=str(ex.status), message=_snippet(raw))
                return
            raise
        if isinstance(body, list):  # a whole streamed array delivered as one JSON document
            ex.streamed = True
            for element in body:
                self._event(element, "")
            self._decode(self.fold.result())
            ex.complete = self.fold.complete
            if self._error_document():
                ex.streamed, ex.complete = False, True
            return
        if not isinstance(body, dict):
            raise DecodeError("response body is not a JSON object", "response")
        self._decode(Folded(body))
        ex.complete = True

    def _decode(self, folded: Folded) -> None:
        self.module.decode_body(folded.body, self.ex, replace(folded.extras, budget=self._budget, path=self._path))
        dropped = self._budget.dropped_calls + max(0, len(self.ex.tool_calls) - MAX_TOOL_CALLS)
        if dropped:
            del self.ex.tool_calls[MAX_TOOL_CALLS:]
            self._fail(DecodeError(f"{dropped} tool calls past the first {MAX_TOOL_CALLS} were not kept", "tool_calls"))

    def _settle(self) -> None:
        ex = self.ex
        if ex.status is not None and ex.status >= 400 and ex.error is None:
            ex.error = ApiError(type=None, code=str(ex.status), message=None)
        settle_finish(ex)
        if ex.usage is not None:
            ex.usage_provenance = "reported" if ex.complete else "partial"
            ex.usage_check = ex.usage.checks()
        else:
            ex.usage_provenance = "missing"
        if ex.model is None:
            ex.model = ex.model_requested
        if self._served_tier is not None:
            ex.service_tier = self._served_tier  # the header says what was served, ahead of the body
        if ex.service_tier is None:
            ex.service_tier = self._requested_tier  # what was asked, when nothing says what was served
        try:
            check_tool_calls(ex, CheckClock.for_size(self._size))
        except Exception as exc:  # noqa: BLE001 - a hostile schema must not lose the record
            self._fail(DecodeError(f"internal error checking tool calls: {exc!r}", "tool_calls"))

    def _fail(self, exc: DecodeError) -> None:
        if self.ex.decode_error is None:
            self.ex.decode_error = str(exc)


def settle_finish(ex: Exchange) -> None:
    """The finish-reason rules SPEC §2 states "in every protocol", over what the protocol's
    table gave: an error (body, mid-stream event, or HTTP status) is `error`; a natural
    stop whose output holds tool calls is `tool_use`; a cut stream's end is unknown."""
    if ex.error is not None:
        ex.finish_reason = "error"
    elif ex.finish_reason == "end_turn" and ex.tool_calls:
        ex.finish_reason = "tool_use"
    if not ex.complete and ex.finish_reason != "error":
        ex.finish_reason = None  # how a cut stream would have ended is unknown


def _is_error_body(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("error"), (dict, str)) and obj.keys() <= _ERROR_BODY_KEYS


def _snippet(raw: bytes, limit: int = 200) -> str:
    return raw[:limit].decode("utf-8", "replace").strip()


def decode_exchange(
    protocol: str,
    *,
    response: bytes,
    request: bytes | dict[str, Any] | None = None,
    path: str = "",
    host: str | None = None,
    status: int | None = None,
    content_type: str | None = None,
    content_encoding: str | None = None,
    provider: str | None = None,
    served_tier: str | None = None,
) -> Exchange:
    """Decode one whole exchange; the same steps as feeding `ExchangeDecoder` in one chunk."""
    decoder = ExchangeDecoder(
        protocol,
        request=request,
        path=path,
        host=host,
        status=status,
        content_type=content_type,
        content_encoding=content_encoding,
        provider=provider,
        served_tier=served_tier,
    )
    decoder.feed(response)
    return decoder.finish()
