"""Reports over the lake (`llmtap report … --lake WAREHOUSE`, analytics/lake_views.py) equal
the same reports over the store, row for row, for the known corpus traffic of
tests/analytics: with everything synced (every row read from the Iceberg tables), and with
a tail (half synced, then more rows, a reprice, a changed team and a deletion in the store
only). The lake is made by the real `lake sync` (read_lake.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from llmtap.analytics import reports
from llmtap.analytics.duck import connect
from llmtap.analytics.pricing import Pricer
from llmtap.analytics.reprice import reprice
from llmtap.storage.engine import make_engine
from tests.analytics import traffic
from tests.analytics.conftest import BACKENDS, blank_database, fill
from tests.helpers import llmtap
from tests.lake import matching, read_lake

# every report, grouped every way the reports take (and the two single-item lists)
CASES: list[tuple[str, list[str] | None, bool]] = [
    *((kind, None, False) for kind in ("usage", "cost", "cache", "finish", "tools", "errors", "latency")),
    *((kind, ["day", "model"], False) for kind in ("usage", "cost", "cache", "finish", "tools", "errors", "latency")),
    ("usage", ["hour", "key", "protocol", "tier"], False),
    ("errors", ["team", "provider", "tier"], False),
    ("cost", ["provider", "key"], False),
    ("conversations", None, False),
    ("cache", None, True),
    ("tools", None, True),
]


@pytest.fixture(params=BACKENDS)
def blank(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with blank_database(request.param, tmp_path) as url:
        yield url


def _all(url: str, lake: Path | None, cached: bool = True) -> dict[str, list[dict[str, Any]]]:
    connection = connect(url, lake=str(lake) if lake else None, cached=cached)
    try:
        found = {}
        for kind, by, listing in CASES:
            table = reports.run(url, kind, by=by, listing=listing, connection=connection, top=1000)
            found[f"{kind} by {by} list {listing}"] = table.rows
        return found
    finally:
        connection.close()


def _parts(url: str, lake: Path) -> dict[str, int]:
    """How many rows each view reads from the store's tail, and in all."""
    connection = connect(url, lake=str(lake))
    try:
        counts = {}
        for view in ("exchanges", "tool_calls"):
            counts[view] = connection.execute(f"SELECT count(*) FROM {view}").fetchone()[0]
            counts[f"{view} tail"] = connection.execute(f"SELECT count(*) FROM lake_tail_{view}").fetchone()[0]
        return counts
    finally:
        connection.close()


def _assert_equal(url: str, lake: Path, cached: bool = True) -> None:
    """On SQLite, `cached`: the store's tail from its facts copy, else from the store."""
    over_store, over_lake = _all(url, None), _all(url, lake, cached)
    assert over_store.keys() == over_lake.keys()
    for case, rows in over_store.items():
        assert rows, f"{case}: the corpus traffic gives rows"
        matching.assert_same(over_lake[case], rows, case)


def test_everything_synced_reads_the_lake_alone_and_equals_the_store(blank: str, tmp_path: Path) -> None:
    known = traffic.build()
    fill(blank, [k.rec for k in known], tmp_path / "spool")
    read_lake.sync(blank, tmp_path / "lake")

    parts = _parts(blank, tmp_path / "lake")
    assert parts == {
        "exchanges": len(known),
        "exchanges tail": 0,
        "tool_calls": parts["tool_calls"],
        "tool_calls tail": 0,
    }
    assert parts["tool_calls"] > 0
    _assert_equal(blank, tmp_path / "lake")


