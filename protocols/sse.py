"""Incremental Server-Sent Events decoder following the WHATWG parsing rules.

Feed it bytes split anywhere (even inside a UTF-8 character or between `\\r` and `\\n`);
it yields complete events. Lines end with `\\n`, `\\r\\n` or `\\r`; `data:` lines join
with `\\n`; lines starting with `:` are comments; `flush()` dispatches a last event that
had no blank line after it (the spec would drop it; recorders should not). One event (its
unfinished line plus its data lines) is bounded by `max_event`: past it, `DecodeError`.

Not responsible for what the data means (JSON parsing is the protocol modules' job) nor
for content decoding (see `content.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

from llmtap.protocols.errors import DecodeError

# Bytes one event may hold. Real events are far smaller (a Responses `response.completed`
# repeats the whole output); a stream that never ends a line must not grow without bound.
MAX_EVENT = 64 * 1024 * 1024


@dataclass(slots=True)
class SSEEvent:
    data: str
    event: str = ""
    id: str | None = None


class SSEDecoder:
    """`decode(chunk) -> list[SSEEvent]`, then `flush() -> list[SSEEvent]` at the end."""

    __slots__ = ("_buffer", "_skip_lf", "_data", "_size", "_event", "_id", "_has_data", "_first", "_max")

    def __init__(self, max_event: int = MAX_EVENT) -> None:
        self._buffer = bytearray()  # the unfinished last line
        self._skip_lf = False  # the last chunk ended in "\r": a leading "\n" belongs to it
        self._data: list[str] = []
        self._size = 0  # characters in _data
        self._event = ""
        self._id: str | None = None
        self._has_data = False
        self._first = True
        self._max = max_event

    def decode(self, chunk: bytes) -> list[SSEEvent]:
        if not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        # Only the new bytes are searched: rescanning the buffer would make a long line
        # quadratic.
        cut = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
        if cut < 0:
            self._buffer += chunk
            self._guard()
            return []
        complete = bytes(self._buffer) + chunk[: cut + 1] if self._buffer else chunk[: cut + 1]
        self._buffer = bytearray(chunk[cut + 1 :])
        if chunk.endswith(b"\r"):  # only a "\r" that ends the input pairs with a "\n" to come
            self._skip_lf = True
        return self._lines(complete.splitlines())

    def flush(self) -> list[SSEEvent]:
        """End of stream: the unterminated last line and any undispatched event."""
        events = self._lines([bytes(self._buffer)]) if self._buffer else []
        self._buffer = bytearray()
        last = self._dispatch()
        if last is not None:
            events.append(last)
        return events

    def _lines(self, lines: list[bytes]) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        for raw in lines:
            if self._first:  # a BOM may open the stream, and only there
                self._first = False
                raw = raw.removeprefix(b"\xef\xbb\xbf")
            if not raw:
                event = self._dispatch()
                if event is not None:
                    events.append(event)
                continue
            line = raw.decode("utf-8", "replace")
            if line.startswith("data:"):
                value = line[5:]
                self._add_data(value[1:] if value.startswith(" ") else value)
                continue
            if line[0] == ":":
                continue  # comment
            name, colon, value = line.partition(":")
            if colon and value.startswith(" "):
                value = value[1:]
            if name == "event":
                self._event = value
            elif name == "data":  # "data" with no colon: an empty data line
                self._add_data("")
            elif name == "id" and "\0" not in value:
                self._id = value
            # "retry" and unknown fields are ignored, as the spec says.
        return events

    def _add_data(self, value: str) -> None:
        self._data.append(value)
        self._size += len(value) + 1
        self._has_data = True
        self._guard()

    def _guard(self) -> None:
        if len(self._buffer) + self._size > self._max:
            raise DecodeError(f"an SSE event exceeds {self._max} bytes", "sse")

    def _dispatch(self) -> SSEEvent | None:
        if not self._has_data:
            self._event = ""
            return None
        event = SSEEvent("\n".join(self._data), self._event, self._id)
        self._data = []
        self._size = 0
        self._has_data = False
        self._event = ""
        return event
