"""Reports over the lake: point a DuckDB connection's `exchanges` and `tool_calls` views
(analytics/duck.py) at the Iceberg tables `llmtap lake sync` wrote, plus the store's rows
the lake does not hold yet, each row counted once.

What the lake holds: each table's current snapshot names, in its summary properties, the
store it was copied from (`llmtap.store_token`, the store's `fact_revision.token`) and a
watermark (`llmtap.watermark`): every change the store made to that table at a revision
below the watermark is in the lake. So a view is
  lake rows whose key is neither in the store's tail nor deleted since (hash anti joins)
  ∪ the tail: the store's fact rows with `revision >= watermark` (or no revision),
where "deleted since" are the store's tombstones (`fact_deletions`) at `revision >=
watermark`. A store row and a lake row of the same key: the store's wins. A store without
`fact_deletions` (before the sync's migration) has no tombstones to read. The tail and
the tombstones are views over the store, read at each query: what a report prices before
it runs (cli/pricing.catch_up) is what it reads.

DuckDB alone reads the lake (no pyiceberg: its import costs a report seconds): the
tables' current metadata files from the SQL catalog pyiceberg keeps in the store's own
database (`iceberg_tables`, through the attached store), the watermark from that file's
current snapshot, and the rows with its `iceberg` extension, loaded by file path from
its PyPI package like the scanners; an `s3://` warehouse also through `httpfs`, with the
S3 settings handed in. The lake's columns take the types the store's views give:
timestamps as naive UTC `TIMESTAMP`, the rest cast to the store view's type.

A report that reads only the exchanges started in its --since/--until window runs inside
`window()`: the views then read only the lake's files of those days. The window reaches
the Iceberg scan as a filter on the lake's own `started_at` (the table is partitioned by
its day, and each data file's bounds are in the manifests), through two DuckDB variables
the views test; a filter on the views' converted `started_at` would not reach the scan,
so every file would be read. Outside `window()` the variables are unset and the views
read every day (the cache, tools and conversation reports need the turns before the window).

The lake's daily summary (`llmtap.daily`): when its snapshot was made from the exchanges
table's current one, attach() also makes it readable (lake_daily.attach: the views
`lake_daily`, `lake_tail_days`, `lake_gone_keys`, `lake_gone_days`, and the variable
lake_daily.ENABLED), and the reports it answers read it (lake_daily.gather); else they
read rows, as before it.

Not responsible for writing the lake (llmtap.lake.sync), for the views over the store
(duck.py) or for what the reports compute.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb

from llmtap.analytics.sql_quoting import identifier, literal
from llmtap.storage.errors import StoreError, mask_passwords

log = logging.getLogger("llmtap.analytics")

CATALOG = "llmtap"  # the SQL catalog's name in the store's database (lake sync uses it too)
NAMESPACE = "llmtap"
WATERMARK = "llmtap.watermark"
STORE_TOKEN = "llmtap.store_token"
# DuckDB variables: the window of a report that reads only its --since/--until days (window())
SINCE = "llmtap_lake_since"
UNTIL = "llmtap_lake_until"
_EPOCH = datetime(1970, 1, 1)
# view -> (the lake table, the store's fact table, its key)
TABLES = {
    "exchanges": ("exchanges", "exchange_facts", ("id",)),
    "tool_calls": ("tool_calls", "tool_call_facts", ("exchange_id", "position")),
}


class LakeError(StoreError):
    """The lake cannot be read as asked (none there, another store's, unreadable)."""


# what DuckDB raises for a file it cannot open or read (gone, cut short, not Parquet/Avro)
READ_ERRORS = (duckdb.IOException, duckdb.HTTPException, duckdb.InvalidInputException)


@dataclass(frozen=True)
class LakeTable:
    """One lake table as its current snapshot has it: None for `metadata` when it holds no
    snapshot yet (then everything is the store's tail)."""

    name: str
    metadata: str | None
    watermark: int
    token: str | None
    snapshot: int | None = None  # the current snapshot's id
    # the columns the snapshot's schema gives its rows: name -> whether an instant (timestamptz)
    columns: Mapping[str, bool] = field(default_factory=dict)


def attach(
    connection: duckdb.DuckDBPyConnection,
    warehouse: str,
    tails: Mapping[str, str | Callable[[int], str]],
    *,
    properties: Mapping[str, str] | None = None,
) -> dict[str, LakeTable]:
    """Redefine the views `exchanges` and `tool_calls` of `connection` (made by duck.py,
    with the store attached as `store`) as lake ∪ store tail. `tails[view]` is a query of
    the store's rows for that view, in the view's columns plus `revision` (or a function of
    the watermark giving one that reads only the rows at or after it). `properties`: the
    lake's S3 settings in pyiceberg's names (`s3.endpoint`, `s3.access-key-id`, …)."""
    load_extensions(connection, warehouse, properties or {})
    try:
        tables = read_state(connection, warehouse)
        token = _store_token(connection)
        for table in tables.values():
            if table.token is not None and table.token != token:
                raise LakeError(
                    f"the lake at {warehouse} holds another store's records (store token {table.token}, "
                    f"this store's {token}): give this store's warehouse"
                )
        gone = _tombstones(connection)
        for view, (lake_name, store_table, key) in TABLES.items():
            _point(connection, view, tables[lake_name], tails[view], gone, store_table, key)
        _summary(connection, warehouse, tables["exchanges"], tables["tool_calls"], gone)
    except READ_ERRORS as exc:  # files gone or damaged, S3 away or refusing
        raise LakeError(f"cannot read the lake at {warehouse}: {mask_passwords(first_line(exc))}") from None
    return tables


@contextmanager
def window(connection: duckdb.DuckDBPyConnection, since: datetime | None, until: datetime | None) -> Iterator[None]:
    """While a query runs that reads only the rows started at or after `since` and before
    `until` (naive datetimes are UTC): the lake's views read only the files of those days.
    The query must itself keep to the window (the views may still hand it rows outside,
    from the store's tail); on a connection without a lake, nothing changes. Inside
    another window, the inner one must lie within it; the outer is back after it."""
    before = current_window(connection)
    try:
        _set_window(connection, since, until)
        yield
    finally:
        for name in (SINCE, UNTIL):
            connection.execute(f"RESET VARIABLE {name}")
        _set_window(connection, *before)


def _set_window(connection: duckdb.DuckDBPyConnection, since: datetime | None, until: datetime | None) -> None:
    for name, moment in ((SINCE, since), (UNTIL, until)):
        if moment is not None:
            instant = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
            connection.execute(f"SET VARIABLE {name} = TIMESTAMPTZ '{instant.isoformat(sep=' ')}'")


def current_window(connection: duckdb.DuckDBPyConnection) -> tuple[datetime | None, datetime | None]:
    """The window a query on `connection` is inside (window()), as naive UTC datetimes."""
    found = connection.execute(
        f"SELECT epoch_us(CAST(getvariable('{SINCE}') AS TIMESTAMPTZ)), "
        f"epoch_us(CAST(getvariable('{UNTIL}') AS TIMESTAMPTZ))"
    ).fetchone() or (None, None)
    since, until = (None if us is None else _EPOCH + timedelta(microseconds=int(us)) for us in found)
    return since, until


def read_state(connection: duckdb.DuckDBPyConnection, warehouse: str) -> dict[str, LakeTable]:
    """Each lake table's current metadata file, watermark and store token: the file from
    pyiceberg's SQL catalog in the store's database (its table `iceberg_tables`, read through
    the attached store), the rest from that file's current snapshot. DuckDB alone: no
    pyiceberg import (seconds) in a report."""
    none_there = LakeError(
        f"no lake for this store at {warehouse}: run `llmtap lake sync --warehouse {warehouse}` first"
    )
    try:
        found = connection.execute(
            "SELECT table_name, metadata_location FROM store.iceberg_tables "
            "WHERE catalog_name = ? AND table_namespace = ?",
            [CATALOG, NAMESPACE],
        ).fetchall()
    except duckdb.CatalogException:  # no sync ever ran on this store
        raise none_there from None
    locations = {str(name): str(location) for name, location in found if location}
    tables = {}
    for lake_name, _store_table, _key in TABLES.values():
        if lake_name not in locations:
            raise none_there
        metadata = _metadata(connection, locations[lake_name])
        if not _under(str(metadata.get("location", "")), warehouse):
            raise LakeError(f"this store's lake is at {metadata.get('location')}, not under {warehouse}")
        snapshot = _current_snapshot(metadata, locations[lake_name])
        if snapshot is None:  # tables made, nothing committed yet
            tables[lake_name] = LakeTable(lake_name, None, 0, None)
            continue
        _check_manifests(connection, snapshot, locations[lake_name])
        summary = snapshot.get("summary") or {}
        if not isinstance(summary, dict):
            raise _damaged(locations[lake_name], "its current snapshot has no summary")
        try:
            watermark = int(summary.get(WATERMARK, ""))
        except ValueError:
            raise LakeError(
                f"the lake table {NAMESPACE}.{lake_name} at {warehouse} has no {WATERMARK} in its "
                "current snapshot: it was not written by `llmtap lake sync`"
            ) from None
        tables[lake_name] = LakeTable(
            lake_name,
            locations[lake_name],
            watermark,
            summary.get(STORE_TOKEN),
            snapshot.get("snapshot-id"),
            held_columns(metadata, snapshot, locations[lake_name]),
        )
    return tables


def _summary(
    connection: duckdb.DuckDBPyConnection,
    warehouse: str,
    exchanges: LakeTable,
    tool_calls: LakeTable,
    gone: str | None,
) -> None:
    """The lake's daily summary made readable (lake_daily.attach) when it is there, made
    from the exchanges' and the tool calls' current snapshots, and in the rows' current
    shape (lake_daily.SHAPE: an older one holds NULL in the newer columns); else the
    reports read rows."""
    from llmtap.analytics import lake_daily

    connection.execute(f"RESET VARIABLE {lake_daily.ENABLED}")
    if exchanges.metadata is None or exchanges.snapshot is None:
        return
    found = connection.execute(
        "SELECT metadata_location FROM store.iceberg_tables WHERE catalog_name = ? AND table_namespace = ? "
        "AND table_name = ?",
        [CATALOG, NAMESPACE, lake_daily.TABLE],
    ).fetchone()
    if found is None or not found[0]:
        return  # a lake from before the summary: its next sync makes it
    metadata = _metadata(connection, str(found[0]))
    snapshot = _current_snapshot(metadata, str(found[0]))
    if snapshot is None or not _under(str(metadata.get("location", "")), warehouse):
        return
    summary = snapshot.get("summary") or {}
    calls = "" if tool_calls.snapshot is None else str(tool_calls.snapshot)
    if (
        not isinstance(summary, dict)
        or summary.get(lake_daily.SUMMARIZED) != str(exchanges.snapshot)
        or summary.get(lake_daily.SUMMARIZED_TOOL_CALLS) != calls
    ):
        log.debug("llmtap: the lake's summary is older than its exchanges or tool calls: reports read rows")
        return
    if summary.get(lake_daily.SHAPED) != lake_daily.SHAPE:
        log.debug("llmtap: the lake's summary is of an older shape: reports read rows until the next sync")
        return
    _check_manifests(connection, snapshot, str(found[0]))
    held = set(held_columns(metadata, snapshot, str(found[0])))
    gone_keys = gone_days = None
    if gone is not None:
        scan = f"iceberg_scan({literal(exchanges.metadata)})"
        gone_keys = (
            f"SELECT exchange_id FROM {gone} WHERE table_name IN ('exchange_facts', 'exchanges') "
            f"AND revision >= {int(exchanges.watermark)}"
        )
        gone_days = (
            f"SELECT DISTINCT CAST(make_timestamp(epoch_us(l.started_at)) AS DATE) AS day FROM {scan} AS l "
            f"SEMI JOIN ({gone_keys}) AS g ON g.exchange_id = l.id"
        )
    lake_daily.attach(connection, str(found[0]), held, gone_keys, gone_days)


def held_columns(metadata: dict[str, Any], snapshot: dict[str, Any], location: str) -> dict[str, bool]:
    """The columns of the rows of `snapshot` (its schema's top-level fields, as DuckDB's
    iceberg reader reads them: the snapshot's own schema, else the table's current one),
    each with whether it holds instants (`timestamptz`, read as TIMESTAMP WITH TIME ZONE).
    Read from the metadata file the caller holds, where a DESCRIBE of the scan would read
    the manifests again: 50 ms for the exchanges of a 100M-exchange lake, at every report."""
    wanted = snapshot.get("schema-id", metadata.get("current-schema-id"))
    schemas = metadata.get("schemas")
    if not isinstance(schemas, list):  # a v1 table may hold its one schema as `schema`
        schemas = [metadata.get("schema")]
    found = [s for s in schemas if isinstance(s, dict)]
    schema = next((s for s in found if wanted is None or s.get("schema-id", wanted) == wanted), None)
    fields = schema.get("fields") if schema is not None else None
    if not isinstance(fields, list) or not all(isinstance(f, dict) and isinstance(f.get("name"), str) for f in fields):
        raise _damaged(location, "its snapshot's schema lists no columns")
    return {f["name"]: f.get("type") in ("timestamptz", "timestamptz_ns") for f in fields}


def _damaged(location: str, what: str) -> LakeError:
    return LakeError(f"the lake is damaged: {what} (the table of {location})")


def _current_snapshot(metadata: dict[str, Any], location: str) -> dict[str, Any] | None:
    """The current snapshot of a table's metadata, once the parts DuckDB's iceberg reader
    takes for granted are there: a table metadata file without its schemas, or whose
    current schema or snapshot is not listed, crashes it (a segfault), never an error."""
    schemas, snapshots = metadata.get("schemas"), metadata.get("snapshots", [])
    if "schemas" in metadata or "schema" not in metadata:  # v2 lists them; v1 may have one
        if not isinstance(schemas, list) or not all(isinstance(schema, dict) for schema in schemas):
            raise _damaged(location, "it lists no schemas")
        if not any(schema.get("schema-id") == metadata.get("current-schema-id") for schema in schemas):
            raise _damaged(location, "its current schema is not among its schemas")
    if not isinstance(snapshots, list) or not all(isinstance(snapshot, dict) for snapshot in snapshots):
        raise _damaged(location, "its snapshots are not a list of snapshots")
    current = metadata.get("current-snapshot-id")
    if current is None or current == -1:
        return None
    snapshot = next((s for s in snapshots if s.get("snapshot-id") == current), None)
    if snapshot is None:
        raise _damaged(location, f"its current snapshot {current} is not among its snapshots")
    return snapshot


def _check_manifests(connection: duckdb.DuckDBPyConnection, snapshot: dict[str, Any], location: str) -> None:
    """The snapshot's manifest list read with DuckDB's Avro reader, and every manifest it
    names there at the length the list gives it: DuckDB's Avro reader reports a list that
    is gone, cut short or not Avro as an error, but its iceberg reader aborts the process
    (an exception where none may be thrown) on a manifest that is gone or cut short. Only
    the manifests' sizes are read (a stat each), not their content."""
    listing = snapshot.get("manifest-list")
    if not isinstance(listing, str):
        raise _damaged(location, "its current snapshot names no manifest list")
    try:
        listed = connection.execute("SELECT manifest_path, manifest_length FROM read_avro(?)", [listing]).fetchall()
        sizes = _sizes(connection, [str(path) for path, _length in listed])
    except duckdb.Error as exc:
        raise _damaged(location, mask_passwords(first_line(exc))) from None
    for path, length in listed:
        size = sizes.get(str(path))
        if size != length:
            what = "is gone" if size is None else f"has {size:,} bytes, not the {length:,} it was written with"
            raise _damaged(location, f"its manifest {path} {what}")


def _sizes(connection: duckdb.DuckDBPyConnection, paths: list[str]) -> dict[str, int]:
    """The size of each file that is there: a stat each in a folder (DuckDB's read_blob
    costs a millisecond a file), a HEAD each through httpfs in S3."""
    import os

    remote = [path for path in paths if path.startswith(("s3://", "s3a://"))]
    sizes = {}
    for path in set(paths) - set(remote):
        try:
            sizes[path] = os.stat(path.removeprefix("file://")).st_size
        except OSError:
            pass  # gone
    if remote:
        sizes |= {
            str(name): int(size)
            for name, size in connection.execute("SELECT filename, size FROM read_blob(?)", [remote]).fetchall()
        }
    return sizes


def unreadable(warehouse: str, exc: BaseException) -> LakeError | None:
    """For an error a query over the lake's views raised: a one-line LakeError when it is
    about one of the lake's files (one that went or was damaged since the views were made:
    a data file removed mid-report, a Parquet file cut short), else None (not the lake's)."""
    if not isinstance(exc, READ_ERRORS):
        return None
    text = first_line(exc)
    place = warehouse.removeprefix("file://").rstrip("/")
    if place.startswith(("s3://", "s3a://")):
        place = place.split("://", 1)[1]
    else:
        import os

        place = os.path.realpath(os.path.expanduser(place))
    if place not in text:
        return None
    return LakeError(f"cannot read the lake at {warehouse}: {mask_passwords(text)}")


def _metadata(connection: duckdb.DuckDBPyConnection, location: str) -> dict[str, Any]:
    """A table's metadata file (JSON), read by DuckDB (a folder, or S3 through httpfs)."""
    row = connection.execute("SELECT content FROM read_text(?)", [location]).fetchone()
    if row is None:  # read_text takes a pattern: a file that is not there matches nothing
        raise LakeError(f"cannot read the lake: its metadata file {location} is not there")
    try:
        found = json.loads(row[0])
    except ValueError:
        found = None
    if not isinstance(found, dict):
        raise LakeError(f"the lake's metadata file {location} is not Iceberg table metadata")
    return found


def _point(
    connection: duckdb.DuckDBPyConnection,
    view: str,
    table: LakeTable,
    tail: str | Callable[[int], str],
    gone: str | None,
    store_table: str,
    key: tuple[str, ...],
) -> None:
    columns = connection.execute(f"DESCRIBE SELECT * FROM {view}").fetchall()
    names = [(str(row[0]), str(row[1])) for row in columns]
    # the view's types, whatever the tail's reader says (sqlite_query may call a number text)
    select = ", ".join(f"CAST(t.{identifier(name)} AS {data_type}) AS {identifier(name)}" for name, data_type in names)
    rows = tail(table.watermark) if callable(tail) else tail
    connection.execute(
        f"CREATE OR REPLACE TEMP VIEW lake_tail_{view} AS SELECT {select} FROM ({rows}) AS t "
        f"WHERE t.revision IS NULL OR CAST(t.revision AS BIGINT) >= {int(table.watermark)}"
    )
    if table.metadata is None:
        connection.execute(f"CREATE OR REPLACE TEMP VIEW {view} AS SELECT * FROM lake_tail_{view}")
        return
    scan = f"iceberg_scan({literal(table.metadata)})"
    held = table.columns
    typed = ", ".join(_typed(name, data_type, held.get(name)) for name, data_type in names)
    # plain hash anti joins with the small side (tail, tombstones) built: a correlated NOT
    # EXISTS became a join on every lake key's distinct value (10 s, 3.6 GB at 10M rows)
    match = " AND ".join(f"t.{identifier(k)} = l.{identifier(k)}" for k in key)
    joins = [f"ANTI JOIN lake_tail_{view} AS t ON {match}"]
    if gone is not None:
        since = int(table.watermark)
        names_of = f"('{store_table}', '{view}')"
        if view == "exchanges":
            joins.append(
                f"ANTI JOIN (SELECT exchange_id FROM {gone} WHERE table_name IN {names_of} AND revision >= {since}) "
                "AS g ON g.exchange_id = l.id"
            )
        else:  # a tool call is gone with its own tombstone or with its exchange's
            joins.append(
                f"ANTI JOIN (SELECT exchange_id, position FROM {gone} WHERE table_name IN {names_of} "
                f"AND revision >= {since}) AS g ON g.exchange_id = l.exchange_id AND g.position = l.position"
            )
            joins.append(
                f"ANTI JOIN (SELECT exchange_id FROM {gone} WHERE table_name IN ('exchange_facts', 'exchanges') "
                f"AND revision >= {since}) AS ge ON ge.exchange_id = l.exchange_id"
            )
    conditions = ["true"]
    if "started_at" in held:  # a report's window (window()), on the column the files are partitioned by
        conditions.append(f"(getvariable('{SINCE}') IS NULL OR l.started_at >= getvariable('{SINCE}'))")
        conditions.append(f"(getvariable('{UNTIL}') IS NULL OR l.started_at < getvariable('{UNTIL}'))")
    connection.execute(
        f"CREATE OR REPLACE TEMP VIEW {view} AS "
        f"SELECT {typed} FROM {scan} AS l {' '.join(joins)} WHERE {' AND '.join(conditions)} "
        f"UNION ALL SELECT * FROM lake_tail_{view}"
    )


def _typed(name: str, data_type: str, instant: bool | None) -> str:
    """A lake column in the store view's type (`TIMESTAMP`: the instant's UTC wall time);
    `instant`: whether the lake holds it as one, None when it does not hold it."""
    quoted = identifier(name)
    if instant is None:  # a column the lake does not have (yet): what the store would say of it
        return f"CAST(NULL AS {data_type}) AS {quoted}"
    if instant:
        return f"make_timestamp(epoch_us(l.{quoted})) AS {quoted}"
    return f"CAST(l.{quoted} AS {data_type}) AS {quoted}"


def _tombstones(connection: duckdb.DuckDBPyConnection) -> str | None:
    """The store's `fact_deletions` as a view, or None when the store has none (yet)."""
    try:
        connection.execute("SELECT table_name, exchange_id, position, revision FROM store.fact_deletions LIMIT 0")
    except duckdb.Error:
        log.debug("llmtap: the store has no fact_deletions table: no deletions since the lake's watermark")
        return None
    connection.execute(
        "CREATE OR REPLACE TEMP VIEW lake_gone AS SELECT CAST(table_name AS VARCHAR) AS table_name, "
        "CAST(exchange_id AS VARCHAR) AS exchange_id, CAST(position AS BIGINT) AS position, "
        "CAST(revision AS BIGINT) AS revision FROM store.fact_deletions"
    )
    return "lake_gone"


def _store_token(connection: duckdb.DuckDBPyConnection) -> str | None:
    try:
        row = connection.execute("SELECT token FROM store.fact_revision WHERE id = 1").fetchone()
    except duckdb.Error:
        return None
    return None if row is None else str(row[0])


def load_extensions(connection: duckdb.DuckDBPyConnection, warehouse: str, properties: Mapping[str, str]) -> None:
    from llmtap.analytics.duck import extension_path

    try:  # the lake extra (pyproject.toml), like pyiceberg for `lake sync`
        import duckdb_extension_avro  # type: ignore[import-untyped]
        import duckdb_extension_httpfs  # type: ignore[import-untyped]
        import duckdb_extension_iceberg  # type: ignore[import-untyped]
    except ImportError as missing:
        raise LakeError(
            "reading a lake needs the lake extra: pip install 'llmtap[lake]' (or in a checkout: "
            f"uv sync --extra lake); {missing.name} is not installed"
        ) from None
    connection.execute(f"LOAD '{extension_path(duckdb_extension_avro, 'avro')}'")
    connection.execute(f"LOAD '{extension_path(duckdb_extension_iceberg, 'iceberg')}'")
    if warehouse.startswith(("s3://", "s3a://")):
        connection.execute(f"LOAD '{extension_path(duckdb_extension_httpfs, 'httpfs')}'")
        try:
            connection.execute(_s3_secret(properties))
        except duckdb.Error as exc:  # its message may quote the statement, keys and all: never shown
            raise LakeError(f"the lake's S3 settings are not usable by DuckDB ({type(exc).__name__})") from None


def _s3_secret(properties: Mapping[str, str]) -> str:
    """DuckDB's S3 secret from pyiceberg's S3 settings (`s3.endpoint`, `s3.access-key-id`,
    `s3.secret-access-key`, `s3.region`), else the usual AWS environment variables."""
    import os

    environment = {
        "s3.access-key-id": os.environ.get("AWS_ACCESS_KEY_ID", ""),
        "s3.secret-access-key": os.environ.get("AWS_SECRET_ACCESS_KEY", ""),
        "s3.region": os.environ.get("AWS_REGION", os.environ.get("AWS_DEFAULT_REGION", "")),
    }
    properties = {**{k: v for k, v in environment.items() if v}, **properties}
    parts = ["TYPE s3"]
    endpoint = properties.get("s3.endpoint")
    if endpoint:
        scheme, _, host = endpoint.partition("://")
        if not host:
            scheme, host = "https", endpoint
        parts += [f"ENDPOINT {literal(host.rstrip('/'))}", "URL_STYLE 'path'"]
        parts.append(f"USE_SSL {'true' if scheme == 'https' else 'false'}")
    if properties.get("s3.access-key-id"):
        parts.append(f"KEY_ID {literal(properties['s3.access-key-id'])}")
        parts.append(f"SECRET {literal(properties.get('s3.secret-access-key', ''))}")
    if properties.get("s3.region"):
        parts.append(f"REGION {literal(properties['s3.region'])}")
    return f"CREATE OR REPLACE SECRET llmtap_lake ({', '.join(parts)})"  # in memory: this connection's


def _under(location: str, warehouse: str) -> bool:
    def plain(text: str) -> str:
        text = text.removeprefix("file://").rstrip("/")
        return text.replace("s3a://", "s3://")

    import os

    here, there = plain(location), plain(warehouse)
    if not there.startswith("s3://"):
        there = os.path.realpath(os.path.expanduser(there))
        here = os.path.realpath(here) if not here.startswith("s3://") else here
    return here == there or here.startswith(there + "/")


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
