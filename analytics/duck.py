"""DuckDB over the store, in place: SQLite through sqlite_scanner, PostgreSQL through
postgres_scanner, both loaded by file path from their PyPI packages (DuckDB cannot
download extensions here), with automatic install and load off.

The store's tables are exposed as views with the types reports expect: timestamps as
UTC `TIMESTAMP` (SQLite keeps them as naive text, PostgreSQL as `timestamptz`), booleans
as `BOOLEAN` (SQLite keeps 0/1), JSON as text, and money as integer pico-dollars (SQLite
would turn a NUMERIC into a lossy REAL, so the store never uses one).

The views read `exchange_facts` and `tool_call_facts`, the narrow copies of what reports
read that the store keeps by triggers (storage/facts.py): a scan reads about a quarter of
the bytes. A connection that will run many reports (the dashboard) can snapshot those
columns into native DuckDB tables once (`snapshot=True`): one pass over the store
instead of one per report, and native scans after it. A single report does better
without: a snapshot costs more than the one pass the report makes anyway.

Not responsible for what the reports compute (see `reports.py` and `sql/`).
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable, Mapping
from typing import Any

import duckdb
import duckdb_extension_postgres_scanner
import duckdb_extension_sqlite_scanner
from sqlalchemy.engine import make_url

from llmtap.analytics import facts_cache
from llmtap.analytics.sql_quoting import literal
from llmtap.storage.errors import StoreError

_BOOLEANS = ("streamed", "complete", "text_truncated", "request_stream", "valid_json", "warmup")
# The view over each table reads its narrow copy, kept by triggers (storage/facts.py); the
# callers (the CLI's commands) bring the store to the current revision before connecting.
_SOURCES = {"exchanges": "exchange_facts", "tool_calls": "tool_call_facts"}
_KEYS = {"exchanges": ("id",), "tool_calls": ("exchange_id", "position")}


MEMORY_DEFAULT = 3 << 30  # bytes: a report over years of a fleet's lake stays under 4 GB


def memory_settings() -> dict[str, str]:
    """What a report's DuckDB may hold in memory, and where it spills the rest.

    DuckDB's own default is 80% of the machine's memory, which a report's window over a
    fleet's history (cache, tools, conversations over 100M exchanges) fills: 20 GB and
    more. The limit is `LLMTAP_DUCKDB_MEMORY` (DuckDB's notation: `8GB`), else 3 GiB or
    half the machine's memory if that is less; past it DuckDB spills to a folder of its
    own under the system's temporary directory (made when first needed and removed when
    the connection closes), never the `.tmp` in the caller's working directory."""
    import tempfile
    import uuid

    limit = os.environ.get("LLMTAP_DUCKDB_MEMORY", "").strip()
    if not limit:
        try:
            physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            physical = 2 * MEMORY_DEFAULT
        limit = f"{min(MEMORY_DEFAULT, physical // 2) >> 20}MB"
    spill = pathlib.Path(tempfile.gettempdir()) / f"llmtap-duckdb-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    return {"memory_limit": limit, "temp_directory": str(spill)}


def extension_path(package: Any, name: str) -> str:
    folder = pathlib.Path(package.__file__).parent / "extensions" / f"v{duckdb.__version__}"
    path = folder / f"{name}.duckdb_extension"
    if not path.exists():
        raise RuntimeError(f"DuckDB extension {name} for DuckDB {duckdb.__version__} is not installed at {path}")
    return str(path)


