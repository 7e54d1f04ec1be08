"""The lake's daily summary as `lake sync` keeps it (lake/daily.py) equals the summary made
from scratch from the lake's rows (analytics/lake_daily.summarize over every day), after
each of several syncs with new rows, changed rows (a reprice's costs, a moved team, new
timings and statuses), deleted rows and a prune between them (seeded random: the same
runs each time); a lake made before the summary gains it at its next sync; and the
reports' latency percentiles read off it are within its stated bound of the exact ones
(random timings over six orders of magnitude, zeros included), grouped every way.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select, text

from llmtap.analytics import lake_daily, reports
from llmtap.analytics.duck import connect
from llmtap.lake import daily
from llmtap.lake.catalog import open_catalog
from llmtap.lake.schema import DAILY, EXCHANGES, TOOL_CALLS
from llmtap.lake.sync import sync
from llmtap.protocols.vocabulary import TOOL_PROBLEMS, TOOL_STATUSES
from llmtap.storage import schema
from llmtap.storage.engine import make_engine
from llmtap.storage.maintenance import prune
from llmtap.storage.migrate import upgrade
from llmtap.storage.writer import Writer
from tests.lake import matching
from tests.storage.helpers import T0, make_record

TEAMS = ("red", "green", "blue")
STATUSES = (200, 200, 200, 429, 500, 529)


@pytest.fixture
def store(tmp_path: Path, llmtap_home: Path) -> Iterator[tuple[str, Engine]]:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = make_engine(url)
    upgrade(engine)
    yield url, engine
    engine.dispose()


def _write(engine: Engine, spool: Path, rng: random.Random, start: int, n: int) -> list[str]:
    writer = Writer(engine, spool_dir=spool, body_mode="metadata", max_delay=0.01)
    for i in range(start, start + n):
        moment = T0 + timedelta(days=rng.randrange(6), hours=rng.randrange(24), minutes=rng.randrange(60))
        writer.submit(make_record(i, prefix=f"P{start}", started_at=moment))
    assert writer.close()
    with engine.begin() as connection:
        ids = [row[0] for row in connection.execute(text("SELECT id FROM exchanges ORDER BY id"))]
    _change(engine, rng, ids, len(ids))
    return ids


def _change(engine: Engine, rng: random.Random, ids: list[str], n: int) -> None:
    """New teams, statuses, costs, timings and cache verdicts on `n` of the rows: what
    reprices and reprocessing write."""
    with engine.begin() as connection:
        for exchange_id in rng.sample(ids, min(n, len(ids))):
            connection.execute(
                text(
                    "UPDATE exchanges SET team = :team, status = :status, cost_total_pico = :cost, "
                    "cost_input_pico = :cost, ttfb_ms = :ttfb, ttft_ms = :ttft, duration_ms = :total, "
                    "retry_after_s = :retry, cache_verdict = :verdict, cache_missed_tokens = :missed, "
                    "rate_input_pico = :rate WHERE id = :id"
                ),
                {
                    "id": exchange_id,
                    "team": rng.choice(TEAMS),
                    "status": rng.choice(STATUSES),
                    "cost": rng.choice([None, rng.randrange(10**9)]),
                    "ttfb": _timing(rng),
                    "ttft": _timing(rng),
                    "total": _timing(rng),
                    "retry": rng.choice([None, None, float(rng.randrange(1, 60))]),
                    # the cache verdicts as a reprocess may store them, priced or not
                    "verdict": rng.choice([None, "first", "hit", "miss", "miss", "not_cacheable"]),
                    "missed": rng.randrange(5000),
                    "rate": rng.choice([None, rng.randrange(1, 5000)]),
                },
            )
            # its tool calls decided again and the conversation's problems with them, as a
            # reprocess writes them (a call changes only with its exchange)
            connection.execute(
                text("UPDATE tool_calls SET status = :status WHERE exchange_id = :id"),
                {"id": exchange_id, "status": rng.choice(TOOL_STATUSES)},
            )
            problems = [
                {"status": rng.choice(TOOL_PROBLEMS), "call_id": f"toolu_{rng.randrange(99)}", "tool": "get_weather"}
                for _ in range(rng.choice([0, 0, 1, 2, 3]))
            ]
            connection.execute(
                text("UPDATE exchanges SET tool_problems = :problems WHERE id = :id"),
                {"id": exchange_id, "problems": json.dumps(problems) if problems or rng.random() < 0.5 else None},
            )


def _timing(rng: random.Random) -> float | None:
    roll = rng.random()
    if roll < 0.1:
        return None
    if roll < 0.15:
        return 0.0
    return 10 ** rng.uniform(-1, 5)


_KEYS = {*dict(lake_daily.GROUPS), lake_daily.GRAIN, "conversation_id"}


def _rows(table: Any) -> list[dict[str, Any]]:
    rows = table.to_pylist()
    return sorted(rows, key=lambda r: [(v is None, str(v)) for k, v in r.items() if k in _KEYS])


def _of_grain(table: Any, grain: str) -> Any:
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    return table.filter(pc.equal(table.column(lake_daily.GRAIN), grain))


def _team_sums_equal(every: Any, team: Any) -> None:
    """The TEAM grain's rows are the ALL grain's summed again by TEAM_GROUPS: each count
    and cost is the same sum, and no more rows hold it."""
    assert 0 < team.num_rows <= every.num_rows
    keys = lake_daily.TEAM_GROUPS
    counted = [name for name, kind in lake_daily.MEASURES if kind in ("BIGINT", "DECIMAL(38,0)")]
    for table in (every, team):
        assert set(table.column_names) >= {*keys, *counted}
    sums: dict[tuple[Any, ...], list[Any]] = {}
    for row in every.to_pylist():
        entry = sums.setdefault(tuple(row[k] for k in keys), [None] * len(counted))
        for i, name in enumerate(counted):
            if row[name] is not None:
                entry[i] = row[name] if entry[i] is None else entry[i] + row[name]
    assert {tuple(row[k] for k in keys): [row[n] for n in counted] for row in team.to_pylist()} == sums


def _conversation_sums_equal(conversations: Any, rows: list[dict[str, Any]]) -> None:
    """The CONVERSATION grain's rows, summed by conversation, count each conversation's
    exchanges and their cost, as the lake's rows do."""
    want: dict[Any, list[Any]] = {}
    for row in rows:
        entry = want.setdefault(row["conversation_id"], [0, None])
        entry[0] += 1
        if row["cost_total_pico"] is not None:
            entry[1] = (entry[1] or 0) + row["cost_total_pico"]
    got: dict[Any, list[Any]] = {}
    for row in conversations.to_pylist():
        assert row["first_started_at"] is not None and row["last_ended_at"] >= row["first_started_at"]
        entry = got.setdefault(row["conversation_id"], [0, None])
        entry[0] += row["requests"]
        if row["cost_total_pico"] is not None:
            entry[1] = (entry[1] or 0) + row["cost_total_pico"]
    assert len(want) > 1 and got == want


