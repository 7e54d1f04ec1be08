"""Alembic migrations on SQLite and PostgreSQL: one head, a blank database upgraded to head
matches `schema.py` exactly, downgrades and upgrades work with data in place, and
`ensure_current` upgrades a blank store and leaves a current one alone."""

from __future__ import annotations

import subprocess
import sys

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import event, inspect, select, text

from llmtap import migrations
from llmtap.storage import migrate, schema
from llmtap.storage.engine import make_engine
from llmtap.storage.errors import StoreError
from llmtap.storage.writer import Writer
from tests.storage.helpers import count, exchange_ids, make_record

TABLES = {"exchanges", "tool_calls", "bodies", "body_refs"}


def revisions() -> list[str]:
    """Every revision, oldest first."""
    script = ScriptDirectory.from_config(migrate.alembic_config())
    return [rev.revision for rev in reversed(list(script.walk_revisions()))]


def write(engine, spool_dir, start: int, n: int) -> None:
    writer = Writer(engine, spool_dir=spool_dir, body_mode="full", max_delay=0.01)
    for i in range(start, start + n):
        record = make_record(i)
        record.request_body = b'{"model":"claude-test","messages":[{"role":"user","content":"hi %d"}]}' % i
        record.response_body = b'{"id":"msg_%d"}' % i
        writer.submit(record)
    assert writer.close()
    assert writer.stats.written == n


def test_single_head_and_a_linear_history():
    assert len(migrate.heads()) == 1
    script = ScriptDirectory.from_config(migrate.alembic_config())
    bases = script.get_bases()
    assert len(bases) == 1
    for rev in script.walk_revisions():
        assert not rev.is_merge_point and not rev.is_branch_point, rev.revision
    assert revisions()[-1] == migrate.heads()[0]
    assert migrations.HEAD == migrate.heads()[0], "migrations.HEAD names the newest revision"


def test_a_store_at_head_is_opened_without_alembic(tmp_path):
    """ensure_current knows a current store by its revision row alone: Alembic is not even
    imported (its import and the scripts' reading were most of a report's start-up); a
    store behind head still migrates, and one at a revision it does not know is refused."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = make_engine(url)
    try:
        migrate.upgrade(engine, "0012")
        migrate.ensure_current(engine)  # a revision behind: migrated the slow way
        assert migrate.current(engine) == migrations.HEAD
    finally:
        engine.dispose()
    probe = (
        "import sys; from llmtap.storage.engine import make_engine; from llmtap.storage.migrate import ensure_current; "
        f"e = make_engine({url!r}); ensure_current(e); print(sorted(m for m in sys.modules if m.startswith('alembic')))"
    )
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]", found.stdout
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(text("UPDATE alembic_version SET version_num = 'ffff'"))
        with pytest.raises(StoreError, match="ffff"):
            migrate.ensure_current(engine)
    finally:
        engine.dispose()


def test_blank_to_head_matches_the_models(db_url, engines):
    engine = engines(db_url)
    migrate.upgrade(engine)
    assert migrate.current(engine) == migrate.heads()[0]
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True, "compare_server_default": True})
        assert compare_metadata(context, schema.metadata) == []
    config = migrate.alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.check(config)  # raises when autogenerate would write a migration


def test_downgrade_to_base_and_upgrade_again(db_url, engines, spool_dir):
    engine = engines(db_url)
    migrate.upgrade(engine)
    write(engine, spool_dir, 0, 20)
    migrate.downgrade(engine, "base")
    assert migrate.current(engine) is None
    assert not TABLES & set(inspect(engine).get_table_names())
    migrate.upgrade(engine)
    assert TABLES <= set(inspect(engine).get_table_names())
    assert count(engine) == 0
    write(engine, spool_dir, 20, 20)
    assert count(engine) == 20


@pytest.mark.parametrize("step", range(1, max(len(revisions()), 2)), ids=lambda s: f"step{s}")
def test_each_downgrade_keeps_the_data(db_url, engines, spool_dir, step):
    """Every revision but the first: down one step and up again with rows in place."""
    history = revisions()
    assert len(history) > step, history  # a step down needs a revision below it
    engine = engines(db_url)
    migrate.upgrade(engine, history[step])
    migrate.upgrade(engine)
    write(engine, spool_dir, 0, 30)
    before = sorted(exchange_ids(engine))
    migrate.downgrade(engine, history[step - 1])
    migrate.upgrade(engine)
    assert sorted(exchange_ids(engine)) == before
    write(engine, spool_dir, 30, 5)
    assert count(engine) == 35


def test_ensure_current_upgrades_a_blank_store(db_url, engines):
    engine = engines(db_url)
    assert migrate.current(engine) is None
    migrate.ensure_current(engine)
    assert migrate.current(engine) == migrate.heads()[0]
    assert TABLES <= set(inspect(engine).get_table_names())


def test_ensure_current_is_a_no_op_on_a_current_store(db_url, engines, spool_dir):
    engine = engines(db_url)
    migrate.upgrade(engine)
    write(engine, spool_dir, 0, 10)
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda conn, cur, sql, *a: statements.append(sql))
    migrate.ensure_current(engine)
    changes = [s for s in statements if not s.lstrip().upper().startswith(("SELECT", "PRAGMA", "SHOW"))]
    assert changes == []
    assert count(engine) == 10
    assert migrate.current(engine) == migrate.heads()[0]


def test_a_store_from_a_newer_llmtap_is_a_one_line_error(db_url, engines):
    engine = engines(db_url)
    migrate.upgrade(engine)
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = 'f00dfacecafe'"))
    with pytest.raises(StoreError) as caught:
        migrate.ensure_current(engine)
    assert "\n" not in str(caught.value)
    assert "f00dfacecafe" in str(caught.value)


def test_alembic_without_a_database_says_so():
    """Plain `alembic` use (no connection passed in) with no URL: a message, not SQLAlchemy's
    complaint about None."""
    with pytest.raises(SystemExit, match="need a database"):
        command.upgrade(migrate.alembic_config(), "head")


def test_0012_finds_the_exchange_a_stored_follow_up_names(db_url, engines, spool_dir):
    """Rows stored before revision 0012 get the exchange their previous_response_id names
    (the same key or team's, the earliest), in the fact copy too."""
    engine = engines(db_url)
    migrate.upgrade(engine)
    records = [make_record(i, response_id=f"resp_{i}") for i in range(4)]
    records[1].exchange.request.previous_response_id = "resp_0"  # type: ignore[union-attr]
    records[2].exchange.request.previous_response_id = "resp_unseen"  # type: ignore[union-attr]
    records[3].exchange.request.previous_response_id = "resp_0"  # type: ignore[union-attr]
    records[3].team = "team-b"  # another team's: not the same chain
    writer = Writer(engine, spool_dir=spool_dir, max_delay=0.01)
    for record in records:
        writer.submit(record)
    assert writer.close()
    migrate.downgrade(engine, "0011")
    migrate.upgrade(engine)
    with engine.connect() as connection:
        found = dict(connection.execute(select(schema.exchanges.c.id, schema.exchanges.c.previous_exchange_id)).all())
        facts = dict(
            connection.execute(select(schema.exchange_facts.c.id, schema.exchange_facts.c.previous_exchange_id)).all()
        )
    named = {records[1].id: records[0].id}
    assert found == facts == {record.id: named.get(record.id) for record in records}
