"""Run a command and measure its own peak resident memory (and its CPU and wall time).

The kernel's count (`wait4`'s `ru_maxrss`) is a process's high-water mark across the
`exec`s it made, and a child forked (or vforked) from a big process starts with its
parent's: a command started from a pytest worker that has grown to 550 MB reports 550 MB
whatever it used itself. So the command is started from a small launcher (a fresh Python
of about 14 MB), and the launcher's `wait4` of it is the command's own figure.

Not responsible for what the command does.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, NamedTuple

_LAUNCHER = """
import json, os, subprocess, sys, time
began = time.perf_counter()
child = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(child.pid, 0)
wall = time.perf_counter() - began
with open(sys.argv[1], "w") as out:
    json.dump({"code": os.waitstatus_to_exitcode(status), "peak": usage.ru_maxrss * 1024,
               "cpu": usage.ru_utime + usage.ru_stime, "wall": wall}, out)
"""


class Measured(NamedTuple):
    """A command's exit code, peak resident memory (bytes), CPU seconds (user + system, its
    threads included) and wall seconds (from its start to its end, not the launcher's)."""

    code: int
    peak: int
    cpu: float
    wall: float


def run_measured(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    stdout: IO[str] | int | None = None,
    stderr: IO[str] | int | None = None,
) -> Measured:
    """Run `command` to its end and measure it."""
    with tempfile.TemporaryDirectory(prefix="llmtap-peak-") as folder:
        result = Path(folder) / "result.json"
        subprocess.run(
            [sys.executable, "-c", _LAUNCHER, str(result), *command],
            env=dict(env) if env is not None else None,
            stdout=stdout,
            stderr=stderr,
            check=False,
        )
        measured = json.loads(result.read_text())
    return Measured(int(measured["code"]), int(measured["peak"]), float(measured["cpu"]), float(measured["wall"]))


if __name__ == "__main__":  # pragma: no cover - a manual check: python workloads/peak_rss.py CMD...
    measured = run_measured(sys.argv[1:])
    print(f"exit {measured.code}, peak RSS {measured.peak / 1e6:,.0f} MB", file=sys.stderr)
    sys.exit(measured.code)
