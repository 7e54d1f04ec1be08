"""The regex module `lark` lexes with, made of RE2: a lark grammar's terminals in linear time.

`lark` compiles its terminals with the module its `regex` option names (Python's `re`
by default, which backtracks: a terminal `/(a|a)*b/` takes 2^n steps). `LARK_RE` is a
stand-in for that module with what lark calls of it (`compile`, `match`, `error`): each
pattern is read as Rust regex syntax (LLGuidance's, which OpenAI applies; lark's own
escapes of string literals are plain escapes there too) and compiled by RE2 through
`linear_regex`. Lark's bundled `ESCAPED_STRING`, whose lookbehind RE2 cannot run, is
swapped for a pattern of the same language.

Every match looks at the clock `grammar.py` sets for the parse (`bound`): a match whose
worst case does not fit in what is left raises `Overrun`, and the call is `unchecked`.
RE2 reads UTF-8; lark speaks in character offsets, so each text is encoded once and the
offsets mapped both ways.

Not responsible for building parsers or reading their verdicts (grammar.py).
"""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_left
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from itertools import accumulate
from typing import Any

from llmtap.protocols import linear_regex
from llmtap.protocols.budget import CheckClock

# common.lark's ESCAPED_STRING as lark renders it, and the same strings without lookbehind:
# a quote, then characters other than a quote, a backslash or a newline, or a backslash
# and the character it escapes, then the first quote that is not escaped.
_LOOKBEHIND_STRING = '".*?(?<!\\\\)(\\\\\\\\)*?"'
_PLAIN_STRING = '"(?:[^"\\\\\\n]|\\\\.)*"'

_clock: ContextVar[CheckClock | None] = ContextVar("llmtap_lark_clock", default=None)


@contextmanager
def bound(clock: CheckClock) -> Iterator[None]:
    """Matches inside this block spend `clock`."""
    token = _clock.set(clock)
    try:
        yield
    finally:
        _clock.reset(token)


class _Encoded:
    """One text as RE2 reads it, with its character offsets in bytes (ASCII: the same)."""

    __slots__ = ("text", "data", "offsets")

    def __init__(self, text: str) -> None:
        self.text = text
        self.data = text.encode("utf-8", "surrogatepass")
        self.offsets: array[int] | None = None
        if len(self.data) != len(text):
            self.offsets = array("q", accumulate(map(_width, text), initial=0))

    def byte(self, char: int) -> int:
        return char if self.offsets is None else self.offsets[char]

    def char(self, byte: int) -> int:
        return byte if self.offsets is None else bisect_left(self.offsets, byte)


def _width(char: str) -> int:
    code = ord(char)
    return 1 if code < 0x80 else 2 if code < 0x800 else 3 if code < 0x10000 else 4


_last = threading.local()  # the text this thread lexes: encoded once per parse


def _encoded(text: str) -> _Encoded:
    found: _Encoded | None = getattr(_last, "text", None)
    if found is None or found.text is not text:
        found = _last.text = _Encoded(text)
    return found


class Match:
    """What lark reads of a match: the text, where it ends, which group matched."""

    __slots__ = ("_text", "_start", "_end", "lastgroup")

    def __init__(self, text: str, start: int, end: int, lastgroup: str | None) -> None:
        self._text, self._start, self._end, self.lastgroup = text, start, end, lastgroup

    def group(self, index: int = 0) -> str:
        if index != 0:
            raise IndexError("only the whole match is kept")
        return self._text[self._start : self._end]

    def start(self, index: int = 0) -> int:
        return self._start

    def end(self, index: int = 0) -> int:
        return self._end

    def span(self, index: int = 0) -> tuple[int, int]:
        return self._start, self._end


class Pattern:
    """A compiled terminal (or lark's alternation of several, one named group each)."""

    __slots__ = ("pattern", "_regex")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        translated = linear_regex.translate(pattern.replace(_LOOKBEHIND_STRING, _PLAIN_STRING), "rust")
        self._regex = linear_regex.Regex(translated, captures=True)

    @property
    def groupindex(self) -> dict[str, int]:
        return dict(self._regex.compiled.groupindex)

    def match(self, text: str, pos: int = 0, endpos: int | None = None) -> Match | None:
        return self._run(text, pos, endpos, whole=False)

    def fullmatch(self, text: str, pos: int = 0, endpos: int | None = None) -> Match | None:
        return self._run(text, pos, endpos, whole=True)

    def _run(self, text: str, pos: int, endpos: int | None, whole: bool) -> Match | None:
        encoded = _encoded(text)
        start = encoded.byte(max(0, min(pos, len(text))))
        stop = len(encoded.data) if endpos is None or endpos >= len(text) else encoded.byte(max(endpos, 0))
        clock = _clock.get()
        if clock is not None:
            clock.admit(self._regex.worst_seconds(stop - start))
        if self._regex.ascii_only and not encoded.data[start:stop].isascii():
            raise linear_regex.Unsupported("a Unicode word boundary: RE2's is ASCII only")
        compiled = self._regex.compiled
        found = (compiled.fullmatch if whole else compiled.match)(encoded.data, start, stop)
        if found is None:
            return None
        begin, end = found.span()
        return Match(text, encoded.char(begin), encoded.char(end), found.lastgroup)


class _LarkRe:
    """The module lark is handed (`Lark(regex=True)` with this as its `regex`)."""

    error = linear_regex.Unsupported

    @staticmethod
    def compile(pattern: Any, flags: int = 0) -> Pattern:
        if flags or not isinstance(pattern, str):
            raise linear_regex.Unsupported("global regex flags or bytes patterns")
        return Pattern(pattern)

    @staticmethod
    def match(pattern: Any, string: str, flags: int = 0) -> Match | None:
        return _LarkRe.compile(pattern, flags).match(string)


LARK_RE = _LarkRe()
