"""A process tree as Linux /proc shows it: its children, its resident memory, when its
processes are gone, and `MemoryCeiling`, a stand-in for the kernel's OOM killer.

Not responsible for starting or stopping processes (`proxy.py`, `fleet.py` and their
callers do), nor for other systems than Linux.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path


def child_pids(pid: int) -> list[int]:
    """A process's children and theirs (Linux /proc)."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found += [int(n) for n in task.read_text().split()]
        except OSError:
            continue
    return found + [grandchild for child in found for grandchild in child_pids(child)]


def rss_kb(pid: int, field: str = "VmRSS") -> int:
    """A process's resident memory (`VmRSS`) or its peak (`VmHWM`) in kB; 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def wait_gone(pids: list[int], timeout: float) -> None:
    """Until every one of `pids` has exited (or is a zombie), `timeout` seconds at most."""
    deadline = time.monotonic() + timeout
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                break
            if state == "Z":
                break
            time.sleep(0.05)


class MemoryCeiling:
    """A stand-in for the kernel's OOM killer on a machine with little memory: SIGKILLs any
    process of a tree (a proxy and its writer process) whose resident memory passes
    `ceiling_mb`, and notes which. Linux /proc; polls every 20 ms."""

    def __init__(self, root: int, ceiling_mb: int) -> None:
        self.root = root
        self.ceiling_kb = ceiling_mb * 1024
        self.killed: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="memory-ceiling", daemon=True)

    def __enter__(self) -> MemoryCeiling:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _watch(self) -> None:
        while not self._stop.wait(0.02):
            for pid in [self.root, *child_pids(self.root)]:
                if rss_kb(pid) > self.ceiling_kb:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        continue
                    self.killed.add(pid)
