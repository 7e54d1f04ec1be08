"""What deciding the verdicts costs the writer (issue 27, goal under 0.3 ms a record):
synthetic conversations (workloads/synthetic.py; every fourth in a client's session) written
through the `Writer` into a fresh store twice in the same run, once as it runs and once
with `storage/verdicts.py` switched off (no lookups, no walks), in time order and then
shuffled (every batch lands before rows its conversations already hold, so they are
walked whole). The difference per record is the figure.

    uv run python bench/verdicts.py [--n 20000] [--pg URL] [--batch 200]

Measured (2-core machine, 20,000 exchanges, batches of 200, 2026-12-02): SQLite 0.051 ms
a record in time order (x1.39 the writer without verdicts), 0.058 ms shuffled; PostgreSQL
0.073 / 0.071 ms. Again 2026-12-04 (the machine slower that day: a bare DuckDB scan took
1.6 times as long): SQLite 0.096-0.118 / 0.012-0.038 ms, PostgreSQL 0.135 / 0.150 ms.
Before the batch's neighbours were read in three queries (a few per row): 0.55 / 0.88 ms
on SQLite, 1.64 / 1.17 ms on PostgreSQL.

Not a timed test: it prints numbers and exits 0 either way. Not responsible for the
rules (protocols/rules.py) nor the writer (storage/writer.py).
"""

from __future__ import annotations

import argparse
import copy
import random
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from llmtap.storage import verdicts
from llmtap.storage.engine import make_engine
from llmtap.storage.migrate import upgrade
from llmtap.storage.rows import RowSet
from llmtap.storage.writer import Writer
from llmtap.workloads.scratch import scratch_postgres
from llmtap.workloads.synthetic import with_sessions

Traffic = list[tuple[dict[str, Any], list[dict[str, Any]]]]


def traffic(n: int) -> Traffic:
    return with_sessions(n, days=max(n / 200_000, 0.05), seed=3)


@contextmanager
def switched_off() -> Iterator[None]:
    decide, finish = verdicts.decide, verdicts.finish
    verdicts.decide = lambda connection, rows, calls: verdicts.Plan()
    verdicts.finish = lambda connection, plan, rows=(): None
    try:
        yield
    finally:
        verdicts.decide, verdicts.finish = decide, finish


def write(url: str, rows: Traffic, batch: int, spool: Path) -> tuple[float, float]:
    engine = make_engine(url)
    upgrade(engine)
    writer = Writer(engine, spool_dir=spool, max_delay=0.01, batch_size=batch)
    prepared = [
        RowSet(exchanges=[r for r, _ in part], tool_calls=[c for _, cs in part for c in cs])
        for part in (copy.deepcopy(rows[i : i + batch]) for i in range(0, len(rows), batch))
    ]
    wall, cpu = time.perf_counter(), time.process_time()
    for rowset in prepared:
        writer.submit(rowset)
    writer.flush(timeout=3600)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    writer.close()
    engine.dispose()
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--pg", help="a PostgreSQL server URL (a scratch database is made)")
    args = parser.parse_args()
    rows = traffic(args.n)
    shuffled = list(rows)
    random.Random(1).shuffle(shuffled)
    print(f"{len(rows):,} exchanges, batches of {args.batch}")
    with tempfile.TemporaryDirectory() as folder:
        targets = [("sqlite", lambda name: f"sqlite:///{folder}/{name}.db")]
        for backend, url_for in targets:
            _compare(backend, url_for, rows, shuffled, args.batch, Path(folder))
        if args.pg:
            for order, data in (("time order", rows), ("shuffled", shuffled)):
                figures = []
                for off in (False, True):
                    with scratch_postgres(args.pg) as url, switched_off() if off else _nothing():
                        figures.append(write(url, data, args.batch, Path(folder) / f"pg{off}{order}"))
                _print("postgresql", order, len(rows), figures)
    return 0


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def _compare(backend: str, url_for: Any, rows: Traffic, shuffled: Traffic, batch: int, folder: Path) -> None:
    for order, data in (("time order", rows), ("shuffled", shuffled)):
        figures = []
        for off in (False, True):
            name = f"{order.replace(' ', '')}{'off' if off else 'on'}"
            with switched_off() if off else _nothing():
                figures.append(write(url_for(name), data, batch, folder / name))
        _print(backend, order, len(rows), figures)


def _print(backend: str, order: str, n: int, figures: list[tuple[float, float]]) -> None:
    (on_wall, on_cpu), (off_wall, off_cpu) = figures
    print(
        f"{backend:10} {order:10}  with verdicts {on_wall:6.2f} s ({on_cpu:6.2f} CPU)  without {off_wall:6.2f} s "
        f"({off_cpu:6.2f} CPU)  cost {1000 * (on_wall - off_wall) / n:.3f} ms/record wall, "
        f"{1000 * (on_cpu - off_cpu) / n:.3f} ms CPU  (x{on_wall / off_wall:.2f})"
    )


if __name__ == "__main__":
    raise SystemExit(main())
