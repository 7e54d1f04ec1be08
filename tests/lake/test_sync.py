"""`llmtap lake sync` on SQLite and PostgreSQL: the first sync copies everything, the next
only what changed (new rows, changed costs, pruned rows), two syncs at once in two
processes leave no duplicate, and a sync killed mid-way is picked up by the next. The
lake is read back with pyiceberg alone; its totals must equal the store's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, delete, select, text

from llmtap.lake.catalog import WATERMARK, open_catalog, watermark
from llmtap.lake.sync import sync
from llmtap.storage.engine import make_engine
from llmtap.storage.maintenance import prune
from llmtap.storage.migrate import upgrade
from llmtap.storage.schema import tool_calls
from llmtap.storage.writer import Writer
from tests.storage.helpers import POSTGRES_URL, T0, fresh_postgres_database, make_record

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param(
        "postgresql",
        id="postgresql",
        marks=pytest.mark.skipif(not POSTGRES_URL, reason="LLMTAP_TEST_POSTGRES_URL is not set"),
    ),
]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path, llmtap_home: Path) -> Iterator[tuple[str, Engine]]:
    """A store at the schema's head: its URL and an engine."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.db'}"
        engine = make_engine(url)
        upgrade(engine)
        yield url, engine
        engine.dispose()
        return
    with fresh_postgres_database() as url:
        engine = make_engine(url)
        upgrade(engine)
        yield url, engine
        engine.dispose()


def write(engine: Engine, spool: Path, start: int, n: int) -> None:
    writer = Writer(engine, spool_dir=spool, body_mode="metadata", max_delay=0.01)
    for i in range(start, start + n):
        writer.submit(make_record(i))
    assert writer.close()
    # what a reprice writes: a cost on each row (the test records' model has no price)
    with engine.begin() as connection:
        connection.execute(
            text("UPDATE exchanges SET cost_total_pico = 1000 + usage_input_tokens WHERE cost_total_pico IS NULL")
        )


def store_totals(engine: Engine) -> tuple[int, int, int]:
    with engine.connect() as connection:
        query = "SELECT count(*), coalesce(sum(cost_total_pico), 0) FROM exchange_facts"
        n, cost = connection.execute(text(query)).one()
        calls = connection.execute(text("SELECT count(*) FROM tool_call_facts")).scalar_one()
    return int(n), int(cost), int(calls)


def changed_since(engine: Engine, mark: int) -> int:
    with engine.connect() as connection:
        query = "SELECT count(*) FROM exchange_facts WHERE revision >= :w"
        return int(connection.execute(text(query), {"w": mark}).scalar_one())


def lake_totals(url: str, warehouse: str, properties: dict[str, object] | None = None) -> tuple[int, int, int]:
    """Exchanges, their cost and tool calls in the lake, read with pyiceberg; asserts that
    no key is held twice."""
    catalog = open_catalog(url, warehouse, properties)
    try:
        exchanges = catalog.load_table("llmtap.exchanges").scan().to_arrow()
        calls = catalog.load_table("llmtap.tool_calls").scan().to_arrow()
    finally:
        catalog.engine.dispose()
    ids = exchanges.column("id").to_pylist()
    assert len(ids) == len(set(ids)), "an exchange held twice"
    keys = list(zip(calls.column("exchange_id").to_pylist(), calls.column("position").to_pylist(), strict=True))
    assert len(keys) == len(set(keys)), "a tool call held twice"
    cost = sum(v for v in exchanges.column("cost_total_pico").to_pylist() if v is not None)
    return len(ids), cost, len(keys)


def run_sync(url: str, warehouse: str, **kwargs: int):
    catalog = open_catalog(url, warehouse)
    engine = make_engine(url)
    try:
        return sync(engine, catalog, **kwargs)
    finally:
        engine.dispose()
        catalog.engine.dispose()


def test_the_first_sync_copies_all_and_the_next_only_what_is_new(store, tmp_path):
    url, engine = store
    warehouse = str(tmp_path / "lake")
    write(engine, tmp_path / "spool", 0, 20)
    first = run_sync(url, warehouse)
    # every third has a tool call; the summary: one row a day (one team, model and key), one commit
    assert [(t.table, t.written, t.commits) for t in first] == [
        ("llmtap.exchanges", 20, 1),
        ("llmtap.tool_calls", 7, 1),
        ("llmtap.daily", first[2].written, 1),
    ]
    assert first[2].written > 0
    assert lake_totals(url, warehouse) == store_totals(engine)
    write(engine, tmp_path / "spool", 20, 6)
    since = changed_since(engine, first[0].watermark)
    second = run_sync(url, warehouse)
    # On PostgreSQL too: other transactions on the server (other tests' databases) do not
    # hold the watermark back.
    assert second[0].written == since == 6
    if engine.dialect.name == "sqlite":
        assert [t.written for t in second[:2]] == [6, 2]  # 21 and 24 have tool calls
    assert second[2].commits == 1 and second[2].gone >= 1  # the days the new rows went into
    assert second[0].watermark > first[0].watermark
    assert lake_totals(url, warehouse) == store_totals(engine) == (26, sum(1000 + 100 + i for i in range(26)), 9)
    third = run_sync(url, warehouse)
    assert [(t.written, t.commits) for t in third] == [(0, 0), (0, 0), (0, 0)]  # the summary too


