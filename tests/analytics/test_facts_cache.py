"""The columnar copy of a SQLite store's facts (analytics/facts_cache.py) reads exactly
what the store holds after every kind of change: the writer's inserts, updates as
`reprice` and `reprocess` make them, deletes (`prune`, tool calls by cascade), a store
file replaced by another; a large store's copy is made in the background while reports
read the store; a copy another connection holds is left alone."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from sqlalchemy import update

from llmtap.analytics import duck, facts_cache
from llmtap.storage import migrate, schema
from llmtap.storage.engine import make_engine
from llmtap.storage.maintenance import prune
from llmtap.storage.writer import Writer
from tests.storage.helpers import T0, make_record

TABLES = {"exchanges": "id", "tool_calls": "exchange_id, position"}


@pytest.fixture
def engines():
    made = []

    def make(url: str):
        made.append(make_engine(url))
        return made[-1]

    yield make
    for engine in made:
        engine.dispose()


@pytest.fixture
def spool_dir(tmp_path):
    return tmp_path / "spool"


@pytest.fixture
def store(tmp_path, engines):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = engines(url)
    migrate.upgrade(engine)
    return url, engine


def _write(engine, spool_dir, indexes) -> None:
    writer = Writer(engine, spool_dir=spool_dir, max_delay=0.01)
    for index in indexes:
        writer.submit(make_record(index))
    assert writer.close()


def _rows(connection, table: str) -> list[tuple]:
    return connection.execute(f"SELECT * FROM {table} ORDER BY {TABLES[table]}").fetchall()


def _copy_equals_store(url: str) -> str:
    """What the copy did on connecting; fails unless it reads what the store reads."""
    cached = duck.connect(url)
    direct = duck.connect(url, cached=False)
    try:
        assert _attached(cached)
        for table in TABLES:
            assert _rows(cached, table) == _rows(direct, table), table
        state = cached.execute("SELECT n FROM facts.copy_state").fetchone()
        assert state == direct.execute("SELECT n FROM store.fact_revision").fetchone()
        return "ok"
    finally:
        cached.close()
        direct.close()


def _attached(connection) -> bool:
    return "facts" in {row[0] for row in connection.execute("SELECT database_name FROM duckdb_databases()").fetchall()}


def _refresh(url: str) -> str:
    connection = duck.connect(url, cached=False)
    try:
        connection.execute(f"ATTACH '{facts_cache.path_for(url.removeprefix('sqlite:///'))}' AS facts")
        return facts_cache.refresh(connection, duck._cache_sources(duck._selects(connection, "sqlite")))
    finally:
        connection.close()


def test_the_copy_follows_inserts_updates_and_deletes(store, spool_dir) -> None:
    url, engine = store
    _write(engine, spool_dir, range(30))
    assert _copy_equals_store(url) == "ok"  # made on first use (a small store: while it waits)
    assert _refresh(url) == "current"
    _write(engine, spool_dir, range(30, 45))
    assert _refresh(url) == "updated"
    _write(engine, spool_dir, range(45, 50))
    _copy_equals_store(url)
    with engine.begin() as connection:  # as reprice and reprocess do
        connection.execute(
            update(schema.exchanges)
            .where(schema.exchanges.c.id.in_([make_record(i).id for i in range(5, 15)]))
            .values(cost_total_pico=4321, price_status="priced", team="billing")
        )
        connection.execute(
            update(schema.tool_calls).where(schema.tool_calls.c.position == 0).values(status="schema_violation")
        )
    _copy_equals_store(url)
    removed, _ = prune(engine, T0 + timedelta(seconds=20))  # make_record(i) started at T0 + i s
    assert removed == 20
    _copy_equals_store(url)
    check = duck.connect(url)
    try:
        assert check.execute("SELECT count(*) FROM exchanges").fetchone() == (30,)
        assert check.execute("SELECT count(*) FROM exchanges WHERE team = 'billing'").fetchone() == (0,)
    finally:
        check.close()


def test_a_replaced_store_file_is_never_read_from_the_old_copy(tmp_path, engines, spool_dir) -> None:
    path = tmp_path / "store.db"
    url = f"sqlite:///{path}"
    engine = engines(url)
    migrate.upgrade(engine)
    _write(engine, spool_dir, range(20))
    _copy_equals_store(url)
    engine.dispose()
    for suffix in ("", "-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    fresh = engines(url)
    migrate.upgrade(fresh)  # a new store: a new token, a counter that starts again
    _write(fresh, spool_dir, range(100, 103))
    assert _refresh(url) == "rebuilt"
    _copy_equals_store(url)


def test_a_copy_in_use_elsewhere_leaves_reports_reading_the_store(store, spool_dir) -> None:
    url, engine = store
    _write(engine, spool_dir, range(10))
    holder = duck.connect(url)
    try:
        assert _attached(holder)
        other = duck.connect(url)  # another database instance: the file is locked
        try:
            assert not _attached(other)
            assert other.execute("SELECT count(*) FROM exchanges").fetchone() == (10,)
        finally:
            other.close()
    finally:
        holder.close()


def test_a_large_store_is_copied_in_the_background(store, spool_dir, monkeypatch) -> None:
    url, engine = store
    _write(engine, spool_dir, range(40))
    monkeypatch.setattr(facts_cache, "INLINE_ROWS", 10)
    first = duck.connect(url)
    try:
        assert not _attached(first)  # read the store; a builder process makes the copy
        assert first.execute("SELECT count(*) FROM exchanges").fetchone() == (40,)
    finally:
        first.close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if facts_cache._BUILDERS and facts_cache._BUILDERS[-1].poll() is not None:
            break
        time.sleep(0.1)
    assert facts_cache._BUILDERS[-1].returncode == 0
    assert _refresh(url) == "current"
    _copy_equals_store(url)


def test_the_copy_is_private(store, spool_dir) -> None:
    url, engine = store
    _write(engine, spool_dir, range(3))
    _copy_equals_store(url)
    path = facts_cache.path_for(url.removeprefix("sqlite:///"))
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
