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
parent stops trying and runs the `Writer` on a thread of its own, as before this module.
If the parent dies, the child sees the pipe close, writes what it holds and exits. The
child ignores SIGINT and SIGTERM (a terminal's Ctrl-C reaches the whole process group, a
service manager's stop every process of the service): it stops when the parent closes the
pipe, after the parent's own shutdown has handed it everything.
A record resent after a child died between committing and reporting it is recognised by
its id (SPEC §6, exactly once): a pending record (finished in the child) gets the random
part of its id here, before it is first shipped, so every child that builds it makes the
same id (`_Identified`).

Not responsible for what records are (storage.writer, storage.rows) or for deciding to
use a process (the proxy's set-up does).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import IO, Any

from llmtap.storage.ids import new_id
from llmtap.storage.record import Recorded
from llmtap.storage.writer import STOP, Observer, Writer, WriterStats, drain

log = logging.getLogger("llmtap.storage")

RESTARTS = 3  # child deaths within the window before falling back to a writer thread
RESTART_WINDOW = 60.0  # seconds
SHIP_WINDOW = 0.05  # seconds the shipper waits to fill a batch (one pickle, one write)
SHIP_BATCH = 1000
_HEADER = struct.Struct("!QQ")  # (records in the frame, payload bytes)


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

    def open(self, *, yield_gil: bool = True) -> Writer:
        """The writer; `yield_gil=False` in a process that has no event loop to yield to."""
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


# -- frames: a header, then a pickle ----------------------------------------------------------


def _write_frame(stream: IO[bytes], count: int, payload: bytes) -> None:
    stream.write(_HEADER.pack(count, len(payload)))
    stream.write(payload)
    stream.flush()


def _read_frame(stream: IO[bytes]) -> tuple[int, bytes] | None:
    """(count, payload), or None at the end of the stream (also a stream cut mid-frame)."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    count, size = _HEADER.unpack(header)
    payload = stream.read(size)
    if len(payload) < size:
        return None
    return count, payload


def _add(total: WriterStats, part: WriterStats) -> None:
    for item in fields(WriterStats):
        setattr(total, item.name, getattr(total, item.name) + getattr(part, item.name))


# -- the parent's side ------------------------------------------------------------------------


class _Child:
    """One writer process and the thread that reads its reports."""

    def __init__(
        self, spec: WriterSpec, on_report: Callable[[_Child, int, WriterStats], None], command: list[str]
    ) -> None:
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
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
            self.send(0, pickle.dumps(spec, protocol=pickle.HIGHEST_PROTOCOL))

    def send(self, count: int, payload: bytes) -> None:
        """Raises OSError when the child is gone."""
        _write_frame(self.stdin, count, payload)

    def _read(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        try:
            while (frame := _read_frame(stdout)) is not None:
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
    """The `Writer`'s interface, with the writing done by a child process."""

    def __init__(self, spec: WriterSpec, *, command: list[str] | None = None) -> None:
        self.spec = spec
        self.command = command or [sys.executable, "-m", "llmtap.storage.writer_process"]
        self.body_mode = spec.body_mode
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Condition()
        self._submitted = 0
        self._acked = 0  # settled records reported by every child so far
        self._unkept = 0  # records that would neither pickle nor finish here (logged)
        self._retained: deque[Any] = deque()  # shipped to the current child, not settled yet
        self._past = WriterStats()  # the stats of children that have exited
        self._fallback: Writer | None = None
        self._deaths: deque[float] = deque()
        self.restarts = 0  # children started again after one exited (a metric: llmtap.telemetry)
        self._closed = False
        self._child: _Child | None = _Child(spec, self._report, self.command)
        self._shipper = threading.Thread(target=self._ship, name="llmtap-writer-shipper", daemon=True)
        self._shipper.start()

    # -- the caller's side: as `Writer` ---------------------------------------------------

    def submit(self, record: Any) -> None:
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
        """Ship everything, let the child write it and exit; True when all is settled."""
        if self._closed:
            return True
        self._closed = True
        self._queue.put(STOP)
        self._shipper.join(timeout)
        with self._lock:
            return not self._shipper.is_alive() and self._settled() >= self._submitted

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
        if self._child is None:
            self._to_fallback(items)
            return
        payload, kept = _pickled(_identified(items))
        with self._lock:
            self._unkept += len(items) - len(kept)  # logged; settled as rejected
            self._retained.extend(kept)  # before the write: a report may follow at once
        items = kept
        try:
            self._child.send(len(items), payload)
        except OSError:
            self._replace_child()  # it resends everything retained, these included

    def _replace_child(self) -> None:
        """The child is gone: start another and resend what it had not settled, or, after
        too many deaths, hand everything to a writer thread in this process."""
        while self._child is not None:
            old = self._child
            old.kill()
            code = old.proc.returncode
            now = time.monotonic()
            self._deaths.append(now)
            while self._deaths and now - self._deaths[0] > RESTART_WINDOW:
                self._deaths.popleft()
            with self._lock:
                _add(self._past, old.stats)
                pending = list(self._retained)
                self._child = None  # reports from `old` are ignored from here on
            if len(self._deaths) < RESTARTS:
                child = _Child(self.spec, self._report, self.command)
                with self._lock:
                    self._child = child
                    self.restarts += 1
            if self._child is None:
                with self._lock:
                    self._retained.clear()
                log.error("llmtap writer: the writer process keeps exiting (status %s); writing on a thread", code)
                self._to_fallback(pending)
                return
            log.error(
                "llmtap writer: the writer process exited (status %s); restarted it, resending %d records",
                code,
                len(pending),
            )
            if not pending:
                return
            try:
                self._child.send(len(pending), _pickled(pending)[0])
                return
            except OSError:
                continue

    def _to_fallback(self, items: list[Any]) -> None:
        if self._fallback is None:
            writer = self.spec.open()
            with self._lock:
                self._fallback = writer
        for item in items:
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


class _Identified:
    """A pending record and the random part of its id, fixed before it first leaves this
    process: a child that dies between committing it and saying so is followed by one
    that builds the same record with the same id, which the store already holds."""

    __slots__ = ("item", "entropy")

    def __init__(self, item: Any, entropy: bytes) -> None:
        self.item = item
        self.entropy = entropy

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Identified, (self.item, self.entropy))

    def build(self) -> Recorded | None:
        return self._identify(self.item.build())

    def salvage(self, error: str) -> Recorded | None:
        salvage = getattr(self.item, "salvage", None)
        return self._identify(salvage(error)) if salvage is not None else None

    def _identify(self, record: Recorded | None) -> Recorded | None:
        if record is not None:
            record.id = new_id(int(record.started_at.timestamp() * 1000), self.entropy)
        return record


def _identified(items: list[Any]) -> list[Any]:
    """Each pending record wrapped with its id's random part (a record already built has
    its id); one `urandom` call a batch."""
    entropy = os.urandom(10 * len(items))
    return [
        item if isinstance(item, (Recorded, _Identified)) else _Identified(item, entropy[10 * n : 10 * n + 10])
        for n, item in enumerate(items)
    ]


def _pickled(items: list[Any]) -> tuple[bytes, list[Any]]:
    """The batch as one pickle. An item that will not pickle (a bug) is finished here,
    in this process, and its record shipped instead; one that cannot be finished either
    is logged and dropped from the batch."""
    try:
        return pickle.dumps(items, protocol=pickle.HIGHEST_PROTOCOL), items
    except Exception:  # noqa: BLE001
        pass
    kept = []
    for item in items:
        try:
            pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
            kept.append(item)
            continue
        except Exception as exc:  # noqa: BLE001
            log.error("llmtap writer: a record would not pickle (%r); finishing it here", exc)
        try:
            built = item.build() if hasattr(item, "build") else item
            if built is not None:
                pickle.dumps(built, protocol=pickle.HIGHEST_PROTOCOL)
                kept.append(built)
        except Exception as exc:  # noqa: BLE001
            log.error("llmtap writer: a record could not be kept: %r", exc)
    return pickle.dumps(kept, protocol=pickle.HIGHEST_PROTOCOL), kept


# -- the child's side --------------------------------------------------------------------------


def child_main() -> int:
    """Read a spec, then batches of records, from stdin; report settled counts on stdout."""
    # Ctrl-C reaches the whole process group, and a service manager's stop sends SIGTERM
    # to every process of the service: the proxy handles both by closing the pipe once it
    # has handed everything over, which is when this process should stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but reports may reach the pipe
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    first = _read_frame(inp)
    if first is None:
        return 0
    spec: WriterSpec = pickle.loads(first[1])
    frames: queue.SimpleQueue[tuple[int, bytes] | None] = queue.SimpleQueue()

    def pump() -> None:
        """Take every frame off the pipe as it comes, also while the writer opens (the
        store, the prices, the observers: seconds on a loaded machine). A record that
        reached this process is written even if the proxy is killed (this process writes
        what it holds before it exits); one the proxy still held, behind a full pipe,
        would die with it."""
        while (frame := _read_frame(inp)) is not None:
            frames.put(frame)
        frames.put(None)

    threading.Thread(target=pump, name="llmtap-writer-pump", daemon=True).start()
    writer = spec.open(yield_gil=False)
    lost = 0  # records in frames that would not unpickle (a bug): counted as settled
    send_lock = threading.Lock()
    parent_gone = threading.Event()

    def report(settled: int) -> None:
        if parent_gone.is_set():
            return
        payload = pickle.dumps((settled + lost, asdict(writer.stats)))
        with send_lock:
            try:
                _write_frame(out, 0, payload)
            except OSError:  # the proxy is gone (killed): nobody to tell; the writing goes on
                parent_gone.set()

    stopping = threading.Event()

    def reporter() -> None:
        seen = -1
        while not stopping.is_set():
            settled = writer.wait_settled(seen, 0.5)
            if settled != seen:
                report(settled)
                seen = settled

    thread = threading.Thread(target=reporter, name="llmtap-writer-reporter", daemon=True)
    thread.start()
    while (frame := frames.get()) is not None:
        count, payload = frame
        try:
            items = pickle.loads(payload)
        except Exception as exc:  # noqa: BLE001
            log.error("llmtap writer: %d records would not unpickle: %r", count, exc)
            lost += count
            continue
        for item in items:
            writer.submit(item)
    writer.close()
    stopping.set()
    thread.join()
    report(writer.wait_settled(-1, 0))
    return 0


if __name__ == "__main__":
    raise SystemExit(child_main())
