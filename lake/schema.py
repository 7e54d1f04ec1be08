"""The lake's tables: `llmtap.exchanges` and `llmtap.tool_calls`, one column for each column
of the store's fact tables (storage/schema.py `exchange_facts`, `tool_call_facts`: what
reports read, costs in integer pico-dollars), under the same names, plus `revision` (the
store's change stamp the row was synced at). Exchanges are partitioned by the UTC day of
`started_at`; tool calls carry their exchange's `started_at` so they partition the same way.

`llmtap.daily` is the daily summary sync keeps beside them (analytics/lake_daily.py says
what it holds; its columns' DuckDB types become Iceberg ones here), partitioned by its
`day` (identity), so a day's rows are replaced by whole files.

Iceberg types: strings and JSON text as `string`, integers as `long`, booleans as
`boolean`, floats as `double`, times as `timestamptz` (instants, microseconds, UTC).

Not responsible for writing or reading the tables (sync and the readers are).
"""

from __future__ import annotations

from llmtap.lake.extra import LakeNotInstalled

try:  # the lake extra (pyproject.toml): a one-line error without it
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import DayTransform, IdentityTransform, MonthTransform
    from pyiceberg.types import (
        BooleanType,
        DateType,
        DecimalType,
        DoubleType,
        IcebergType,
        IntegerType,
        ListType,
        LongType,
        NestedField,
        StringType,
        StructType,
        TimestampType,
        TimestamptzType,
    )
except ImportError as missing:
    raise LakeNotInstalled(missing.name) from None
from sqlalchemy import BigInteger, Boolean, DateTime, Float, Integer, Table
from sqlalchemy.types import TypeDecorator

from llmtap.analytics import lake_daily
from llmtap.storage import schema as store

NAMESPACE = "llmtap"
EXCHANGES = f"{NAMESPACE}.exchanges"
TOOL_CALLS = f"{NAMESPACE}.tool_calls"
DAILY = f"{NAMESPACE}.{lake_daily.TABLE}"


def _iceberg_type(column_type: object) -> IcebergType:
    if isinstance(column_type, TypeDecorator):  # the store's own types (storage/storable.py)
        column_type = column_type.impl_instance
    if isinstance(column_type, Boolean):
        return BooleanType()
    if isinstance(column_type, (BigInteger, Integer)):
        return LongType()
    if isinstance(column_type, Float):
        return DoubleType()
    if isinstance(column_type, DateTime):
        return TimestamptzType()
    return StringType()


def _schema(table: Table, *, extra_started_at: bool) -> Schema:
    fields = []
    for index, column in enumerate(table.columns, start=1):
        fields.append(NestedField(index, column.name, _iceberg_type(column.type), required=bool(column.primary_key)))
    if extra_started_at:
        fields.append(NestedField(len(fields) + 1, "started_at", TimestamptzType(), required=False))
    return Schema(*fields)


EXCHANGES_SCHEMA = _schema(store.exchange_facts, extra_started_at=False)
TOOL_CALLS_SCHEMA = _schema(store.tool_call_facts, extra_started_at=True)


def _by_day(schema: Schema) -> PartitionSpec:
    source = schema.find_field("started_at").field_id
    return PartitionSpec(PartitionField(source_id=source, field_id=1000, transform=DayTransform(), name="day"))


EXCHANGES_PARTITIONS = _by_day(EXCHANGES_SCHEMA)
TOOL_CALLS_PARTITIONS = _by_day(TOOL_CALLS_SCHEMA)


def _daily_schema() -> Schema:
    """lake_daily.COLUMNS as Iceberg fields (a histogram: a list of {b, n} structs)."""
    scalar: dict[str, IcebergType] = {
        "DATE": DateType(),
        "VARCHAR": StringType(),
        "BIGINT": LongType(),
        "DOUBLE": DoubleType(),
        "DECIMAL(38,0)": DecimalType(38, 0),
        "TIMESTAMP": TimestampType(),  # naive UTC, as the reports' views hold times
        "BOOLEAN": BooleanType(),
    }
    fields = []
    ids = iter(range(1, 10_000))
    for name, duck_type in lake_daily.COLUMNS:
        field_id = next(ids)
        if duck_type == lake_daily.HISTOGRAM_TYPE:
            element = StructType(
                NestedField(next(ids), "b", IntegerType(), required=False),
                NestedField(next(ids), "n", LongType(), required=False),
            )
            kind: IcebergType = ListType(next(ids), element, element_required=False)
        else:
            kind = scalar[duck_type]
        fields.append(NestedField(field_id, name, kind, required=name == "day"))
    return Schema(*fields)


DAILY_SCHEMA = _daily_schema()
# a file a month and grain (lake_daily.GRAIN): a report reads 12 a year, of its grain
DAILY_PARTITIONS = PartitionSpec(
    PartitionField(
        source_id=DAILY_SCHEMA.find_field("day").field_id, field_id=1000, transform=MonthTransform(), name="month"
    ),
    PartitionField(
        source_id=DAILY_SCHEMA.find_field(lake_daily.GRAIN).field_id,
        field_id=1001,
        transform=IdentityTransform(),
        name=lake_daily.GRAIN,
    ),
)
