"""For the lake readers' tests: a lake made from a store's facts with pyiceberg alone, as
`llmtap lake sync` would leave it (its SQL catalog in the store's database, the tables of
llmtap.lake.schema partitioned by day, the watermark and store token in the snapshot's
summary), and the store's change stamp to take a watermark from.

Each day's rows go to a Parquet file of their own, added with `add_files` (which finds the
file's day from its column bounds): pyiceberg's `append` of a day-partitioned table needs
the `pyiceberg-core` package, which is not installed.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
from sqlalchemy import select, text

from llmtap.analytics.lake_views import CATALOG
from llmtap.lake import schema as lake
from llmtap.storage import schema as store
from llmtap.storage.engine import make_engine


def watermark_now(url: str) -> int:
    """A watermark that covers every change the store has committed so far."""
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            if engine.dialect.name == "sqlite":
                return int(connection.execute(text("SELECT n FROM fact_revision WHERE id = 1")).scalar_one()) + 1
            return int(
                connection.execute(text("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint")).scalar_one()
            )
    finally:
        engine.dispose()


def sync(url: str, warehouse: Path, watermark: int) -> None:
    """Replace the store's lake by one holding its fact rows with `revision < watermark`."""
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            token = connection.execute(text("SELECT token FROM fact_revision WHERE id = 1")).scalar_one()
            facts = store.exchange_facts
            exchanges = [
                dict(r._mapping) for r in connection.execute(select(facts).where(facts.c.revision < watermark))
            ]
            calls = store.tool_call_facts
            started = select(calls, facts.c.started_at).join(facts, facts.c.id == calls.c.exchange_id)
            tool_calls = [dict(r._mapping) for r in connection.execute(started.where(calls.c.revision < watermark))]
    finally:
        engine.dispose()
    catalog = SqlCatalog(CATALOG, uri=url, warehouse=f"file://{warehouse}")
    catalog.create_namespace_if_not_exists(lake.NAMESPACE)
    properties = {"llmtap.watermark": str(watermark), "llmtap.store_token": str(token)}
    try:
        _write(catalog, warehouse, exchanges, tool_calls, properties, f"{token}-{watermark}")
    finally:
        catalog.engine.dispose()


def _write(
    catalog: SqlCatalog, warehouse: Path, exchanges: list, tool_calls: list, properties: dict, stem: str
) -> None:
    for name, iceberg_schema, spec, rows in (
        (lake.EXCHANGES, lake.EXCHANGES_SCHEMA, lake.EXCHANGES_PARTITIONS, exchanges),
        (lake.TOOL_CALLS, lake.TOOL_CALLS_SCHEMA, lake.TOOL_CALLS_PARTITIONS, tool_calls),
    ):
        if catalog.table_exists(name):
            catalog.drop_table(name)
        table = catalog.create_table(name, iceberg_schema, partition_spec=spec)
        arrow = iceberg_schema.as_arrow()
        by_day: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            by_day[_utc(row["started_at"]).date().isoformat()].append({f.name: _value(row.get(f.name)) for f in arrow})
        files = []
        for day, day_rows in sorted(by_day.items()):
            path = warehouse / "llmtap" / name.split(".")[1] / "data" / f"day={day}" / f"{stem}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.Table.from_pylist(day_rows, schema=arrow), path)
            files.append(f"file://{path}")
        if files:
            table.add_files(files, snapshot_properties=properties)
        else:
            table.append(pa.Table.from_pylist([], schema=arrow), snapshot_properties=properties)


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _value(value: Any) -> Any:
    return _utc(value) if isinstance(value, datetime) else value