def _kept_equals_scratch(url: str, lake: Path) -> int:
    catalog = open_catalog(url, str(lake))
    try:
        exchanges, calls = catalog.load_table(EXCHANGES), catalog.load_table(TOOL_CALLS)
        summary = catalog.load_table(DAILY)
        current, called = exchanges.current_snapshot(), calls.current_snapshot()
        assert current is not None and daily.summarized(summary) == current.snapshot_id
        assert called is not None and daily.summarized(summary, lake_daily.SUMMARIZED_TOOL_CALLS) == called.snapshot_id
        assert daily.shaped(summary)
        both = summary.scan().to_arrow()
        scratch = lake_daily.summarize(exchanges.metadata_location, calls.metadata_location, str(lake), None)
        assert _rows(both) == _rows(scratch)
        kept = _of_grain(both, lake_daily.ALL)
        _team_sums_equal(kept, _of_grain(both, lake_daily.TEAM))
        rows = exchanges.scan(selected_fields=("id", "conversation_id", "cost_total_pico")).to_arrow().to_pylist()
        ids = {row["id"] for row in rows}
        assert sum(kept.column("requests").to_pylist()) == len(ids)
        _conversation_sums_equal(_of_grain(both, lake_daily.CONVERSATION), rows)
        held = calls.scan(selected_fields=("exchange_id", "status")).to_arrow().to_pylist()
        # every call of a summarized exchange, by status
        assert sum(kept.column("tool_calls").to_pylist()) == sum(1 for c in held if c["exchange_id"] in ids) > 0
        for status in TOOL_STATUSES:
            assert sum(kept.column(status).to_pylist()) == sum(
                1 for c in held if c["exchange_id"] in ids and c["status"] == status
            )
        return both.num_rows
    finally:
        catalog.engine.dispose()


