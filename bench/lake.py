"""The lake at fleet size: a year of synthetic history made directly as Iceberg data (10M,
100M exchanges), every `llmtap report` over it timed as the CLI runs it, and `llmtap lake
sync` throughput from a PostgreSQL store.

    uv run python bench/lake.py [--rows 10000000[,100000000]] [--days 365] [--dir /tmp]
        [--keep] [--reuse FOLDER] [--no-reports] [--pg URL | --no-sync] [--sync-rows 1000000]

How the history is made fast. `synthetic.py` makes a seed (20,000 exchanges, priced, in a
SQLite store) and `llmtap lake sync` copies it into a scratch lake, so the seed's rows
have the lake's columns and types exactly. Each day of the year then takes the next
stretch of the seed, cycling through it: zero-copy `pyarrow` slices of the seed's wide
columns, with the few that change made whole by `pyarrow.compute` (new start times inside
the day: business hours, weekends at a third, traffic growing over the year; new ids; each
pass over the seed its own thread keys and first messages, so its conversations are its
own, and its own teams and keys: 50 teams; its conversation ids and links to a previous
exchange are the new ids of its own rows, a conversation the stretch cuts starting anew).
A day's tool calls are the seed's calls of its exchanges, sliced the same way. Two
processes write the days' Parquet files (the Iceberg field ids in their schema, zstd level
1), one per table and day in its partition's folder, and one `add_files` commit per table
registers them (pyiceberg reads only the files' footers for the stats) with the snapshot
summary a sync writes: `llmtap.watermark` above every revision of the store the lake is
kept in (a fresh SQLite store, which also holds the SQL catalog) and its
`llmtap.store_token`. So `llmtap report … --lake` reads it as a synced lake. One day of
274,000 exchanges (100M a year): 3.6-3.9 s to make and write, 0.9-1.0 s CPU;
`Table.append` of the same Arrow tables 6.6 s, 1.6 s CPU, and its commits take turns,
where files written apart take one commit. (The seed's copies repeat: a team and its twin
of the other pass have the same totals.)

Each report runs as `llmtap report KIND --lake DIR --db URL --format csv` in a child
process started by a small launcher (a child's `ru_maxrss` carries the high-water mark of
the process that started it: the launcher is small): wall time, CPU time (user + system,
DuckDB's threads included: on a busy machine the steadier figure) and peak RSS. `budgets`
and `whatif` read the store only and are not run.

The daily summary: after the `add_files` commits the lake gains its summary exactly as a
sync makes it (lake/daily.keep: every month, since none was made), and the reports it
answers are also read through `reports.run` in a process each, beside the bare DuckDB
`GROUP BY team, day` over the same Parquet files, and again as rows (the summary turned
off). Measured 2026-12-04 at 100M (summary: 22,672,697 rows, most of them the 20.8M
conversations' days, made in 451 s); the whole CLI commands: usage / cost / finish /
errors by team,day 1.3 / 1.6 / 1.5 / 1.2 s, latency by model 2.2 s, cache 1.3 s, tools
1.1 s, conversations 5.6 s (every report under 470 MB); as rows: 15.8 / 20.4 / 12.0 /
33.9 s, latency 21.4 s (3.3 GB); the bare GROUP BY 15.6 s. docs/lake.md has the tables.

Measured (2-core machine, shared with other work): docs/lake.md, "At fleet size". 100M
exchanges + 35.8M tool calls written in 273-565 s (177,000-366,000 exchanges/s), 6.9 GB of
Parquet.

Not a timed test: it prints numbers and exits 0 either way. Not responsible for the
reports (analytics/) or the sync (lake/sync.py).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
from sqlalchemy import text
from sqlalchemy.engine import make_url

from llmtap.analytics.pricing import Pricer
from llmtap.lake import daily, schema
from llmtap.lake.catalog import STORE_TOKEN, WATERMARK, ensure_tables, open_catalog
from llmtap.lake.sync import sync
from llmtap.storage.engine import make_engine
from llmtap.storage.migrate import upgrade
from llmtap.workloads.peak_rss import run_measured
from llmtap.workloads.scratch import postgres_reachable
from llmtap.workloads.synthetic import fill

DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
SEED_ROWS = 20_000
DAY_US = 86_400_000_000
COPIES_PER_TEAM_SET = 2  # the seed's 25 teams become 50: a copy's teams by its number
# issue 27's goals at 100M on two cores: the four by team and day, latency by model, the rest
GOALS = {"fast": 2.0, "latency": 5.0, "slow": 15.0, "memory_mb": 2048.0}
# (label, arguments after `llmtap report`, goal in seconds)
REPORTS: list[tuple[str, list[str], float]] = [
    *[
        (f"{kind} --by team,day", [kind, "--by", "team,day"], GOALS["fast"])
        for kind in ("usage", "cost", "finish", "errors")
    ],
    ("latency --by model", ["latency", "--by", "model"], GOALS["latency"]),
    ("latency --by team,day", ["latency", "--by", "team,day"], GOALS["latency"]),
    ("cache", ["cache"], GOALS["slow"]),
    ("tools", ["tools"], GOALS["slow"]),
    ("conversations", ["conversations"], GOALS["slow"]),
    ("usage --by team --since 7d", ["usage", "--by", "team", "--since", "7d"], GOALS["latency"]),
    ("cost --by model --since 30d", ["cost", "--by", "model", "--since", "30d"], GOALS["latency"]),
]


# runs the report in a child of its own and prints the child's wall seconds and peak RSS (kB)
@dataclass(frozen=True)
class Seed:
    """The seed's rows in the lake's Arrow schemas, and where each exchange's tool calls
    are (rows from `calls_start[i]` on of `calls`, sorted by exchange)."""

    exchanges: pa.Table
    calls: pa.Table
    calls_start: pa.Array
    calls_owner: pa.Array  # each call's exchange (its row in `exchanges`)
    duration_us: pa.Array  # ended_at - started_at, -1 where there is no end
    team_code: pa.Array  # the seed's team as a number 0..24


@dataclass(frozen=True)
class Day:
    number: int  # 0: the history's first day
    start_us: int  # its UTC midnight, microseconds since the epoch
    rows: int
    first: int  # the seed position of its first row, counting passes over the seed (and the history's row number)


@dataclass(frozen=True)
class Written:
    exchanges: str
    exchange_rows: int
    calls: str
    call_rows: int
    size: int


@dataclass(frozen=True)
class Lake:
    store_url: str
    warehouse: Path
    exchanges: int
    tool_calls: int
    size: int


def make_seed(folder: Path, rows: int) -> Seed:
    """`rows` synthetic exchanges into a SQLite store, synced to a lake there, read back."""
    url = f"sqlite:///{folder / 'seed.db'}"
    engine = make_engine(url)
    upgrade(engine)
    fill([engine], rows, Pricer())
    catalog = open_catalog(url, str(folder / "seed-lake"))
    sync(engine, catalog)
    engine.dispose()
    order = [("started_at", "ascending"), ("id", "ascending")]
    exchanges = _plain(catalog.load_table(schema.EXCHANGES).scan().to_arrow()).sort_by(order).combine_chunks()
    calls = _plain(catalog.load_table(schema.TOOL_CALLS).scan().to_arrow())
    calls = calls.append_column("owner", pc.index_in(calls.column("exchange_id"), value_set=exchanges.column("id")))
    calls = calls.sort_by([("owner", "ascending"), ("position", "ascending")]).combine_chunks()
    count = [0] * exchanges.num_rows
    for owner in calls.column("owner").to_pylist():
        count[owner] += 1
    start, at = [], 0
    for n in count:
        start.append(at)
        at += n
    started = pc.cast(exchanges.column("started_at"), pa.int64())
    ended = pc.cast(exchanges.column("ended_at"), pa.int64())
    duration = pc.fill_null(pc.subtract(ended, started), -1).combine_chunks()
    teams = pc.dictionary_encode(exchanges.column("team")).combine_chunks()
    return Seed(
        exchanges,
        calls.drop_columns(["owner"]),
        pa.array(start, pa.int64()),
        pc.cast(calls.column("owner"), pa.int64()),
        duration,
        pc.cast(teams.indices, pa.int64()),
    )


def plan(total: int, days: int, last_day: datetime) -> list[Day]:
    """`total` rows over `days` days ending with `last_day`: weekends at a third of a
    weekday, traffic growing from 0.6 to 1.4 times the mean over the span."""
    first_day = last_day - timedelta(days=days - 1)
    weights = [
        (0.35 if (first_day + timedelta(days=d)).weekday() >= 5 else 1.0) * (0.6 + 0.8 * d / max(days - 1, 1))
        for d in range(days)
    ]
    counts = [int(total * w / sum(weights)) for w in weights]
    counts[-1] += total - sum(counts)
    plans, first = [], 0
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    for d, rows in enumerate(counts):
        start_us = (first_day + timedelta(days=d) - epoch) // timedelta(microseconds=1)
        plans.append(Day(d, start_us, rows, first))
        first += rows
    return plans


_SEED: Seed | None = None  # set before the writers fork
_WHERE: dict[str, str] = {}  # lake table -> its data folder
_ARROW: dict[str, pa.Schema] = {}


def _plain(table: pa.Table) -> pa.Table:
    """Strings as `string` (pyiceberg reads them as `large_string`, which the joins of
    `write_day` do not take with the `string` they make)."""
    fields = [pa.field(f.name, pa.string()) if pa.types.is_large_string(f.type) else f for f in table.schema]
    return table.cast(pa.schema(fields))


def _arange(start: int, n: int) -> pa.Array:
    return pc.add(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), n)), start - 1)


def _text(values: pa.Array) -> pa.Array:
    return pc.cast(values, pa.string())


def _replace(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    index = table.schema.get_field_index(name)
    return table.set_column(index, pa.field(name, values.type), values)


def _times_of_day(n: int, seed: int) -> pa.Array:
    """`n` sorted offsets into a day (microseconds): three quarters in (UTC) business
    hours, about normal around 14:30 (sd 3 h, a sum of uniforms), the rest all day."""
    uniform = [pc.random(n, initializer=seed * 8 + k) for k in range(6)]
    normal = pc.multiply(
        pc.subtract(pc.add(pc.add(uniform[0], uniform[1]), pc.add(uniform[2], uniform[3])), 2.0), 3**0.5
    )
    busy = pc.add(14.5 * 3600e6, pc.multiply(normal, 3.0 * 3600e6))
    anytime = pc.multiply(uniform[4], float(DAY_US))
    offsets = pc.if_else(pc.less(uniform[5], 0.75), busy, anytime)
    offsets = pc.max_element_wise(pc.min_element_wise(offsets, float(DAY_US - 1)), 0.0)
    offsets = pc.cast(pc.floor(offsets), pa.int64())
    return pc.take(offsets, pc.array_sort_indices(offsets))


def _segments(day: Day, size: int) -> list[tuple[int, int, int]]:
    """The day's stretch of the seed as (from, to, pass) pieces, each within one pass."""
    pieces, at, end = [], day.first, day.first + day.rows
    while at < end:
        copy, start = divmod(at, size)
        stop = min(size, start + end - at)
        pieces.append((start, stop, copy))
        at += stop - start
    return pieces


