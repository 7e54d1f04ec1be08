"""`llmtap lake sync`: copy what changed in the store's fact tables since the lake's
watermark into the lake's Iceberg tables, by key.

The contract with the readers: a table's current snapshot carries `llmtap.watermark` W
(catalog.WATERMARK) and `llmtap.store_token`. Every store row with `revision < W` is in
the lake as the store holds it, and every fact row deleted with a tombstone `revision < W`
is gone from it; the rows with `revision >= W` may or may not be there. So a reader takes
the lake plus the store's rows with `revision >= W`, the store's row winning by key, and
drops lake rows whose key has a tombstone with `revision >= W` and no store row.

How W is taken, at the start of the sync's read of the store:
- SQLite: `fact_revision.n + 1`. The triggers bump `n` and stamp the row with it, so every
  row written later gets a larger revision; rows read in the same pass that were written
  after `n` was read are copied too, and again next time (harmless: by key).
- PostgreSQL: from the sync's REPEATABLE READ snapshot (`pg_current_snapshot()`): the
  oldest transaction still running in it that may write this database, else its xmax.
  The triggers stamp `txid_current()`; every transaction below the watermark has finished
  and its rows are in the snapshot, or ran in another database (placed by
  pg_stat_activity). A long transaction in this database holds the watermark back, and
  the next sync copies again what changed since then (correct, only more work); one in
  another database on the server does not.
Tombstones below both watermarks are deleted after a sync: a store has one lake.

Each table syncs on its own (its own watermark). Rows are read in key order and committed
`CHUNK` rows at a time: each commit deletes those keys (and, in the first, keys the store
deleted) and appends the store's rows, so a commit is idempotent. Commits before the last
keep the old watermark; the last writes the new one. A killed sync leaves whole commits
(Iceberg commits are atomic) under the old watermark: the next one redoes them by key.
Two syncs at once: each commit asserts the table's snapshot it started from (Iceberg's
optimistic commit); a sync that loses restarts from the lake's new state, so one sync's
commits are never interleaved with another's and no key is ever held twice.

After the fact tables, the daily summary is brought up to the exchanges it now holds
(lake/daily.py: the days the commits touched, made again from the lake's rows).

Not responsible for the catalog or the tables' shape (catalog.py, schema.py) or for reading
the lake in reports.
"""

from __future__ import annotations

import logging
import random
import secrets
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from llmtap.lake.extra import LakeNotInstalled

try:  # the lake extra (pyproject.toml): a one-line error without it
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.compute as pc  # type: ignore[import-untyped]
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.exceptions import CommitFailedException, ValidationException
    from pyiceberg.expressions import And, BooleanExpression, GreaterThanOrEqual, In, LessThanOrEqual, Or
    from pyiceberg.table import Table
except ImportError as missing:
    raise LakeNotInstalled(missing.name) from None
from sqlalchemy import Connection, Engine, text

from llmtap.lake import daily, schema
from llmtap.lake.catalog import STORE_TOKEN, WATERMARK, LakeError, ensure_tables, lake_files, watermark
from llmtap.storage.schema import EXCHANGE_FACT_COLUMNS, TOOL_CALL_FACT_COLUMNS

log = logging.getLogger("llmtap.lake")

CHUNK = 50_000  # rows per Iceberg commit: bounds the sync's memory (30,000 rows: about 300 MB)
ATTEMPTS = 20  # restarts after losing a commit to another sync, then a one-line error
SYNC_ID = "llmtap.sync"  # snapshot summary: which sync made the commit


@dataclass
class TableSync:
    """What one table's sync did: rows appended, keys deleted for the store's deletes
    (the summary: days replaced), commits made, restarts after a conflict, and the
    watermark the lake now holds."""

    table: str
    written: int = 0
    gone: int = 0
    commits: int = 0
    restarts: int = 0
    watermark: int = 0


@dataclass(frozen=True)
class _Source:
    name: str  # the lake table
    key: str  # the column commits delete by
    gone_sql: str  # keys the store deleted since :w and holds no row for now
    rows_sql: str  # the rows to copy, in key order


