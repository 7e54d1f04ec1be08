"""Each limit's committed spend, handed from the writer's process (which knows it) to the
proxy's process (which admits or refuses), through a small JSON file in the proxy's spool
folder.

The writer's side replaces the file atomically (write a temporary file, then
`os.replace`) at each step of its budget thread: after each commit it is told of, and at
least once a second. Beside the spend the file carries `stamp`, the writer's monotonic
clock when the spend was read (under the lock its commits take): every commit the writer
had finished by then is in it. The proxy's side (`StateReader`) re-reads the file when its
size, inode or mtime changed, from the gate's own thread, so the gate answers from memory
and the event loop never touches the file; the gate releases a reservation once a file
stamped after its record settled has been read (budget_gate.py). A monotonic clock is one
clock for every process of a machine (Linux, macOS, Windows). An entry counts only while
its period lasts and only for a limit the current config still sets over the same period.

Not responsible for computing spend (budget_spend.py), reserving (budget_ledger.py) or
shaping refusals (budget_refusal.py).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from llmtap.storage.private import open_private, private_dir
from llmtap.telemetry.budget_config import Limit
from llmtap.telemetry.budget_spend import Standing

log = logging.getLogger("llmtap.budgets")

FILE_NAME = "budgets-over.json"  # the name from when it listed only the limits over
STAMP_MARGIN_NS = 2 * 10**9  # file times may be coarser than the clock: a file this much older still counts


def path_in(spool_dir: Path) -> Path:
    return spool_dir / FILE_NAME


def encode(standings: Sequence[Standing], now: datetime, stamp: float | None = None) -> bytes:
    """The spend of every standing, read at `stamp` (the writer's monotonic clock)."""
    entries = [
        {
            "scope": s.limit.scope,
            "name": s.limit.name,
            "period": s.limit.period,
            "usd": str(s.limit.usd),
            "period_end": s.end.isoformat(),
            "spent_pico": s.spent_pico,
        }
        for s in standings
    ]
    document = {"written_at": now.isoformat(), "stamp": time.monotonic() if stamp is None else stamp}
    document["standings"] = entries
    return json.dumps(document, sort_keys=True).encode()


def write(path: Path, data: bytes) -> None:
    """Replace the file atomically (a reader sees the old one or the new one). It tells
    each limit's spend: private to the user, as every file llmtap writes (SPEC §4)."""
    private_dir(path.parent)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open_private(temporary, "wb") as out:
        out.write(data)
    os.replace(temporary, path)


@dataclass(frozen=True, slots=True)
class Committed:
    limit: Limit
    spent_pico: int
    period_end: datetime


State = dict[tuple[str, str], Committed]  # (scope, name) -> its committed spend


def decode(data: bytes, limits: Sequence[Limit]) -> tuple[State, float | None]:
    """(the entries that name a configured limit, the stamp); a malformed file is empty."""
    known = {(limit.scope, limit.name, limit.period): limit for limit in limits}
    try:
        document = json.loads(data)
        found: State = {}
        for entry in document["standings"]:
            limit = known.get((entry["scope"], entry["name"], entry["period"]))
            spent = entry["spent_pico"]
            if limit is not None and isinstance(spent, int) and not isinstance(spent, bool):
                found[(limit.scope, limit.name)] = Committed(limit, spent, datetime.fromisoformat(entry["period_end"]))
        stamp = document["stamp"]
        return found, float(stamp) if isinstance(stamp, (int, float)) and not isinstance(stamp, bool) else None
    except (ValueError, KeyError, TypeError, AttributeError):
        return {}, None


def over_of(data: bytes, limits: Sequence[Limit]) -> dict[tuple[str, str], tuple[Limit, datetime]]:
    """The limits the file says are reached (spent at least the limit)."""
    state, _ = decode(data, limits)
    return {k: (c.limit, c.period_end) for k, c in state.items() if c.spent_pico >= c.limit.pico}


class StateReader:
    """The proxy's side: `refresh` (from the gate's thread) keeps `state` current; `spent`
    answers from memory. `stamp` is None until a file written since this reader started
    has been read: an older one's spend counts, its stamp (of a clock that may have
    restarted with the machine) releases nothing."""

    def __init__(self, path: Path, limits: Sequence[Limit], clock: Callable[[], datetime] | None = None) -> None:
        self.path = path
        self.limits = tuple(limits)
        self.clock = clock or (lambda: datetime.now(UTC))
        self._started_ns = time.time_ns() - STAMP_MARGIN_NS
        self.state: State = {}  # replaced whole, never mutated: a read needs no lock
        self.stamp: float | None = None
        self._seen: tuple[int, int, int] | None = None

    def spent(self, limit: Limit, now: datetime) -> int:
        """The committed spend of `limit` in its current period (0 once the period the
        file speaks of is over: the writer starts the next from nothing too)."""
        found = self.state.get((limit.scope, limit.name))
        return found.spent_pico if found is not None and now < found.period_end else 0

    def refresh(self) -> None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._seen, self.state = None, {}
            return
        except OSError as exc:
            log.warning("llmtap budgets: cannot read %s: %s", self.path, exc)
            return
        seen = (stat.st_ino, stat.st_mtime_ns, stat.st_size)  # os.replace: a new inode
        if seen == self._seen:
            return
        try:
            data = self.path.read_bytes()
        except OSError:
            return
        state, stamp = decode(data, self.limits)
        self._seen, self.state = seen, state
        if stamp is not None and stat.st_mtime_ns >= self._started_ns:
            self.stamp = stamp