def _sync(url: str, engine: Engine, lake: Path) -> None:
    catalog = open_catalog(url, str(lake))
    try:
        sync(engine, catalog)
    finally:
        catalog.engine.dispose()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_kept_summary_is_the_summary_from_scratch_after_every_sync(
    store: tuple[str, Engine], tmp_path: Path, seed: int
) -> None:
    url, engine = store
    rng = random.Random(seed)
    lake = tmp_path / "lake"
    ids = _write(engine, tmp_path / "spool0", rng, 0, 60)
    _sync(url, engine, lake)
    assert _kept_equals_scratch(url, lake) > 0
    for step in range(1, 5):
        ids = _write(engine, tmp_path / f"spool{step}", rng, step * 1000, rng.randrange(5, 30))
        _change(engine, rng, ids, rng.randrange(1, 15))  # synced rows change
        with engine.begin() as connection:
            for exchange_id in rng.sample(ids, 3):  # and some go
                connection.execute(text("DELETE FROM exchanges WHERE id = :id"), {"id": exchange_id})
        if step == 3:
            assert prune(engine, T0 + timedelta(days=1))[0] > 0  # a retention prune: the first day goes
        _sync(url, engine, lake)
        _kept_equals_scratch(url, lake)
    _sync(url, engine, lake)  # nothing changed: the summary stays as it is
    _kept_equals_scratch(url, lake)


def test_a_lake_made_before_the_summary_gains_it_at_its_next_sync(store: tuple[str, Engine], tmp_path: Path) -> None:
    url, engine = store
    lake = tmp_path / "lake"
    _write(engine, tmp_path / "spool", random.Random(7), 0, 40)
    _sync(url, engine, lake)
    catalog = open_catalog(url, str(lake))
    try:
        catalog.drop_table(DAILY)  # as a lake synced before the summary existed
    finally:
        catalog.engine.dispose()
    connection = connect(url, lake=str(lake))
    try:  # without it the reports read rows, and say the same
        assert not lake_daily.answers(connection, "usage", ["team"], "UTC", False)
        assert reports.run(url, "usage", connection=connection).rows == reports.run(url, "usage").rows
    finally:
        connection.close()
    _sync(url, engine, lake)
    assert _kept_equals_scratch(url, lake) > 0


BY = [
    None,
    ["team"],
    ["day", "model"],
    ["team", "provider", "status", "tier", "key", "protocol"],
    ["status"],
]


def test_reports_over_the_summary_equal_the_rows_and_percentiles_keep_their_bound(
    store: tuple[str, Engine], tmp_path: Path
) -> None:
    url, engine = store
    rng = random.Random(11)
    lake = tmp_path / "lake"
    ids = _write(engine, tmp_path / "spool", rng, 0, 300)
    _sync(url, engine, lake)
    _write(engine, tmp_path / "spool2", rng, 5000, 20)  # and a tail
    _change(engine, rng, ids, 10)
    middle = T0 + timedelta(days=2, hours=7, minutes=13)
    connection = connect(url, lake=str(lake))
    try:
        checked = 0
        misses = calls = problems = 0
        for kind in ("usage", "cost", "finish", "errors", "latency", "cache", "tools"):
            for by in BY:
                if by is not None and not set(by) <= set(reports.REPORTS[kind].dimensions):
                    continue
                for window in ({}, {"since": middle}, {"until": middle}, {"since": T0, "until": middle}):
                    assert lake_daily.answers(connection, kind, by or [], "UTC", False)
                    got = reports.run(url, kind, by=by, connection=connection, **window).rows  # type: ignore[arg-type]
                    want = reports.run(url, kind, by=by, **window).rows  # type: ignore[arg-type]
                    assert got, (kind, by, window)
                    matching.assert_same(got, want, (kind, by, window))
                    if kind == "latency":
                        checked += sum(1 for row in want for name in matching.PERCENTILES if row[name] is not None)
                    if kind == "cache":
                        misses += sum(row["misses"] for row in want)
                    if kind == "tools":
                        calls += sum(row[status] for row in want for status in TOOL_STATUSES)
                        problems += sum(row[problem] for row in want for problem in TOOL_PROBLEMS)
        assert checked > 100  # percentiles were compared, not only empty groups
        assert misses > 0  # the cache verdicts were compared, not only zeros
        assert calls > 0 and problems > 0  # and the tool calls and problems
        for window in ({}, {"since": middle}):
            footer = reports.price_footer(url, connection=connection, **window)  # type: ignore[arg-type]
            assert footer == reports.price_footer(url, **window)  # type: ignore[arg-type]
    finally:
        connection.close()


