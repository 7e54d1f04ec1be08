"""The writer in a process of its own, for the proxy: the other core does the work.

mitmproxy relays every byte on one event loop, and a writer thread in the same process
shares its GIL: each record the thread finishes (the decode's last steps, pricing, the
SQL) is time the loop does not relay anything. Measured with bench/proxy_overhead.py,
that cost a quarter of bare mitmdump's requests/s. `WriterProcess` has the `Writer`'s
interface (`submit`, `flush`, `close`, `stats`, `body_mode`) and ships what it is given,
pickled in batches over a pipe, to a child process (`python -m
llmtap.storage.writer_process`) that runs a plain `Writer`.

Delivery. The parent keeps every record it shipped until the child reports it settled
(committed, spooled or rejected, as the `Writer` means it; the child reports only between
batches, when that count is exact and in order). If the child dies, a new one gets the
unsettled records again; after `RESTARTS` deaths within `RESTART_WINDOW` seconds the
parent stops trying and runs a `Writer` on a thread of its own (which stores records
undecoded: below).
If the parent dies, the child sees the pipe close, writes what it holds and exits. The
child ignores SIGINT and SIGTERM (a terminal's Ctrl-C reaches the whole process group, a
service manager's stop every process of the service): it stops when the parent closes the
pipe, after the parent's own shutdown has handed it everything.
A record resent after a child died between committing and reporting it is recognised by
its id (SPEC §6, exactly once): a pending record (finished in the child) gets the random
part of its id here, before it is first shipped, so every child that builds it makes the
same id (`storage.shipped.Identified`).

One record cannot stop the writer (SPEC §6). Each record's build in the child has a
deadline and a memory bound (`LLMTAP_RECORD_DEADLINE`, CPU seconds, default 30;
`LLMTAP_RECORD_MEMORY`, MiB, default 2048: storage/watchdog.py), and a shared progress
slot tells this process which record the child is building. A build that overruns its
memory bound is stored by the child from what is known without decoding it; one that
overruns its deadline, or during which the child dies for any reason, ends that child:
the next one is sent the record QUARANTINED (stored undecoded, the decode error saying
what happened, with its bodies as the body mode allows), the records behind it as they
were. Those deaths are the record's, not the writer's: they do not count towards the
writer thread. A child that dies again on the quarantined record gets instead what this
process knows of it (who, when, where, no bodies). This process never builds a record:
neither the writer thread (which stores records undecoded, as `salvage` makes them) nor a
record that would not pickle. Closing in time says what is not written yet and where it is.

Not responsible for what records are (storage.writer, storage.rows), for the bounds'
mechanics (storage.watchdog) or for deciding to use a process (the proxy's set-up does).
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import queue
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from llmtap.storage import access_log, watchdog
from llmtap.storage.record import Recorded
from llmtap.storage.rows import RowSet
from llmtap.storage.shipped import Identified, identified, pickled, quarantined, read_frame, write_frame
from llmtap.storage.sink import Pending, RecordSink
from llmtap.storage.writer import STOP, BuildWatch, Observer, Writer, WriterStats, drain

log = logging.getLogger("llmtap.storage")

RESTARTS = 3  # child deaths within the window before falling back to a writer thread
RESTART_WINDOW = 60.0  # seconds
SHIP_WINDOW = 0.05  # seconds the shipper waits to fill a batch (one pickle, one write)
SHIP_BATCH = 1000


@dataclass(frozen=True)
class WriterSpec:
    """What a process needs to open the same writer. Sent over the pipe, not on the
    command line, where `ps` would show a database URL's password."""

    url: str
    spool_dir: Path
    body_mode: str = "metadata"
    # A picklable callable (a module-level function, or functools.partial of one) that
    # returns the writer's `enrich` step, e.g. the pricer's `price_rows`.
    enrich_factory: Callable[[], Callable[[list[dict[str, Any]]], None]] | None = None
    # Likewise picklable: the observers told of what each commit added (llmtap.telemetry),
    # made in the process that writes, so their work never runs on the proxy's event loop.
    observers_factory: Callable[[], Sequence[Observer]] | None = None
    batch_size: int = 500
    max_delay: float = 0.2
    retry_initial: float = 0.5
    retry_max: float = 10.0
    key_secret_id: str | None = None  # the fingerprint secret's id: see `Writer`
    # One record's build in the writer process: CPU seconds, and MiB it may add (SPEC §6).
    record_seconds: float = field(default_factory=watchdog.deadline_from_env)
    record_memory_mb: int = field(default_factory=watchdog.memory_from_env)
    access_log: bool = False  # a line on stderr per exchange (storage/access_log.py)
    say_left: bool = True  # False: the proxy's own last line says what is left (shutdown.py)

    def open(self, *, yield_gil: bool = True, watch: BuildWatch | None = None) -> Writer:
        """The writer; `yield_gil=False` in a process that has no event loop to yield to,
        `watch` where each record's build is watched (the writer process)."""
        from llmtap.storage.engine import make_engine

        return Writer(
            make_engine(self.url),
            spool_dir=self.spool_dir,
            body_mode=self.body_mode,
            batch_size=self.batch_size,
            max_delay=self.max_delay,
            retry_initial=self.retry_initial,
            retry_max=self.retry_max,
            key_secret_id=self.key_secret_id,
            enrich=self.enrich_factory() if self.enrich_factory is not None else None,
            yield_gil=yield_gil,
            observers=self._observers(),
            watch=watch,
            memory_bound_mb=self.record_memory_mb if watch is not None else None,
            access=access_log.write if self.access_log else None,
            say_left=self.say_left,
        )

    def _observers(self) -> Sequence[Observer]:
        """The observers, or none if making them fails: a writer without them still records."""
        if self.observers_factory is None:
            return ()
        try:
            return self.observers_factory()
        except Exception:  # noqa: BLE001 - whatever an observer's set-up raises
            log.exception("llmtap writer: the observers could not start; writing without them")
            return ()


