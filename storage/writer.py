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
nowhere.

Not responsible for decoding (records arrive decoded) or for signals (the process that
owns the writer calls `close()` on SIGINT/SIGTERM).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from sqlalchemy import Engine, Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from llmtap.storage import followups, migrate, rejected, schema, spool, threads, verdicts
from llmtap.storage.errors import StoreError
from llmtap.storage.private import open_private, private_dir
from llmtap.storage.record import Recorded
from llmtap.storage.rows import BODY_MODES, RowSet, rows_for

log = logging.getLogger("llmtap.storage")

STOP = object()  # put on a record queue: take what is left, then stop
FOLLOWUPS_WAITING = 10_000  # follow-ups held in memory while even the disk refuses them, at most


@runtime_checkable
class Pending(Protocol):
    """A record whose last, costlier steps (finishing the decode, checking tool calls)
    run on the writer's thread: `build()` returns the record, or None to skip it."""

    def build(self) -> Recorded | followups.FollowUp | None: ...


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
        refuses them: see `_apply_followups`)."""
        return self.written + self.duplicates + self.spooled + self.rejected + self.skipped + self.followups


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
        self.engine = engine
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
        self._other_secrets: set[Any] = set()  # ids of other secrets a replay was found to hold
        self.watch = watch
        self.memory_bound_mb = memory_bound_mb  # the process's bound, named when a build exceeds it
        self.spool = spool.Spool(spool_dir)
        self.rejected_path = spool_dir / "rejected.jsonl"
        self.stats = WriterStats()
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._settled = threading.Condition()
        self._count_lock = threading.Lock()
        self._between_batches = 0  # stats.settled when the thread last finished a batch
        self._held: list[RowSet] = []  # rows neither the database nor the disk would take
        self._followups: list[followups.FollowUp] = []  # applied after the rows of their batch
        self._followups_held = 0  # of those, ones the disk refused (in memory, not durable)
        self._followups_taken = 0  # of those, taken from the queue and not settled yet
        self._down_until = 0.0
        self._backoff = retry_initial
        self._away_since: float | None = None  # when the database went away (one line each way)
        self._spool_refused: str | None = None  # why the disk refuses the spool (one line each way)
        self._held_most = 0  # records in memory at most while it does, for the line when it ends
        self._dialect = engine.dialect.name
        self._sqlite_file = _sqlite_file(engine)
        self._file_identity = _identity(self._sqlite_file)
        self._gone: str | None = None  # why the store must be made again before the next write
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
        return finished and not self._held and not self._followups

    def _report_left(self) -> None:
        """Say what is not in the database as this writer stops: the spool (written at the
        next start, or by the next command that writes), and rows even the disk refused."""
        waiting = self.spool.count()
        lost = sum(len(rows) for rows in self._held) + len(self._followups)
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
            self._down_until = 0.0
            for start in range(0, max(len(rows.exchanges), 1), self.batch_size):
                self._deliver(_slice(rows, start, self.batch_size))
            self._retry_held(force=True)
            if time.monotonic() >= self._down_until and self.spool.has_files():
                self._replay()  # an earlier run's spool, when this run never went idle
            self._apply_followups()  # or spooled, when the store is still away
            return
        if rows.exchanges:
            self._deliver(rows)
        elif time.monotonic() >= self._down_until:  # idle: catch up on what waits
            self._retry_held()
            if self.spool.pending or self.spool.has_files():
                self._replay()
        self._apply_followups()

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
        if isinstance(record, followups.FollowUp):  # changes a stored exchange: see `_apply_followups`
            self._followups.append(record)
            self._followups_taken += 1
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
        self._reject_record(record, failure)

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
                self._reject_unfinished(item, exc)
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

    def _apply_followups(self) -> None:
        """Polls, resumed streams and cancels of background exchanges (storage/followups.py),
        after the rows of their batch, so a poll never overtakes its POST. While the store is
        away, or rows or follow-ups wait in the spool before them, they go to the spool too,
        behind those (a replay applies them after every spooled row); held in memory only
        while even the disk refuses them. Either way a batch's follow-ups are settled with it,
        so settlement keeps the order of submission."""
        try:
            if not self._followups:
                return
            waiting, self._followups = self._followups, []
            if time.monotonic() < self._down_until or self.spool.pending or self._held or self._gone:
                self._spool_followups(waiting)
                return
            for index, followup in enumerate(waiting):
                try:
                    self._apply_one(followup)
                except SQLAlchemyError as exc:
                    if _is_unavailable(exc):
                        self._went_down(exc)
                        self._spool_followups(waiting[index:])  # this one too: applying it again changes nothing
                        return
                    self._reject_followup(followup, exc)
                except Exception as exc:  # noqa: BLE001 - a bug in applying it: keep it to import again
                    log.error("llmtap writer: a background follow-up could not be applied: %r", exc)
                    self._reject_followup(followup, exc)
            self._followups_held = 0
        finally:
            if self._followups_taken:
                taken, self._followups_taken = self._followups_taken, 0
                self._settle(followups=taken)

    def _apply_one(self, followup: followups.FollowUp) -> None:
        """One follow-up, in a transaction of its own; raises the store's errors. A SQLite
        file deleted under the writer counts as the store gone, before and after (the pool's
        connections would apply it to the deleted file)."""
        self._check_file()
        followups.apply(self.engine, [followup], self.enrich)
        self._check_file()

    def _spool_followups(self, waiting: list[followups.FollowUp]) -> None:
        try:
            unkept = self.spool.append_followups([followup.kept(self.body_mode) for followup in waiting])
        except OSError as exc:  # the disk refuses too: hold them in memory, retry with the rows
            kept = waiting[-FOLLOWUPS_WAITING:]
            self._followups_held = len(kept)
            self._disk_refused(exc)
            if len(waiting) > len(kept):
                log.error("llmtap writer: %d background follow-ups lost (memory full)", len(waiting) - len(kept))
            self._followups = kept + self._followups  # none taken since: only this batch's
            return
        spooled = len(waiting) - len(unkept)
        self._followups_held = 0
        self._disk_takes_again()
        self.stats.followups_spooled += spooled
        for followup, why in unkept:
            log.error(
                "llmtap writer: the %s of %s %s was lost: %r",
                followup.route.kind,
                followup.route.protocol,
                followup.route.response_id,
                why,
            )

    def _apply_replayed(self, followup: followups.FollowUp) -> None:
        """A spooled follow-up, after every spooled row: the store's being away raises (the
        replay stops, the file stays); a refusal of its content goes to the rejected file."""
        try:
            self._apply_one(followup)
        except SQLAlchemyError as exc:
            if _is_unavailable(exc):
                raise
            self._reject_followup(followup, exc)
        except Exception as exc:  # noqa: BLE001 - a bug in applying it
            log.error("llmtap writer: a spooled background follow-up could not be applied: %r", exc)
            self._reject_followup(followup, exc)

    def _reject_followup(self, followup: followups.FollowUp, exc: Exception) -> None:
        """Refused for its content: to the rejected file, whence `llmtap import` takes it back."""
        route = followup.route
        log.error(
            "llmtap writer: the %s of %s %s was rejected: %s",
            route.kind,
            route.protocol,
            route.response_id,
            _first_line(exc),
        )
        try:
            line = rejected.followup_line(followup.kept(self.body_mode), _first_line(exc))
        except Exception as why:  # noqa: BLE001 - values bad enough to fail the store may fail this too
            log.error("llmtap writer: could not keep the rejected follow-up either: %r", why)
            return
        if not self._keep_rejected(line):
            log.error("llmtap writer: could not keep the rejected follow-up of %s either", route.response_id)

    def _deliver(self, rows: RowSet) -> None:
        if not rows.exchanges:
            return
        now = time.monotonic()
        if self._held and now >= self._down_until:
            self._retry_held()  # rows the disk refused go first, while the database takes them
        if now < self._down_until or self._held:
            self._to_spool(rows)
            return
        if self.spool.pending or self.spool.has_files() or self._gone:
            if not self._replay():
                self._to_spool(rows)
                return
        try:
            self._write(rows)
        except SQLAlchemyError as exc:
            if _is_unavailable(exc):
                self._went_down(exc)
                self._to_spool(rows)
            else:
                self._isolate(rows, exc)

    def _replay(self) -> bool:
        if not self._revive():
            return False
        try:
            replayed, applied = self.spool.replay(self._write_replayed, self._apply_replayed)
        except SQLAlchemyError as exc:
            if _is_unavailable(exc):
                self._went_down(exc)
            else:
                log.error("llmtap writer: spool replay hit a bad row: %s", _first_line(exc))
            return False
        if replayed or applied:
            log.info("llmtap writer: replayed %d spooled exchanges and %d background follow-ups", replayed, applied)
        return True

    def _write_replayed(self, rows: RowSet) -> None:
        self._note_other_secrets(rows)
        try:
            inserted = self._insert(rows)
        except SQLAlchemyError as exc:
            if _is_unavailable(exc):
                raise
            inserted = self._isolate_quietly(rows)
        self.stats.replayed += inserted
        self._came_up()

    def _note_other_secrets(self, rows: RowSet) -> None:
        """Say once per secret that spooled rows of another secret are stored as they are."""
        named = {row.get("key_secret_id") for row in rows.exchanges if row.get("key_fingerprint")}
        other = named - {None, self.key_secret_id} - self._other_secrets
        if other and self.key_secret_id:
            self._other_secrets |= other
            log.warning(
                "llmtap writer: spooled exchanges fingerprinted with another secret (%s) are stored as they are; "
                "`llmtap fingerprint rekey --from` its file makes them this store's",
                ", ".join(sorted(str(secret_id) for secret_id in other)),
            )

    def _write(self, rows: RowSet) -> None:
        inserted = self._insert(rows)
        self._came_up()
        self._settle(written=inserted, duplicates=len(rows.exchanges) - inserted)

    def _insert(self, rows: RowSet) -> int:
        """Insert a batch in one transaction; returns how many exchanges it added. A row
        that continues a Responses chain takes its thread key there (threads.assign).

        A plain executemany first: RETURNING would make psycopg parse a multi-row VALUES
        statement of ~40k placeholders per batch in Python (bench/ingest.py: 7x slower).
        When some exchanges were already stored (a replay, a file imported again), that
        transaction is rolled back and the batch goes in with RETURNING, so only the
        exchanges it adds get their tool calls and body refs.
        """
        self._check_file()
        with self.engine.connect() as connection:
            with connection.begin() as transaction:
                verdicts.lock(connection)  # decided from what every other writer committed
                self._insert_bodies(connection, rows)
                # a response chain's conversation: read and set in this transaction
                threads.assign(connection, rows.exchanges)
                # each exchange's verdicts, from its neighbours (storage/verdicts.py)
                plan = verdicts.decide(connection, rows.exchanges, rows.tool_calls)
                statement = self._insert_ignore(schema.exchanges)
                added = connection.execute(statement, rows.exchanges, execution_options=_COUNT_ROWS).rowcount
                if added == len(rows.exchanges):
                    self._insert_children(connection, rows.tool_calls, rows.body_refs)
                    verdicts.finish(connection, plan, rows.exchanges)
                else:
                    transaction.rollback()
            if added != len(rows.exchanges):
                connection.info.pop(verdicts.REKEYED, None)  # what the rolled-back transaction noted
                with connection.begin():
                    verdicts.lock(connection)
                    self._insert_bodies(connection, rows)
                    threads.assign(connection, rows.exchanges)
                    verdicts.keyed(rows.exchanges)  # the keys; the walks below decide
                    statement = self._insert_ignore(schema.exchanges).returning(schema.exchanges.c.id)
                    inserted = set(connection.execute(statement, rows.exchanges).scalars())
                    calls = [c for c in rows.tool_calls if c["exchange_id"] in inserted]
                    refs = [r for r in rows.body_refs if r["exchange_id"] in inserted]
                    self._insert_children(connection, calls, refs)
                    # some were stored already: what the batch decided from them is walked again
                    verdicts.finish(connection, verdicts.walk_again(rows.exchanges, inserted), rows.exchanges)
                added = len(inserted)
                rows = RowSet(
                    exchanges=[e for e in rows.exchanges if e["id"] in inserted], tool_calls=calls, body_refs=refs
                )
        self._check_file()  # deleted while it was written: the rows went nowhere, and spool
        self.stats.batches += 1
        if added:
            self._observe(rows)
        return added

    def _observe(self, added: RowSet) -> None:
        for observer in self.observers:
            try:
                observer.observe(added)
            except Exception:  # noqa: BLE001 - an observer's bug never costs a record
                log.exception("llmtap writer: %s failed on a batch", type(observer).__name__)

    def _insert_bodies(self, connection: Any, rows: RowSet) -> None:
        if rows.bodies:
            connection.execute(self._insert_ignore(schema.bodies), _unique(rows.bodies, "hash"))

    def _insert_children(self, connection: Any, calls: list[dict[str, Any]], refs: list[dict[str, Any]]) -> None:
        if calls:
            connection.execute(self._insert_ignore(schema.tool_calls), calls)
        if refs:
            connection.execute(self._insert_ignore(schema.body_refs), refs)

    def _insert_ignore(self, table: Table) -> Any:
        dialect = postgresql if self._dialect == "postgresql" else sqlite
        return dialect.insert(table).on_conflict_do_nothing()

    def _isolate(self, rows: RowSet, exc: SQLAlchemyError) -> None:
        """A batch the database refused for its content: find the rows at fault."""
        log.error("llmtap writer: batch refused (%s); writing row by row", _first_line(exc))
        for single in _singles(rows):
            try:
                self._write(single)
            except SQLAlchemyError as row_exc:
                if _is_unavailable(row_exc):
                    self._went_down(row_exc)
                    self._to_spool(single)
                else:
                    self._reject(single, row_exc)

    def _isolate_quietly(self, rows: RowSet) -> int:
        inserted = 0
        for single in _singles(rows):
            try:
                inserted += self._insert(single)
            except SQLAlchemyError as exc:
                if _is_unavailable(exc):
                    raise
                self._reject(single, exc, count=False)
        return inserted

    def _to_spool(self, rows: RowSet) -> None:
        try:
            self.spool.append(rows)
        except OSError as exc:  # the disk refuses too: keep them in memory and retry
            self._held.append(rows)
            self._disk_refused(exc)
        else:
            self._disk_takes_again()
        self._settle(spooled=len(rows))

    def _retry_held(self, force: bool = False) -> None:
        """Rows neither the database nor the disk took: try the database (once its backoff
        is over: a writer whose disk refuses has no spool to replay, so this is where the
        database is found back), then the disk."""
        held, self._held = self._held, []
        for rows in held:
            if force or time.monotonic() >= self._down_until:
                try:
                    self._insert(rows)
                    self._came_up()
                    continue
                except SQLAlchemyError as exc:
                    if _is_unavailable(exc):
                        self._went_down(exc)
            try:
                self.spool.append(rows)
            except OSError:
                self._held.append(rows)
        self._disk_takes_again()

    def _disk_refused(self, exc: OSError) -> None:
        """One line when the disk starts refusing the spool (a full disk), not one per batch."""
        held = sum(len(rows) for rows in self._held) + self._followups_held
        self._held_most = max(self._held_most, held)
        if self._spool_refused is None:
            self._spool_refused = str(exc)
            log.error(
                "llmtap writer: cannot spool (%s); holding records in memory until the database or the disk takes them",
                exc,
            )

    def _disk_takes_again(self) -> None:
        """And one when nothing is held in memory any more, with how many were at most."""
        if self._spool_refused is not None and not self._held and not self._followups_held:
            log.warning(
                "llmtap writer: nothing is held in memory any more (at most %d records were, while the disk "
                "refused the spool: %s)",
                self._held_most,
                self._spool_refused,
            )
            self._spool_refused, self._held_most = None, 0

    def _reject(self, rows: RowSet, exc: Exception, count: bool = True) -> None:
        log.error("llmtap writer: exchange %s rejected: %s", rows.exchanges[0]["id"], _first_line(exc))
        if not self._keep_rejected(rejected.rows_line(rows, _first_line(exc))):
            self._held.append(rows)
        if count:
            self._settle(rejected=len(rows))

    def _reject_record(self, record: Recorded, exc: Exception) -> None:
        try:  # whole, so `llmtap import rejected.jsonl` can load it back
            line = rejected.record_line(record, repr(exc))
        except Exception as why:  # noqa: BLE001 - values bad enough to fail the rows may fail this too
            log.error("llmtap writer: could not keep the rejected record %s either: %r", record.id, why)
        else:
            if not self._keep_rejected(line):
                log.error("llmtap writer: could not keep the rejected record %s either", record.id)
        self._settle(rejected=1)

    def _reject_unfinished(self, item: Any, exc: Exception) -> None:
        """Nothing to keep: an item that could neither be finished nor say who it was."""
        log.error("llmtap writer: a %s was lost: %r", type(item).__name__, exc)
        self._settle(rejected=1)

    def _keep_rejected(self, line: bytes) -> bool:
        try:
            private_dir(self.rejected_path.parent)
            with open_private(self.rejected_path, "ab") as handle:
                handle.write(line)
        except OSError:
            return False
        return True

    def _settle(self, **counts: int) -> None:
        with self._settled:
            for name, value in counts.items():
                setattr(self.stats, name, getattr(self.stats, name) + value)
            self._settled.notify_all()

    def _went_down(self, exc: Exception) -> None:
        self.stats.db_errors += 1
        if _store_gone(exc) and self._gone is None:
            self._gone = _first_line(exc)
            log.warning(
                "llmtap writer: the store is gone (%s); spooling until it is made again at %s",
                self._gone,
                self._label(),
            )
        elif self._away_since is None:
            log.warning("llmtap writer: database unavailable (%s); spooling", _first_line(exc))
        if self._away_since is None:
            self._away_since = time.monotonic()
        self._down_until = time.monotonic() + self._backoff
        self._backoff = min(self._backoff * 2, self.retry_max)

    def _check_file(self) -> None:
        """A SQLite file deleted or replaced under us: the pool's connections would go on
        writing into the deleted file, which nobody will ever read."""
        if self._sqlite_file is None:
            return
        now = _identity(self._sqlite_file)
        if self._file_identity is None:
            self._file_identity = now  # made by this writer's first connection
        elif now != self._file_identity:
            raise StoreVanished(f"the database file {self._sqlite_file} was deleted or replaced")

    def _revive(self) -> bool:
        """A store that vanished or lost its tables is made again (a new SQLite file, the
        migrations) before anything is written to it; False while that fails."""
        if self._gone is None:
            return True
        try:
            if self._sqlite_file is not None:
                self._fresh_sqlite_engine()
            migrate.ensure_current(self.engine)
        except (StoreError, SQLAlchemyError, OSError) as exc:
            self.stats.db_errors += 1
            self._down_until = time.monotonic() + self._backoff
            self._backoff = min(self._backoff * 2, self.retry_max)
            log.debug("llmtap writer: the store cannot be made again yet: %s", exc)
            return False
        self._file_identity = _identity(self._sqlite_file)
        log.warning(
            "llmtap writer: made the store again at %s (%s); writing the spool into it", self._label(), self._gone
        )
        self._gone = None
        return True

    def _fresh_sqlite_engine(self) -> None:
        """Drop the connections to the deleted file and open the path afresh. A -wal or
        -shm file left beside a missing database belongs to the deleted one: SQLite would
        apply that log to the new file."""
        from llmtap.storage.engine import make_engine

        assert self._sqlite_file is not None
        url = self.engine.url.render_as_string(hide_password=False)
        self.engine.dispose()
        if not self._sqlite_file.exists():
            for suffix in ("-wal", "-shm", "-journal"):
                self._sqlite_file.with_name(self._sqlite_file.name + suffix).unlink(missing_ok=True)
        self.engine = make_engine(url)

    def _label(self) -> str:
        return str(self._sqlite_file) if self._sqlite_file else self.engine.url.render_as_string(hide_password=True)

    def _came_up(self) -> None:
        if self._away_since is not None:  # also when it is found back at shutdown, backoff or not
            log.warning("llmtap writer: database is back (away %.0f s)", time.monotonic() - self._away_since)
            self._away_since = None
        self._down_until = 0.0
        self._backoff = self.retry_initial


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


class StoreVanished(SQLAlchemyError):
    """The SQLite file was deleted or replaced while the writer had it open."""


def _sqlite_file(engine: Engine) -> Path | None:
    if engine.dialect.name != "sqlite":
        return None
    database = engine.url.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database).expanduser().absolute()


def _identity(path: Path | None) -> tuple[int, int] | None:
    if path is None:
        return None
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _store_gone(exc: Exception) -> bool:
    """The file deleted, or the tables gone (a database dropped and made again empty)."""
    if isinstance(exc, StoreVanished):
        return True
    orig = getattr(exc, "orig", None)
    if getattr(orig, "sqlstate", None) == "42P01":  # PostgreSQL's undefined_table
        return True
    return type(orig).__name__ == "OperationalError" and str(orig).startswith("no such table")


def _is_unavailable(exc: SQLAlchemyError) -> bool:
    """Away (down, locked, read-only, refusing connections, the store gone) rather than
    refusing a row."""
    from sqlalchemy.exc import IntegrityError, OperationalError

    if _store_gone(exc):
        return True
    if isinstance(exc, IntegrityError):
        return False
    if isinstance(exc, OperationalError):
        return True
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    name = type(getattr(exc, "orig", None)).__name__
    return name in ("OperationalError", "InterfaceError", "ConnectionException", "AdminShutdown")


_COUNT_ROWS = {"preserve_rowcount": True}  # the rows an INSERT … ON CONFLICT DO NOTHING added


def _first_line(exc: Exception) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else exc.__class__.__name__


def _unique(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    seen: dict[Any, dict[str, Any]] = {}
    for row in rows:
        seen.setdefault(row[key], row)
    return list(seen.values())


def _slice(rows: RowSet, start: int, size: int) -> RowSet:
    exchanges = rows.exchanges[start : start + size]
    ids = {row["id"] for row in exchanges}
    return RowSet(
        exchanges,
        [c for c in rows.tool_calls if c["exchange_id"] in ids],
        rows.bodies if start == 0 else [],
        [r for r in rows.body_refs if r["exchange_id"] in ids],
    )


def _singles(rows: RowSet) -> Iterable[RowSet]:
    wanted_bodies = {r["body_hash"] for r in rows.body_refs}
    by_hash = {b["hash"]: b for b in rows.bodies if b["hash"] in wanted_bodies}
    for row in rows.exchanges:
        refs = [r for r in rows.body_refs if r["exchange_id"] == row["id"]]
        yield RowSet(
            [row],
            [c for c in rows.tool_calls if c["exchange_id"] == row["id"]],
            [by_hash[r["body_hash"]] for r in refs if r["body_hash"] in by_hash],
            refs,
        )