def test_a_percentile_off_the_histogram_is_within_the_bound_of_the_exact_one() -> None:
    """latency_daily.sql's percentiles against DuckDB's quantile_cont over the same values,
    bucketed by the summary's own SQL (sql/lake_daily.sql) and merged from several summary
    rows: the relative error never passes RELATIVE_ERROR (about 4.43%)."""
    import duckdb

    rng = random.Random(5)
    connection = duckdb.connect()
    query = reports.build(reports.REPORTS["latency"], [], source="latency_daily")
    try:
        worst = 0.0
        for _ in range(40):
            values = [
                rng.choice([0.0, 10 ** rng.uniform(-2, 6), rng.uniform(1, 3)]) for _ in range(rng.randrange(1, 400))
            ]
            connection.execute(
                "CREATE OR REPLACE TABLE exchanges AS SELECT x AS ttfb_ms, x AS ttft_ms, x AS duration_ms, "
                "CAST(i % 3 AS VARCHAR) AS team, 200 AS status, false AS warmup, "
                "CAST(NULL AS VARCHAR) AS background_state "
                "FROM (SELECT unnest(?::DOUBLE[]) AS x, unnest(range(?)) AS i)",
                [values, len(values)],
            )
            connection.execute(  # one summary row a team: the report merges their histograms
                "CREATE OR REPLACE TABLE daily_rows AS SELECT count(*) FILTER (WHERE timed) AS latency_requests, "
                f"{lake_daily._histogram('ttfb_ms')} AS ttfb_hist, {lake_daily._histogram('ttft_ms')} AS ttft_hist, "
                f"{lake_daily._histogram('duration_ms')} AS total_hist "
                "FROM (SELECT *, true AS timed FROM exchanges) GROUP BY team"
            )
            found = connection.execute(query).fetchone()
            exact = connection.execute("SELECT quantile_cont(ttfb_ms, [0.5, 0.95]) FROM exchanges").fetchone()[0]
            assert found is not None and found[0] == len(values)
            for got, want in ((found[1], exact[0]), (found[2], exact[1]), (found[5], exact[0]), (found[6], exact[1])):
                assert matching.close(got, round(want, 1)), (got, want)
                if want > 100:  # where the rounding (0.05 ms) is under 0.05%
                    worst = max(worst, abs(got - want) / want)
        assert 0.02 < worst <= lake_daily.RELATIVE_ERROR + 0.001  # near the bound, and within it
    finally:
        connection.close()


def _write_on(engine: Engine, spool: Path, start: int, n: int, day: int) -> None:
    """`n` new exchanges on day `day` (from T0), every third with a tool call."""
    writer = Writer(engine, spool_dir=spool, body_mode="metadata", max_delay=0.01)
    for i in range(start, start + n):
        writer.submit(make_record(i, prefix=f"D{start}", started_at=T0 + timedelta(days=day, minutes=7 * i % 1400)))
    assert writer.close()


def _called(engine: Engine) -> list[str]:
    with engine.begin() as connection:
        return sorted({str(r[0]) for r in connection.execute(text("SELECT exchange_id FROM tool_calls"))})