def connect(
    url: str,
    *,
    snapshot: bool = False,
    cached: bool = True,
    build: bool = False,
    lake: str | None = None,
    lake_settings: dict[str, str] | None = None,
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the store attached read-only as `store`, and views over
    its facts: on a SQLite store, over the columnar copy kept beside it (facts_cache.py;
    `cached=False`: never; `build`: make it now if it must be made again, however
    large); else over the store itself (with `snapshot`, over tables of the columns
    reports read, copied once). With `lake` (a warehouse), over that lake's Iceberg
    tables plus the store's rows it does not hold yet (lake_views.py)."""
    connection = duckdb.connect(
        config={
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "threads": 2,
            **memory_settings(),
        }
    )
    connection.execute("SET enable_progress_bar = false")  # never a bar in a report's output
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if not parsed.database or parsed.database == ":memory:":
            connection.close()
            # not the store's database: ATTACH would open one of its own, empty
            raise StoreError("reports read a store in a file: an in-memory SQLite database holds nothing to read")
        connection.execute(f"LOAD '{extension_path(duckdb_extension_sqlite_scanner, 'sqlite_scanner')}'")
        # ATTACH takes no bound parameters: the path is quoted as an SQL string literal.
        connection.execute(f"ATTACH {literal(parsed.database)} AS store (TYPE sqlite, READ_ONLY)")
        kind = "sqlite"
    else:
        connection.execute(f"LOAD '{extension_path(duckdb_extension_postgres_scanner, 'postgres_scanner')}'")
        connection.execute(f"ATTACH {literal(_libpq(parsed))} AS store (TYPE postgres, READ_ONLY)")
        kind = "postgres"
    selects = _selects(connection, kind)
    cached = cached and os.environ.get("LLMTAP_FACTS_COPY", "1") != "0"  # 0: never keep a copy
    if (
        kind == "sqlite"
        and cached
        and facts_cache.attach(connection, str(parsed.database), _cache_sources(selects), build=build)
    ):
        for table in _SOURCES:  # the copy is native already: no snapshot to take
            connection.execute(f"CREATE TEMP VIEW {table} AS SELECT * EXCLUDE (revision) FROM facts.{table}")
        if lake:
            _over_lake(connection, lake, lake_settings, {t: f"SELECT * FROM facts.{t}" for t in _SOURCES})
        return connection
    for table, source in _SOURCES.items():
        connection.execute(f"CREATE TEMP VIEW {table} AS SELECT {selects[table]} FROM store.{source}")
    if lake:
        scan = "sqlite_query" if kind == "sqlite" else "postgres_query"  # through the store's revision index
        if kind == "sqlite":
            # The scans of an attached SQLite file share its one handle, and a lake's view
            # reads the tail twice (its anti join and its union): two threads preparing on
            # that handle at once crash the scanner (a segfault in sqlite3_prepare_v2).
            connection.execute("SET threads = 1")
        tails = {t: _tail(scan, selects[t], s) for t, s in _SOURCES.items()}
        _over_lake(connection, lake, lake_settings, tails)
    if snapshot:
        _snapshot(connection)
    return connection


def _tail(scan: str, select: str, source: str) -> Callable[[int], str]:
    """The store's rows at or after a lake's watermark, read by the store itself."""

    def query(watermark: int) -> str:
        inner = f"SELECT * FROM {source} WHERE revision >= {int(watermark)} OR revision IS NULL"
        return f"SELECT {select}, \"revision\" FROM {scan}('store', {literal(inner)})"

    return query


def _over_lake(
    connection: duckdb.DuckDBPyConnection,
    lake: str,
    settings: dict[str, str] | None,
    tails: Mapping[str, str | Callable[[int], str]],
) -> None:
    from llmtap.analytics import lake_views

    try:
        lake_views.attach(connection, lake, tails, properties=settings)
    except BaseException:
        connection.close()
        raise


def refresh(connection: duckdb.DuckDBPyConnection) -> None:
    """After this connection's own process changed the store (`report` pricing what was
    stored unpriced): bring the facts copy, when the connection reads one, up to date."""
    attached = {row[0] for row in connection.execute("SELECT database_name FROM duckdb_databases()").fetchall()}
    if "facts" in attached:
        facts_cache.refresh(connection, _cache_sources(_selects(connection, "sqlite")))


def _cache_sources(selects: dict[str, str]) -> list[facts_cache.Source]:
    return [facts_cache.Source(source, table, _KEYS[table], selects[table]) for table, source in _SOURCES.items()]


def _libpq(parsed: Any) -> str:
    parts = {
        "host": parsed.host or "127.0.0.1",
        "port": parsed.port or 5432,
        "user": parsed.username,
        "password": parsed.password,
        "dbname": parsed.database,
    }
    return " ".join(f"{k}={_quote(str(v))}" for k, v in parts.items() if v)


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _selects(connection: duckdb.DuckDBPyConnection, kind: str) -> dict[str, str]:
    """Each view's select list: the store's columns with the types reports expect."""
    selects = {}
    for table, source in _SOURCES.items():
        # The column types as the scanner sees them (information_schema is slow to ask).
        found = connection.execute(f"SELECT * FROM store.{source} LIMIT 0").description
        columns = [(d[0], str(d[1])) for d in found if d[0] != "revision"]
        selects[table] = ", ".join(_column(name, data_type, kind) for name, data_type in columns)
    return selects


def _column(name: str, data_type: str, kind: str) -> str:
    quoted = f'"{name}"'
    if name.endswith("_at"):
        if kind == "postgres" or "TIME ZONE" in data_type.upper():
            # The instant's UTC wall time: from its epoch microseconds, which is integer
            # arithmetic, rather than timezone('UTC', …), an ICU calendar call per value
            # (35 times slower; a tenth of a scan of 1M exchanges).
            return f"make_timestamp(epoch_us({quoted})) AS {quoted}"
        return f"CAST({quoted} AS TIMESTAMP) AS {quoted}"
    if name in _BOOLEANS:
        return f"CAST({quoted} AS BOOLEAN) AS {quoted}"
    if data_type.upper() in ("JSON", "JSONB"):
        return f"CAST({quoted} AS VARCHAR) AS {quoted}"
    return quoted


def _snapshot(connection: duckdb.DuckDBPyConnection) -> None:
    """Copy what the views read (the narrow copies: only what reports read) into temp
    tables and point the views at them. The copy's row order is free (every report sorts
    what it returns): kept in scan order, the copy costs twice the CPU at 1M exchanges."""
    connection.execute("SET preserve_insertion_order = false")
    try:
        for table in _SOURCES:
            connection.execute(f"CREATE TEMP TABLE {table}_snapshot AS SELECT * FROM {table}")
            connection.execute(f"CREATE OR REPLACE TEMP VIEW {table} AS SELECT * FROM {table}_snapshot")
    finally:
        connection.execute("SET preserve_insertion_order = true")
