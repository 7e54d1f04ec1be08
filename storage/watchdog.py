"""The watchdog on each record's build in the writer process (SPEC §6): its bounds, the
progress slot that tells the proxy which record is being built, and the words that say
what happened to a record that overran them.

Bounds, from the environment (read where the proxy makes its `WriterSpec`):

| variable | default | what |
|---|---|---|
| `LLMTAP_RECORD_DEADLINE` | 30 | CPU seconds one record's build (its decode, checks and rows) may take |
| `LLMTAP_RECORD_MEMORY` | 2048 | MiB of address space the writer process may add to its size once started |

How they hold. Before each build the writer process arms a CPU-time timer (`ITIMER_PROF`,
whose signal's default action ends the process: no handler needs the GIL that a runaway
regular expression in C holds) and writes the record's sequence number into a one-page
shared memory slot; after it, it disarms the timer and clears the slot (two system calls
and two stores, ~2.5 µs a record). Its address space is capped (`RLIMIT_AS`), so a
build that swells fails with MemoryError in that process, and its OOM score is raised so
that, should the machine run out first, the kernel ends the writer, not the proxy. The
proxy reads the slot when its writer process dies, so it knows which record it was
building; a `Backstop` thread there also ends a build that sits in the slot past ten times
its deadline plus 2 s of wall-clock time (a timer signal blocked or caught).

Not responsible for what happens to that record next (storage.writer_process quarantines
it) or for how records are built (the items' own `build`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import mmap
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from llmtap.storage.errors import StoreError

log = logging.getLogger("llmtap.storage")

DEADLINE_ENV = "LLMTAP_RECORD_DEADLINE"
MEMORY_ENV = "LLMTAP_RECORD_MEMORY"
DEFAULT_DEADLINE = 30.0  # CPU seconds
DEFAULT_MEMORY_MB = 2048
EXIT_NO_MEMORY = 99  # the writer process's status when MemoryError reached it outside a build
OOM_SCORE_ADJ = 500  # the kernel's OOM killer picks the writer process before the proxy
BACKSTOP_POLL = 0.25  # seconds between the proxy's looks at the slot


def deadline_from_env() -> float:
    return _positive(DEADLINE_ENV, DEFAULT_DEADLINE)


def memory_from_env() -> int:
    return max(1, round(_positive(MEMORY_ENV, DEFAULT_MEMORY_MB)))


def _positive(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise StoreError(f"{name} must be a number above 0, not {raw!r}")
    return value


def backstop_seconds(deadline: float) -> float:
    """Wall-clock seconds a build may sit in the slot before the proxy ends it: far past
    its CPU-time deadline, which a loaded machine takes several times as long to reach."""
    return 10 * deadline + 2


class ProgressSlot:
    """One page of memory that the proxy and its writer process share: word 0 holds the
    sequence number of the record being built, 0 when none is. An aligned 8-byte store
    and load: a reader never sees half a number."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._map = mmap.mmap(fd, mmap.PAGESIZE)
        self._words = memoryview(self._map).cast("Q")

    @classmethod
    def new(cls) -> ProgressSlot:
        """A slot in memory of no file (an unlinked one where memfd is missing)."""
        memfd = getattr(os, "memfd_create", None)
        if memfd is not None:
            fd = memfd("llmtap-writer-progress")
        else:
            fd, path = tempfile.mkstemp(prefix="llmtap-writer-")
            os.unlink(path)
        os.ftruncate(fd, mmap.PAGESIZE)
        return cls(fd)

    @classmethod
    def attach(cls, fd: int) -> ProgressSlot:
        return cls(fd)

    def close(self) -> None:
        """The proxy's end, once no writer process is to start again."""
        with contextlib.suppress(OSError):
            os.close(self.fd)

    def building(self) -> int:
        return int(self._words[0])

    def begin(self, seq: int) -> None:
        self._words[0] = seq

    def clear(self) -> None:
        self._words[0] = 0


class ChildWatch:
    """The writer's `BuildWatch` in the writer process: the timer and the slot."""

    def __init__(self, slot: ProgressSlot | None, deadline: float) -> None:
        self.slot = slot
        self.deadline = deadline
        self._armed = False

    def begin(self, item: object) -> None:
        seq = getattr(item, "seq", 0)
        if not seq:  # already built (a record this process made no decision about)
            return
        signal.setitimer(signal.ITIMER_PROF, self.deadline)
        if self.slot is not None:
            self.slot.begin(seq)
        self._armed = True

    def end(self) -> None:
        if not self._armed:
            return
        signal.setitimer(signal.ITIMER_PROF, 0)
        if self.slot is not None:
            self.slot.clear()
        self._armed = False


def limit_memory(headroom_mb: int) -> None:
    """Cap this process's address space at its size now plus `headroom_mb`, and make it the
    OOM killer's first choice over the proxy. Linux; elsewhere the death of the writer
    process, whatever ends it, is the bound."""
    if not sys.platform.startswith("linux"):
        return
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[0])
        cap = pages * mmap.PAGESIZE + headroom_mb * 1024 * 1024
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    except (OSError, ValueError) as exc:
        log.warning("llmtap writer: could not bound the writer process's memory: %s", exc)
    with contextlib.suppress(OSError):
        Path("/proc/self/oom_score_adj").write_text(str(OOM_SCORE_ADJ))


class Backstop:
    """The proxy's own look at the slot, by the wall clock: a build that has sat there past
    `backstop_seconds(deadline)` (its timer blocked or caught) is ended with SIGKILL."""

    def __init__(self, slot: ProgressSlot, deadline: float, current: Callable[[], subprocess.Popen[bytes] | None]):
        self.slot = slot
        self.limit = backstop_seconds(deadline)
        self._current = current
        self._killed: tuple[int, int] | None = None  # (pid, seq) it ended
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="llmtap-writer-watchdog", daemon=True)
        self._thread.start()

    def ended(self, pid: int, seq: int) -> bool:
        """Whether it was this thread that ended process `pid` while it built `seq`."""
        return self._killed == (pid, seq)

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        seen: tuple[int, int] | None = None
        since = 0.0
        while not self._stop.wait(BACKSTOP_POLL):
            proc = self._current()
            seq = self.slot.building()
            now = time.monotonic()
            if proc is None or not seq:
                seen = None
                continue
            if seen != (proc.pid, seq):
                seen, since = (proc.pid, seq), now
            elif now - since > self.limit and proc.poll() is None:
                self._killed = seen
                log.error("llmtap writer: a record's build ran past %g s; ending the writer process", self.limit)
                with contextlib.suppress(OSError):
                    proc.kill()
                seen = None


def death(code: int | None, deadline: float, memory_mb: int, backstop: bool) -> str:
    """What happened to the record the writer process was building when it ended."""
    if backstop:
        return f"record build ran past {backstop_seconds(deadline):g} s (its deadline: {deadline:g} s of CPU time)"
    if code == -signal.SIGPROF:
        return f"record build exceeded {deadline:g} s of CPU time"
    if code == EXIT_NO_MEMORY:
        return f"the writer process ran out of memory (its bound: {memory_mb} MiB) while building this record"
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the writer process was killed ({name}) while building this record"
    return f"the writer process exited (status {code}) while building this record"