def _same_reports(url: str, connection: Any, kinds: Any, summary: bool) -> None:
    """Each report `kinds` over the lake (its summary, or rows) equals it over the store."""
    assert lake_daily.answers(connection, "usage", ["team"], "UTC", False) is summary
    for kind in kinds:
        for by in [["team"], ["team", "day"], ["day", "model"], ["provider", "key", "protocol", "tier", "day"]]:
            got = reports.run(url, kind, by=by, connection=connection).rows
            if summary:  # by team and day, what the team grain's rows hold (and none of the others)
                grain = lake_daily.grain_for(kind, by)
                assert grain == (
                    lake_daily.TEAM if kind != "latency" and len(by) <= 2 and "model" not in by else lake_daily.ALL
                )
                view = lake_daily.grain_rows(grain)
                if connection.execute("SELECT count(*) FROM daily_parts").fetchone() == (0,):  # no tail
                    held = connection.execute(f"SELECT count(*) FROM {view}").fetchone()
                    assert connection.execute("SELECT count(*) FROM daily_rows").fetchone() == held
            want = reports.run(url, kind, by=by).rows
            assert got, (kind, by)
            matching.assert_same(got, want, (kind, by))


def test_tools_over_the_summary_equal_the_rows_with_a_tail_of_its_own_days(
    store: tuple[str, Engine], tmp_path: Path
) -> None:
    """The summary answers the days the tail leaves alone; a day of the tail (new rows with
    calls, a reprocess's new statuses and problems), a day only the tail holds (its calls
    only there) and the day of a deleted exchange are read as rows."""
    url, engine = store
    rng = random.Random(17)
    lake = tmp_path / "lake"
    ids = _write(engine, tmp_path / "spool", rng, 0, 200)
    _sync(url, engine, lake)
    _kept_equals_scratch(url, lake)
    _write_on(engine, tmp_path / "spool2", 6000, 12, 4)  # a day the lake holds too
    _write_on(engine, tmp_path / "spool3", 7000, 12, 6)  # a day the lake does not hold
    with engine.begin() as connection:
        e, t = schema.exchanges, schema.tool_calls
        on_day4 = sorted(
            {
                str(found)
                for (found,) in connection.execute(
                    select(e.c.id)
                    .join(t, t.c.exchange_id == e.c.id)
                    .where(e.c.started_at >= T0 + timedelta(days=4), e.c.started_at < T0 + timedelta(days=5))
                )
            }
        )
        assert on_day4
        connection.execute(text("DELETE FROM exchanges WHERE id = :id"), {"id": sorted(set(ids) - set(on_day4))[0]})
    _change(engine, rng, on_day4, len(on_day4))  # the tail's rows: new statuses and problems
    connection = connect(url, lake=str(lake))
    try:
        chosen = lake_daily.plan(connection, None, None)
        assert 2 <= len(chosen.dirty) < 6  # some days from the summary, some as rows
        _same_reports(url, connection, sorted(lake_daily.REPORTS), summary=True)
        totals = reports.run(url, "tools", by=["day"], connection=connection).rows
        assert any(row["day"] == (T0 + timedelta(days=6)).date().isoformat() and row["tool_calls"] for row in totals)
        assert sum(row[p] for row in totals for p in TOOL_PROBLEMS) > 0
    finally:
        connection.close()


def test_a_summary_older_than_the_tool_calls_is_not_read_and_the_next_sync_catches_up(
    store: tuple[str, Engine], tmp_path: Path
) -> None:
    """The summary made after the exchanges' commit and before the tool calls' (a sync's
    tables commit apart): it names the older tool_calls snapshot, so reports read rows;
    the next sync makes again the days whose calls changed, though no exchange did."""
    from llmtap.lake import sync as syncing
    from llmtap.lake.catalog import ensure_tables

    url, engine = store
    rng = random.Random(19)
    lake = tmp_path / "lake"
    _write(engine, tmp_path / "spool", rng, 0, 90)
    _sync(url, engine, lake)
    _change(engine, rng, _called(engine), 20)  # a reprocess decides calls again
    catalog = open_catalog(url, str(lake))
    try:
        tables = ensure_tables(catalog)
        syncing._sync_table(engine, tables[EXCHANGES], syncing._EXCHANGES, syncing.CHUNK, None)
        assert daily.keep(catalog, tables[EXCHANGES], tables[TOOL_CALLS], tables[DAILY])[2] == 1
        syncing._sync_table(engine, tables[TOOL_CALLS], syncing._TOOL_CALLS, syncing.CHUNK, None)
    finally:
        catalog.engine.dispose()
    connection = connect(url, lake=str(lake))
    try:
        assert connection.execute("SELECT count(*) FROM lake_tail_tool_calls").fetchone() == (0,)
        _same_reports(url, connection, ["tools", "usage"], summary=False)
    finally:
        connection.close()
    _sync(url, engine, lake)  # nothing to copy: only the summary catches up
    _kept_equals_scratch(url, lake)
    connection = connect(url, lake=str(lake))
    try:
        _same_reports(url, connection, ["tools", "usage"], summary=True)
    finally:
        connection.close()