def _own_links(rows: pa.Table, seed_ids: pa.ChunkedArray) -> pa.Table:
    """A piece's links between exchanges made its own, as the writer would have stored
    them for these rows: each conversation's id is the new id of its first exchange in the
    piece (a conversation the piece cuts starts at its first row here), and a previous
    exchange or cache predecessor outside the piece is none. Without this every pass over
    the seed would add its turns to the seed's few thousand conversations."""
    new_ids = rows.column("id").combine_chunks()
    seed_ids = seed_ids.combine_chunks()
    for name in ("previous_exchange_id", "cache_previous_id"):
        at = pc.index_in(rows.column(name), value_set=seed_ids)
        rows = _replace(rows, name, pc.take(new_ids, at))
    conversation = rows.column("conversation_id").combine_chunks()
    position = pa.table({"conversation": conversation, "at": _arange(0, len(conversation))})
    first = position.group_by("conversation").aggregate([("at", "min")])
    first = first.filter(pc.is_valid(first.column("conversation")))
    at = pc.take(first.column("at_min"), pc.index_in(conversation, value_set=first.column("conversation")))
    return _replace(rows, "conversation_id", pc.take(new_ids, at))


def write_day(day: Day) -> Written:
    """One day's exchanges and tool calls as two Parquet files in their partitions: the
    seed's rows sliced (no copies of its wide columns), its few changed columns made whole."""
    seed = _SEED
    assert seed is not None
    n = day.rows
    started = pc.add(_times_of_day(n, day.number), day.start_us)
    instant = pa.timestamp("us", tz="UTC")
    started_at = pc.cast(started, instant)
    ids = pc.binary_join_element_wise(
        pc.utf8_lpad(_text(pc.divide(started, 1000)), 13, "0"), pc.utf8_lpad(_text(_arange(day.first, n)), 13, "0"), ""
    )
    names = pa.array([f"team-{i:02d}" for i in range(25 * COPIES_PER_TEAM_SET)])
    exchange_parts, call_parts, at = [], [], 0
    for start, stop, copy in _segments(day, seed.exchanges.num_rows):
        count = stop - start
        rows = seed.exchanges.slice(start, count)
        here = slice(at, at + count)
        tag = f".{copy}"
        team_set = copy % COPIES_PER_TEAM_SET
        duration = seed.duration_us.slice(start, count)
        begun = started.slice(here.start, count)
        ended = pc.if_else(pc.less(duration, 0), pa.scalar(None, pa.int64()), pc.add(begun, duration))
        rows = _replace(rows, "id", ids.slice(here.start, count))
        rows = _replace(rows, "team", pc.take(names, pc.add(seed.team_code.slice(start, count), 25 * team_set)))
        rows = _replace(rows, "started_at", started_at.slice(here.start, count))
        rows = _replace(rows, "ended_at", pc.cast(ended, instant))
        fingerprints = rows.column("key_fingerprint").combine_chunks()
        rows = _replace(rows, "key_fingerprint", pc.binary_join_element_wise(fingerprints, f".{team_set}", ""))
        for name in ("thread_key", "first_message_hash"):  # each pass over the seed: conversations of its own
            rows = _replace(rows, name, pc.binary_join_element_wise(rows.column(name).combine_chunks(), tag, ""))
        rows = _own_links(rows, seed.exchanges.column("id").slice(start, count))
        exchange_parts.append(rows)
        first_call = seed.calls_start[start].as_py()
        calls_end = seed.calls_start[stop].as_py() if stop < len(seed.calls_start) else seed.calls.num_rows
        calls = seed.calls.slice(first_call, calls_end - first_call)
        owner = pc.add(seed.calls_owner.slice(first_call, calls_end - first_call), at - start)
        calls = _replace(calls, "exchange_id", pc.take(ids, owner))
        calls = _replace(calls, "started_at", pc.take(started_at, owner))
        call_parts.append(calls)
        at += count
    rows = pa.concat_tables(exchange_parts)
    rows = _replace(rows, "revision", pa.repeat(pa.scalar(0, pa.int64()), n)).cast(_ARROW[schema.EXCHANGES])
    calls = pa.concat_tables(call_parts)
    calls = _replace(calls, "revision", pa.repeat(pa.scalar(0, pa.int64()), calls.num_rows))
    calls = calls.cast(_ARROW[schema.TOOL_CALLS])

    date = datetime.fromtimestamp(day.start_us / 1e6, UTC).date().isoformat()
    paths = []
    for table_name, table in ((schema.EXCHANGES, rows), (schema.TOOL_CALLS, calls)):
        folder = Path(_WHERE[table_name]) / f"day={date}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"lakebench-{day.number:05d}.parquet"
        pq.write_table(table, path, compression="zstd", compression_level=1, row_group_size=1 << 20)
        paths.append(path)
    size = sum(p.stat().st_size for p in paths)
    return Written(str(paths[0]), rows.num_rows, str(paths[1]), calls.num_rows, size)