def _add(total: WriterStats, part: WriterStats) -> None:
    for item in fields(WriterStats):
        setattr(total, item.name, getattr(total, item.name) + getattr(part, item.name))


# -- the parent's side ------------------------------------------------------------------------


class _Child:
    """One writer process and the thread that reads its reports."""

    def __init__(
        self,
        spec: WriterSpec,
        on_report: Callable[[_Child, int, WriterStats], None],
        command: list[str],
        slot: watchdog.ProgressSlot,
    ) -> None:
        slot.clear()  # nobody builds anything yet
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
            pass_fds=(slot.fd,),
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin: IO[bytes] = self.proc.stdin
        self.stats = WriterStats()
        self.settled = 0  # records of this child's that it reported settled
        self.gone = threading.Event()
        self._on_report = on_report
        self.reader = threading.Thread(target=self._read, name="llmtap-writer-reports", daemon=True)
        self.reader.start()
        with contextlib.suppress(OSError):  # a child that died at once: its reader says so
            self.send(0, pickle.dumps((spec, slot.fd), protocol=pickle.HIGHEST_PROTOCOL))

    def send(self, count: int, payload: bytes) -> None:
        """Raises OSError when the child is gone."""
        write_frame(self.stdin, count, payload)

    def _read(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        try:
            while (frame := read_frame(stdout)) is not None:
                settled, stats = pickle.loads(frame[1])
                self._on_report(self, settled, WriterStats(**stats))
        except Exception:  # noqa: BLE001 - a garbled report: treat the child as gone
            log.exception("llmtap writer: unreadable report from the writer process")
        finally:
            with contextlib.suppress(OSError):
                stdout.close()
            self.gone.set()
            self._on_report(self, self.settled, self.stats)  # wakes whoever waits

    def end(self) -> None:
        """Close its input (it finishes and exits) and wait for it and its last reports.
        No time limit here: `WriterProcess.close` bounds how long its caller waits."""
        with contextlib.suppress(OSError):
            self.stdin.close()
        self.proc.wait()
        self.reader.join(5)

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.stdin.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.reader.join(5)


class WriterProcess:
    """The `Writer`'s interface (a `RecordSink`), with the writing done by a child process."""

    def __init__(self, spec: WriterSpec, *, command: list[str] | None = None) -> None:
        self.spec = spec
        self.command = command or [sys.executable, "-m", "llmtap.storage.writer_process"]
        self.body_mode = spec.body_mode
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Condition()
        self._submitted = 0
        self._acked = 0  # settled records reported by every child so far
        self._unkept = 0  # records that could not be shipped nor kept (logged)
        self._retained: deque[Any] = deque()  # shipped to the current child, not settled yet
        self._past = WriterStats()  # the stats of children that have exited
        self._fallback: Writer | None = None
        self._fallback_reason = ""  # the decode error of what the writer thread stores
        self._deaths: deque[float] = deque()  # deaths no record explains, within the window
        self.restarts = 0  # children started again after one exited (a metric: llmtap.telemetry)
        self.quarantined = 0  # records whose build overran or took a child down
        self._closed = False
        self._slot = watchdog.ProgressSlot.new()
        self._child: _Child | None = _Child(spec, self._report, self.command, self._slot)
        self._backstop = watchdog.Backstop(self._slot, spec.record_seconds, self._current_process)
        self._shipper = threading.Thread(target=self._ship, name="llmtap-writer-shipper", daemon=True)
        self._shipper.start()

    # -- the caller's side: as `Writer` ---------------------------------------------------

    def submit(self, record: Recorded | Pending | RowSet) -> None:
        """Hand over one record; returns at once, never raises."""
        self._queue.put(record)
        self._submitted += 1  # only the event loop's thread submits

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every record submitted so far is committed or spooled."""
        target = self._submitted
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self._settled() < target:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._lock.wait(0.05 if left is None else min(left, 0.05))
        return True

    def close(self, timeout: float | None = 60.0) -> bool:
        """Ship everything, let the child write it and exit; True when all is settled.
        Otherwise says how many records are not written yet, and where they are."""
        if self._closed:
            return True
        self._closed = True
        self._queue.put(STOP)
        self._shipper.join(timeout)
        with self._lock:
            done = not self._shipper.is_alive() and self._settled() >= self._submitted
            if not done:
                self._report_unsettled(timeout)
        if done:
            self._backstop.stop()
            self._slot.close()
        return done

    def _report_unsettled(self, timeout: float | None) -> None:
        """Called with the lock held, when `close` gives up waiting."""
        unsettled = self._submitted - self._settled()
        child = self._child
        held = len(self._retained) if child is not None else 0
        late = timeout is not None and self._shipper.is_alive()
        log.error(
            "llmtap: the writer %s: %d records are not written yet, %s; %d not handed over (lost when this "
            "process exits)",
            f"did not finish within {timeout:g} s" if late and timeout is not None else "stopped",
            unsettled,
            f"{held} of them with the writer process (pid {child.proc.pid}), which goes on writing them"
            if child is not None
            else "none of them with a writer process",
            unsettled - held,
        )

    @property
    def stats(self) -> WriterStats:
        with self._lock:
            total = WriterStats()
            _add(total, self._past)
            if self._child is not None:
                _add(total, self._child.stats)
            if self._fallback is not None:
                _add(total, self._fallback.stats)
            total.submitted = self._submitted
            total.rejected += self._unkept
            return total

    @property
    def backlog(self) -> int:
        with self._lock:
            return self._submitted - self._settled()

    @property
    def child_pid(self) -> int | None:
        child = self._child
        return child.proc.pid if child is not None else None

    @property
    def building(self) -> int | None:
        """The sequence number of the record the writer process is building now, if any."""
        return self._slot.building() or None

    def _current_process(self) -> subprocess.Popen[bytes] | None:
        child = self._child
        return child.proc if child is not None else None

    # -- reports from the child (its reader thread) --------------------------------------

    def _report(self, child: _Child, settled: int, stats: WriterStats) -> None:
        with self._lock:
            if child is self._child:
                for _ in range(settled - child.settled):
                    self._retained.popleft()
                self._acked += settled - child.settled
            child.settled = settled
            child.stats = stats
            self._lock.notify_all()

    def _settled(self) -> int:
        fallback = self._fallback.stats.settled if self._fallback is not None else 0
        return self._acked + self._unkept + fallback

    # -- the shipper thread ----------------------------------------------------------------

    def _ship(self) -> None:
        closing = False
        while not closing:
            batch, closing = self._take()
            try:
                if self._child is not None and self._child.gone.is_set():
                    self._replace_child()
                if batch:
                    self._send(batch)
            except Exception:  # noqa: BLE001 - the thread must outlive any bug
                log.exception("llmtap writer: shipping failed; records kept for the next try")
        self._finish()

    def _take(self) -> tuple[list[Any], bool]:
        try:
            first = self._queue.get(timeout=0.5)
        except queue.Empty:
            return [], False
        if first is STOP:
            return drain(self._queue), True
        batch = [first]
        time.sleep(SHIP_WINDOW)  # one wake-up per batch, not per record
        while len(batch) < SHIP_BATCH:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is STOP:
                return batch + drain(self._queue), True
            batch.append(item)
        return batch, False

    def _send(self, items: list[Any]) -> None:
        items = identified(items)
        if self._child is None:
            self._to_fallback(items)
            return
        payload, kept = pickled(items)
        with self._lock:
            self._unkept += len(items) - len(kept)  # logged; settled as rejected
            self._retained.extend(kept)  # before the write: a report may follow at once
        try:
            self._child.send(len(kept), payload)
        except OSError:
            self._replace_child()  # it resends everything retained, these included

    def _replace_child(self) -> None:
        """The child is gone: quarantine the record it was building, if it was building
        one; start another and resend what it had not settled or, after too many deaths
        that no record explains, hand everything to a writer thread in this process."""
        while self._child is not None:
            old = self._child
            old.kill()
            code = old.proc.returncode
            blamed = self._blame(old, code)
            with self._lock:
                _add(self._past, old.stats)
                pending = list(self._retained)
                self._child = None  # reports from `old` are ignored from here on
            if not blamed and self._too_many_deaths():
                with self._lock:
                    self._retained.clear()
                log.error("llmtap writer: the writer process keeps exiting (status %s); writing on a thread", code)
                self._fallback_reason = f"the writer process kept exiting (status {code}); stored undecoded"
                self._to_fallback(pending)
                return
            child = _Child(self.spec, self._report, self.command, self._slot)
            with self._lock:
                self._child = child
                self.restarts += 1
            log.error(
                "llmtap writer: the writer process exited (status %s); restarted it, resending %d records",
                code,
                len(pending),
            )
            if not pending:
                return
            try:
                child.send(len(pending), pickled(pending)[0])
                return
            except OSError:
                continue

    def _blame(self, old: _Child, code: int | None) -> bool:
        """If the child died building a record it had not settled, put that record, quarantined,
        in its place among those to resend; whether it did."""
        seq = self._slot.building()
        self._slot.clear()
        if not seq:
            return False
        reason = watchdog.death(
            code, self.spec.record_seconds, self.spec.record_memory_mb, self._backstop.ended(old.proc.pid, seq)
        )
        with self._lock:
            index = next((n for n, item in enumerate(self._retained) if getattr(item, "seq", 0) == seq), None)
            if index is None:
                return False
            instead = quarantined(self._retained[index], reason)
            if instead is None:
                del self._retained[index]
                self._unkept += 1
            else:
                self._retained[index] = instead
            self.quarantined += 1
        log.error("llmtap writer: %s; that record is stored undecoded (quarantined), the rest resent", reason)
        return True

    def _too_many_deaths(self) -> bool:
        now = time.monotonic()
        self._deaths.append(now)
        while self._deaths and now - self._deaths[0] > RESTART_WINDOW:
            self._deaths.popleft()
        return len(self._deaths) >= RESTARTS

    def _to_fallback(self, items: list[Any]) -> None:
        """To the writer thread, undecoded: a record that could take this process down is
        never built here (SPEC §6)."""
        if self._fallback is None:
            writer = self.spec.open()
            with self._lock:
                self._fallback = writer
        for item in items:
            if isinstance(item, Identified):
                item = item.undecoded(item.undecoded_as or self._fallback_reason, bodies=False)
            self._fallback.submit(item)

    def _finish(self) -> None:
        """Closing: the child writes what it holds and exits; a child that dies on the way
        is replaced and its unsettled records resent, as at any other time."""
        while self._child is not None:
            child = self._child
            child.end()
            with self._lock:  # its reports are all in: it exited and its reader ended
                if not self._retained:
                    _add(self._past, child.stats)
                    self._child = None
                    break
            self._replace_child()  # it exited with records unsettled: it died
        if self._fallback is not None:
            self._fallback.close()


if TYPE_CHECKING:  # mypy holds both writers to the one interface the proxy and the CLI use

    def _both_are_sinks(writer: Writer, process: WriterProcess) -> tuple[RecordSink, RecordSink]:
        return writer, process


if __name__ == "__main__":
    from llmtap.storage.writer_child import child_main

    raise SystemExit(child_main())
