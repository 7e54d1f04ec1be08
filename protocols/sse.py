"""Incremental Server-Sent Events decoder following the WHATWG parsing rules.

Feed it bytes split anywhere (even inside a UTF-8 character or between `\\r` and `\\n`);
it yields complete events. Lines end with `\\n`, `\\r\\n` or `\\r`; `data:` lines join
with `\\n`; lines starting with `:` are comments; `flush()` dispatches a last event that
had no blank line after it (the spec would drop it; recorders should not).

Not responsible for what the data means (JSON parsing is the protocol modules' job) nor
for content decoding (see `content.py`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class SSEEvent:
    data: str
    event: str = ""
    id: str | None = None


class SSEDecoder:
    """`decode(chunk) -> list[SSEEvent]`, then `flush() -> list[SSEEvent]` at the end."""

    __slots__ = ("_buffer", "_skip_lf", "_data", "_event", "_id", "_has_data", "_first")

    def __init__(self) -> None:
        self._buffer = b""
        self._skip_lf = False  # the last chunk ended in "\r": a leading "\n" belongs to it
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._has_data = False
        self._first = True

    def decode(self, chunk: bytes) -> list[SSEEvent]:
        if not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        buffer = self._buffer + chunk if self._buffer else chunk
        cut = max(buffer.rfind(b"\n"), buffer.rfind(b"\r"))
        if cut < 0:
            self._buffer = buffer
            return []
        complete, self._buffer = buffer[: cut + 1], buffer[cut + 1 :]
        if complete.endswith(b"\r"):
            self._skip_lf = True
        return self._lines(complete.splitlines())

    def flush(self) -> list[SSEEvent]:
        """End of stream: the unterminated last line and any undispatched event."""
        events = self._lines([self._buffer]) if self._buffer else []
        self._buffer = b""
        last = self._dispatch()
        if last is not None:
            events.append(last)
        return events

    def _lines(self, lines: list[bytes]) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        for raw in lines:
            if not raw:
                event = self._dispatch()
                if event is not None:
                    events.append(event)
                continue
            line = raw.decode("utf-8", "replace")
            if self._first:
                self._first = False
                line = line.removeprefix("\ufeff")
            if line.startswith("data:"):
                value = line[5:]
                self._data.append(value[1:] if value.startswith(" ") else value)
                self._has_data = True
                continue
            if line[0] == ":":
                continue  # comment
            name, colon, value = line.partition(":")
            if colon and value.startswith(" "):
                value = value[1:]
            if name == "event":
                self._event = value
            elif name == "data":  # "data" with no colon: an empty data line
                self._data.append("")
                self._has_data = True
            elif name == "id" and "\0" not in value:
                self._id = value
            # "retry" and unknown fields are ignored, as the spec says.
        return events

    def _dispatch(self) -> SSEEvent | None:
        if not self._has_data:
            self._event = ""
            return None
        event = SSEEvent("\n".join(self._data), self._event, self._id)
        self._data = []
        self._has_data = False
        self._event = ""
        return event
