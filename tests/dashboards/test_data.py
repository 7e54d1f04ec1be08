"""What the dashboard gathers, by other routes: the newest exchanges equal `llmtap log`'s
own route (audit.log and audit.details, each with its own passes over the store), the
totals equal the reports', and SQLite and PostgreSQL give the same page data.

Not responsible for how the page draws it (test_dashboard.py, test_layout.py).
"""

from __future__ import annotations

import json
import os
from decimal import Decimal

import pytest

from llmtap.analytics import audit, reports
from llmtap.analytics.pricing import Pricer
from llmtap.dashboards import data
from llmtap.storage.engine import make_engine
from llmtap.storage.migrate import upgrade
from llmtap.workloads.scratch import scratch_postgres
from llmtap.workloads.synthetic import fill

POSTGRES_URL = os.environ.get("LLMTAP_TEST_POSTGRES_URL", "").strip() or None
ROWS, DAYS = 2000, 90


def filled(*urls: str) -> None:
    """The same synthetic exchanges (one generator) into each store."""
    engines = [make_engine(url) for url in urls]
    try:
        for engine in engines:
            upgrade(engine)
        fill(engines, ROWS, Pricer(), days=DAYS)
    finally:
        for engine in engines:
            engine.dispose()


@pytest.fixture(scope="module")
def sqlite_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('data') / 'store.db'}"
    filled(url)
    return url


def comparable(collected: dict) -> str:
    return json.dumps({k: v for k, v in collected.items() if k != "generated_at"}, default=str, sort_keys=True)


def test_newest_exchanges_as_the_log_lists_them(sqlite_store: str):
    collected = data.collect(sqlite_store)
    engine = make_engine(sqlite_store)
    try:
        rows = audit.log(sqlite_store, engine, audit.LogFilters(), limit=data.EXCHANGES_SHOWN)
        details = audit.details(engine, [r["id"] for r in rows])
    finally:
        engine.dispose()
    expected = [
        {**{k: data._plain(v, k) for k, v in r.items()}, "detail": data.slim(details.get(r["id"]))} for r in rows
    ]
    assert len(expected) == data.EXCHANGES_SHOWN
    assert any(r["detail"]["cache"]["verdict"] == "miss" for r in expected)
    assert json.dumps(collected["exchanges"], default=str) == json.dumps(expected, default=str)


def test_totals_are_the_reports_totals(sqlite_store: str):
    totals = data.collect(sqlite_store)["totals"]
    cost = reports.run(sqlite_store, "cost", by=["team"]).rows
    cache = reports.run(sqlite_store, "cache", by=["team"]).rows
    misses = reports.run(sqlite_store, "cache", listing=True).rows
    priced = sum(r["cost_usd"] for r in cost if r["cost_usd"] is not None)
    assert priced > 1 and Decimal(totals["cost_usd"]) == priced and totals["cost_text"] == f"${priced:,.2f}"
    assert totals["unpriced"] == sum(r["unpriced"] for r in cost) > 0
    assert totals["misses"] == sum(r["misses"] for r in cache) > 0
    assert totals["requests"] == ROWS
    shown = data.collect(sqlite_store)
    # not-cacheable turns are listed with cause below_minimum and counted apart (SPEC §5)
    apart = [m for m in misses if m["cause"] == "below_minimum"]
    assert sum(c["misses"] for c in shown["miss_causes"]) + shown["not_cacheable"] == len(misses)
    assert shown["not_cacheable"] == len(apart) == totals["not_cacheable"] > 0
    assert len(shown["misses"]) == min(len(misses) - len(apart), data.MISSES_SHOWN)


@pytest.mark.skipif(not POSTGRES_URL, reason="LLMTAP_TEST_POSTGRES_URL is not set")
def test_postgresql_gives_the_same_page_data(tmp_path):
    sqlite = f"sqlite:///{tmp_path / 'store.db'}"
    with scratch_postgres(POSTGRES_URL or "", "llmtap_d") as postgresql:
        filled(sqlite, postgresql)
        on_postgresql = data.collect(postgresql)
    on_sqlite = data.collect(sqlite)
    assert on_sqlite["period"] == "week" and len(on_sqlite["exchanges"]) == data.EXCHANGES_SHOWN
    assert comparable(on_postgresql) == comparable(on_sqlite)
