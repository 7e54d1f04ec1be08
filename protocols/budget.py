"""What one exchange may cost to decode and check (SPEC §6): memory a small multiple of its
body, time linear in its size, whatever it contains.

One `ExchangeBudget` per exchange, shared by every site that assembles something from the
response (a fold's text and tool arguments, Gemini `partialArgs`), so a bound cannot be
multiplied by repeating the site (many calls, many blocks, many chunks):

- kept text: the characters a fold keeps (visible text, tool arguments, a call's name,
  partialArgs strings) stop at `MAX_KEPT_CHARS`; past it the stream is still decoded to
  the end for usage and finish reason, and the record says `text_truncated`. Kept text
  is at most the body's own characters.
- made characters: what assembly makes that the body does not carry (the null padding of
  a partialArgs array index, the objects and arrays along a path) is charged by the
  characters it adds to the arguments' JSON, and an exchange may make at most `MADE_BASE`
  plus `MADE_PER_CHAR` per character of the partialArgs pieces it received. A call whose
  pieces would make more is not assembled: its pieces are its raw text, not valid JSON.
- tool calls: at most `MAX_TOOL_CALLS` per exchange are kept (each costs a row and a check);
  the rest are counted in `dropped_calls`, and the record says so.

`CheckClock` is the checks' share: the CPU seconds (this thread's) that an exchange's tool
checks may take together, `CHECK_BASE_SECONDS` plus `CHECK_SECONDS_PER_MIB` per MiB of the
exchange, at most `CHECK_MAX_SECONDS`. A check that would overrun it (a regex whose worst
case does not fit in what is left, Earley past the deadline, a schema whose evaluation does
not end) stops, and its call is `unchecked`; the checks after it in the same exchange find
the clock spent and are `unchecked` at once. The garbage collector's passes are not
charged to it: a full collection walks the whole process's heap, whatever the exchange is
(`check_time` is this thread's CPU time less its collections).

Not responsible for what a fold keeps or a check concludes (the translators, toolcheck.py):
only for how much of it there may be.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable

MAX_KEPT_CHARS = 4 * 1024 * 1024
MADE_BASE = 16 * 1024
MADE_PER_CHAR = 1
MAX_TOOL_CALLS = 16_384

CHECK_BASE_SECONDS = 0.1
CHECK_SECONDS_PER_MIB = 2.0
CHECK_MAX_SECONDS = 5.0


class ExchangeBudget:
    """The shared allowances of one exchange's decoding (see the module's doc)."""

    __slots__ = ("kept", "pieces", "made", "calls", "dropped_calls")

    def __init__(self) -> None:
        self.kept = MAX_KEPT_CHARS  # characters a fold may still keep
        self.pieces = 0  # characters of partialArgs pieces received
        self.made = 0  # characters assembled beyond the pieces
        self.calls = 0  # tool calls a fold has opened
        self.dropped_calls = 0

    def piece(self, size: int) -> None:
        """A partialArgs piece of `size` characters arrived: it pays for what it makes."""
        self.pieces += size

    def make(self, size: int) -> bool:
        """Whether `size` more characters may be made (and, if so, they are counted)."""
        if self.made + size > MADE_BASE + MADE_PER_CHAR * self.pieces:
            return False
        self.made += size
        return True

    def open_call(self) -> bool:
        """Whether one more tool call may be kept (and, if so, it is counted)."""
        if self.calls >= MAX_TOOL_CALLS:
            self.dropped_calls += 1
            return False
        self.calls += 1
        return True


def new_budget() -> ExchangeBudget:
    return ExchangeBudget()


class _Collections(threading.local):
    """This thread's CPU seconds spent in the garbage collector, and when its pass began."""

    spent = 0.0
    began = 0.0


_collections = _Collections()


def _on_collection(phase: str, _info: dict[str, int]) -> None:
    # The collector runs on the thread whose allocation set it off, so its passes are
    # measured on that thread's clock.
    if phase == "start":
        _collections.began = time.thread_time()
    else:
        _collections.spent += time.thread_time() - _collections.began


if _on_collection not in gc.callbacks:
    gc.callbacks.append(_on_collection)


def check_time() -> float:
    """This thread's CPU seconds, less those the garbage collector took on it."""
    return time.thread_time() - _collections.spent


class Overrun(Exception):
    """A check ran past what its exchange's clock allows."""


class CheckClock:
    """The CPU time an exchange's tool checks may still take, on this thread's clock (the
    machine's load does not spend it; only the checks' own work does)."""

    __slots__ = ("deadline",)

    def __init__(self, seconds: float) -> None:
        self.deadline = check_time() + seconds

    @classmethod
    def for_size(cls, size: int) -> CheckClock:
        """The clock of an exchange of `size` bytes (request and response)."""
        seconds = CHECK_BASE_SECONDS + CHECK_SECONDS_PER_MIB * size / (1024 * 1024)
        return cls(min(seconds, CHECK_MAX_SECONDS))

    def left(self) -> float:
        return self.deadline - check_time()

    def spent(self) -> bool:
        """Whether the clock is spent (its deadline passed on `check_time`)."""
        return check_time() > self.deadline

    def check(self) -> None:
        """Raise `Overrun` once the clock is spent."""
        if self.spent():
            raise Overrun("the exchange's checks used their time")

    def excluding(self, step: Callable[[], object]) -> None:
        """Run `step` (a module's first import, a cache's first fill: work no exchange
        causes) without spending the clock on it: the deadline moves by what it took."""
        start = check_time()
        step()
        self.deadline += check_time() - start

    def admit(self, seconds: float) -> None:
        """Raise `Overrun` unless a step that may take `seconds` fits in what is left."""
        if seconds > self.left():
            raise Overrun("its worst case does not fit in the time the exchange's checks have left")
