"""`llmtap import` of a big HAR: peak memory and entries per second, whatever the size.

    uv run python bench/import_size.py [--size 2G] [--db URL] [--dir DIR] [--keep]

Writes a HAR of about `--size` bytes from the corpus cases (every case over and over,
one entry per second from 2026-11-02, teams round-robin, so each entry is an exchange of
its own and none is a duplicate of another), written entry by entry so the maker itself
stays small. Then runs `llmtap import FILE` in a child process (the console script, a
fresh SQLite store unless `--db`) and prints its wall time, entries per second, and its
peak resident memory as the kernel counted it for that process alone (bench/peak_rss.py:
started from a small launcher, so no parent's high-water mark is counted in). Checks
that the store holds every entry once, and the HAR is deleted after unless `--keep`.

Not a timed test: it prints numbers, and exits 0 either way (1 when the counts disagree).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from llmtap.bench.corpus import case_meta, corpus_cases
from llmtap.bench.peak_rss import run_measured
from llmtap.storage import schema
from llmtap.storage.engine import make_engine

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("LLMTAP_CORPUS", ROOT / "tests" / "corpus"))
START = datetime(2026, 11, 2, tzinfo=UTC)
TEAMS = ("alpha", "beta", "gamma")
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def size_of(text: str) -> int:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMG]?)B?", text.strip().upper())
    if not match:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 200M, 2G)")
    return int(float(match.group(1)) * UNITS[match.group(2)])


def _template(folder: Path) -> dict[str, Any]:
    """One case as a HAR entry without its time and team (filled per copy)."""
    meta = case_meta(folder)
    body = (folder / "response.body").read_bytes()
    request_file = folder / "request.json"
    request = request_file.read_text() if request_file.exists() else "{}"
    content_type = meta.get("content_type") or "application/json"
    try:
        content: dict[str, Any] = {"size": len(body), "mimeType": content_type, "text": body.decode("utf-8")}
    except UnicodeDecodeError:  # a binary stream (AWS event-stream frames): base64, as HAR allows
        content = {"size": len(body), "mimeType": content_type, "text": base64.b64encode(body).decode()}
        content["encoding"] = "base64"
    return {
        "time": 850.0,
        "request": {
            "method": "POST",
            "url": f"https://{meta['host']}{meta['path']}",
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "content-type", "value": "application/json"}],
            "queryString": [],
            "cookies": [],
            "headersSize": -1,
            "bodySize": len(request),
            "postData": {"mimeType": "application/json", "text": request},
        },
        "response": {
            "status": meta["status"],
            "statusText": "",
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "content-type", "value": content_type}],
            "cookies": [],
            "content": content,
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": len(body),
        },
        "cache": {},
        "timings": {"send": 1, "wait": 600, "receive": 249},
    }


def _entries(templates: list[dict[str, Any]]) -> Iterator[str]:
    index = 0
    while True:
        for template in templates:
            started = (START + timedelta(seconds=index)).isoformat().replace("+00:00", "Z")
            team = {"name": "X-LLMTap-Team", "value": TEAMS[index % len(TEAMS)]}
            entry = template | {"startedDateTime": started}
            entry["request"] = template["request"] | {"headers": [*template["request"]["headers"], team]}
            yield json.dumps(entry, ensure_ascii=False)
            index += 1


def make_har(path: Path, size: int, corpus: Path = CORPUS) -> int:
    """Write a HAR of at least `size` bytes from the corpus; how many entries it holds."""
    templates = [_template(folder) for folder in corpus_cases(corpus)]
    count = 0
    with open(path, "w", encoding="utf-8") as out:
        out.write('{"log": {"version": "1.2", "creator": {"name": "llmtap-bench", "version": "1"}, "entries": [\n')
        written = 0
        for text in _entries(templates):
            if count:
                out.write(",\n")
            written += out.write(text) + 2
            count += 1
            if written >= size:
                break
        out.write("\n]}}\n")
    return count


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
