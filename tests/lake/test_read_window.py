"""A report with --since/--until over the lake reads only the lake's files of its days
(analytics/lake_views.window): the files of a day outside the window are removed from the
warehouse, and the reports that keep to their window still run and equal the same
reports over the store, while a read that needs every day (the cache report, whose
previous turn may be older; a view read without a window) still goes for the removed
files. The known corpus traffic of tests/analytics spans two days; the lake is made by the
real `lake sync` (read_lake.py).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from llmtap.analytics import lake_daily, reports
from llmtap.analytics.duck import connect
from llmtap.analytics.pricing import Pricer
from llmtap.analytics.reprice import stale_ids
from tests.analytics import traffic
from tests.analytics.conftest import BACKENDS, blank_database, fill
from tests.helpers import llmtap
from tests.lake import matching, read_lake

WINDOWED: list[tuple[str, list[str] | None]] = [
    ("usage", ["team", "day"]),
    ("cost", ["model"]),
    ("finish", None),
    ("errors", ["provider"]),
    ("latency", ["day"]),
    ("cache", ["team", "model"]),
]


@pytest.fixture(params=BACKENDS)
def blank(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with blank_database(request.param, tmp_path) as url:
        yield url


def _remove_day(lake: Path, day: datetime) -> set[str]:
    """Remove the fact tables' files of `day`'s partition (not the summary's); the tables
    that had some."""
    folders = [
        folder
        for table in ("exchanges", "tool_calls")
        for folder in lake.glob(f"llmtap/{table}/data/day={day.date().isoformat()}")
    ]
    for folder in folders:
        shutil.rmtree(folder)
    return {folder.parent.parent.name for folder in folders}


def _windowed(url: str, lake: Path | None, **window: datetime) -> dict[str, object]:
    connection = connect(url, lake=str(lake) if lake else None)
    try:
        found: dict[str, object] = {}
        for kind, by in WINDOWED:
            found[f"{kind} by {by}"] = reports.run(url, kind, by=by, connection=connection, **window).rows
        found["cost footer"] = reports.price_footer(url, connection=connection, **window)
        return found
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("window", "outside"),
    [({"since": traffic.DAY2}, traffic.DAY1), ({"until": traffic.DAY2}, traffic.DAY2)],
    ids=["since", "until"],
)
def test_a_windowed_report_reads_only_the_lake_files_of_its_days(
    blank: str, tmp_path: Path, window: dict[str, datetime], outside: datetime
) -> None:
    known = traffic.build()
    fill(blank, [k.rec for k in known], tmp_path / "spool")
    lake = tmp_path / "lake"
    read_lake.sync(blank, lake)
    over_store = _windowed(blank, None, **window)
    assert all(over_store.values()), "the corpus traffic gives rows in the window"

    assert "exchanges" in _remove_day(lake, outside)
    over_lake = _windowed(blank, lake, **window)
    assert over_lake.keys() == over_store.keys()
    for case, rows in over_store.items():
        if isinstance(rows, list):
            matching.assert_same(over_lake[case], rows, case)  # type: ignore[arg-type]
        else:
            assert over_lake[case] == rows, case

    connection = connect(blank, lake=str(lake))
    try:
        with pytest.raises(duckdb.IOException):  # no window: every day's files are read
            connection.execute("SELECT count(*) FROM exchanges").fetchall()
        # a conversation is billed whole: over the summary, its CONVERSATION rows hold the
        # turns outside the window (no file of rows read) ...
        assert lake_daily.enabled(connection)
        whole = reports.run(blank, "conversations", connection=connection, **window).rows
        assert whole and whole == reports.run(blank, "conversations", **window).rows
        connection.execute(f"SET VARIABLE {lake_daily.ENABLED} = false")
        with pytest.raises(duckdb.IOException):  # ... and over rows, the files before its window are read
            reports.run(blank, "conversations", connection=connection, **window)
        # the window is the report's only: after it, a read takes every day again
        with pytest.raises(duckdb.IOException):
            connection.execute("SELECT count(*) FROM exchanges").fetchall()
    finally:
        connection.close()


def test_the_cli_report_since_a_day_reads_only_its_days(blank: str, tmp_path: Path) -> None:
    known = traffic.build()
    fill(blank, [k.rec for k in known], tmp_path / "spool")
    lake = tmp_path / "lake"
    read_lake.sync(blank, lake)
    since = ["--since", traffic.DAY2.date().isoformat(), "--by", "team,day", "--format", "json", "--db", blank]
    over_store = llmtap("report", "cost", *since)
    assert over_store.code == 0 and over_store.json(), over_store.err

    assert _remove_day(lake, traffic.DAY1) == {"exchanges", "tool_calls"}
    over_lake = llmtap("report", "cost", *since, "--lake", str(lake))
    assert over_lake.code == 0, over_lake.err
    assert over_lake.json() == over_store.json()
    # no window, by hour (which the daily summary cannot answer): every day's files
    everything = llmtap("report", "cost", "--by", "hour", "--db", blank, "--lake", str(lake))
    assert everything.code != 0 and "day=" + traffic.DAY1.date().isoformat() in everything.err
    # by day, the daily summary answers for the day whose rows are gone, and the CLI's
    # catch-up pricing reads the summary to know that no row of that day is stale
    by_day = llmtap("report", "cost", "--by", "day", "--format", "json", "--db", blank, "--lake", str(lake))
    assert by_day.code == 0, by_day.err
    assert traffic.DAY1.date().isoformat() in {row["day"] for row in by_day.json()}


def _models_of_one_day(url: str) -> dict[str, str]:
    """day (ISO) -> a (provider, model) seen on that day only, as a price file entry."""
    connection = connect(url)
    try:
        found = connection.execute(
            "SELECT any_value(CAST(started_at AS DATE)), provider, model FROM exchanges WHERE model IS NOT NULL "
            "GROUP BY provider, model HAVING count(DISTINCT CAST(started_at AS DATE)) = 1 ORDER BY model"
        ).fetchall()
    finally:
        connection.close()
    return {
        day.isoformat(): f'[[price]]\nprovider = "{p}"\nmodel = "{m}"\ninput_mtok = 1\noutput_mtok = 2\n'
        for day, p, m in found
    }


def _stale(url: str, lake: Path, pricer: Pricer, *, summary: bool, **window: datetime) -> list[str]:
    connection = connect(url, lake=str(lake))
    try:
        if not summary:
            connection.execute(f"RESET VARIABLE {lake_daily.ENABLED}")
        assert lake_daily.enabled(connection) == summary  # which of stale_ids' two reads is compared
        with reports.window(connection, "cost", window.get("since"), window.get("until")):
            return stale_ids(connection, pricer)
    finally:
        connection.close()


def test_catch_up_pricing_reads_only_the_days_the_summary_flags(blank: str, tmp_path: Path) -> None:
    """stale_ids over a lake with a current summary equals the same rule read over every
    row (each pricer, each window, with a store tail), and reads the lake files of only
    the days whose summary rows hold a stale row."""
    known = traffic.build()
    fill(blank, [k.rec for k in known[:-3]], tmp_path / "spool")
    lake = tmp_path / "lake"
    read_lake.sync(blank, lake)
    one_day = _models_of_one_day(blank)  # of the lake's rows
    fill(blank, [k.rec for k in known[-3:]], tmp_path / "spool")  # the store's tail
    day1 = traffic.DAY1.date().isoformat()
    assert day1 in one_day, "the traffic has a model of day 1 alone"
    named = tmp_path / "day1.toml"
    named.write_text(one_day[day1])
    everything = tmp_path / "all.toml"
    everything.write_text(
        "".join(
            f'[[price]]\nmodel = "{prefix}*"\ninput_mtok = 1\noutput_mtok = 1\n'
            for prefix in ("gpt-", "claude-", "gemini-")
        )
    )
    pricers = [Pricer(), Pricer(named), Pricer(everything)]
    windows: list[dict[str, datetime]] = [{}, {"since": traffic.DAY2}, {"until": traffic.DAY2}]
    flagged = 0
    for pricer in pricers:
        for window in windows:
            by_rows = _stale(blank, lake, pricer, summary=False, **window)
            assert _stale(blank, lake, pricer, summary=True, **window) == by_rows, (pricer.file_version, window)
            flagged += bool(by_rows)
    assert flagged >= 4, "the pricers name stale rows"

    assert "exchanges" in _remove_day(lake, traffic.DAY1)
    assert _stale(blank, lake, Pricer(), summary=True) == []  # nothing stale: no day's files read
    assert _stale(blank, lake, Pricer(everything), summary=True, since=traffic.DAY2)  # day 2's files alone
    with pytest.raises(duckdb.IOException, match="day=" + day1):
        _stale(blank, lake, Pricer(named), summary=True)
    assert _stale(blank, lake, Pricer(named), summary=True, since=traffic.DAY2) == []