def test_a_summary_of_an_older_shape_is_read_as_rows_and_the_next_sync_makes_it_whole(
    store: tuple[str, Engine], tmp_path: Path
) -> None:
    """A summary an older llmtap made, before its tool columns and grains (so named the
    current snapshots but no shape, a file a day): the reports read rows and say the same;
    the next sync adds the columns (NULL in the old rows) and makes every row again."""
    url, engine = store
    lake = tmp_path / "lake"
    _write(engine, tmp_path / "spool", random.Random(23), 0, 90)
    _sync(url, engine, lake)
    added = {"tool_calls", *TOOL_STATUSES, *TOOL_PROBLEMS, lake_daily.GRAIN}
    rows = _plant_an_older_summary(url, lake, without=added, shaped=False)
    _reports_over(url, lake, summary=False)
    _sync(url, engine, lake)
    assert _kept_equals_scratch(url, lake) == rows
    _reports_over(url, lake, summary=True)


def _plant_an_older_summary(url: str, lake: Path, *, without: set[str], shaped: bool) -> int:
    """Replace the lake's summary with one an older llmtap made of the current snapshots:
    a file a day, without the columns `without` (and the rows of the grains they held),
    named of today's shape or of none; returns how many rows today's would hold."""
    from pyiceberg.schema import Schema

    from llmtap.lake.catalog import TABLE_PROPERTIES
    from llmtap.lake.schema import DAILY_SCHEMA

    catalog = open_catalog(url, str(lake))
    try:
        exchanges, calls = catalog.load_table(EXCHANGES), catalog.load_table(TOOL_CALLS)
        rows = lake_daily.summarize(exchanges.metadata_location, calls.metadata_location, str(lake), None)
        catalog.drop_table(DAILY)
        old = Schema(*(field for field in DAILY_SCHEMA.fields if field.name not in without))
        table = catalog.create_table(DAILY, old, partition_spec=_by_day(old), properties=TABLE_PROPERTIES)
        current, called = exchanges.current_snapshot(), calls.current_snapshot()
        assert current is not None and called is not None
        named = {
            lake_daily.SUMMARIZED: str(current.snapshot_id),
            lake_daily.SUMMARIZED_TOOL_CALLS: str(called.snapshot_id),
        } | ({lake_daily.SHAPED: lake_daily.SHAPE} if shaped else {})
        held = rows if lake_daily.GRAIN not in without else _of_grain(rows, lake_daily.ALL)
        arrow = table.schema().as_arrow()
        table.append(held.select(arrow.names).cast(arrow), snapshot_properties=named)
        assert len(table.inspect.files()) == len(set(rows.column("day").to_pylist())) > 2
        assert not daily.laid_out(table)
        return int(rows.num_rows)
    finally:
        catalog.engine.dispose()


def _reports_over(url: str, lake: Path, *, summary: bool) -> None:
    connection = connect(url, lake=str(lake))
    try:
        _same_reports(url, connection, sorted(lake_daily.REPORTS), summary=summary)
    finally:
        connection.close()