def _q(columns: tuple[str, ...], prefix: str) -> str:
    return ", ".join(f'{prefix}."{c}"' for c in columns)


_EXCHANGES = _Source(
    schema.EXCHANGES,
    "id",
    "SELECT DISTINCT d.exchange_id FROM fact_deletions d WHERE d.table_name = 'exchange_facts' "
    "AND d.revision >= :w AND NOT EXISTS (SELECT 1 FROM exchange_facts e WHERE e.id = d.exchange_id)",
    f"SELECT {_q(EXCHANGE_FACT_COLUMNS, 'e')}, e.revision FROM exchange_facts e WHERE e.revision >= :w ORDER BY e.id",
)
# A tool call's key is (exchange_id, position); commits replace an exchange's calls whole.
_TOOL_CALLS = _Source(
    schema.TOOL_CALLS,
    "exchange_id",
    "SELECT DISTINCT d.exchange_id FROM fact_deletions d WHERE d.table_name = 'tool_call_facts' "
    "AND d.revision >= :w AND NOT EXISTS (SELECT 1 FROM tool_call_facts t WHERE t.exchange_id = d.exchange_id)",
    f"SELECT {_q(TOOL_CALL_FACT_COLUMNS, 't')}, t.revision, e.started_at FROM tool_call_facts t "
    "LEFT JOIN exchange_facts e ON e.id = t.exchange_id WHERE t.exchange_id IN ("
    "SELECT exchange_id FROM tool_call_facts WHERE revision >= :w UNION "
    "SELECT exchange_id FROM fact_deletions WHERE table_name = 'tool_call_facts' AND revision >= :w) "
    "ORDER BY t.exchange_id, t.position",
)


Progress = Callable[[str, int], None]  # (table, rows written to it so far), after each commit


def sync(
    engine: Engine, catalog: SqlCatalog, *, chunk: int = CHUNK, progress: Progress | None = None
) -> list[TableSync]:
    """Bring the lake's tables up to the store; returns what each table's sync did. A lake
    file that cannot be read is a LakeError (catalog.lake_files)."""
    with lake_files(catalog):
        tables = ensure_tables(catalog)
        done = [
            _sync_table(engine, tables[source.name], source, chunk, progress) for source in (_EXCHANGES, _TOOL_CALLS)
        ]
        summary = TableSync(schema.DAILY, watermark=done[0].watermark)
        summary.written, summary.gone, summary.commits = daily.keep(
            catalog, tables[schema.EXCHANGES], tables[schema.TOOL_CALLS], tables[schema.DAILY]
        )
        done.append(summary)
    _trim(engine, {"exchange_facts": done[0].watermark, "tool_call_facts": done[1].watermark})
    return done


def _trim(engine: Engine, watermarks: dict[str, int]) -> None:
    """Drop the tombstones the lake has applied (below its watermark: no reader reads
    them). A store has one lake (catalog.py), so no other copy still needs them; a lake's
    watermark never goes back (each commit stacks on the snapshot it read it from)."""
    with engine.begin() as connection:
        for table_name, mark in watermarks.items():
            connection.execute(
                text("DELETE FROM fact_deletions WHERE table_name = :t AND revision < :w"), {"t": table_name, "w": mark}
            )


def _sync_table(engine: Engine, table: Table, source: _Source, chunk: int, progress: Progress | None) -> TableSync:
    result = TableSync(source.name)
    for attempt in range(ATTEMPTS):
        table.refresh()
        try:
            _copy(engine, table, source, chunk, result, progress)
            return result
        except (CommitFailedException, ValidationException):
            result.restarts += 1
            log.info("llmtap: another sync committed to %s first; starting again", source.name)
            time.sleep(random.uniform(0.05, 0.3) * (attempt + 1))
    raise LakeError(f"{source.name}: gave up after {ATTEMPTS} commits lost to other syncs; run lake sync again")


