"""Analytics fixtures: a store filled with the known traffic of `traffic.py` through the
real writer and pricer, once per test module and backend (SQLite always; PostgreSQL when
`LLMTAP_TEST_POSTGRES_URL` is set, in a database created for the module and dropped
after), and `llmtap` run in-process with its output captured.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llmtap.analytics.pricing import Pricer
from llmtap.storage.engine import make_engine
from llmtap.storage.migrate import ensure_current
from llmtap.storage.writer import Writer
from llmtap.workloads.scratch import scratch_postgres
from tests.analytics import traffic
from tests.helpers import llmtap

POSTGRES_URL = os.environ.get("LLMTAP_TEST_POSTGRES_URL", "").strip() or None
BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param(
        "postgresql",
        id="postgresql",
        marks=pytest.mark.skipif(not POSTGRES_URL, reason="LLMTAP_TEST_POSTGRES_URL is not set"),
    ),
]


def fresh_postgres_database():
    """CREATE DATABASE llmtap_a_<random>, yield its URL, DROP … WITH (FORCE) after."""
    return scratch_postgres(POSTGRES_URL or "", "llmtap_a")


@contextlib.contextmanager
def blank_database(backend: str, folder: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{folder / 'store.db'}"
    else:
        with fresh_postgres_database() as url:
            yield url


def fill(url: str, records: list[Any], spool: Path) -> None:
    """Store records as the proxy would: the real writer, priced by the real pricer."""
    engine = make_engine(url)
    try:
        ensure_current(engine)
        writer = Writer(engine, spool_dir=spool, enrich=Pricer().price_rows)
        for record in records:
            writer.submit(record)
        assert writer.close(), "the writer did not finish"
        assert writer.stats.written == len(records), writer.stats
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def known() -> dict[str, traffic.Known]:
    return {k.name: k for k in traffic.build()}


@pytest.fixture(scope="module", params=BACKENDS)
def store(
    request: pytest.FixtureRequest, known: dict[str, traffic.Known], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The URL of a store holding the known traffic."""
    folder = tmp_path_factory.mktemp(f"store-{request.param}")
    with blank_database(request.param, folder) as url:
        fill(url, [k.rec for k in known.values()], folder / "spool")
        yield url


def report(url: str, kind: str, *args: str) -> Any:
    """`llmtap report KIND … --format json` as parsed JSON; the command must succeed."""
    result = llmtap("report", kind, *args, "--format", "json", "--db", url)
    assert result.code == 0, result.err
    return result.json()


def by_key(rows: list[dict[str, Any]], *keys: str) -> dict[Any, dict[str, Any]]:
    """Rows indexed by their grouping value(s)."""
    if len(keys) == 1:
        return {row[keys[0]]: row for row in rows}
    return {tuple(row[k] for k in keys): row for row in rows}
