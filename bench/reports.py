"""Report speed at scale: every `llmtap report` over 100k and 1M synthetic exchanges, next
to the same aggregation run by the store's own database, on SQLite and (when reachable)
PostgreSQL.

    uv run python bench/reports.py [--quick] [--rows N[,N…]] [--pg URL | --no-pg] [--repeat R] [--keep DIR]

The exchanges come from `synthetic.py` (rows as the writer makes them, in time order,
priced by `Pricer.price_rows`), inserted into a fresh database at the schema's head.
Each report is timed as the CLI runs it (`reports.run`: a new DuckDB connection, the
store attached, the views, the query, the rows in Python), best of R, wall clock and this
process's CPU (DuckDB's threads included: on a busy machine the CPU column is the steadier
one). Then the dashboard's way (one connection, a snapshot, every report), what one dashboard
render gathers (`data.collect`: the snapshot, its reports and listings, the newest
exchanges), `show ID` with its conversation, and whole `llmtap` commands. Goals at 1M
exchanges on a 2-core machine: every report under 1 s, `show ID --conversation` under
0.2 s. Not a timed test: it prints numbers, and exits 0 either way.
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Row, create_engine, text
from sqlalchemy.engine import make_url

from llmtap.analytics import reports
from llmtap.analytics.pricing import Pricer
from llmtap.dashboards import data
from llmtap.storage.engine import make_engine
from llmtap.storage.migrate import upgrade
from llmtap.workloads.scratch import postgres_reachable
from llmtap.workloads.synthetic import fill

DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@contextmanager
def sqlite_store(folder: Path, name: str, keep: bool) -> Iterator[str]:
    path = folder / f"{name}.db"
    yield f"sqlite:///{path}"
    if not keep:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


@contextmanager
def postgres_store(admin_url: str, name: str | None) -> Iterator[str]:
    """A database made for this run and dropped after, or (--keep) one kept by name."""
    keep = name is not None
    name = name or f"llmtap_bench_{secrets.token_hex(4)}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            exists = connection.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).first()
            if not exists:
                connection.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        if not keep:
            with admin.connect() as connection:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def stored(engine: Engine) -> int:
    with engine.connect() as connection:
        return connection.execute(text("SELECT count(*) FROM exchanges")).scalar_one()


# -- what is timed ----------------------------------------------------------------------------

# (label, kind, --by, --list, since): each report as the CLI runs it by default, and a few more
REPORT_RUNS = [
    ("usage --by team", "usage", ["team"], False, None),
    ("usage --by day,model --since 7d", "usage", ["day", "model"], False, 7),
    ("cost --by team", "cost", ["team"], False, None),
    ("cache --by team,model", "cache", None, False, None),
    ("cache --list", "cache", None, True, None),
    ("finish --by provider", "finish", None, False, None),
    ("tools --by team", "tools", None, False, None),
    ("tools --list", "tools", None, True, None),
    ("errors --by provider", "errors", None, False, None),
    ("latency --by model,provider", "latency", None, False, None),
    ("conversations --top 20", "conversations", None, False, None),  # the CLI's default top
]
TOP = 20

# The same aggregation in the store's own SQL, where it has one.
NATIVE = {
    "usage --by team": """
        SELECT team, count(*), sum(usage_input_tokens), sum(usage_cache_read_input_tokens),
               sum(usage_cache_creation_input_tokens), sum(usage_output_tokens),
               sum(usage_reasoning_output_tokens), sum(CASE WHEN usage_input_tokens IS NULL THEN 1 ELSE 0 END)
        FROM exchanges GROUP BY team ORDER BY team""",
    "cost --by team": """
        SELECT team, count(*), sum(cost_total_pico), sum(cost_input_pico), sum(cost_cache_read_pico),
               sum(cost_cache_write_pico), sum(cost_output_pico),
               sum(CASE WHEN price_status = 'unpriced' THEN 1 ELSE 0 END)
        FROM exchanges GROUP BY team ORDER BY team""",
    "finish --by provider": """
        SELECT provider, coalesce(finish_reason, 'unknown'), count(*)
        FROM exchanges GROUP BY 1, 2 ORDER BY 1, 3 DESC""",
    "errors --by provider": """
        SELECT provider, count(*), sum(CASE WHEN status >= 400 OR error_type IS NOT NULL THEN 1 ELSE 0 END),
               sum(CASE WHEN status = 429 THEN 1 ELSE 0 END), max(retry_after_s)
        FROM exchanges GROUP BY provider ORDER BY provider""",
}
NATIVE_PG = {
    "latency --by model,provider": """
        SELECT model, provider, count(*),
               percentile_cont(0.5) WITHIN GROUP (ORDER BY ttft_ms),
               percentile_cont(0.95) WITHIN GROUP (ORDER BY ttft_ms),
               percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms)
        FROM exchanges WHERE coalesce(status, 0) < 400 GROUP BY 1, 2 ORDER BY 1, 2""",
}


@dataclass
class Timing:
    label: str
    wall: float  # seconds, best of R
    cpu: float  # this process's CPU seconds in that run (DuckDB's threads included)
    rows: int = 0
    native: float | None = None  # the store's own SQL, best of R


def best_of(repeat: int, action: Callable[[], Any]) -> tuple[float, float, Any]:
    """(wall, cpu, result) of the fastest of `repeat` runs."""
    best, result = (float("inf"), 0.0), None
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        result = action()
        best = min(best, (time.perf_counter() - wall, time.process_time() - cpu))
    return best[0], best[1], result


def _fetch_all(connection: Connection, sql: str) -> Sequence[Row[Any]]:
    return connection.execute(text(sql)).fetchall()


def time_facts_copy(url: str, engine: Engine) -> list[Timing]:
    """The columnar copy of a SQLite store's facts (analytics/facts_cache.py): made whole
    once (in the background when a report first needs it), then brought up to date at each
    connection with what changed (here: 1,000 exchanges updated, as a reprice does)."""
    from llmtap.analytics import facts_cache

    database = make_url(url).database or ""
    folder = facts_cache.path_for(database).parent
    for path in folder.glob(f"{Path(database).name}.duckdb*"):
        path.unlink()
    wall, cpu, _ = best_of(1, lambda: reports.connect(url, build=True).close())
    out = [Timing("facts copy: made whole (background)", wall, cpu)]
    with engine.begin() as connection:
        connection.execute(text("UPDATE exchanges SET team = team WHERE rowid <= 1000"))
    wall, cpu, _ = best_of(1, lambda: reports.connect(url).close())
    out.append(Timing("facts copy: 1,000 changed, connect", wall, cpu))
    return out


def time_reports(url: str, engine: Engine, repeat: int, backend: str) -> list[Timing]:
    out = []
    if backend == "sqlite" and os.environ.get("LLMTAP_FACTS_COPY", "1") != "0":
        out += time_facts_copy(url, engine)
    wall, cpu, _ = best_of(repeat, lambda: reports.connect(url).close())
    out.append(Timing("(connect: load, attach, views)", wall, cpu))
    latest = datetime(2026, 11, 3, tzinfo=UTC)
    native = {**NATIVE, **(NATIVE_PG if backend == "postgresql" else {})}
    for label, kind, by, listing, days in REPORT_RUNS:
        since = latest - timedelta(days=days) if days else None
        top = TOP if kind == "conversations" else None
        wall, cpu, table = best_of(
            repeat, partial(reports.run, url, kind, by=by, listing=listing, since=since, top=top)
        )
        timing = Timing(label, wall, cpu, len(table.rows))
        if label in native:
            with engine.connect() as connection:
                timing.native, _, _ = best_of(repeat, partial(_fetch_all, connection, native[label]))
        out.append(timing)
    out += time_snapshot(url)
    out += time_show(url, engine, repeat)
    out.append(time_command(url, repeat))
    return out


def time_show(url: str, engine: Engine, repeat: int) -> list[Timing]:
    """`show ID` and `show ID --conversation` (analytics/audit.py) for an exchange in the
    store's longest conversation and for one in a conversation of median length: the
    stored conversation id looked up by key, its turns and their tool calls. Then the
    whole `llmtap show ID --conversation --format json` command."""
    from llmtap.analytics import audit

    with engine.connect() as connection:
        sizes = connection.execute(
            text(
                "SELECT conversation_id, count(*) AS n FROM exchanges WHERE conversation_id IS NOT NULL "
                "GROUP BY conversation_id ORDER BY n DESC, conversation_id"
            )
        ).all()
        picks = [("longest", sizes[0]), ("median", sizes[len(sizes) // 2])]
        ids = {
            name: connection.execute(
                text("SELECT max(id) FROM exchanges WHERE conversation_id = :c"), {"c": row.conversation_id}
            ).scalar_one()
            for name, row in picks
        }
    out = []
    for name, row in picks:
        shown = ids[name]
        wall, cpu, _ = best_of(repeat, partial(audit.show, engine, shown))
        out.append(Timing(f"show ID ({name} conversation)", wall, cpu, 1))
        wall, cpu, data = best_of(repeat, partial(audit.conversation, engine, shown))
        out.append(Timing(f"show ID --conversation ({name}: {row.n:,})", wall, cpu, len(data["turns"])))
    command = ["show", ids["median"], "--conversation", "--format", "json", "--db", url]
    out.append(Timing("llmtap show --conversation (command)", time_llmtap(command, repeat), float("nan")))
    return out


def time_snapshot(url: str) -> list[Timing]:
    """The dashboard's way: one connection, the columns copied once, every report after."""
    wall, cpu, connection = best_of(1, lambda: reports.connect(url, snapshot=True))
    out = [Timing("snapshot (dashboard connection)", wall, cpu)]
    try:

        def everything() -> int:
            return sum(
                len(reports.run(url, kind, by=by, listing=listing, connection=connection, top=TOP).rows)
                for _, kind, by, listing, _ in REPORT_RUNS
            )

        wall, cpu, rows = best_of(1, everything)
        out.append(Timing("  then all the reports above", wall, cpu, rows))
    finally:
        connection.close()
    wall, cpu, shown = best_of(1, lambda: data.collect(url))
    out.append(Timing("dashboard page data (data.collect)", wall, cpu, len(shown["exchanges"])))
    return out


