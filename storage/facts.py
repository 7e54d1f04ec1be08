"""Triggers that keep the narrow report tables (`exchange_facts`, `tool_call_facts`) equal
to the columns they copy, on SQLite and PostgreSQL.

Reports scan every exchange. Through DuckDB's scanners that scan costs what the rows
weigh, and an `exchanges` row carries answer text, tool specs, request parameters and raw
usage: about 2.3 KB against 0.6 KB for what reports read (bench/reports.py, 1M rows).
Triggers rather than the writer's own inserts, so that every path that changes an
exchange (the writer, `import`, `reprocess`, `reprice`, `prune`, a person with `sqlite3`)
changes its copy in the same transaction, and no report ever reads a stale copy.

Change tracking (schema 0009, for `llmtap lake sync`): every fact row carries `revision`,
"changed since watermark W" being `revision >= W`. On SQLite it is `fact_revision.n`, which
the triggers bump; on PostgreSQL the writing transaction's id (`txid_current()`), read back
below `pg_snapshot_xmin` of a reader's snapshot (every transaction below it has finished).
A delete leaves a tombstone in `fact_deletions` stamped the same way.

Caution for migrations: on SQLite, `batch_alter_table("exchanges")` (or `tool_calls`)
rebuilds the table and drops its triggers; such a migration must create them again.

Not responsible for the tables themselves (schema.py) or for reading them (analytics).
"""

from __future__ import annotations

from collections.abc import Sequence


def create_statements(
    dialect: str,
    table: str,
    facts: str,
    columns: Sequence[str],
    key: Sequence[str],
    *,
    revisions: bool = False,
    tombstones: bool = False,
) -> list[str]:
    """DDL that makes `facts` follow `table`'s inserts, updates and deletes. With
    `revisions` (schema 0008 on), on SQLite each write also counts in `fact_revision` and
    stamps the copy with the count. With `tombstones` (schema 0009 on), a delete also
    records the key in `fact_deletions`, and on PostgreSQL the rows and tombstones are
    stamped with the writing transaction's id."""
    names = ", ".join(_q(c) for c in columns)
    values = ", ".join(f"NEW.{_q(c)}" for c in columns)
    match = " AND ".join(f"{_q(k)} = OLD.{_q(k)}" for k in key)
    if dialect == "sqlite":
        settings = ", ".join(f"{_q(c)} = NEW.{_q(c)}" for c in columns)
        count = delete_count = stamp_name = stamp_value = stamp_set = ""
        if revisions:
            count = "UPDATE fact_revision SET n = n + 1; "
            delete_count = "UPDATE fact_revision SET n = n + 1, deleted = n + 1; "
            now = "(SELECT n FROM fact_revision WHERE id = 1)"
            stamp_name, stamp_value, stamp_set = ", revision", f", {now}", f", revision = {now}"
        tombstone = _tombstone(facts, key, "(SELECT n FROM fact_revision WHERE id = 1)") if tombstones else ""
        return [
            # OR REPLACE: an `INSERT OR REPLACE` into the table deletes the old row without
            # firing the delete trigger (recursive_triggers is off); its copy is replaced here.
            f"CREATE TRIGGER {_q(table + '_facts_insert')} AFTER INSERT ON {_q(table)} BEGIN {count}"
            f"INSERT OR REPLACE INTO {_q(facts)} ({names}{stamp_name}) VALUES ({values}{stamp_value}); END",
            f"CREATE TRIGGER {_q(table + '_facts_update')} AFTER UPDATE ON {_q(table)} BEGIN {count}"
            f"UPDATE {_q(facts)} SET {settings}{stamp_set} WHERE {match}; END",
            f"CREATE TRIGGER {_q(table + '_facts_delete')} AFTER DELETE ON {_q(table)} BEGIN {delete_count}"
            f"DELETE FROM {_q(facts)} WHERE {match}; {tombstone}END",
        ]
    if dialect == "postgresql":
        function = _q(f"llmtap_{facts}")
        conflict = ", ".join(_q(k) for k in key)
        updates = ", ".join(f"{_q(c)} = EXCLUDED.{_q(c)}" for c in columns if c not in key)
        stamp_name = stamp_value = tombstone = ""
        if tombstones:
            stamp_name, stamp_value = ", revision", ", txid_current()"
            updates += ", revision = EXCLUDED.revision"
            tombstone = "        " + _tombstone(facts, key, "txid_current()") + "\n"
        return [
            f"CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$\n"
            "BEGIN\n"
            "    IF TG_OP = 'DELETE' THEN\n"
            f"        DELETE FROM {_q(facts)} WHERE {match};\n"
            f"{tombstone}"
            "        RETURN OLD;\n"
            "    END IF;\n"
            "    IF TG_OP = 'UPDATE' THEN\n"
            f"        DELETE FROM {_q(facts)} WHERE {match};\n"
            "    END IF;\n"
            f"    INSERT INTO {_q(facts)} ({names}{stamp_name}) VALUES ({values}{stamp_value})\n"
            f"        ON CONFLICT ({conflict}) DO UPDATE SET {updates};\n"
            "    RETURN NEW;\n"
            "END $$",
            f"CREATE TRIGGER {_q(table + '_facts')} AFTER INSERT OR UPDATE OR DELETE ON {_q(table)} "
            f"FOR EACH ROW EXECUTE FUNCTION {function}()",
        ]
    raise ValueError(f"no fact triggers for the {dialect} dialect")


def _tombstone(facts: str, key: Sequence[str], stamp: str) -> str:
    """The delete trigger's record of a deleted key: the exchange's id, and the position
    for a tool call (NULL for an exchange)."""
    position = f"OLD.{_q(key[1])}" if len(key) > 1 else "NULL"
    return (
        "INSERT INTO fact_deletions (table_name, exchange_id, position, revision) "
        f"VALUES ('{facts}', OLD.{_q(key[0])}, {position}, {stamp}); "
    )


def drop_statements(dialect: str, table: str, facts: str) -> list[str]:
    if dialect == "sqlite":
        return [f"DROP TRIGGER IF EXISTS {_q(table + '_facts_' + op)}" for op in ("insert", "update", "delete")]
    return [
        f"DROP TRIGGER IF EXISTS {_q(table + '_facts')} ON {_q(table)}",
        f"DROP FUNCTION IF EXISTS {_q('llmtap_' + facts)}()",
    ]


def backfill_statement(table: str, facts: str, columns: Sequence[str]) -> str:
    names = ", ".join(_q(c) for c in columns)
    return f"INSERT INTO {_q(facts)} ({names}) SELECT {names} FROM {_q(table)}"


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
