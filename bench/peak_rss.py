"""Run a command and measure its own peak resident memory.

The kernel's count (`wait4`'s `ru_maxrss`) is a process's high-water mark across the
`exec`s it made, and a child forked (or vforked) from a big process starts with its
parent's: a command started from a pytest worker that has grown to 550 MB reports 550 MB
whatever it used itself. So the command is started from a small launcher (a fresh Python
of about 14 MB), and the launcher's `wait4` of it is the command's own figure.

Not responsible for what the command does or for timing it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

_LAUNCHER = """
import json, os, subprocess, sys
child = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(child.pid, 0)
with open(sys.argv[1], "w") as out:
    json.dump({"code": os.waitstatus_to_exitcode(status), "peak": usage.ru_maxrss * 1024}, out)
"""


def run_measured(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    stdout: IO[str] | int | None = None,
    stderr: IO[str] | int | None = None,
) -> tuple[int, int]:
    """Run `command` to its end: its exit code and its peak resident memory in bytes."""
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
    return int(measured["code"]), int(measured["peak"])


if __name__ == "__main__":  # pragma: no cover - a manual check: python bench/peak_rss.py CMD...
    code, peak = run_measured(sys.argv[1:])
    print(f"exit {code}, peak RSS {peak / 1e6:,.0f} MB", file=sys.stderr)
    sys.exit(code)
