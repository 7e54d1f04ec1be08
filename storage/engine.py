"""Where the store is and how to connect: the default SQLite file, URL normalisation,
and SQLite tuned for a recorder (WAL, a busy timeout, foreign keys).

A new SQLite file is created private to its user (`private.py`).

Not responsible for the schema's version (see `migrate.py`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import ConnectionPoolEntry

from llmtap.storage.errors import StoreError, shown_url


def home() -> Path:
    """llmtap's own folder: the default database, the spool, the fingerprint secret."""
    return Path(os.environ.get("LLMTAP_HOME") or Path.home() / ".llmtap")


def default_url() -> str:
    return os.environ.get("LLMTAP_DB") or f"sqlite:///{home() / 'llmtap.db'}"


def normalize_url(url: str) -> str:
    """`postgresql://` means psycopg 3 here (psycopg2 is not a dependency). A URL that
    cannot be used is a `StoreError` whose message never shows its password."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as exc:  # ValueError: a port that is not a number
        why = "" if isinstance(exc, ArgumentError) else f" ({exc})"
        raise StoreError(f"not a database URL: {shown_url(url)!r}{why}") from None
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.drivername not in ("sqlite", "sqlite+pysqlite", "postgresql+psycopg"):
        raise StoreError(f"unsupported database {parsed.drivername!r}: use sqlite:// or postgresql://")
    if parsed.get_backend_name() == "sqlite" and (parsed.username or parsed.password or parsed.host or parsed.port):
        # SQLAlchemy refuses it too, but only in create_engine, after the file was made
        raise StoreError(f"not a SQLite URL: {shown_url(url)!r} (a file is sqlite:///PATH, no user or host)")
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        if not _is_uri(parsed.query, parsed.database):
            _refuse_unusable_path(Path(parsed.database).expanduser())
    return parsed.render_as_string(hide_password=False)


def _refuse_unusable_path(path: Path) -> None:
    """A SQLite path under a file, or naming a folder: SQLite would only say "unable to
    open database file", so say which part of the path is wrong."""
    if path.is_dir():
        raise StoreError(f"cannot use {str(path)!r} as the store: it is a folder, not a database file")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise StoreError(f"cannot use {str(path)!r} as the store: {str(parent)!r} is a file, not a folder")
            return


def make_engine(url: str | None = None, *, busy_timeout_ms: int = 5000) -> Engine:
    url = normalize_url(url or default_url())
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database
        if database and database != ":memory:" and not _is_uri(parsed.query, database):
            _create_store_file(Path(database).expanduser())
        engine = _create(url, connect_args={"timeout": busy_timeout_ms / 1000})
        event.listen(engine, "connect", _sqlite_pragmas(busy_timeout_ms))
        return engine
    return _create(url, pool_pre_ping=True, connect_args={"connect_timeout": 5})


def _create(url: str, **kwargs: Any) -> Engine:
    """`create_engine`, whose refusal of the URL's arguments (`?port=x`) is a `StoreError`."""
    try:
        return create_engine(url, **kwargs)
    except (ArgumentError, ValueError, TypeError) as exc:
        raise StoreError(f"not a usable database URL: {shown_url(url)!r} ({exc})") from None


def _is_uri(query: Mapping[str, object], database: str) -> bool:
    """`?uri=true` hands SQLite a `file:` URI (e.g. `mode=ro`): not a path to create."""
    return str(query.get("uri", "")).lower() in ("true", "1") or database.startswith("file:")


def _create_store_file(path: Path) -> None:
    """The database file made 0600 before SQLite opens it: SQLite gives its -wal, -shm and
    -journal files the database file's mode, so they are private too."""
    from llmtap.storage.private import create_private, private_dir

    try:
        private_dir(path.parent)
        create_private(path)
    except OSError:
        pass  # SQLite's own open says what is wrong with the path, as it always did


def _sqlite_pragmas(busy_timeout_ms: int) -> Callable[[DBAPIConnection, ConnectionPoolEntry], None]:
    def on_connect(dbapi_connection: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
        except Exception:  # noqa: BLE001 - a read-only file cannot switch modes; reads still work
            pass
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    return on_connect
