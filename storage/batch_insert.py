"""One batch of rows into the store, in one transaction: the bodies, the thread keys
(storage/threads.py), each exchange's verdicts (storage/verdicts.py: locked, decided,
finished in that same transaction), the exchanges (duplicates ignored), their tool calls
and body refs. What it added is given to `observe` once committed.

Not responsible for what happens when the store refuses (storage.delivery retries,
spools or rejects), nor for the store being gone (storage.store_guard: `check_file`,
before and after).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite

from llmtap.storage import schema, threads, verdicts
from llmtap.storage.rows import RowSet
from llmtap.storage.sink import WriterStats
from llmtap.storage.store_guard import StoreGuard

_COUNT_ROWS = {"preserve_rowcount": True}  # the rows an INSERT … ON CONFLICT DO NOTHING added


class BatchInsert:
    def __init__(self, guard: StoreGuard, stats: WriterStats, observe: Callable[[RowSet], None]) -> None:
        self.guard = guard
        self.stats = stats
        self.observe = observe  # told of the rows each commit added (the writer's observers)

    def __call__(self, rows: RowSet) -> int:
        """Insert a batch in one transaction; returns how many exchanges it added. A row
        that continues a Responses chain takes its thread key there (threads.assign).

        A plain executemany first: RETURNING would make psycopg parse a multi-row VALUES
        statement of ~40k placeholders per batch in Python (bench/ingest.py: 7x slower).
        When some exchanges were already stored (a replay, a file imported again), that
        transaction is rolled back and the batch goes in with RETURNING, so only the
        exchanges it adds get their tool calls and body refs.
        """
        self.guard.check_file()
        with self.guard.engine.connect() as connection:
            with connection.begin() as transaction:
                verdicts.lock(connection)  # decided from what every other writer committed
                self._insert_bodies(connection, rows)
                # a response chain's conversation: read and set in this transaction
                threads.assign(connection, rows.exchanges)
                # each exchange's verdicts, from its neighbours (storage/verdicts.py)
                plan = verdicts.decide(connection, rows.exchanges, rows.tool_calls)
                statement = self._insert_ignore(schema.exchanges)
                added = connection.execute(statement, rows.exchanges, execution_options=_COUNT_ROWS).rowcount
                if added == len(rows.exchanges):
                    self._insert_children(connection, rows.tool_calls, rows.body_refs)
                    verdicts.finish(connection, plan, rows.exchanges)
                else:
                    transaction.rollback()
            if added != len(rows.exchanges):
                connection.info.pop(verdicts.REKEYED, None)  # what the rolled-back transaction noted
                with connection.begin():
                    verdicts.lock(connection)
                    self._insert_bodies(connection, rows)
                    threads.assign(connection, rows.exchanges)
                    verdicts.keyed(rows.exchanges)  # the keys; the walks below decide
                    statement = self._insert_ignore(schema.exchanges).returning(schema.exchanges.c.id)
                    inserted = set(connection.execute(statement, rows.exchanges).scalars())
                    calls = [c for c in rows.tool_calls if c["exchange_id"] in inserted]
                    refs = [r for r in rows.body_refs if r["exchange_id"] in inserted]
                    self._insert_children(connection, calls, refs)
                    # some were stored already: what the batch decided from them is walked again
                    verdicts.finish(connection, verdicts.walk_again(rows.exchanges, inserted), rows.exchanges)
                added = len(inserted)
                rows = RowSet(
                    exchanges=[e for e in rows.exchanges if e["id"] in inserted], tool_calls=calls, body_refs=refs
                )
        self.guard.check_file()  # deleted while it was written: the rows went nowhere, and spool
        self.stats.batches += 1
        if added:
            self.observe(rows)
        return added

    def _insert_bodies(self, connection: Any, rows: RowSet) -> None:
        if rows.bodies:
            connection.execute(self._insert_ignore(schema.bodies), _unique(rows.bodies, "hash"))

    def _insert_children(self, connection: Any, calls: list[dict[str, Any]], refs: list[dict[str, Any]]) -> None:
        if calls:
            connection.execute(self._insert_ignore(schema.tool_calls), calls)
        if refs:
            connection.execute(self._insert_ignore(schema.body_refs), refs)

    def _insert_ignore(self, table: Table) -> Any:
        dialect = postgresql if self.guard.dialect == "postgresql" else sqlite
        return dialect.insert(table).on_conflict_do_nothing()


def _unique(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    seen: dict[Any, dict[str, Any]] = {}
    for row in rows:
        seen.setdefault(row[key], row)
    return list(seen.values())
