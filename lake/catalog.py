"""The lake's catalog: pyiceberg's `SqlCatalog` named `llmtap`, kept in the store's own
database (its tables `iceberg_tables` and `iceberg_namespace_properties` sit beside the
store's), and the tables of lake/schema.py created in it on first use. A store has one
lake: a sync to another warehouse than the one its tables live in is refused.

A warehouse is a folder (`/data/lake`, `file:///data/lake`) or `s3://bucket/prefix`,
written through pyiceberg's pyarrow FileIO. S3 settings come from the config file's
`[lake]` table (`s3.endpoint`, `s3.region`, `s3.access-key-id`, `s3.secret-access-key`,
any other pyiceberg FileIO property), else from the usual AWS environment; a custom
endpoint without a region gets one here, so that nothing asks AWS for the bucket's.

Not responsible for what the tables hold (sync.py) or for reading them in reports.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from llmtap.lake.extra import LakeNotInstalled

try:  # the lake extra (pyproject.toml): a one-line error without it
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.exceptions import (
        CommitFailedException,
        NamespaceAlreadyExistsError,
        NoSuchTableError,
        TableAlreadyExistsError,
    )
    from pyiceberg.exceptions import ValidationError as IcebergValidationError
    from pyiceberg.io import PY_IO_IMPL
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table
except ImportError as missing:
    raise LakeNotInstalled(missing.name) from None
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from llmtap.lake import private_io, schema
from llmtap.storage.private import private_dir

WATERMARK = "llmtap.watermark"  # snapshot summary: rows with revision >= it are not (all) in the lake
STORE_TOKEN = "llmtap.store_token"  # snapshot summary: the store's fact_revision.token
# pyiceberg retries a lost commit on top of the other writer's snapshot by itself; a sync
# must instead start again from the lake's new watermark (sync.py), so it never does.
TABLE_PROPERTIES = {"commit.retry.num-retries": "0"}
TABLES = {
    schema.EXCHANGES: (schema.EXCHANGES_SCHEMA, schema.EXCHANGES_PARTITIONS),
    schema.TOOL_CALLS: (schema.TOOL_CALLS_SCHEMA, schema.TOOL_CALLS_PARTITIONS),
    schema.DAILY: (schema.DAILY_SCHEMA, schema.DAILY_PARTITIONS),  # the summary (lake/daily.py)
}


class LakeError(Exception):
    """Something a user can fix about a warehouse or its settings (one line)."""


# What pyiceberg (and the pyarrow, Avro and pydantic readers under it) raise for a lake
# file it cannot make sense of: cut short (EOFError, and SystemError from its Avro
# decoder), not what it should be (pyiceberg's ValidationError for a metadata file;
# ValueError: pydantic's ValidationError, pyarrow's ArrowInvalid, UnicodeDecodeError). A
# file that is gone is an OSError, which the CLI reports as one line already (with the
# writes that fail).
DAMAGE = (EOFError, SystemError, ValueError, IcebergValidationError)


@contextmanager
def lake_files(catalog: SqlCatalog) -> Iterator[None]:
    """Within it, a damaged file of the catalog's lake is a LakeError naming the warehouse,
    not an internal error."""
    try:
        yield
    except DAMAGE as exc:
        where = catalog.properties.get("warehouse", "the warehouse")
        lines = str(exc).strip().splitlines() or [""]
        raise LakeError(
            f"the lake at {where} is damaged: a file of it cannot be read ({type(exc).__name__}: {lines[0][:300]})"
        ) from None


def warehouse_uri(warehouse: str) -> str:
    """`s3://…` as given (no trailing slash); a folder as an absolute `file://` URI."""
    if warehouse.startswith("s3://"):
        if len(warehouse) <= len("s3://") or warehouse[5] == "/":
            raise LakeError(f"not an S3 warehouse: {warehouse!r} (s3://bucket/prefix)")
        return warehouse.rstrip("/")
    if "://" in warehouse and not warehouse.startswith("file://"):
        raise LakeError(f"unsupported warehouse {warehouse!r}: a folder or s3://bucket/prefix")
    path = Path(warehouse.removeprefix("file://")).expanduser().resolve()
    return f"file://{path}"


CATALOG = "llmtap"  # the catalog's name in `iceberg_tables` (analytics/lake_views.py reads the same)


def open_catalog(store_url: str, warehouse: str, settings: Mapping[str, object] | None = None) -> SqlCatalog:
    """The warehouse's catalog in the store at `store_url` (a SQLAlchemy URL). Local files
    it writes are private to their user (lake/private_io.py)."""
    uri = warehouse_uri(warehouse)
    properties = {PY_IO_IMPL: private_io.PY_IO_IMPL}
    properties |= _with_region({str(k): str(v) for k, v in (settings or {}).items() if k != "warehouse"})
    if uri.startswith("file://"):
        private_dir(Path(uri.removeprefix("file://")))
    for attempt in range(3):
        try:
            return SqlCatalog(CATALOG, uri=store_url, warehouse=uri, **properties)
        except (IntegrityError, OperationalError, ProgrammingError):
            # two first syncs at once: both make the catalog's tables; the second's fails
            if attempt == 2:
                raise
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


def _with_region(properties: dict[str, str]) -> dict[str, str]:
    """A custom `s3.endpoint` (MinIO, a gateway, a test server) without a region: pyiceberg
    would ask AWS (s3.amazonaws.com) for the bucket's region before every sync, a call
    that leaves for AWS and, with no route there, a warning and a wait. The region is
    then the environment's (AWS_REGION, AWS_DEFAULT_REGION), else us-east-1, which such
    servers take by default; with AWS's own endpoint pyiceberg still finds it itself."""
    if properties.get("s3.endpoint") and not (properties.get("s3.region") or properties.get("client.region")):
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        properties = {**properties, "s3.region": region}
    return properties


