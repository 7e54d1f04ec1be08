"""The same report over the store and over the lake, for the corpus traffic of
tests/analytics: equal, row for row, for every report kind grouped by each column it takes
(one at a time, and all of them at once), inside a time window (`--since/--until`), by day
and hour in another zone than UTC, each `--list`, `conversations --top`, and the footer
`report cost` prints (price versions, unpriced models, usage missing).

Two lakes on each backend: everything synced (every row from the Iceberg tables), and half
synced with the rest, a reprice and a changed team in the store only (the lake plus the
store's tail). test_read_reports.py covers the reports' common groupings, the dashboard and
the CLI; this file covers what it leaves out, so that "every report" means every option.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest
from sqlalchemy import select, text

from llmtap.analytics import reports
from llmtap.analytics.duck import connect
from llmtap.analytics.pricing import Pricer
from llmtap.analytics.reprice import reprice
from llmtap.lake.catalog import open_catalog, watermark
from llmtap.storage.engine import make_engine
from llmtap.storage.schema import exchanges
from tests.analytics import traffic
from tests.analytics.conftest import BACKENDS, blank_database, fill
from tests.lake import matching, read_lake

KINDS = ("usage", "cost", "cache", "finish", "tools", "errors", "latency")
OTHER_ZONE = "America/Los_Angeles"  # UTC-8/-7: a day there starts at 07:00 or 08:00 UTC


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module", params=["synced", "tail"])
def lake(
    request: pytest.FixtureRequest, backend: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    """A store of the corpus traffic and its lake: all synced, or half synced and then more
    rows, a reprice and a changed team in the store only."""
    folder = tmp_path_factory.mktemp(f"equal-{backend}-{request.param}")
    known = traffic.build()
    with blank_database(backend, folder) as url:
        if request.param == "synced":
            fill(url, [k.rec for k in known], folder / "spool")
            read_lake.sync(url, folder / "lake")
        else:
            fill(url, [k.rec for k in known[::2]], folder / "spool1")
            read_lake.sync(url, folder / "lake")
            fill(url, [k.rec for k in known[1::2]], folder / "spool2")
            synced = [k.id for k in known[::2]]
            engine = make_engine(url)
            try:
                assert reprice(engine, Pricer(), ids=synced[:4]) == 4
                with engine.begin() as connection:
                    connection.execute(text("UPDATE exchanges SET team = 'moved' WHERE id = :id"), {"id": synced[5]})
            finally:
                engine.dispose()
        yield url, folder / "lake"


@pytest.fixture(scope="module")
def both(lake: tuple[str, Path]) -> Iterator[tuple[str, duckdb.DuckDBPyConnection, duckdb.DuckDBPyConnection]]:
    """The store's URL, a connection over the store and one over the lake."""
    url, warehouse = lake
    over_store, over_lake = connect(url), connect(url, lake=str(warehouse))
    try:
        yield url, over_store, over_lake
    finally:
        over_store.close()
        over_lake.close()


def _equal(
    both: tuple[str, duckdb.DuckDBPyConnection, duckdb.DuckDBPyConnection], kind: str, **options: Any
) -> list[dict[str, Any]]:
    url, over_store, over_lake = both
    rows = reports.run(url, kind, connection=over_store, **options).rows
    matching.assert_same(reports.run(url, kind, connection=over_lake, **options).rows, rows, (kind, options))
    return rows


def _middle(url: str) -> datetime:
    """The started_at that splits the corpus traffic in two."""
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            moments = sorted(connection.execute(select(exchanges.c.started_at)).scalars())
    finally:
        engine.dispose()
    return moments[len(moments) // 2]


@pytest.mark.parametrize("kind", KINDS)
def test_each_column_a_report_groups_by_alone_and_all_at_once(both, kind: str) -> None:
    dimensions = reports.REPORTS[kind].dimensions
    for name in dimensions:
        assert _equal(both, kind, by=[name]), (kind, name)
    assert _equal(both, kind, by=list(dimensions))


@pytest.mark.parametrize("kind", KINDS)
def test_a_time_window_cuts_the_same_rows(both, kind: str) -> None:
    url = both[0]
    middle = _middle(url)
    earlier = _equal(both, kind, until=middle, by=["day"])
    later = _equal(both, kind, since=middle, by=["day"])
    assert earlier and later, "the window splits the traffic"
    everything = _equal(both, kind, by=["day"])
    if kind in ("usage", "cost"):  # additive: the two halves add up to the whole
        assert sum(r["requests"] for r in earlier) + sum(r["requests"] for r in later) == sum(
            r["requests"] for r in everything
        )


@pytest.mark.parametrize("kind", ["usage", "cost", "errors", "latency"])
def test_days_and_hours_in_another_zone(both, kind: str) -> None:
    assert _equal(both, kind, by=["day", "hour"], tz=OTHER_ZONE)


def test_the_lists_whole_and_in_a_window(both) -> None:
    middle = _middle(both[0])
    for kind in ("cache", "tools"):
        assert _equal(both, kind, listing=True), kind
        _equal(both, kind, listing=True, since=middle)


def test_the_top_conversations(both) -> None:
    everything = _equal(both, "conversations", top=1000)
    assert len(everything) > 3
    assert _equal(both, "conversations", top=3) == everything[:3]
    _equal(both, "conversations", top=1000, since=_middle(both[0]))


def test_the_cost_footer(both) -> None:
    url, over_store, over_lake = both
    footer = reports.price_footer(url, connection=over_store)
    assert footer["price_versions"], "the corpus traffic is priced"
    assert footer["unpriced_models"] or footer["usage_missing"], "and has rows that are not"
    assert reports.price_footer(url, connection=over_lake) == footer
    middle = _middle(url)
    assert reports.price_footer(url, connection=over_lake, since=middle) == reports.price_footer(
        url, connection=over_store, since=middle
    )


def test_the_lake_connection_reads_the_iceberg_tables(lake: tuple[str, Path], both) -> None:
    """Not the store again under another name: the store's tail is exactly its rows at or
    above the lake's watermark, the rest comes from the Iceberg tables. On SQLite that is
    none (synced) or some (tail); PostgreSQL's watermark is the server's oldest open
    transaction (lake/sync.py), which another database's long transaction holds back, so
    there it may be every row."""
    url, warehouse = lake
    catalog = open_catalog(url, str(warehouse))
    try:
        mark, _token = watermark(catalog.load_table("llmtap.exchanges"))
    finally:
        catalog.engine.dispose()
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            query = "SELECT count(*) FROM exchange_facts WHERE revision >= :w"
            held = connection.execute(text(query), {"w": mark}).scalar_one()
    finally:
        engine.dispose()
    over_lake = both[2]
    total = over_lake.execute("SELECT count(*) FROM exchanges").fetchone()[0]
    tail = over_lake.execute("SELECT count(*) FROM lake_tail_exchanges").fetchone()[0]
    assert total == len(traffic.build())
    assert tail == held
    if url.startswith("sqlite"):
        assert tail == 0 if "synced" in warehouse.parent.name else 0 < tail < total