def _copy(
    engine: Engine, table: Table, source: _Source, chunk: int, result: TableSync, progress: Progress | None = None
) -> None:
    old, held_token = watermark(table)
    sync_id = secrets.token_hex(8)
    with _read(engine) as connection:
        new, token = _mark(connection)
        if held_token is not None and held_token != token:
            raise LakeError(
                f"{source.name} holds another store's facts (store token {held_token}, this store's {token}): "
                "sync each store to a warehouse of its own"
            )
        gone = [row[0] for row in connection.execute(text(source.gone_sql), {"w": old})]
        arrow_schema = table.schema().as_arrow()
        pending: pa.Table | None = None
        for batch in _batches(connection, source, old, arrow_schema, chunk):
            if pending is not None:
                _commit(table, source, pending, gone, {WATERMARK: str(old), STORE_TOKEN: token, SYNC_ID: sync_id})
                result.commits += 1
                result.written += pending.num_rows
                gone = []
                if progress is not None:
                    progress(source.name, result.written)
            pending = batch
        if pending is None and not gone:
            result.watermark = old
            return  # nothing changed: the watermark stays (readers read the same)
        final = {WATERMARK: str(new), STORE_TOKEN: token, SYNC_ID: sync_id}
        rows = pending if pending is not None else arrow_schema.empty_table()
        _commit(table, source, rows, gone, final)
        result.commits += 1
        result.written += rows.num_rows
        result.gone += len(gone)
        result.watermark = new
        if progress is not None:
            progress(source.name, result.written)


class _read:
    """A read of the store in one snapshot: REPEATABLE READ on PostgreSQL, a deferred
    transaction on SQLite (pysqlite would not begin one for a SELECT)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def __enter__(self) -> Connection:
        if self.engine.dialect.name == "postgresql":
            self.connection = self.engine.connect().execution_options(isolation_level="REPEATABLE READ")
        else:
            self.connection = self.engine.connect()
            self.connection.exec_driver_sql("BEGIN")
        return self.connection

    def __exit__(self, *exc: object) -> None:
        self.connection.rollback()
        self.connection.close()


def _mark(connection: Connection) -> tuple[int, str]:
    """The new watermark and the store's token, taken first in the read's snapshot."""
    n, token = connection.execute(text("SELECT n, token FROM fact_revision WHERE id = 1")).one()
    if connection.dialect.name == "postgresql":
        return _pg_watermark(connection), str(token)
    return int(n) + 1, str(token)


def _pg_watermark(connection: Connection) -> int:
    """The oldest transaction this read's snapshot does not see that could have written
    the store's tables, else the snapshot's xmax: every transaction below it has finished
    and is in the snapshot, or ran in another database. An in-progress transaction is left
    out only when pg_stat_activity shows its backend in another database (a long one there
    would otherwise hold the watermark back); one it cannot place (finished since, a
    subtransaction, a prepared one, a backend it may not see) is counted."""
    snapshot = connection.execute(text("SELECT pg_current_snapshot()::text")).scalar_one()
    _, xmax, listed = str(snapshot).split(":")
    running = [int(x) for x in listed.split(",") if x]
    if not running:
        return int(xmax)
    elsewhere = {
        int(xid)
        for (xid,) in connection.execute(
            text(
                "SELECT backend_xid::text::bigint FROM pg_stat_activity "
                "WHERE backend_xid IS NOT NULL AND datname IS DISTINCT FROM current_database()"
            )
        )
    }
    ours = [x for x in running if x % (1 << 32) not in elsewhere]
    return min(ours) if ours else int(xmax)


def _batches(
    connection: Connection, source: _Source, old: int, arrow_schema: pa.Schema, chunk: int
) -> Iterator[pa.Table]:
    """The rows to copy as Arrow tables of about `chunk` rows, never splitting a key."""
    result = connection.execution_options(stream_results=True).execute(text(source.rows_sql), {"w": old})
    try:
        names = list(result.keys())
        carry: list[Any] = []
        while True:
            fetched = result.fetchmany(chunk)
            rows = carry + list(fetched)
            carry = []
            if len(fetched) < chunk:  # the end
                break
            cut = _cut(rows, names.index(source.key))
            carry = rows[cut:]
            if cut:
                yield _arrow(rows[:cut], names, arrow_schema)
    finally:
        result.close()  # PostgreSQL's server-side cursor
    if rows:
        yield _arrow(rows, names, arrow_schema)


def _cut(rows: list[Any], key: int) -> int:
    """Where to end a batch so that the last key's rows stay together (tool calls)."""
    last = rows[-1][key]
    cut = len(rows)
    while cut > 0 and rows[cut - 1][key] == last:
        cut -= 1
    return cut if cut else len(rows)


