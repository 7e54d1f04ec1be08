"""Ingest throughput: exchanges per second through the `Writer`, next to a bare SQLAlchemy
Core `executemany` of the same prepared rows, into SQLite and (when reachable) PostgreSQL.

    uv run python bench/ingest.py [--quick] [--n N] [--bodies none|metadata|full] [--pg URL]

The records are the shared corpus's exchanges (decoded once, before timing), repeated
with fresh ids and response ids until there are N. The writer is timed from the first
`submit()` to the end of `flush()`, so it pays for turning records into rows, its
batching thread, `ON CONFLICT DO NOTHING` and `RETURNING`. The baseline inserts the
rows `rows_for` made before the clock started, in the writer's batch size, one
transaction per batch, with plain `conn.execute(table.insert(), rows)`. Each run gets a
fresh database. Goal: the writer keeps at least half the bare rate, and at least 5,000
exchanges/s into SQLite.

Not a timed test: it prints numbers and ratios, and exits 0 either way.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine, func, select
from sqlalchemy.engine import make_url

from llmtap.storage import schema
from llmtap.storage.engine import make_engine
from llmtap.storage.ingest import to_record
from llmtap.storage.migrate import upgrade
from llmtap.storage.record import Recorded
from llmtap.storage.rows import RowSet, rows_for
from llmtap.storage.secrets import KeyFingerprinter
from llmtap.storage.writer import Writer
from llmtap.workloads.corpus import corpus_cases, corpus_http
from llmtap.workloads.scratch import postgres_reachable, scratch_postgres

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("LLMTAP_CORPUS", ROOT / "tests" / "corpus"))
DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
BATCH = 500


def corpus_records() -> list[Recorded]:
    """Every corpus case decoded once, as the import path would record it."""
    fingerprinter = KeyFingerprinter(b"bench" * 8)
    out = []
    started = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
    for folder in corpus_cases(CORPUS):
        http = corpus_http(
            folder,
            started_at=started,
            headers=[("x-api-key", "sk-ant-bench-" + "0" * 30)],
            first_byte_ms=300,
            ended_ms=900,
        )
        record = to_record(http, fingerprinter=fingerprinter)
        if record is not None:
            out.append(record)
    if not out:
        raise SystemExit(f"no corpus cases under {CORPUS}")
    return out


def replicate(base: list[Recorded], n: int) -> list[Recorded]:
    """N records cycling through `base`, each with its own id, response id and time."""
    out = []
    t0 = datetime(2026, 11, 3, tzinfo=UTC)
    for i in range(n):
        template = base[i % len(base)]
        exchange = dataclasses.replace(template.exchange, response_id=f"{template.exchange.response_id or 'resp'}-{i}")
        started = t0 + timedelta(milliseconds=i)
        out.append(
            dataclasses.replace(
                template,
                exchange=exchange,
                id="",
                started_at=started,
                first_byte_at=started + timedelta(milliseconds=300),
                ended_at=started + timedelta(milliseconds=900),
            )
        )
    return out


# -- databases -------------------------------------------------------------------------------


@contextmanager
def sqlite_db(folder: Path, name: str) -> Iterator[str]:
    path = folder / f"{name}.db"
    yield f"sqlite:///{path}"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def fresh_engine(url: str) -> Engine:
    engine = make_engine(url)
    upgrade(engine)
    return engine


def count(engine: Engine) -> int:
    with engine.connect() as connection:
        return connection.execute(select(func.count()).select_from(schema.exchanges)).scalar_one()


# -- the two contenders ----------------------------------------------------------------------


def run_writer(url: str, records: list[Recorded], body_mode: str, spool: Path) -> float:
    engine = fresh_engine(url)
    writer = Writer(engine, spool_dir=spool, body_mode=body_mode, batch_size=BATCH)
    try:
        start = time.perf_counter()
        for record in records:
            writer.submit(record)
        if not writer.flush(timeout=600):
            raise SystemExit("the writer did not finish within 10 minutes")
        elapsed = time.perf_counter() - start
    finally:
        writer.close()
    stored = count(engine)
    engine.dispose()
    if stored != len(records) or writer.stats.spooled:
        raise SystemExit(f"writer stored {stored} of {len(records)} ({writer.stats.spooled} spooled)")
    return len(records) / elapsed


def run_bare(url: str, prepared: list[RowSet]) -> float:
    engine = fresh_engine(url)
    start = time.perf_counter()
    for rows in prepared:
        with engine.begin() as connection:
            if rows.bodies:
                connection.execute(schema.bodies.insert(), rows.bodies)
            connection.execute(schema.exchanges.insert(), rows.exchanges)
            if rows.tool_calls:
                connection.execute(schema.tool_calls.insert(), rows.tool_calls)
            if rows.body_refs:
                connection.execute(schema.body_refs.insert(), rows.body_refs)
    elapsed = time.perf_counter() - start
    stored = count(engine)
    engine.dispose()
    total = sum(len(rows) for rows in prepared)
    if stored != total:
        raise SystemExit(f"bare insert stored {stored} of {total}")
    return total / elapsed


def prepare(records: list[Recorded], body_mode: str) -> list[RowSet]:
    """The writer's batches, as rows, made before the baseline's clock starts."""
    batches = []
    for start in range(0, len(records), BATCH):
        rows = RowSet()
        seen: set[str] = set()
        for record in records[start : start + BATCH]:
            one = rows_for(record, body_mode)
            one.bodies = [b for b in one.bodies if b["hash"] not in seen]
            seen.update(b["hash"] for b in one.bodies)
            rows.extend(one)
        batches.append(rows)
    if body_mode == "full":  # plain INSERT cannot skip a blob an earlier batch stored
        stored: set[str] = set()
        for rows in batches:
            rows.bodies = [b for b in rows.bodies if b["hash"] not in stored]
            stored.update(b["hash"] for b in rows.bodies)
    return batches


def measure(label: str, make_db, records: list[Recorded], body_mode: str, rounds: int, folder: Path) -> dict:
    prepared = prepare(records, body_mode)
    writer_rates, bare_rates = [], []
    for round_no in range(rounds):
        with make_db(f"w{round_no}") as url:
            writer_rates.append(run_writer(url, records, body_mode, folder / f"spool-{label}-{round_no}"))
        with make_db(f"b{round_no}") as url:
            bare_rates.append(run_bare(url, prepared))
    writer_rate, bare_rate = max(writer_rates), max(bare_rates)
    return {"db": label, "writer": writer_rate, "bare": bare_rate, "ratio": writer_rate / bare_rate}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer exchanges and one round")
    parser.add_argument("--n", type=int, help="exchanges per run (default 20000, quick 4000)")
    parser.add_argument("--bodies", choices=("none", "metadata", "full"), default="metadata")
    parser.add_argument("--rounds", type=int, help="best of this many runs (default 3, quick 1)")
    parser.add_argument("--pg", default=os.environ.get("LLMTAP_TEST_POSTGRES_URL", DEFAULT_PG), help="admin URL")
    args = parser.parse_args(argv)
    n = args.n or (4000 if args.quick else 20000)
    rounds = args.rounds or (1 if args.quick else 3)
    records = replicate(corpus_records(), n)
    results = []
    with tempfile.TemporaryDirectory(prefix="llmtap-bench-") as tmp:
        folder = Path(tmp)
        results.append(measure("sqlite", lambda name: sqlite_db(folder, name), records, args.bodies, rounds, folder))
        if postgres_reachable(args.pg):
            results.append(
                measure(
                    "postgresql",
                    lambda _name: scratch_postgres(args.pg, "llmtap_bench"),
                    records,
                    args.bodies,
                    rounds,
                    folder,
                )
            )
        else:
            print(f"PostgreSQL at {make_url(args.pg).render_as_string()} is not reachable: skipped", file=sys.stderr)
    print(f"{n} exchanges per run, body mode {args.bodies}, batch {BATCH}, best of {rounds}")
    print(f"{'database':<12}{'writer ex/s':>14}{'bare ex/s':>14}{'writer/bare':>13}")
    for row in results:
        print(f"{row['db']:<12}{row['writer']:>14,.0f}{row['bare']:>14,.0f}{row['ratio']:>13.2f}")
    sqlite = results[0]
    print(
        f"goal: writer >= 0.5 x bare on every database "
        f"({'met' if all(r['ratio'] >= 0.5 for r in results) else 'MISSED'}); "
        f">= 5,000 exchanges/s into SQLite ({'met' if sqlite['writer'] >= 5000 else 'MISSED'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
