"""A report's DuckDB is bounded: a memory limit (3 GiB, or half the machine's memory if
less; `LLMTAP_DUCKDB_MEMORY` to change it) and a spill folder of its own under the system's
temporary directory, removed when the connection closes, never `.tmp` in the working
directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from llmtap.analytics.duck import MEMORY_DEFAULT, connect
from llmtap.storage.engine import make_engine
from llmtap.storage.migrate import upgrade


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = make_engine(url)
    upgrade(engine)
    engine.dispose()
    return url


def _setting(connection, name: str) -> str:
    return str(connection.execute(f"SELECT current_setting('{name}')").fetchone()[0])


def _bytes(text: str) -> float:
    number, unit = text.split()
    return float(number) * {"MiB": 1 << 20, "GiB": 1 << 30, "KiB": 1 << 10}[unit]


def test_a_report_connection_is_bounded_and_spills_outside_the_working_directory(store, tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("LLMTAP_DUCKDB_MEMORY", raising=False)
    monkeypatch.chdir(tmp_path)
    connection = connect(store)
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        limit = _bytes(_setting(connection, "memory_limit"))
        assert limit <= min(MEMORY_DEFAULT, physical // 2) * 1.01
        assert limit >= min(MEMORY_DEFAULT, physical // 2) * 0.9
        spill = Path(_setting(connection, "temp_directory"))
        assert spill.name.startswith("llmtap-duckdb-") and tmp_path not in spill.parents
        connection.execute("SET memory_limit = '64MB'")  # make it spill
        rows = connection.execute(
            "SELECT count(*) FROM (SELECT i, repeat('x', 40) || i AS s FROM range(3000000) t(i) ORDER BY s DESC)"
        ).fetchone()
        assert rows == (3_000_000,)
        assert spill.is_dir()
    finally:
        connection.close()
    assert not spill.exists()
    assert not (tmp_path / ".tmp").exists()


def test_the_limit_can_be_set(store, monkeypatch) -> None:
    monkeypatch.setenv("LLMTAP_DUCKDB_MEMORY", "1GB")
    connection = connect(store)
    try:
        assert 900 << 20 <= _bytes(_setting(connection, "memory_limit")) <= 1 << 30
    finally:
        connection.close()