def _by_day(table_schema: Any) -> Any:
    """The summary's partitions before they were by month: a file a day."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    return PartitionSpec(PartitionField(table_schema.find_field("day").field_id, 1000, IdentityTransform(), name="day"))


def _files_by_month(url: str, lake: Path) -> dict[tuple[int, int], tuple[str, ...]]:
    """The summary's data files by month: one of each grain (asserted), in grain order."""
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    catalog = open_catalog(url, str(lake))
    try:
        paths = catalog.load_table(DAILY).inspect.files().column("file_path").to_pylist()
    finally:
        catalog.engine.dispose()
    found: dict[tuple[int, int], dict[str, str]] = {}
    for path in paths:
        rows = pq.read_table(path.removeprefix("file://"), columns=["day", lake_daily.GRAIN]).to_pylist()
        held = {((r["day"].year, r["day"].month), r[lake_daily.GRAIN]) for r in rows}
        assert len(held) == 1, f"{path} holds the rows of {sorted(held)}"
        ((month, grain),) = held
        assert grain not in found.get(month, {}), f"two files of {month}, {grain}"
        found.setdefault(month, {})[grain] = path
    grains = {lake_daily.ALL, lake_daily.TEAM, lake_daily.CONVERSATION}
    assert all(set(files) == grains for files in found.values()), found
    return {month: tuple(files[g] for g in sorted(files)) for month, files in found.items()}


def _write_around_a_month_end(engine: Engine, spool: Path, rng: random.Random, start: int, n: int, days: int) -> None:
    """`n` rows from 4 days before T0's month starts, over `days` days (into the next month)."""
    first = T0.replace(day=1, hour=0) - timedelta(days=4)
    writer = Writer(engine, spool_dir=spool, body_mode="metadata", max_delay=0.01)
    for i in range(start, start + n):
        moment = first + timedelta(days=rng.randrange(days), hours=rng.randrange(24), minutes=rng.randrange(60))
        writer.submit(make_record(i, prefix=f"M{start}", started_at=moment))
    assert writer.close()


def test_the_summary_keeps_a_file_a_month_and_a_sync_makes_again_only_the_months_it_touched(
    store: tuple[str, Engine], tmp_path: Path
) -> None:
    """A month is one file (a year is 12 files to open, not 365); a sync whose rows are
    all of one month writes that month's file again, from its kept days and its changed
    ones, and leaves the other month's file as it was."""
    url, engine = store
    rng = random.Random(31)
    lake = tmp_path / "lake"
    _write_around_a_month_end(engine, tmp_path / "spool0", rng, 0, 60, 8)
    _sync(url, engine, lake)
    assert _kept_equals_scratch(url, lake) > 0
    before = _files_by_month(url, lake)
    earlier, later = (T0.year, T0.month - 1), (T0.year, T0.month)
    assert set(before) == {earlier, later}
    _write_around_a_month_end(engine, tmp_path / "spool1", rng, 1000, 8, 3)  # the earlier month's last days only
    _sync(url, engine, lake)
    _kept_equals_scratch(url, lake)
    after = _files_by_month(url, lake)
    assert after[later] == before[later] and after[earlier] != before[earlier]
    with engine.begin() as connection:  # a later-month row changes: the earlier month's file stays
        table = schema.exchanges
        changed = connection.execute(
            table.update().where(table.c.started_at >= T0.replace(day=1, hour=0)).values(team="moved")
        ).rowcount
    assert changed > 0
    _sync(url, engine, lake)
    _kept_equals_scratch(url, lake)
    last = _files_by_month(url, lake)
    assert last[earlier] == after[earlier] and last[later] != after[later]


def test_a_summary_of_a_file_a_day_is_laid_out_by_month_at_the_next_sync(
    store: tuple[str, Engine], tmp_path: Path
) -> None:
    """A summary partitioned by day (an older llmtap's, current and of today's shape): the
    reports read it; the next sync partitions it by month and makes it again whole."""
    url, engine = store
    lake = tmp_path / "lake"
    _write_around_a_month_end(engine, tmp_path / "spool", random.Random(37), 0, 50, 8)
    _sync(url, engine, lake)
    rows = _plant_an_older_summary(url, lake, without=set(), shaped=True)
    _reports_over(url, lake, summary=True)
    _sync(url, engine, lake)
    assert _kept_equals_scratch(url, lake) == rows
    assert len(_files_by_month(url, lake)) == 2
    catalog = open_catalog(url, str(lake))
    try:
        assert daily.laid_out(catalog.load_table(DAILY))
    finally:
        catalog.engine.dispose()
    _reports_over(url, lake, summary=True)