def test_a_tail_of_new_changed_and_deleted_rows_counts_each_row_once(blank: str, tmp_path: Path) -> None:
    known = traffic.build()
    first, second = known[::2], known[1::2]
    fill(blank, [k.rec for k in first], tmp_path / "spool1")
    read_lake.sync(blank, tmp_path / "lake")

    fill(blank, [k.rec for k in second], tmp_path / "spool2")  # new rows, not synced
    synced = [k.id for k in first]
    engine = make_engine(blank)
    try:
        with engine.connect() as connection:
            called = {row[0] for row in connection.execute(text("SELECT exchange_id FROM tool_call_facts"))}
        with_calls = next(i for i in synced[5:] if i in called)
        assert reprice(engine, Pricer(), ids=synced[:3]) == 3  # a reprice rewrites synced rows
        with engine.begin() as connection:  # as reprocess does: a synced row changes
            connection.execute(text("UPDATE exchanges SET team = 'moved' WHERE id = :id"), {"id": synced[4]})
            # a deletion (tool calls go with their exchange)
            connection.execute(text("DELETE FROM exchanges WHERE id = :id"), {"id": with_calls})
    finally:
        engine.dispose()

    parts = _parts(blank, tmp_path / "lake")
    assert parts["exchanges"] == len(known) - 1
    # the tail: the second half and the changed rows; the rest comes from the lake
    assert len(second) + 4 <= parts["exchanges tail"] < len(known) - 1
    _assert_equal(blank, tmp_path / "lake")
    if blank.startswith("sqlite"):
        _assert_equal(blank, tmp_path / "lake", cached=False)


def test_the_dashboard_over_the_lake_draws_what_it_draws_over_the_store(blank: str, tmp_path: Path) -> None:
    from llmtap.dashboards import data

    known = traffic.build()
    fill(blank, [k.rec for k in known[::2]], tmp_path / "spool1")
    read_lake.sync(blank, tmp_path / "lake")
    fill(blank, [k.rec for k in known[1::2]], tmp_path / "spool2")  # and a tail

    over_store = data.collect(blank)
    over_lake = data.collect(blank, lake=str(tmp_path / "lake"))
    for drawn in (over_store, over_lake):
        drawn.pop("generated_at")
    # latency's percentiles come off the lake's summary's histograms: within its bound
    matching.assert_same(over_lake.pop("latency_by_model"), over_store.pop("latency_by_model"), "latency")
    assert over_lake == over_store
    assert over_store["usage_by_team"]

    page = tmp_path / "lake.html"
    written = llmtap("dashboard", "--db", blank, "--lake", str(tmp_path / "lake"), "-o", str(page))
    assert written.code == 0, written.err
    assert "search" in page.read_text(encoding="utf-8")


def test_the_cli_reads_the_lake_and_refuses_another_stores(blank: str, tmp_path: Path) -> None:
    known = traffic.build()
    fill(blank, [k.rec for k in known], tmp_path / "spool")
    lake = tmp_path / "lake"

    missing = llmtap("report", "usage", "--db", blank, "--lake", str(lake))
    assert missing.code != 0 and len(missing.err.strip().splitlines()) == 1
    assert "no lake for this store" in missing.err

    read_lake.sync(blank, lake)
    over_store = llmtap("report", "cost", "--by", "team,day", "--format", "json", "--db", blank)
    over_lake = llmtap("report", "cost", "--by", "team,day", "--format", "json", "--db", blank, "--lake", str(lake))
    assert over_store.code == 0 and over_lake.code == 0, over_lake.err
    assert over_lake.json() == over_store.json()

    for kind in ("budgets", "whatif"):  # they read the store only: never silently
        refused = llmtap("report", kind, "--db", blank, "--lake", str(lake))
        assert refused.code != 0 and "not a lake" in refused.err

    elsewhere = llmtap("report", "usage", "--db", blank, "--lake", str(tmp_path / "elsewhere"))
    assert elsewhere.code != 0 and "not under" in elsewhere.err

    engine = make_engine(blank)
    try:
        with engine.begin() as connection:  # as if the lake were another store's
            connection.execute(text("UPDATE fact_revision SET token = 'another-store'"))
    finally:
        engine.dispose()
    refused = llmtap("report", "usage", "--db", blank, "--lake", str(lake))
    assert refused.code != 0 and len(refused.err.strip().splitlines()) == 1
    assert "another store's records" in refused.err
    assert os.environ.get("AWS_SECRET_ACCESS_KEY", "\0") not in refused.err

    lake.rename(tmp_path / "moved")  # the lake's files gone from where the catalog says
    gone = llmtap("report", "usage", "--db", blank, "--lake", str(lake))
    assert gone.code != 0 and len(gone.err.strip().splitlines()) == 1
    assert "cannot read the lake" in gone.err