@pytest.mark.skipif(not POSTGRES_URL, reason="LLMTAP_TEST_POSTGRES_URL is not set")
def test_only_a_transaction_in_the_stores_own_database_holds_the_watermark_back(tmp_path, llmtap_home):
    """A long transaction in another database on the server is left out of the watermark;
    one in the store's database is counted until it ends."""
    with fresh_postgres_database() as url, fresh_postgres_database() as other:
        engine, elsewhere = make_engine(url), make_engine(other)
        try:
            upgrade(engine)
            warehouse = str(tmp_path / "lake")
            write(engine, tmp_path / "spool", 0, 4)
            run_sync(url, warehouse)
            with elsewhere.connect() as held:
                held.execute(text("SELECT txid_current()"))  # a transaction id, left open
                write(engine, tmp_path / "spool", 4, 3)
                second = run_sync(url, warehouse)
                assert second[0].written == 3
                assert changed_since(engine, second[0].watermark) == 0
            with engine.connect() as held:
                xid = int(held.execute(text("SELECT txid_current()")).scalar_one())
                write(engine, tmp_path / "spool", 7, 2)
                third = run_sync(url, warehouse)
                assert third[0].watermark == xid
                assert third[0].written == 2
            fourth = run_sync(url, warehouse)
            assert fourth[0].watermark > xid
            assert changed_since(engine, fourth[0].watermark) == 0
            assert lake_totals(url, warehouse) == store_totals(engine)
        finally:
            engine.dispose()
            elsewhere.dispose()


def test_a_cost_change_and_a_prune_reach_the_lake(store, tmp_path):
    url, engine = store
    warehouse = str(tmp_path / "lake")
    write(engine, tmp_path / "spool", 0, 30)
    run_sync(url, warehouse)
    with engine.begin() as connection:  # what `reprice` writes, for a third of the rows
        changed = connection.execute(
            text("UPDATE exchanges SET cost_total_pico = cost_total_pico * 3 WHERE usage_input_tokens >= 120")
        ).rowcount
    assert changed == 10
    repriced = run_sync(url, warehouse)
    if engine.dialect.name == "sqlite":
        assert repriced[0].written == 10 and repriced[1].written == 0
    assert repriced[0].written >= 10
    assert lake_totals(url, warehouse) == store_totals(engine)
    removed, _ = prune(engine, T0 + timedelta(seconds=12))
    assert removed == 12
    pruned = run_sync(url, warehouse)
    assert pruned[0].gone == 12 and pruned[1].gone == 4  # 0, 3, 6, 9 had tool calls
    assert lake_totals(url, warehouse) == store_totals(engine)
    assert store_totals(engine)[0] == 18
    with engine.connect() as connection:  # the lake applied them: trimmed
        assert connection.execute(text("SELECT count(*) FROM fact_deletions")).scalar_one() == 0


def test_a_tool_call_deleted_and_written_again_stays_once(store, tmp_path):
    """What `reprocess` does to an exchange's tool calls: delete them, insert them again."""
    url, engine = store
    warehouse = str(tmp_path / "lake")
    write(engine, tmp_path / "spool", 0, 9)
    run_sync(url, warehouse)
    with engine.begin() as connection:
        rows = connection.execute(select(tool_calls).where(tool_calls.c.exchange_id.like("%3"))).mappings().all()
        assert len(rows) == 1
        connection.execute(delete(tool_calls).where(tool_calls.c.exchange_id.like("%3")))
        connection.execute(tool_calls.insert(), [dict(rows[0])])
        connection.execute(text("DELETE FROM tool_calls WHERE exchange_id LIKE '%6'"))
    again = run_sync(url, warehouse)
    assert again[1].written == 1 and again[1].gone == 1
    assert lake_totals(url, warehouse) == store_totals(engine)
    assert store_totals(engine)[2] == 2


def _cli(url: str, warehouse: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "llmtap.cli.main", "lake", "sync", "--db", url, "--warehouse", warehouse],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