def make_lake(folder: Path, seed: Seed, total: int, days: int, workers: int) -> Lake:
    """A fresh SQLite store holding the catalog, and a lake of `total` exchanges in it."""
    global _SEED
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    store = folder / "store.db"
    url = f"sqlite:///{store}"
    engine = make_engine(url)
    upgrade(engine)
    with engine.connect() as connection:
        n, token = connection.execute(text("SELECT n, token FROM fact_revision WHERE id = 1")).one()
    engine.dispose()
    warehouse = folder / "lake"
    catalog = open_catalog(url, str(warehouse))
    tables = ensure_tables(catalog)
    for name, table in tables.items():
        _WHERE[name] = table.location().removeprefix("file://") + "/data"
        _ARROW[name] = schema_to_pyarrow(table.schema(), include_field_ids=True)
    _SEED = seed
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    plans = plan(total, days, today)
    clock = time.perf_counter()
    written: list[Written] = []
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        for done in pool.imap_unordered(write_day, plans):
            written.append(done)
            made = sum(w.exchange_rows for w in written)
            print(f"\r  {made:,} exchanges written", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    writing = time.perf_counter() - clock
    clock = time.perf_counter()
    summary = {WATERMARK: str(int(n) + 1), STORE_TOKEN: str(token), "llmtap.sync": "bench-lake"}
    for name, files in (
        (schema.EXCHANGES, [w.exchanges for w in written]),
        (schema.TOOL_CALLS, [w.calls for w in written]),
    ):
        with tables[name].transaction() as transaction:
            transaction.add_files(sorted(files), snapshot_properties=summary, check_duplicate_files=False)
    registering = time.perf_counter() - clock
    clock = time.perf_counter()
    # the daily summary, as `lake sync` keeps it after its commits (lake/daily.py)
    summary_rows, _days, _commits = daily.keep(
        catalog, tables[schema.EXCHANGES], tables[schema.TOOL_CALLS], tables[schema.DAILY]
    )
    summarizing = time.perf_counter() - clock
    exchanges = sum(w.exchange_rows for w in written)
    calls = sum(w.call_rows for w in written)
    size = sum(w.size for w in written)
    print(
        f"{exchanges:,} exchanges and {calls:,} tool calls over {days} days: Parquet written in {writing:.1f} s "
        f"({exchanges / writing:,.0f} exchanges/s, {(exchanges + calls) / writing:,.0f} rows/s, {workers} processes), "
        f"registered in {registering:.1f} s; {size / 1e9:.2f} GB of Parquet; daily summary "
        f"({summary_rows:,} rows) made in {summarizing:.1f} s"
    )
    return Lake(url, warehouse, exchanges, calls, size)


@dataclass(frozen=True)
class Run:
    label: str
    seconds: float
    cpu: float  # user + system seconds of the report's process (DuckDB's threads included)
    peak_mb: float
    goal: float
    error: str

    @property
    def verdict(self) -> str:
        if self.error:
            return "FAILED"
        return "MEETS" if self.seconds < self.goal and self.peak_mb < GOALS["memory_mb"] else "MISSES"


def time_report(lake: Lake, label: str, arguments: Sequence[str], goal: float) -> Run:
    """One `llmtap report` measured by bench/peak_rss.py: wall and CPU seconds, peak RSS."""
    llmtap = str(Path(sys.executable).with_name("llmtap"))
    command = [llmtap, "report", *arguments, "--lake", str(lake.warehouse), "--db", lake.store_url, "--format", "csv"]
    return time_command(label, command, goal)


# the reports the daily summary answers, read as reports.run does (no CLI: its catch-up
# pricing, cli/pricing.catch_up, scans the lake's rows before every priced report)
SUMMARY_READS = [
    (f"{kind} --by team,day (read)", kind) for kind in ("usage", "cost", "finish", "errors", "latency", "tools")
]
# (argv[4] "rows": the same report with the summary turned off, the lake read as rows)
_READ = (
    "import sys; from llmtap.analytics import reports; from llmtap.analytics.duck import connect; "
    "c = connect(sys.argv[1], lake=sys.argv[2]); "
    "sys.argv[4] == 'rows' and c.execute('RESET VARIABLE llmtap_lake_daily'); "
    "reports.run(sys.argv[1], sys.argv[3], by=['team', 'day'], connection=c); c.close()"
)
# the bare baseline: DuckDB's GROUP BY team, day over the same Parquet files, nothing else
_BARE = (
    "import sys, duckdb; c = duckdb.connect(config={'threads': 2}); c.execute(\"SELECT team, "
    "CAST(started_at AS DATE) AS day, count(*), sum(usage_input_tokens), sum(usage_output_tokens), "
    "sum(cost_total_pico) FROM read_parquet('\" + sys.argv[1] + \"/llmtap/exchanges/data/*/*.parquet') "
    'GROUP BY ALL").fetchall()'
)


def time_command(label: str, command: list[str], goal: float) -> Run:
    """`command` measured by bench/peak_rss.py; its last line on stderr is the error of one that fails."""
    with tempfile.TemporaryFile("w+") as err:
        measured = run_measured(command, env=_child_env(), stdout=subprocess.DEVNULL, stderr=err)
        err.seek(0)
        last = (err.read().strip().splitlines() or [""])[-1]
    error = "" if measured.code == 0 else last or f"exit {measured.code}"
    return Run(label, measured.wall, measured.cpu, measured.peak / 1024 / 1024, goal, error)


def run_reads(lake: Lake) -> list[Run]:
    """The summary's reports in a process of their own each, and the bare scan."""
    runs = [
        time_command(
            label.replace("(read)", f"({how})"),
            [sys.executable, "-c", _READ, lake.store_url, str(lake.warehouse), kind, how],
            2.0,
        )
        for label, kind in SUMMARY_READS
        for how in ("summary", "rows")
    ]
    runs.append(time_command("bare DuckDB GROUP BY team, day", [sys.executable, "-c", _BARE, str(lake.warehouse)], 2.0))
    for run in runs:
        print(
            f"  {run.label}: {run.seconds:.1f} s, {run.cpu:.1f} s CPU, {run.peak_mb:,.0f} MB {run.error}",
            file=sys.stderr,
        )
    return runs


def _child_env() -> dict[str, str]:
    """The reports' environment: no config file, and bytecode written and read as an
    installed tool has it (with PYTHONDONTWRITEBYTECODE set, as on these machines, every
    run compiled the modules it lacked again: 0.1-0.3 s of each whole command)."""
    env = dict(os.environ)
    env.pop("LLMTAP_CONFIG", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_reports(lake: Lake, repeat: int) -> list[Run]:
    runs = []
    for label, arguments, goal in REPORTS:
        best = min((time_report(lake, label, arguments, goal) for _ in range(repeat)), key=lambda r: r.seconds)
        runs.append(best)
        print(
            f"  {label}: {best.seconds:.1f} s, {best.cpu:.1f} s CPU, {best.peak_mb:,.0f} MB {best.error}",
            file=sys.stderr,
            flush=True,
        )
    return runs


def print_runs(title: str, runs: list[Run]) -> None:
    print(f"\n{title}")
    print(f"{'report':<30} {'wall s':>7} {'CPU s':>7} {'peak MB':>8} {'goal':>6}  verdict")
    for run in runs:
        goal = f"<{run.goal:.0f} s"
        print(
            f"{run.label:<30} {run.seconds:>7.1f} {run.cpu:>7.1f} {run.peak_mb:>8,.0f} {goal:>6}  "
            f"{run.verdict} {run.error}"
        )
    print(f"(memory goal: under {GOALS['memory_mb']:,.0f} MB for every report)")


def bench_sync(admin_url: str, rows: int, folder: Path, keep: bool) -> None:
    """`llmtap lake sync` of a PostgreSQL store of `rows` exchanges into a fresh warehouse,
    then again after 10,000 of its exchanges changed."""
    database = f"llmtap_lakebench_{rows}"
    admin = make_engine(admin_url).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        if connection.execute(text("SELECT 1 FROM pg_database WHERE datname = :d"), {"d": database}).first() is None:
            connection.execute(text(f'CREATE DATABASE "{database}"'))
    admin.dispose()
    url = make_url(admin_url).set(database=database).render_as_string(hide_password=False)
    engine = make_engine(url)
    upgrade(engine)
    with engine.begin() as connection:
        held = connection.execute(text("SELECT count(*) FROM exchanges")).scalar_one()
        if held != rows:
            connection.execute(text("DELETE FROM tool_calls"))
            connection.execute(text("DELETE FROM exchanges"))
        # the store's lake: a new one each run (a store syncs to one warehouse)
        connection.execute(text("DROP TABLE IF EXISTS iceberg_tables, iceberg_namespace_properties"))
    if held != rows:
        print(f"\nPostgreSQL store of {rows:,} exchanges: generating and inserting", file=sys.stderr)
        fill([engine], rows, Pricer(), days=365)
    with engine.connect() as connection:
        calls = connection.execute(text("SELECT count(*) FROM tool_call_facts")).scalar_one()
    warehouse = folder / "sync-lake"
    first = _time_sync(url, warehouse)
    print(
        f"\nlake sync from PostgreSQL, {rows:,} exchanges + {calls:,} tool calls into a new warehouse: "
        f"{first:.1f} s, {(rows + calls) / first:,.0f} records/s ({rows / first:,.0f} exchanges/s)"
    )
    with engine.begin() as connection:
        connection.execute(text("ANALYZE exchanges"))  # else a nested loop over a million rows
        connection.execute(
            text(
                "UPDATE exchanges SET team = team || '-moved' WHERE id IN "
                "(SELECT id FROM exchanges ORDER BY started_at DESC LIMIT 10000)"
            )
        )
    again = _time_sync(url, warehouse)
    print(f"lake sync again after 10,000 exchanges changed: {again:.1f} s")
    engine.dispose()
    if not keep:
        admin = make_engine(admin_url).execution_options(isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))
        admin.dispose()


def _time_sync(url: str, warehouse: Path) -> float:
    llmtap = str(Path(sys.executable).with_name("llmtap"))
    clock = time.perf_counter()
    subprocess.run([llmtap, "lake", "sync", "--warehouse", str(warehouse), "--db", url], check=True, env=_child_env())
    return time.perf_counter() - clock


def run(sizes: list[int], days: int, seed_rows: int, folder: Path, keep: bool, repeat: int, reports: bool) -> None:
    """Each lake made (or, in a folder a --keep run left, the one there reused) and read."""
    seed: Seed | None = None
    for total in sizes:
        where = folder / f"lake-{total}"
        made = where / "made.json"
        if made.exists():
            lake = Lake(**{**json.loads(made.read_text()), "warehouse": where / "lake"})
            print(f"\n{total:,} exchanges: reusing the lake at {where}", file=sys.stderr)
        else:
            if seed is None:
                print(f"seed: {seed_rows:,} synthetic exchanges", file=sys.stderr)
                (folder / "seed").mkdir(parents=True, exist_ok=True)
                seed = make_seed(folder / "seed", seed_rows)
            shutil.rmtree(where, ignore_errors=True)
            where.mkdir(parents=True)
            print(f"\n{total:,} exchanges: writing the lake at {where}", file=sys.stderr)
            lake = make_lake(where, seed, total, days, workers=2)
            made.write_text(json.dumps({**asdict(lake), "warehouse": str(lake.warehouse)}))
        if reports:
            reads = run_reads(lake)
            print_runs(f"the daily summary's reports over the lake, {total:,} exchanges, and the bare scan", reads)
            runs = run_reports(lake, repeat)
            print_runs(f"every report over the lake, {total:,} exchanges ({lake.size / 1e9:.1f} GB)", runs)
        if not keep:
            shutil.rmtree(where)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="10000000", help="comma-separated lake sizes (default 10000000)")
    parser.add_argument("--days", type=int, default=365, help="days of history, ending today (default 365)")
    parser.add_argument("--seed-rows", type=int, default=SEED_ROWS)
    parser.add_argument("--repeat", type=int, default=1, help="runs of each report, the best kept (default 1)")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()), help="where the lakes go")
    parser.add_argument("--keep", action="store_true", help="keep the lakes and the PostgreSQL store")
    parser.add_argument("--pg", default=DEFAULT_PG, help=f"PostgreSQL admin URL (default {DEFAULT_PG})")
    parser.add_argument("--sync-rows", type=int, default=1_000_000, help="the PostgreSQL store's exchanges")
    parser.add_argument("--no-sync", action="store_true", help="skip the sync throughput")
    parser.add_argument("--no-lake", action="store_true", help="skip the lakes (sync throughput only)")
    parser.add_argument("--no-reports", action="store_true", help="make the lakes only (with --keep: read them later)")
    parser.add_argument(
        "--reuse", type=Path, metavar="FOLDER", help="the folder a --keep run left: its lakes are read again"
    )
    args = parser.parse_args()
    try:
        sizes = [int(s) for s in args.rows.split(",")]
    except ValueError:
        parser.error(f"--rows takes comma-separated numbers, not {args.rows!r}")
    folder = args.reuse or Path(tempfile.mkdtemp(prefix="llmtap-lakebench-", dir=args.dir))
    try:
        if not args.no_lake:
            # a folder --reuse names is the user's: its lakes are never removed
            run(
                sizes,
                args.days,
                args.seed_rows,
                folder,
                args.keep or bool(args.reuse),
                args.repeat,
                not args.no_reports,
            )
        if not args.no_sync:
            if postgres_reachable(args.pg):
                bench_sync(args.pg, args.sync_rows, folder, args.keep)
            else:
                print(f"PostgreSQL at {args.pg} is not reachable: no sync throughput", file=sys.stderr)
    finally:
        if args.keep or args.reuse:
            print(f"kept: {folder}", file=sys.stderr)
        else:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
