"""What the proxy and the CLI hold when they hold a writer: `RecordSink`, the interface the
in-process `Writer` (storage/writer.py) and the `WriterProcess` (storage/writer_process.py)
both offer, and the two things it speaks in: `Pending` (a record the writer finishes) and
`WriterStats` (what it did with what it was given).

Not responsible for writing anything (storage.writer does), nor for where the writing
runs (a thread of the caller's process, or a process of its own: storage.writer_process).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from llmtap.storage import followups
from llmtap.storage.record import Recorded
from llmtap.storage.rows import RowSet


@runtime_checkable
class Pending(Protocol):
    """A record whose last, costlier steps (finishing the decode, checking tool calls)
    run on the writer's thread: `build()` returns the record, or None to skip it."""

    def build(self) -> Recorded | followups.FollowUp | None: ...


@dataclass
class WriterStats:
    submitted: int = 0
    written: int = 0
    duplicates: int = 0
    spooled: int = 0
    replayed: int = 0
    rejected: int = 0
    skipped: int = 0
    db_errors: int = 0
    batches: int = 0
    followups: int = 0  # polls, resumed streams and cancels of background exchanges taken
    followups_spooled: int = 0  # of those, put in the spool (counted in `followups` already)
    # As the writer closed: records in the spool (this run's and any earlier run's not yet
    # replayed), and records neither the database nor the disk took (gone with the process).
    in_spool: int = 0
    lost: int = 0

    @property
    def settled(self) -> int:
        """Records whose fate is durable: in the database, in the spool, or rejected (and
        follow-ups, applied, spooled or rejected, or held in memory while even the disk
        refuses them: see `FollowUps.apply`, storage/followup_apply.py)."""
        return self.written + self.duplicates + self.spooled + self.rejected + self.skipped + self.followups


class RecordSink(Protocol):
    """Where the proxy and the CLI hand records: `submit` is O(1) and never blocks or
    raises (the proxy's event loop calls it); `flush` waits until everything submitted is
    committed, spooled or rejected (False if `timeout` came first); `close` flushes and
    stops (True when everything is settled). `backlog` is what was submitted and is not
    settled yet; `body_mode` what the store keeps of bodies (storage/rows.py)."""

    def submit(self, record: Recorded | Pending | RowSet) -> None: ...

    def flush(self, timeout: float | None = None) -> bool: ...

    def close(self, timeout: float | None = 60.0) -> bool: ...

    @property
    def stats(self) -> WriterStats: ...

    @property
    def backlog(self) -> int: ...

    @property
    def body_mode(self) -> str: ...
