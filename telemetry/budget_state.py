"""Which limits are over, handed from the writer's process (which knows the spend) to the
proxy's process (which refuses), through a small JSON file in the proxy's spool folder.

The writer's side replaces the file atomically (write a temporary file, then
`os.replace`) whenever the set changes and after each reload. The proxy's side re-reads
it from a thread of its own every `state_poll_s` (0.25 s) when its size or mtime changed,
so the gate answers from memory and the event loop never touches the file. An entry
counts only while its period lasts and only for a limit the current config still sets
with the same amount and period (a raised limit lets traffic through at once).

Not responsible for computing spend (budget_spend.py) or shaping refusals
(budget_refusal.py).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from llmtap.telemetry.budget_config import Limit
from llmtap.telemetry.budget_spend import Standing

log = logging.getLogger("llmtap.budgets")

FILE_NAME = "budgets-over.json"


def path_in(spool_dir: Path) -> Path:
    return spool_dir / FILE_NAME


def encode(over: Sequence[Standing], now: datetime) -> bytes:
    entries = [
        {
            "scope": s.limit.scope,
            "name": s.limit.name,
            "period": s.limit.period,
            "usd": str(s.limit.usd),
            "period_end": s.end.isoformat(),
        }
        for s in over
    ]
    return json.dumps({"written_at": now.isoformat(), "over": entries}, sort_keys=True).encode()


def write(path: Path, data: bytes) -> None:
    """Replace the file atomically (a reader sees the old one or the new one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)


Over = dict[tuple[str, str], tuple[Limit, datetime]]  # (scope, name) -> (limit, period end)


def decode(data: bytes, limits: Sequence[Limit]) -> Over:
    """The entries that still name a configured limit; a malformed file is empty."""
    known = {(limit.scope, limit.name, limit.period, str(limit.usd)): limit for limit in limits}
    try:
        entries = json.loads(data)["over"]
        found: Over = {}
        for entry in entries:
            limit = known.get((entry["scope"], entry["name"], entry["period"], entry["usd"]))
            if limit is not None:
                found[(limit.scope, limit.name)] = (limit, datetime.fromisoformat(entry["period_end"]))
        return found
    except (ValueError, KeyError, TypeError):
        return {}


class StateReader:
    """The proxy's side: a thread that keeps `over` current; `find` answers from memory."""

    def __init__(
        self, path: Path, limits: Sequence[Limit], poll_s: float, clock: Callable[[], datetime] | None = None
    ) -> None:
        self.path = path
        self.limits = tuple(limits)
        self.poll_s = poll_s
        self.clock = clock or (lambda: datetime.now(UTC))
        self.over: Over = {}  # replaced whole, never mutated: a read needs no lock
        self._seen: tuple[int, int, int] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="llmtap-budget-state", daemon=True)

    def start(self) -> StateReader:
        self.refresh()
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)

    def find(self, team: str | None, fingerprint: str | None) -> tuple[Limit, datetime] | None:
        """The limit this team or key is over now (the team's first), or None."""
        over, now = self.over, self.clock()
        for scoped in (("team", team), ("key", fingerprint)):
            if scoped[1] is None:
                continue
            hit = over.get((scoped[0], scoped[1]))
            if hit is not None and now < hit[1]:
                return hit
        return None

    def refresh(self) -> None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._seen, self.over = None, {}
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
        self._seen, self.over = seen, decode(data, self.limits)

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            self.refresh()
