"""The writer: records in without waiting, batched inserts on a thread of its own, and a
spool when the database is away.

`submit()` is O(1) and never blocks or raises, so the proxy's event loop can call it.
The thread turns records into rows, inserts them in batches (one transaction each,
duplicates ignored by id and by provider response id), and when the database is down or
locked appends the batch to the spool and retries with backoff; when the database is back
the spool is replayed first, so order is kept. Follow-ups of background work (polls,
resumed streams, cancels: storage/followups.py) change the exchange their POST stored
rather than add one; they are applied after the rows of their batch, and wait in the
spool behind those rows whenever rows do. `flush()` waits until everything submitted is
committed or spooled; `close()` flushes and stops. A row or follow-up the database rejects
for its content (not for being away) goes to `rejected.jsonl` beside the spool, never
nowhere. The `Writer` is a `RecordSink` (storage/sink.py), as the writer process is.

This module is the queue, the thread and the batching, turning each batch's records into
rows, and the settled counts `flush` waits on; it composes the parts that do the rest:
where rows go (storage/delivery.py: the store, the spool, memory, the rejected file; the
transaction itself in storage/batch_insert.py), the follow-ups (storage/followup_apply.py)
and the watch on the store (storage/store_guard.py: away, gone, made again, the backoff).

Not responsible for decoding (records arrive decoded) or for signals (the process that
owns the writer calls `close()` on SIGINT/SIGTERM).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import Engine

from llmtap.storage import followups, spool
from llmtap.storage.batch_insert import BatchInsert
from llmtap.storage.delivery import Delivery
from llmtap.storage.followup_apply import FOLLOWUPS_WAITING, FollowUps
from llmtap.storage.held import Held
from llmtap.storage.record import Recorded
from llmtap.storage.rejecting import Rejecting
from llmtap.storage.rows import BODY_MODES, RowSet, rows_for
from llmtap.storage.sink import Pending, RecordSink, WriterStats
from llmtap.storage.store_guard import StoreGuard, StoreVanished
from llmtap.storage.writer_parts import WriterParts

__all__ = [
    "FOLLOWUPS_WAITING",
    "STOP",
    "BuildWatch",
    "Observer",
    "Pending",
    "RecordSink",
    "StoreVanished",
    "Writer",
    "WriterStats",
    "drain",
]

log = logging.getLogger("llmtap.storage")

STOP = object()  # put on a record queue: take what is left, then stop


class BuildWatch(Protocol):
    """Told when the writer's thread starts and ends turning one item into rows (its build,
    then its rows): the writer process's watchdog (storage/watchdog.py). Must be cheap."""

    def begin(self, item: object) -> None: ...

    def end(self) -> None: ...


class Observer(Protocol):
    """Something told of every exchange the store took, after its transaction committed
    (metrics, span export, budgets: llmtap.telemetry). `observe` runs on the writer's
    thread, between batches: it must be quick and must not raise (the writer logs and
    carries on if it does); `close` runs once, after the last batch."""

    def observe(self, rows: RowSet) -> None: ...

    def close(self) -> None: ...


