"""Spend in flight (SPEC §6): the estimates reserved against budget limits by requests the
gate let through, held until their real cost is in the committed spend the gate reads.

A reservation lives through four steps:

1. `reserve`, on the event loop as the request passes the gate: its estimate counts
   against every limit it falls under (its team's, each carried key's);
2. `ended`, on the event loop as its record is handed to the writer (whatever the
   exchange became: complete, cut, refused upstream, not a generation after all);
3. `settle`, on the gate's thread: once the writer reports every record up to this one
   settled (committed, spooled or rejected: the writer settles in the order it was
   handed records), the moment is noted;
4. `release`, on the gate's thread: once the gate has read a committed spend stamped
   after that moment, the record's cost (if it had one) is in it, and the estimate goes.

Between 3 and 4 a cost may count twice (committed and reserved): the error is on the
side of refusing. A reservation whose record is never handed over (a bug) expires after
`STALE_S`, one whose record settled but whose release never comes (no spend from the
writer: the store away since the start) after `SETTLED_STALE_S`, with one warning: a
stuck writer cannot keep a team refused.

Thread-safe: the event loop and the gate's thread share one lock, held for a few dict
operations at a time.

Not responsible for estimates (budget_estimate.py), committed spend (budget_state.py) or
deciding to refuse (budget_gate.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

log = logging.getLogger("llmtap.budgets")

STALE_S = 3600.0  # a reservation whose record was never handed over expires after this long
SETTLED_STALE_S = 60.0  # and one whose record settled, without a newer committed spend
Key = tuple[str, str]  # (scope, name) of a limit


@dataclass(slots=True)
class _Reservation:
    keys: tuple[Key, ...]
    pico: int
    made: float  # monotonic
    seq: int | None = None  # the writer's submission count by which its record was handed over
    settled_at: float | None = None  # monotonic: every record up to `seq` settled before this


class Ledger:
    def __init__(
        self, clock: Callable[[], float] = time.monotonic, stale_s: float = STALE_S, settled_s: float = SETTLED_STALE_S
    ) -> None:
        self.clock = clock
        self.stale_s = stale_s
        self.settled_s = settled_s
        self._lock = threading.Lock()
        self._next = 0
        self._open: dict[int, _Reservation] = {}
        self._held: dict[Key, int] = {}  # the sum of open reservations per limit
        self._ended: list[int] = []  # handed over since the last `settle`
        self._waiting: dict[int, _Reservation] = {}  # handed over, not yet settled
        self._warned = False

    # -- the event loop ----------------------------------------------------------------

    def reserve(self, keys: Iterable[Key], pico: int) -> int:
        reservation = _Reservation(tuple(keys), max(pico, 0), self.clock())
        with self._lock:
            self._next += 1
            token = self._next
            self._open[token] = reservation
            for key in reservation.keys:
                self._held[key] = self._held.get(key, 0) + reservation.pico
        return token

    def held(self, key: Key) -> int:
        return self._held.get(key, 0)

    def ended(self, token: int) -> None:
        with self._lock:
            if token in self._open:
                self._ended.append(token)

    # -- the gate's thread ---------------------------------------------------------------

    def settle(self, submitted: int, backlog: int) -> None:
        """The writer's counts, read in this order: `submitted` (every record handed to it
        so far, those of the reservations ended before the call included), then
        `backlog` (how many of them are not settled yet)."""
        settled = submitted - backlog  # at least what was settled when `backlog` was read
        now = self.clock()
        with self._lock:
            for token in self._ended:
                reservation = self._open.get(token)
                if reservation is not None:
                    reservation.seq = submitted  # its record was among them
                    self._waiting[token] = reservation
            self._ended = []
            for reservation in self._waiting.values():
                if reservation.settled_at is None and reservation.seq is not None and reservation.seq <= settled:
                    reservation.settled_at = now

    def release(self, stamp: float | None) -> int:
        """Release what settled before the committed spend read at `stamp` (the writer's
        monotonic clock); expire what is stale. Returns how many went."""
        now = self.clock()
        gone: list[int] = []
        stale = 0
        with self._lock:
            for token, reservation in self._open.items():
                settled = reservation.settled_at
                if settled is not None and stamp is not None and settled < stamp:
                    gone.append(token)
                elif now - reservation.made > self.stale_s or (settled is not None and now - settled > self.settled_s):
                    gone.append(token)
                    stale += 1
            for token in gone:
                self._drop(token)
        if stale and not self._warned:
            self._warned = True
            log.warning("llmtap budgets: %d reservations expired unreleased (no spend from the writer)", stale)
        return len(gone)

    def _drop(self, token: int) -> None:
        reservation = self._open.pop(token)
        self._waiting.pop(token, None)
        for key in reservation.keys:
            left = self._held.get(key, 0) - reservation.pico
            if left > 0:
                self._held[key] = left
            else:
                self._held.pop(key, None)

    def __len__(self) -> int:
        return len(self._open)
