"""The narrow report tables follow the wide ones through every path that changes them:
the writer's inserts, updates (as `reprice` and `reprocess` make them), deletes (`prune`,
with tool calls going by cascade), and migration 0003's backfill of a store that already
held exchanges. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import timedelta

from sqlalchemy import JSON, inspect, select, update

from llmtap.storage import migrate, schema
from llmtap.storage.maintenance import prune
from llmtap.storage.rows import rows_for
from llmtap.storage.writer import Writer
from tests.storage.helpers import T0, count, make_record


def _same(engine) -> None:
    """Each narrow table holds exactly the copied columns of its wide table, row for row."""
    pairs = (
        (schema.exchanges, schema.exchange_facts, schema.EXCHANGE_FACT_COLUMNS, ("id",)),
        (schema.tool_calls, schema.tool_call_facts, schema.TOOL_CALL_FACT_COLUMNS, ("exchange_id", "position")),
    )
    with engine.connect() as connection:
        for wide, narrow, columns, key in pairs:
            order = [wide.c[k] for k in key]
            want = connection.execute(select(*(wide.c[c] for c in columns)).order_by(*order)).all()
            order = [narrow.c[k] for k in key]
            have = connection.execute(select(*(narrow.c[c] for c in columns)).order_by(*order)).all()
            # the copies keep JSON as its text
            parse = [isinstance(wide.c[c].type, JSON) for c in columns]
            have = [
                tuple(json.loads(v) if p and v is not None else v for v, p in zip(row, parse, strict=True))
                for row in have
            ]
            assert have == [tuple(row) for row in want], narrow.name
            assert any(parse) == (narrow is schema.exchange_facts)


def _write(engine, spool_dir, indexes) -> None:
    writer = Writer(engine, spool_dir=spool_dir, max_delay=0.01)
    for index in indexes:
        writer.submit(make_record(index))
    assert writer.close()


def test_inserts_updates_and_deletes_reach_the_copies(db_url, engines, spool_dir) -> None:
    engine = engines(db_url)
    migrate.upgrade(engine)
    _write(engine, spool_dir, range(30))
    _write(engine, spool_dir, range(25, 40))  # duplicates ignored: no copy either
    assert count(engine) == 40 and count(engine, schema.exchange_facts) == 40
    assert count(engine, schema.tool_call_facts) == count(engine, schema.tool_calls) > 0
    _same(engine)
    with engine.begin() as connection:  # as reprice does
        connection.execute(
            update(schema.exchanges)
            .where(schema.exchanges.c.id.in_([make_record(i).id for i in range(10)]))
            .values(cost_total_pico=1234, price_status="priced", team="billing")
        )
        connection.execute(  # as reprocess does for a call whose status changed
            update(schema.tool_calls).where(schema.tool_calls.c.position == 0).values(status="schema_violation")
        )
    _same(engine)
    removed, _ = prune(engine, T0 + timedelta(seconds=20))  # make_record(i) started at T0 + i s
    assert removed == 20
    assert count(engine, schema.exchange_facts) == 20
    _same(engine)


def _write_at_0002(engine, indexes) -> None:
    """Rows as a store at revision 0002 held them: only the columns it had (the writer
    writes today's columns, which a later revision may have added)."""
    present = {table: {c["name"] for c in inspect(engine).get_columns(table)} for table in ("exchanges", "tool_calls")}
    with engine.begin() as connection:
        for index in indexes:
            rows = rows_for(make_record(index))
            connection.execute(
                schema.exchanges.insert(),
                [{k: v for k, v in row.items() if k in present["exchanges"]} for row in rows.exchanges],
            )
            if rows.tool_calls:
                connection.execute(
                    schema.tool_calls.insert(),
                    [{k: v for k, v in row.items() if k in present["tool_calls"]} for row in rows.tool_calls],
                )


def test_migration_0003_copies_what_the_store_already_held(db_url, engines, spool_dir) -> None:
    engine = engines(db_url)
    migrate.upgrade(engine, "0002")
    _write_at_0002(engine, range(12))
    migrate.upgrade(engine)
    assert count(engine, schema.exchange_facts) == 12
    _same(engine)
    _write(engine, spool_dir, range(12, 20))  # and the triggers are in place after it
    _same(engine)
    migrate.downgrade(engine, "0002")
    _write_at_0002(engine, range(20, 25))  # no triggers left behind to trip on
    migrate.upgrade(engine)
    assert count(engine, schema.exchange_facts) == 25
    _same(engine)


def test_insert_or_replace_keeps_one_copy(tmp_path, engines, spool_dir) -> None:
    """SQLite's REPLACE deletes the old row without firing its delete trigger."""
    engine = engines(f"sqlite:///{tmp_path / 'store.db'}")
    migrate.upgrade(engine)
    _write(engine, spool_dir, range(3))
    with engine.begin() as connection:
        values = dict(connection.execute(select(schema.exchanges).limit(1)).mappings().one())
        values["team"] = "replaced"
        connection.execute(schema.exchanges.insert().prefix_with("OR REPLACE"), values)
    assert count(engine, schema.exchange_facts) == 3
    _same(engine)
