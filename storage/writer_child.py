"""The writer process itself (`python -m llmtap.storage.writer_process`): reads a spec, then
batches of records, from stdin; writes them with a `Writer` whose builds are watched
(storage.watchdog); reports settled counts on stdout.

Not responsible for the delivery protocol's other end (storage.writer_process) or for what
is done with a record whose build overran (the proxy decides, after this process ends).
"""

from __future__ import annotations

import logging
import os
import pickle
import queue
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import asdict

from llmtap.storage import watchdog
from llmtap.storage.shipped import read_frame, write_frame

log = logging.getLogger("llmtap.storage")


def child_main() -> int:
    """Read a spec, then batches of records, from stdin; report settled counts on stdout."""
    # Ctrl-C reaches the whole process group, and a service manager's stop sends SIGTERM
    # to every process of the service: the proxy handles both by closing the pipe once it
    # has handed everything over, which is when this process should stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGPROF, signal.SIG_DFL)  # a build past its deadline ends this process
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but reports may reach the pipe
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    # psycopg's "error ignored terminating <Pipeline>: the connection is lost", a line per
    # connection cut: the writer's own line says the store went away, and why.
    logging.getLogger("psycopg").setLevel(logging.ERROR)
    first = read_frame(inp)
    if first is None:
        return 0
    spec, slot_fd = pickle.loads(first[1])
    frames: queue.SimpleQueue[tuple[int, bytes] | None] = queue.SimpleQueue()

    def pump() -> None:
        """Take every frame off the pipe as it comes, also while the writer opens (the
        store, the prices, the observers: seconds on a loaded machine). A record that
        reached this process is written even if the proxy is killed (this process writes
        what it holds before it exits); one the proxy still held, behind a full pipe,
        would die with it."""
        while (frame := read_frame(inp)) is not None:
            frames.put(frame)
        frames.put(None)

    _thread(pump, "llmtap-writer-pump")
    watch = watchdog.ChildWatch(watchdog.ProgressSlot.attach(slot_fd), spec.record_seconds)
    writer = spec.open(yield_gil=False, watch=watch)
    lost = 0  # records in frames that would not unpickle (a bug): counted as settled
    send_lock = threading.Lock()
    parent_gone = threading.Event()

    def report(settled: int) -> None:
        if parent_gone.is_set():
            return
        payload = pickle.dumps((settled + lost, asdict(writer.stats)))
        with send_lock:
            try:
                write_frame(out, 0, payload)
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

    thread = _thread(reporter, "llmtap-writer-reporter")
    watchdog.limit_memory(spec.record_memory_mb)  # every thread started: its stack counted
    while (frame := frames.get()) is not None:
        count, payload = frame
        try:
            items = pickle.loads(payload)
        except MemoryError:
            os._exit(watchdog.EXIT_NO_MEMORY)  # the proxy sends them again
        except Exception as exc:  # noqa: BLE001
            log.error("llmtap writer: %d records would not unpickle: %r", count, exc)
            lost += count
            continue
        for item in items:
            writer.submit(item)
    writer.close(timeout=None)  # what it holds is its to write, also once the proxy is gone
    stopping.set()
    thread.join()
    report(writer.wait_settled(-1, 0))
    return 0


def _thread(target: Callable[[], None], name: str) -> threading.Thread:
    """A thread of the writer process that, should memory run out in it (a build swelling
    on another thread), ends the process rather than itself: the proxy sends again what
    was not settled, and knows which record was being built."""

    def run() -> None:
        try:
            target()
        except MemoryError:
            os._exit(watchdog.EXIT_NO_MEMORY)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread
