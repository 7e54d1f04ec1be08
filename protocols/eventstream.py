"""Incremental decoder of AWS event-stream framing (`application/vnd.amazon.eventstream`).

Bedrock's streaming routes (`invoke-with-response-stream`, `converse-stream`) answer in
binary messages, each:

    prelude   total length (uint32 BE), headers length (uint32 BE), CRC32 of those 8 bytes
    headers   name length (uint8), name, value type (uint8), value; repeated
    payload   the rest
    trailer   CRC32 of everything before it

https://docs.aws.amazon.com/transcribe/latest/dg/streaming-setting-up.html#streaming-event-stream
(the same encoding every AWS event stream uses) and
https://docs.aws.amazon.com/AmazonS3/latest/API/RESTSelectObjectAppendix.html (the header
value types). Feed bytes split anywhere with `decode(chunk)`; it returns the messages
completed so far. Both CRCs are checked: a bad one is a `DecodeError`, as is a frame
longer than `max_frame`, so memory stays bounded. `pending` says whether the bytes ended
inside a frame (a cut stream).

Not responsible for what the messages mean: `payload_event` below reads Bedrock's two
payload shapes, and the protocol modules fold the events.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
import uuid
import zlib
from dataclasses import dataclass, field
from typing import Any

from llmtap.protocols.common import parse_json
from llmtap.protocols.errors import DecodeError

CONTENT_TYPE = "application/vnd.amazon.eventstream"
_PRELUDE = 12  # total length, headers length, prelude CRC
_TRAILER = 4  # message CRC
_MIN_FRAME = _PRELUDE + _TRAILER
# botocore's limits: 128 KiB of headers, 24 MiB of payload per message.
MAX_HEADERS = 128 * 1024
MAX_FRAME = 24 * 1024 * 1024 + MAX_HEADERS + _MIN_FRAME

# header value type -> fixed size in bytes (None: a uint16 length precedes the value)
_FIXED = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}
_VARIABLE = (6, 7)  # bytes, string
_INTS = {2: ">b", 3: ">h", 4: ">i", 5: ">q", 8: ">q"}


@dataclass(slots=True)
class EventMessage:
    """One decoded message: its headers (`:message-type`, `:event-type`, …) and payload."""

    headers: dict[str, Any] = field(default_factory=dict)
    payload: bytes = b""

    @property
    def message_type(self) -> str:
        value = self.headers.get(":message-type")
        return value if isinstance(value, str) else "event"

    @property
    def event_type(self) -> str:
        value = self.headers.get(":event-type")
        return value if isinstance(value, str) else ""


def prelude_ok(head: bytes) -> bool:
    """Whether bytes open with an event-stream prelude (its CRC checks): a body of unknown
    content type is sniffed by this."""
    if len(head) < _PRELUDE:
        return False
    total, headers, crc = _prelude_fields(head)
    return zlib.crc32(head[:8]) == crc and _MIN_FRAME <= total and headers <= total - _MIN_FRAME


class EventStreamDecoder:
    """`decode(chunk) -> list[EventMessage]`; `pending` is true inside an unfinished frame."""

    __slots__ = ("_buffer", "_need", "_max", "messages")

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self._buffer = bytearray()
        self._need = _PRELUDE  # bytes the next step needs: the prelude, then the whole frame
        self._max = max_frame
        self.messages = 0

    @property
    def pending(self) -> bool:
        return bool(self._buffer)

    def decode(self, chunk: bytes) -> list[EventMessage]:
        if not chunk:
            return []
        self._buffer += chunk
        found: list[EventMessage] = []
        # Frames are taken off the front one by one; a chunk holding many is sliced once each.
        while len(self._buffer) >= self._need:
            if self._need == _PRELUDE:
                self._need = self._prelude()
                continue
            frame = bytes(self._buffer[: self._need])
            del self._buffer[: self._need]
            self._need = _PRELUDE
            found.append(self._message(frame))
        return found

    def _prelude(self) -> int:
        head = bytes(self._buffer[:_PRELUDE])
        total, headers, crc = _prelude_fields(head)
        where = f"eventstream message {self.messages}"
        if zlib.crc32(head[:8]) != crc:
            raise DecodeError("event-stream prelude CRC mismatch", where)
        if total < _MIN_FRAME or headers > total - _MIN_FRAME:
            raise DecodeError(f"event-stream frame lengths are inconsistent ({total}, {headers})", where)
        if total > self._max or headers > MAX_HEADERS:
            raise DecodeError(f"an event-stream frame exceeds {self._max} bytes ({total})", where)
        return total

    def _message(self, frame: bytes) -> EventMessage:
        where = f"eventstream message {self.messages}"
        (crc,) = struct.unpack(">I", frame[-_TRAILER:])
        if zlib.crc32(frame[:-_TRAILER]) != crc:
            raise DecodeError("event-stream message CRC mismatch", where)
        (headers_length,) = struct.unpack(">I", frame[4:8])
        end = _PRELUDE + headers_length
        message = EventMessage(_headers(frame[_PRELUDE:end], where), frame[end:-_TRAILER])
        self.messages += 1
        return message


def _prelude_fields(head: bytes) -> tuple[int, int, int]:
    total, headers, crc = struct.unpack(">III", head[:_PRELUDE])
    return int(total), int(headers), int(crc)


def _headers(raw: bytes, where: str) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    pos = 0
    try:
        while pos < len(raw):
            size = raw[pos]
            name = raw[pos + 1 : pos + 1 + size].decode("utf-8")
            pos += 1 + size
            kind = raw[pos]
            pos += 1
            if kind in _VARIABLE:
                (length,) = struct.unpack(">H", raw[pos : pos + 2])
                value_bytes = raw[pos + 2 : pos + 2 + length]
                if len(value_bytes) != length:
                    raise ValueError("header value runs past the headers")
                pos += 2 + length
                headers[name] = value_bytes.decode("utf-8") if kind == 7 else value_bytes
                continue
            width = _FIXED.get(kind)
            if width is None:
                raise ValueError(f"unknown header value type {kind}")
            value = raw[pos : pos + width]
            if len(value) != width:
                raise ValueError("header value runs past the headers")
            pos += width
            headers[name] = _fixed_value(kind, value)
    except (IndexError, ValueError, struct.error, UnicodeDecodeError) as exc:
        raise DecodeError(f"event-stream headers are malformed ({exc})", where) from None
    return headers


def _fixed_value(kind: int, value: bytes) -> Any:
    if kind in (0, 1):
        return kind == 0
    if kind == 9:
        return str(uuid.UUID(bytes=value))
    (number,) = struct.unpack(_INTS[kind], value)
    return number


def payload_event(message: EventMessage, where: str) -> tuple[Any, str]:
    """A Bedrock event message as (the protocol event, its name).

    InvokeModel's stream wraps each provider event as `{"bytes": base64}` in a `chunk`
    event (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModelWithResponseStream.html);
    Converse's events are the payload itself, named by `:event-type`
    (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html).
    Both may carry a `p` padding field, which is not the event's."""
    body = _json(message.payload, where)
    if message.event_type == "chunk" and isinstance(body, dict) and isinstance(body.get("bytes"), str):
        try:
            inner = base64.b64decode(body["bytes"], validate=True)
        except (binascii.Error, ValueError) as exc:
            raise DecodeError(f"chunk bytes are not base64 ({exc})", where) from None
        return _json(inner, where), ""
    if isinstance(body, dict):
        body.pop("p", None)
    return body, message.event_type


def exception_fields(message: EventMessage) -> tuple[str | None, str | None, str | None]:
    """An `exception` or `error` message as (type, code, message).

    `:message-type exception` names the modelled exception in `:exception-type`
    (`throttlingException`, `modelStreamErrorException`, …) with a JSON payload holding
    `message` (and, for a model stream error, `originalStatusCode`); `:message-type error`
    carries `:error-code` and `:error-message` headers."""
    if message.message_type == "error":
        code = message.headers.get(":error-code")
        text = message.headers.get(":error-message")
        return (str(code) if code is not None else None, None, str(text) if text is not None else None)
    try:
        body = json.loads(message.payload) if message.payload.strip() else {}
    except ValueError:
        body = {}
    body = body if isinstance(body, dict) else {}
    kind = message.headers.get(":exception-type")
    status = body.get("originalStatusCode")
    text = body.get("message") if isinstance(body.get("message"), str) else body.get("Message")
    return (
        str(kind) if kind is not None else None,
        str(status) if isinstance(status, int) and not isinstance(status, bool) else None,
        str(text) if isinstance(text, str) else None,
    )


def _json(data: bytes, where: str) -> Any:
    return parse_json(data, where)  # one JSON policy for every payload
