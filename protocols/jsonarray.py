"""Incremental splitter for a streamed top-level JSON array (Gemini `streamGenerateContent`
without `alt=sse` sends `[{…},\\r\\n{…}]` element by element).

`decode(chunk)` returns the text of every element completed so far; `flush()` says
whether the closing `]` arrived. Structural scanning uses one regular expression per
chunk, so the work stays linear in the input; one element is bounded by `max_element`.

Not responsible for parsing the elements (the protocol module `json.loads` them).
"""

from __future__ import annotations

import re

from llmtap.protocols.errors import DecodeError

_STRUCTURE = re.compile(rb'["{}\[\]]')
_STRING_END = re.compile(rb'["\\]')
# Bytes one element may hold, as much as a whole non-streamed body (exchange.MAX_JSON_BODY).
MAX_ELEMENT = 64 * 1024 * 1024


class JSONArraySplitter:
    __slots__ = ("_buf", "_pos", "_depth", "_in_string", "_start", "_opened", "closed", "_escape", "_max")

    def __init__(self, max_element: int = MAX_ELEMENT) -> None:
        self._buf = bytearray()
        self._pos = 0  # scan position in _buf
        self._depth = 0  # nesting inside the top-level array (0 = between elements)
        self._in_string = False
        self._escape = False
        self._start = -1  # where the current element began
        self._opened = False
        self.closed = False
        self._max = max_element

    def decode(self, chunk: bytes) -> list[str]:
        if self.closed or not chunk:
            return []
        self._buf += chunk
        elements: list[str] = []
        buf, pos = self._buf, self._pos
        while pos < len(buf):
            if self._in_string:
                pos = self._scan_string(buf, pos)
                continue
            if not self._opened:
                pos = self._open(buf, pos)
                continue
            match = _STRUCTURE.search(buf, pos)
            if match is None:
                if self._depth == 0:
                    self._check_between(buf[pos:])
                pos = len(buf)
                break
            char = buf[match.start()]
            if self._depth == 0:
                self._check_between(buf[pos : match.start()])
            pos = match.end()
            if char == 0x22:  # "
                if self._depth == 0:
                    raise DecodeError("a bare string in the streamed JSON array", "[]")
                self._in_string = True
            elif char in (0x7B, 0x5B):  # { [
                if self._depth == 0:
                    self._start = match.start()
                self._depth += 1
            elif self._depth == 0:
                if char == 0x5D:  # ]
                    self.closed = True
                    break
                raise DecodeError("unbalanced '}' in the streamed JSON array", "[]")
            else:
                self._depth -= 1
                if self._depth == 0:
                    elements.append(bytes(buf[self._start : pos]).decode("utf-8", "replace"))
                    self._start = -1
        self._compact(pos)
        return elements

    @property
    def pending(self) -> bool:
        """Whether an element has begun and not ended (the stream was cut inside it)."""
        return self._depth > 0 or self._in_string

    def _open(self, buf: bytearray, pos: int) -> int:
        stripped = bytes(buf[pos:]).lstrip()
        if not stripped:
            return len(buf)
        if stripped[:1] != b"[":
            raise DecodeError("the streamed response is not a JSON array", "[]")
        self._opened = True
        return len(buf) - len(stripped) + 1

    def _scan_string(self, buf: bytearray, pos: int) -> int:
        if self._escape:
            self._escape = False
            return pos + 1
        match = _STRING_END.search(buf, pos)
        if match is None:
            return len(buf)
        if buf[match.start()] == 0x5C:  # backslash: skip the escaped byte
            if match.end() >= len(buf):
                self._escape = True
                return len(buf)
            return match.end() + 1
        self._in_string = False
        return match.end()

    @staticmethod
    def _check_between(gap: bytes | bytearray) -> None:
        if gap.strip(b" \t\r\n,"):
            raise DecodeError("unexpected text between elements of the streamed JSON array", "[]")

    def _compact(self, pos: int) -> None:
        keep_from = self._start if self._start >= 0 else pos
        if keep_from > 0:
            del self._buf[:keep_from]
            pos -= keep_from
            if self._start >= 0:
                self._start = 0
        self._pos = pos
        if len(self._buf) > self._max:  # what is kept is the unfinished element
            raise DecodeError(f"an element of the streamed JSON array exceeds {self._max} bytes", "[]")