def time_command(url: str, repeat: int) -> Timing:
    """`llmtap report cost` as a user runs it: interpreter, imports, schema check, the
    check for unpriced rows, DuckDB, output (bytecode cached, as an installed tool has it)."""
    wall = time_llmtap(["report", "cost", "--format", "json", "--db", url], repeat)
    return Timing("llmtap report cost (whole command)", wall, float("nan"))


def time_llmtap(arguments: list[str], repeat: int) -> float:
    """Best wall seconds of `llmtap ARGUMENTS` in a fresh interpreter, after one run that
    writes the bytecode cache (as an installed tool has it)."""
    with tempfile.TemporaryDirectory(prefix="llmtap-bench-home-") as home:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(LLMTAP_HOME=home, PYTHONPYCACHEPREFIX=str(Path(home) / "pycache"))
        command = [sys.executable, "-m", "llmtap.cli.main", *arguments]
        subprocess.run(command, env=env, check=True, capture_output=True)
        wall, _, _ = best_of(repeat, lambda: subprocess.run(command, env=env, check=True, capture_output=True))
    return wall


def print_table(title: str, results: list[Timing]) -> None:
    print(f"\n{title}")
    print(f"  {'report':<36} {'DuckDB':>8} {'(cpu)':>8} {'rows':>7} {'native':>8} {'ratio':>6}")
    for t in results:
        native = f"{t.native * 1000:6.0f}ms" if t.native is not None else f"{'-':>8}"
        ratio = f"{t.wall / t.native:5.1f}x" if t.native else f"{'':>6}"
        cpu = f"{t.cpu * 1000:6.0f}ms" if t.cpu == t.cpu else f"{'':>8}"
        flag = "  over 2 s" if t.wall > 2 else ""
        print(f"  {t.label:<36} {t.wall * 1000:6.0f}ms {cpu} {t.rows or '':>7} {native} {ratio}{flag}")


