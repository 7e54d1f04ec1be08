"""`llmtap import` of a big HAR: peak memory and entries per second, whatever the size.

    uv run python bench/import_size.py [--size 2G] [--db URL] [--dir DIR] [--keep]

Writes a HAR of about `--size` bytes from the corpus cases (workloads/har.py). Then runs
`llmtap import FILE` in a child process (the console script, a fresh SQLite store unless
`--db`) and prints its wall time, entries per second, and its peak resident memory as
the kernel counted it for that process alone (workloads/peak_rss.py: started from a small
launcher, so no parent's high-water mark is counted in). Checks that the store holds
every entry once, and the HAR is deleted after unless `--keep`.

Not a timed test: it prints numbers, and exits 0 either way (1 when the counts disagree).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import func, select

from llmtap.storage import schema
from llmtap.storage.engine import make_engine
from llmtap.workloads.har import make_har
from llmtap.workloads.peak_rss import run_measured

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def size_of(text: str) -> int:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMG]?)B?", text.strip().upper())
    if not match:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 200M, 2G)")
    return int(float(match.group(1)) * UNITS[match.group(2)])


def stored(url: str) -> int:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return int(connection.execute(select(func.count()).select_from(schema.exchanges)).scalar_one())
    finally:
        engine.dispose()


def run_import(path: Path, url: str, home: Path) -> tuple[subprocess.CompletedProcess[str], float, int]:
    """The real command in a child process: its result, wall seconds and peak RSS in bytes."""
    script = Path(sys.executable).parent / "llmtap"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "llmtap.cli.main"]
    env = {**os.environ, "LLMTAP_HOME": str(home)}
    argv = [*command, "import", str(path), "--db", url]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        began = time.perf_counter()
        measured = run_measured(argv, env=env, stdout=out, stderr=err)
        seconds = time.perf_counter() - began
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess(argv, measured.code, out.read(), err.read())
    return done, seconds, measured.peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=size_of, default=size_of("2G"), help="HAR size (default 2G)")
    parser.add_argument("--db", help="store URL (default a fresh SQLite file beside the HAR)")
    parser.add_argument("--dir", type=Path, help="where the HAR goes (default a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the HAR and the store")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="llmtap-import-size-", dir=args.dir))
    try:
        har = folder / "big.har"
        began = time.perf_counter()
        entries = make_har(har, args.size)
        made = time.perf_counter() - began
        megabytes = har.stat().st_size / 1e6
        print(f"HAR: {megabytes:,.0f} MB, {entries:,} entries (made in {made:.0f} s)")
        url = args.db or f"sqlite:///{folder / 'store.db'}"
        done, seconds, peak = run_import(har, url, folder / "home")
        if done.returncode != 0:
            print(f"llmtap import failed ({done.returncode}): {done.stderr.strip()[-500:]}")
            return 1
        print(done.stdout.strip())
        print(
            f"import: {seconds:,.1f} s, {entries / seconds:,.0f} entries/s, {megabytes / seconds:,.1f} MB/s, "
            f"peak RSS {peak / 1e6:,.0f} MB"
        )
        rows = stored(url)
        print(f"store: {rows:,} exchanges for {entries:,} entries")
        return 0 if rows == entries else 1
    finally:
        if args.keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