def _arrow(rows: list[Any], names: list[str], arrow_schema: pa.Schema) -> pa.Table:
    columns = {name: [row[i] for row in rows] for i, name in enumerate(names)}
    for field in arrow_schema:
        values = columns[field.name]
        if pa.types.is_boolean(field.type):
            columns[field.name] = [None if v is None else bool(v) for v in values]
        elif pa.types.is_timestamp(field.type):
            columns[field.name] = [_instant(v) for v in values]
    return pa.table({field.name: pa.array(columns[field.name], field.type) for field in arrow_schema}, arrow_schema)


def _instant(value: Any) -> Any:
    """SQLite hands back naive UTC datetimes (or their text); PostgreSQL aware ones."""
    from datetime import UTC, datetime

    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def _commit(table: Table, source: _Source, rows: pa.Table, gone: list[str], properties: dict[str, str]) -> None:
    """Delete the batch's keys the lake holds and the gone ones, append the batch: one
    atomic commit, asserting the snapshot the keys were looked up in."""
    span = _span(rows)
    held = _held(table, source.key, rows.column(source.key), span)
    doomed: list[BooleanExpression] = []
    if held:  # a row keeps its start time: its older copy is in the same days' files
        keys = In(source.key, sorted(held))  # type: ignore[call-arg,arg-type]
        doomed.append(keys if span is None else And(span, keys))
    if gone:
        doomed.append(In(source.key, sorted(set(gone))))  # type: ignore[call-arg,arg-type]
    with table.transaction() as transaction:
        if doomed and table.current_snapshot() is not None:
            with warnings.catch_warnings():
                # A gone key the lake never held (a row made and deleted between syncs).
                warnings.filterwarnings("ignore", "Delete operation did not match any records")
                transaction.delete(Or(*doomed) if len(doomed) > 1 else doomed[0], snapshot_properties=properties)
        if rows.num_rows:
            transaction.append(rows, snapshot_properties=properties)


def _span(rows: pa.Table) -> BooleanExpression | None:
    """The batch's start times as a predicate the day partitions prune by (None when a
    row has none: a tool call whose exchange is gone)."""
    if rows.num_rows == 0 or "started_at" not in rows.column_names:
        return None
    started = rows.column("started_at")
    if started.null_count:
        return None
    low, high = pc.min(started).as_py(), pc.max(started).as_py()
    return And(
        GreaterThanOrEqual("started_at", low.isoformat()),  # type: ignore[call-arg,arg-type]
        LessThanOrEqual("started_at", high.isoformat()),  # type: ignore[call-arg,arg-type]
    )


def _held(table: Table, key: str, batch: pa.ChunkedArray, span: BooleanExpression | None) -> set[str]:
    """The batch's keys the lake already holds, looked up through a scan of the key column
    over the batch's key range (and days) only. pyiceberg's delete binds its key set again
    for every data file it plans (about a second per 50,000 keys, each file): new rows,
    whose ids are later than every file's (ids begin with their time), then need no delete
    at all, and changed rows' deletes plan only their days' files."""
    if batch.length() == 0 or table.current_snapshot() is None:
        return set()
    low, high = pc.min(batch).as_py(), pc.max(batch).as_py()
    within = And(GreaterThanOrEqual(key, low), LessThanOrEqual(key, high))  # type: ignore[call-arg,arg-type]
    if span is not None:
        within = And(within, span)
    found = table.scan(row_filter=within, selected_fields=(key,)).to_arrow().column(key)
    return set(pc.filter(found, pc.is_in(found, value_set=pc.unique(batch))).to_pylist())