def test_conversations_over_the_summary_equal_the_rows_with_a_tail_deletions_and_partial_days(
    store: tuple[str, Engine], tmp_path: Path
) -> None:
    """report conversations over the summary's CONVERSATION grain (lake_daily.
    gather_conversations) equals it over the store, row for row and in order: with a tail
    of new and changed rows, rows deleted since the sync, and windows that cut days (a
    conversation's turns outside the window still count: it is billed whole)."""
    url, engine = store
    rng = random.Random(41)
    lake = tmp_path / "lake"
    ids = _write(engine, tmp_path / "spool", rng, 0, 200)
    ids += _write(engine, tmp_path / "spool1", rng, 1000, 60)  # a second conversation prefix
    with engine.begin() as connection:  # rows of no conversation (as an llmtap before stored verdicts left them)
        for exchange_id in rng.sample(ids, 4):
            connection.execute(text("UPDATE exchanges SET conversation_id = NULL WHERE id = :id"), {"id": exchange_id})
    _sync(url, engine, lake)
    _write_on(engine, tmp_path / "spool2", 5000, 15, 2)  # a tail, on the third day
    with engine.begin() as connection:  # the rows of the second and fifth days, synced
        day = "CAST(strftime('%d', started_at) AS INTEGER) - CAST(strftime('%d', :t0) AS INTEGER)"
        found = connection.execute(text(f"SELECT id, {day} FROM exchanges"), {"t0": T0.isoformat()}).fetchall()
    second, fifth = ([i for i, d in found if d == n] for n in (1, 4))
    _change(engine, rng, second, 5)  # some changed
    with engine.begin() as connection:
        for exchange_id in rng.sample(fifth, 3):  # and some deleted: tombstones since the watermark
            connection.execute(text("DELETE FROM exchanges WHERE id = :id"), {"id": exchange_id})
    middle = T0 + timedelta(days=2, hours=7, minutes=13)
    windows: list[dict[str, Any]] = [
        {},
        {"since": middle},
        {"until": middle},
        {"since": T0 + timedelta(days=1), "until": middle},
        {"since": middle, "until": middle + timedelta(hours=3)},  # within a day
        {"since": T0 + timedelta(days=3), "until": T0 + timedelta(days=5)},  # whole days only
    ]
    connection = connect(url, lake=str(lake))
    try:
        assert lake_daily.enabled(connection)
        assert connection.execute("SELECT 1 FROM lake_gone_keys LIMIT 1").fetchone() is not None
        counts = set()
        for window in windows:
            for top in (3, 10_000):
                got = reports.run(url, "conversations", connection=connection, top=top, **window).rows
                # read off the summary: its rows are the view's, not a scan of the lake's rows
                parts = connection.execute("SELECT count(*) FROM conversation_parts").fetchone()
                summarized = connection.execute(f"SELECT count(*) FROM {lake_daily.CONVERSATION_ROWS}").fetchone()
                assert parts is not None and summarized is not None and summarized[0] > parts[0] > 0
                want = reports.run(url, "conversations", top=top, **window).rows
                assert got == want, (window, top)
                counts.add(len(want))
        assert len(counts) > 2 and max(counts) > 3  # windows that keep different conversations
        # the view held each kind of conversation row its SQL sorts apart
        kinds = connection.execute(
            f"SELECT count(*) FILTER (WHERE opens), count(*) FILTER (WHERE NOT opens), "
            f"count(*) FILTER (WHERE conversation_id IS NULL) FROM {lake_daily.CONVERSATION_ROWS}"
        ).fetchone()
        assert kinds is not None and min(kinds) > 0, kinds
    finally:
        connection.close()


def test_the_summarizer_keeps_to_the_reports_memory_bound_and_spills_past_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rebuild's aggregates are bounded as a report's are (duck.memory_settings): a
    month of 100M rows held 2.8 GB with DuckDB's own default (80% of the machine)."""
    monkeypatch.setenv("LLMTAP_DUCKDB_MEMORY", "77MB")
    with lake_daily.Summarizer("unused.metadata.json", None, str(tmp_path)) as summarizer:
        found = summarizer._connection.execute(
            "SELECT current_setting('memory_limit'), current_setting('temp_directory')"
        ).fetchone()
    assert found is not None
    limit, spill = found
    assert limit == "73.4 MiB" and "llmtap-duckdb-" in spill, found