@pytest.mark.slow
def test_two_syncs_at_once_then_after_a_reprice(store, tmp_path):
    url, engine = store
    warehouse = str(tmp_path / "lake")
    write(engine, tmp_path / "spool", 0, 300)
    for _round in range(2):
        children = [_cli(url, warehouse), _cli(url, warehouse)]
        for child in children:
            out, err = child.communicate(timeout=180)
            assert child.returncode == 0, err
            assert "llmtap.exchanges:" in out
        assert lake_totals(url, warehouse) == store_totals(engine)
        with engine.begin() as connection:  # a reprice between the rounds
            connection.execute(text("UPDATE exchanges SET cost_total_pico = cost_total_pico + 7"))
        write(engine, tmp_path / "spool", 300 + _round * 50, 50)
    children = [_cli(url, warehouse), _cli(url, warehouse)]
    for child in children:
        _out, err = child.communicate(timeout=180)
        assert child.returncode == 0, err
    assert lake_totals(url, warehouse) == store_totals(engine)


_SLOW_CHILD = """
import sys, time
from llmtap.lake import sync as lake_sync
from llmtap.lake.catalog import open_catalog
from llmtap.storage.engine import make_engine
url, warehouse = sys.argv[1], sys.argv[2]
commit = lake_sync._commit
def slow(*args, **kwargs):
    commit(*args, **kwargs)
    print("committed", flush=True)
    time.sleep(60)
lake_sync._commit = slow
lake_sync.sync(make_engine(url), open_catalog(url, warehouse), chunk=10)
"""


@pytest.mark.slow
def test_a_killed_sync_is_picked_up_by_the_next(store, tmp_path):
    url, engine = store
    warehouse = str(tmp_path / "lake")
    write(engine, tmp_path / "spool", 0, 40)
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_SLOW_CHILD), url, warehouse],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "committed"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        assert child.stdout is not None
        child.stdout.close()
    catalog = open_catalog(url, warehouse)
    table = catalog.load_table("llmtap.exchanges")
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    assert snapshot.summary[WATERMARK] == "0"  # a first chunk: the watermark not yet moved
    held = table.scan().to_arrow().num_rows
    catalog.engine.dispose()
    assert 0 < held < 40  # whole keys of the first chunk of 10
    resumed = run_sync(url, warehouse)
    assert resumed[0].written == 40
    assert lake_totals(url, warehouse) == store_totals(engine)
    catalog = open_catalog(url, warehouse)
    assert watermark(catalog.load_table("llmtap.exchanges"))[0] == resumed[0].watermark > 0
    catalog.engine.dispose()
    assert child.returncode == -signal.SIGKILL


def test_small_commits_add_up_to_the_store(store, tmp_path):
    """Commits of a few rows each (the watermark moves with the last): the same lake."""
    url, engine = store
    warehouse = str(tmp_path / "lake")
    write(engine, tmp_path / "spool", 0, 23)
    done = run_sync(url, warehouse, chunk=5)
    assert done[0].written == 23 and done[0].commits >= 5
    assert lake_totals(url, warehouse) == store_totals(engine)
    catalog = open_catalog(url, warehouse)
    snapshots = catalog.load_table("llmtap.exchanges").snapshots()
    catalog.engine.dispose()
    marks = [s.summary[WATERMARK] for s in snapshots if s.summary is not None]
    assert marks[:-1] == ["0"] * (len(marks) - 1) and marks[-1] == str(done[0].watermark)


def test_a_lake_made_before_the_stored_verdicts_gains_them_at_its_next_sync(store, tmp_path):
    """A lake whose exchanges table predates schema 0013 (no verdict columns) takes them by
    name at the next sync, and the rows it copies carry them."""
    from pyiceberg.schema import Schema

    from llmtap.lake import schema as lake_schema
    from llmtap.storage.verdicts import VERDICT_COLUMNS

    url, engine = store
    warehouse = str(tmp_path / "lake")
    write(engine, tmp_path / "spool", 0, 12)
    catalog = open_catalog(url, warehouse)
    try:
        catalog.create_namespace(lake_schema.NAMESPACE)
        old = Schema(*[f for f in lake_schema.EXCHANGES_SCHEMA.fields if f.name not in VERDICT_COLUMNS])
        catalog.create_table("llmtap.exchanges", old, partition_spec=lake_schema.EXCHANGES_PARTITIONS)
    finally:
        catalog.engine.dispose()
    run_sync(url, warehouse)
    catalog = open_catalog(url, warehouse)
    try:
        lake = catalog.load_table("llmtap.exchanges").scan().to_arrow()
    finally:
        catalog.engine.dispose()
    assert set(VERDICT_COLUMNS) <= set(lake.column_names)
    with engine.connect() as connection:
        stored = dict(connection.execute(text("SELECT id, conversation_id FROM exchanges")).all())
    held = dict(zip(lake.column("id").to_pylist(), lake.column("conversation_id").to_pylist(), strict=True))
    assert len(stored) == 12 and held == stored and all(held.values())