def _with_new_columns(catalog: SqlCatalog, name: str, table: Table, wanted: Schema) -> Table:
    """A lake made before the store gained columns (schema 0013's verdicts) gains them by
    name, with ids of the table's own; the store's upgrade marked every row changed, so the
    next sync copies them whole. Two syncs at once: the second finds them added."""
    have = {field.name for field in table.schema().fields}
    if all(field.name in have for field in wanted.fields):
        return table
    try:
        with table.update_schema() as update:
            update.union_by_name(wanted)
    except CommitFailedException:
        pass  # another sync added them first
    return catalog.load_table(name)


def ensure_tables(catalog: SqlCatalog) -> dict[str, Table]:
    """The lake's tables, made when missing (two first syncs at once: one makes each)."""
    try:
        catalog.create_namespace(schema.NAMESPACE)
    except (NamespaceAlreadyExistsError, IntegrityError):  # IntegrityError: another sync made it just now
        pass
    tables = {}
    for name, (table_schema, partitions) in TABLES.items():
        try:
            tables[name] = catalog.load_table(name)
        except NoSuchTableError:
            try:
                tables[name] = catalog.create_table(
                    name, table_schema, partition_spec=partitions, properties=TABLE_PROPERTIES
                )
            except TableAlreadyExistsError:
                tables[name] = catalog.load_table(name)
        tables[name] = _with_new_columns(catalog, name, tables[name], table_schema)
        where = str(catalog.properties.get("warehouse", ""))
        if not tables[name].location().startswith(where + "/"):
            raise LakeError(
                f"this store's lake is at {tables[name].location().rsplit('/' + schema.NAMESPACE, 1)[0]}, not {where}: "
                "a store syncs to one warehouse"
            )
    return tables


def watermark(table: Table) -> tuple[int, str | None]:
    """The table's `llmtap.watermark` (0 for a table never synced) and store token."""
    snapshot = table.current_snapshot()
    if snapshot is None or snapshot.summary is None:
        return 0, None
    value = snapshot.summary[WATERMARK]
    return (int(value) if value else 0), snapshot.summary[STORE_TOKEN]