class Writer:
    def __init__(
        self,
        engine: Engine,
        *,
        spool_dir: Path,
        body_mode: str = "metadata",
        batch_size: int = 500,
        max_delay: float = 0.2,
        retry_initial: float = 0.5,
        retry_max: float = 10.0,
        enrich: Callable[[list[dict[str, Any]]], None] | None = None,
        yield_gil: bool = True,
        observers: Sequence[Observer] = (),
        key_secret_id: str | None = None,
        watch: BuildWatch | None = None,
        memory_bound_mb: int | None = None,
        access: Callable[[list[dict[str, Any]]], None] | None = None,
        say_left: bool = True,
    ) -> None:
        if body_mode not in BODY_MODES:
            raise ValueError(f"body mode must be one of {', '.join(BODY_MODES)}")
        self.body_mode = body_mode
        self.batch_size = batch_size
        self.max_delay = max_delay
        self.retry_initial = retry_initial
        self.retry_max = retry_max
        self.enrich = enrich  # e.g. the pricer: fills columns of exchange rows in place
        self.yield_gil = yield_gil  # before finishing each pending record (see `_rows`)
        self.observers = tuple(observers)  # told of the exchanges each commit added
        self.access = access  # told of each batch's new exchanges once priced (storage/access_log.py)
        self.say_left = say_left  # False: whoever runs it says what is left (the proxy's last line)
        # the id of the secret this process fingerprints with: records it hands over that
        # name none are stamped with it (store_secret.py); records loaded from files keep theirs
        self.key_secret_id = key_secret_id
        self.watch = watch
        self.memory_bound_mb = memory_bound_mb  # the process's bound, named when a build exceeds it
        self.spool = spool.Spool(spool_dir)
        self.rejected_path = spool_dir / "rejected.jsonl"
        self.stats = WriterStats()
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._settled = threading.Condition()
        self._count_lock = threading.Lock()
        self._between_batches = 0  # stats.settled when the thread last finished a batch
        # the parts (each module's docstring says what it does), sharing the stats and `_settle`
        self._guard = StoreGuard(engine, self.stats, retry_initial=retry_initial, retry_max=retry_max)
        self._held = Held()
        self._rejecting = Rejecting(self.rejected_path, self._held, self._settle)
        parts = WriterParts(self._guard, self.spool, self._held, self._rejecting, self.stats, self._settle)
        self._followups = FollowUps(parts, body_mode=body_mode, enrich=enrich)
        self._delivery = Delivery(
            parts,
            BatchInsert(self._guard, self.stats, self._observe),
            apply_replayed=self._followups.apply_replayed,
            key_secret_id=key_secret_id,
        )
        self._thread = threading.Thread(target=self._run, name="llmtap-writer", daemon=True)
        self._closed = False
        self._closing = threading.Event()
        self._thread.start()

    # -- the caller's side ---------------------------------------------------------------

    def submit(self, record: Recorded | Pending | RowSet) -> None:
        """Hand over one record; returns at once.

        Takes no lock the writer's thread waits for, so a SIGTERM handler that interrupts
        it and calls `close()` cannot deadlock; queued before counted, so a record the
        handler's `close()` drains is never one the queue does not hold.
        """
        self._queue.put(record)
        with self._count_lock:
            self.stats.submitted += 1

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every record submitted so far is committed or spooled."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._settled:
            target = self.stats.submitted
            while self.stats.settled < target:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._settled.wait(timeout=left if left is not None else 0.5)
        return True

    def wait_settled(self, seen: int, timeout: float) -> int:
        """Block until the records settled between batches number other than `seen`, or
        `timeout`; that count. Between batches it is exact and in submission order: the
        first N records submitted are the N settled (mid-batch it is not)."""
        with self._settled:
            if self._between_batches == seen:
                self._settled.wait(timeout)
            return self._between_batches

    def close(self, timeout: float | None = 60.0) -> bool:
        """Flush everything queued and stop the thread."""
        if self._closed:
            return True
        self._closed = True
        self._queue.put(STOP)
        self._closing.set()
        self._thread.join(timeout)
        finished = not self._thread.is_alive()
        if not finished:  # (a timeout of None waits for as long as it takes)
            log.error(
                "llmtap: the writer did not finish within %s s: %d records are not written yet (lost when this "
                "process exits)",
                f"{timeout:g}" if timeout is not None else "",
                self.backlog,
            )
        self.spool.close()
        self._report_left()
        for observer in self.observers:
            try:
                observer.close()
            except Exception:  # noqa: BLE001 - closing an observer never fails the writer's close
                log.exception("llmtap writer: closing %s failed", type(observer).__name__)
        return finished and not self._held.rows and not self._followups.waiting

    def _report_left(self) -> None:
        """Say what is not in the database as this writer stops: the spool (written at the
        next start, or by the next command that writes), and rows even the disk refused."""
        waiting = self.spool.count()
        lost = sum(len(rows) for rows in self._held.rows) + len(self._followups.waiting)
        self.stats.in_spool, self.stats.lost = waiting, lost
        if not self.say_left:
            return
        if waiting:
            log.warning(
                "llmtap: %d records are still in the spool at %s; they are written when the database is back "
                "(next start)",
                waiting,
                self.spool.folder,
            )
        if lost:
            log.error("llmtap: %d records could be written neither to the database nor to the spool", lost)

    @property
    def backlog(self) -> int:
        return self.stats.submitted - self.stats.settled

    @property
    def engine(self) -> Engine:
        """The store's engine: a new one once a vanished SQLite file is made again."""
        return self._guard.engine

    # -- the thread ----------------------------------------------------------------------

    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch, stopping = self._take()
            try:
                self._handle(batch, final=stopping)
            except Exception:  # noqa: BLE001 - the thread must outlive any bug
                log.exception("llmtap writer: unexpected failure; rows kept in memory for retry")
            with self._settled:
                if self._between_batches != self.stats.settled:
                    self._between_batches = self.stats.settled
                    self._settled.notify_all()

    def _take(self) -> tuple[list[Recorded], bool]:
        """A batch: wait for a first record, take what else is queued and, unless that
        makes a full batch, sleep out the batch window once and take again. One wake-up
        per batch rather than per record: each wake-up takes the GIL from the proxy's
        event loop, whose `submit` would otherwise also pay to wake this thread."""
        try:
            first = self._queue.get(timeout=self.max_delay)
        except queue.Empty:
            return [], False
        if first is STOP:
            return drain(self._queue), True
        batch: list[Recorded] = [first]
        window_ends = time.monotonic() + self.max_delay
        for second_look in (False, True):
            while len(batch) < self.batch_size:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is STOP:
                    batch.extend(drain(self._queue))
                    return batch, True
                batch.append(item)
            if second_look or len(batch) >= self.batch_size:
                break
            self._closing.wait(max(window_ends - time.monotonic(), 0))  # close() cuts it short
        return batch, False

    def _handle(self, batch: list[Recorded], final: bool) -> None:
        rows = self._rows(batch)
        if final:  # write everything now, in batches, database or spool
            # Shutting down: one more try whatever the backoff says (a failure sets it
            # again, so the rest goes straight to the spool).
            self._guard.down_until = 0.0
            for start in range(0, max(len(rows.exchanges), 1), self.batch_size):
                self._delivery.deliver(_slice(rows, start, self.batch_size))
            self._delivery.retry_held(force=True)
            if time.monotonic() >= self._guard.down_until and self.spool.has_files():
                self._delivery.replay()  # an earlier run's spool, when this run never went idle
            self._followups.apply()  # or spooled, when the store is still away
            return
        if rows.exchanges:
            self._delivery.deliver(rows)
        elif time.monotonic() >= self._guard.down_until:  # idle: catch up on what waits
            self._delivery.retry_held()
            if self.spool.pending or self.spool.has_files():
                self._delivery.replay()
        self._followups.apply()

    def _rows(self, batch: Iterable[Recorded | Pending | RowSet]) -> RowSet:
        rows = RowSet()
        watch = self.watch
        fresh = 0  # exchanges built from records (not loaded back from the rejected file)
        for item in batch:
            if isinstance(item, RowSet):  # rows loaded back from the rejected file
                rows.extend(item)
                continue
            before = len(rows.exchanges)
            if watch is None:
                self._add(item, rows)
            else:
                watch.begin(item)
                try:
                    self._add(item, rows)
                finally:
                    watch.end()
            fresh += len(rows.exchanges) - before
        if self.enrich is not None and rows.exchanges:
            try:
                self.enrich(rows.exchanges)
            except Exception:  # noqa: BLE001 - rows are stored unpriced; `reprice` catches up
                log.exception("llmtap writer: enrich step failed")
        if self.access is not None and fresh:
            try:
                self.access(rows.exchanges if fresh == len(rows.exchanges) else self._fresh(batch, rows))
            except Exception:  # noqa: BLE001 - an access line never costs a record
                log.exception("llmtap writer: the access log failed on a batch")
        return rows

    @staticmethod
    def _fresh(batch: Iterable[Any], rows: RowSet) -> list[dict[str, Any]]:
        """The rows of a batch that also carried rows loaded back from the rejected file."""
        loaded = {id(row) for item in batch if isinstance(item, RowSet) for row in item.exchanges}
        return [row for row in rows.exchanges if id(row) not in loaded]

    def _add(self, item: Recorded | Pending, rows: RowSet) -> None:
        """One item's record, as rows (or a follow-up, applied after the batch's rows)."""
        record = self._built(item)
        if record is None:
            return
        if isinstance(record, followups.FollowUp):  # changes a stored exchange: see storage/followup_apply.py
            self._followups.take(record)
            return
        self._stamp(record)
        try:
            rows.extend(rows_for(record, self.body_mode))
            return
        except MemoryError as exc:  # its rows would not fit: what is known without them
            failure: Exception = exc
            salvaged = self._salvaged(item, exc)
        except Exception as exc:  # noqa: BLE001 - a record that cannot become rows
            log.error("llmtap writer: a record could not be stored: %r", exc)
            failure, salvaged = exc, None
        try:
            if salvaged is not None:
                self._stamp(salvaged)
                rows.extend(rows_for(salvaged, self.body_mode))
                return
        except Exception as exc:  # noqa: BLE001 - not even that
            failure = exc
        self._rejecting.record(record, failure)

    def _stamp(self, record: Recorded) -> None:
        """A record fingerprinted here names this process's secret (store_secret.py)."""
        if record.key_fingerprint and record.key_secret_id is None:
            record.key_secret_id = self.key_secret_id

    def _built(self, item: Recorded | Pending) -> Recorded | followups.FollowUp | None:
        """The record of an item; None when it is not one (settled as skipped) or could
        not be finished and said nothing of itself (settled as rejected)."""
        # A class check, not `isinstance(item, Pending)`: a runtime Protocol check costs
        # ~5 µs a record.
        if isinstance(item, Recorded):
            return item
        try:
            if self.yield_gil:
                # A thread in the proxy's own process shares the GIL with mitmproxy's
                # event loop: let a loop that waits for it go first, rather than after
                # the switch interval (5 ms), so finishing a record never adds that to
                # a response's latency. (A writer process has no loop to wait for.)
                time.sleep(0)
            # A pending record finishes its decoding here, off the proxy's event loop.
            record = item.build()
        except Exception as exc:  # noqa: BLE001 - a bug in finishing, or a bound: keep who, when and where
            record = self._salvaged(item, exc)
            if record is None:
                self._rejecting.unfinished(item, exc)
            return record
        if record is None:  # not a generation after all (body shape)
            self._settle(skipped=1)
        return record

    def _salvaged(self, item: Any, exc: Exception) -> Recorded | None:
        """The record of an item that could not be finished, from what it knows without
        decoding (its `salvage`), with the failure as its decode error; None without one."""
        if isinstance(exc, MemoryError):
            bound = f" (the writer's bound: {self.memory_bound_mb} MiB)" if self.memory_bound_mb else ""
            error = f"record build ran out of memory{bound}; stored undecoded (quarantined)"
        else:
            error = f"the record could not be finished: {exc!r}"
        log.error("llmtap writer: %s", error)
        salvage = getattr(item, "salvage", None)
        try:
            return salvage(error) if salvage is not None else None
        except Exception:  # noqa: BLE001
            return None

    def _observe(self, added: RowSet) -> None:
        for observer in self.observers:
            try:
                observer.observe(added)
            except Exception:  # noqa: BLE001 - an observer's bug never costs a record
                log.exception("llmtap writer: %s failed on a batch", type(observer).__name__)

    def _settle(self, **counts: int) -> None:
        with self._settled:
            for name, value in counts.items():
                setattr(self.stats, name, getattr(self.stats, name) + value)
            self._settled.notify_all()


def drain(source: queue.SimpleQueue[Any]) -> list[Any]:
    """Everything still queued, STOP markers left out."""
    rest: list[Any] = []
    while True:
        try:
            item = source.get_nowait()
        except queue.Empty:
            return rest
        if item is not STOP:
            rest.append(item)


def _slice(rows: RowSet, start: int, size: int) -> RowSet:
    exchanges = rows.exchanges[start : start + size]
    ids = {row["id"] for row in exchanges}
    return RowSet(
        exchanges,
        [c for c in rows.tool_calls if c["exchange_id"] in ids],
        rows.bodies if start == 0 else [],
        [r for r in rows.body_refs if r["exchange_id"] in ids],
    )