def run(sizes: list[int], pg_url: str | None, repeat: int, keep: Path | None) -> None:
    """--keep DIR keeps the stores (SQLite files in DIR, PostgreSQL databases
    llmtap_bench_N) and reuses them on the next run, for working on the reports' SQL."""
    pricer = Pricer()
    with tempfile.TemporaryDirectory(prefix="llmtap-bench-") as scratch:
        folder = keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        for n in sizes:
            stores: list[tuple[str, Any]] = [("sqlite", sqlite_store(folder, f"reports-{n}", keep is not None))]
            if pg_url:
                stores.append(("postgresql", postgres_store(pg_url, f"llmtap_bench_{n}" if keep else None)))
            with ExitStack() as stack:
                urls = [(backend, stack.enter_context(manager)) for backend, manager in stores]
                engines = [make_engine(url) for _, url in urls]
                for engine in engines:
                    upgrade(engine)
                empty = [(b, e) for (b, _), e in zip(urls, engines, strict=True) if stored(e) != n]
                if len(empty) < len(engines):
                    print(f"\n{n:,} exchanges: reusing the kept stores", file=sys.stderr)
                if empty:
                    for _, engine in empty:
                        with engine.begin() as connection:
                            connection.execute(text("DELETE FROM tool_calls"))
                            connection.execute(text("DELETE FROM exchanges"))
                    print(
                        f"\n{n:,} exchanges: generating, pricing and inserting into {', '.join(b for b, _ in empty)}",
                        file=sys.stderr,
                    )
                    stats, making, inserting = fill([e for _, e in empty], n, pricer)
                    print(
                        f"{n:,} exchanges ({stats.conversations:,} conversations, {stats.tool_calls:,} tool calls, "
                        f"{stats.errors:,} errors, ~{stats.misses:,} cache misses): made and priced in "
                        f"{making:.1f} s, inserted in {inserting:.1f} s ({n / inserting:,.0f}/s into "
                        f"{len(empty)} store(s))"
                    )
                for (backend, url), engine in zip(urls, engines, strict=True):
                    with engine.begin() as connection:
                        connection.execute(text("ANALYZE"))
                    results = time_reports(url, engine, repeat, backend)
                    print_table(f"{backend}, {n:,} exchanges (best of {repeat})", results)
                    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100k exchanges only")
    parser.add_argument("--rows", help="comma-separated sizes (default 100000,1000000)")
    parser.add_argument("--pg", default=DEFAULT_PG, help=f"PostgreSQL admin URL (default {DEFAULT_PG})")
    parser.add_argument("--no-pg", action="store_true")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--direct", action="store_true", help="SQLite: read the store itself, not the facts copy beside it"
    )
    parser.add_argument("--keep", type=Path, metavar="DIR", help="keep the stores (and reuse them next time)")
    args = parser.parse_args()
    if args.direct:
        os.environ["LLMTAP_FACTS_COPY"] = "0"
    sizes = [int(s) for s in args.rows.split(",")] if args.rows else [100_000] if args.quick else [100_000, 1_000_000]
    pg_url = None if args.no_pg or not postgres_reachable(args.pg) else args.pg
    if not args.no_pg and pg_url is None:
        print(f"PostgreSQL at {args.pg} is not reachable: SQLite only", file=sys.stderr)
    run(sizes, pg_url, args.repeat, args.keep)


if __name__ == "__main__":
    main()
