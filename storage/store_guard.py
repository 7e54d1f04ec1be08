"""The writer's watch on its store: whether it is away (down, locked, read-only, refusing
connections) or gone (its SQLite file deleted or replaced, its tables dropped), the backoff
before the next try, one log line when it goes and one when it is back, and making a gone
store again (a fresh SQLite file, the migrations) before anything is written to it.

`StoreGuard` owns the writer's engine: making the store again replaces it.

Not responsible for what is written or where it goes meanwhile (storage.delivery spools
it), nor for telling an away store from a refused row's own fault beyond `is_unavailable`.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from llmtap.storage import migrate
from llmtap.storage.errors import StoreError
from llmtap.storage.sink import WriterStats

log = logging.getLogger("llmtap.storage")


class StoreVanished(SQLAlchemyError):
    """The SQLite file was deleted or replaced while the writer had it open."""


class StoreGuard:
    """The store's state as the writer's thread sees it. `down_until` is when the next try
    may be made (0.0: now); `gone` why the store must be made again before the next write."""

    def __init__(self, engine: Engine, stats: WriterStats, *, retry_initial: float, retry_max: float) -> None:
        self.engine = engine
        self.stats = stats
        self.retry_initial = retry_initial
        self.retry_max = retry_max
        self.down_until = 0.0
        self._backoff = retry_initial
        self._away_since: float | None = None  # when the database went away (one line each way)
        self.dialect = engine.dialect.name
        self.sqlite_file = sqlite_file(engine)
        self._file_identity = identity(self.sqlite_file)
        self.gone: str | None = None  # why the store must be made again before the next write

    def went_down(self, exc: Exception) -> None:
        self.stats.db_errors += 1
        if store_gone(exc) and self.gone is None:
            self.gone = first_line(exc)
            log.warning(
                "llmtap writer: the store is gone (%s); spooling until it is made again at %s",
                self.gone,
                self.label(),
            )
        elif self._away_since is None:
            log.warning("llmtap writer: database unavailable (%s); spooling", first_line(exc))
        if self._away_since is None:
            self._away_since = time.monotonic()
        self.down_until = time.monotonic() + self._backoff
        self._backoff = min(self._backoff * 2, self.retry_max)

    def check_file(self) -> None:
        """A SQLite file deleted or replaced under us: the pool's connections would go on
        writing into the deleted file, which nobody will ever read."""
        if self.sqlite_file is None:
            return
        now = identity(self.sqlite_file)
        if self._file_identity is None:
            self._file_identity = now  # made by this writer's first connection
        elif now != self._file_identity:
            raise StoreVanished(f"the database file {self.sqlite_file} was deleted or replaced")

    def revive(self) -> bool:
        """A store that vanished or lost its tables is made again (a new SQLite file, the
        migrations) before anything is written to it; False while that fails."""
        if self.gone is None:
            return True
        try:
            if self.sqlite_file is not None:
                self._fresh_sqlite_engine()
            migrate.ensure_current(self.engine)
        except (StoreError, SQLAlchemyError, OSError) as exc:
            self.stats.db_errors += 1
            self.down_until = time.monotonic() + self._backoff
            self._backoff = min(self._backoff * 2, self.retry_max)
            log.debug("llmtap writer: the store cannot be made again yet: %s", exc)
            return False
        self._file_identity = identity(self.sqlite_file)
        log.warning(
            "llmtap writer: made the store again at %s (%s); writing the spool into it", self.label(), self.gone
        )
        self.gone = None
        return True

    def _fresh_sqlite_engine(self) -> None:
        """Drop the connections to the deleted file and open the path afresh. A -wal or
        -shm file left beside a missing database belongs to the deleted one: SQLite would
        apply that log to the new file."""
        from llmtap.storage.engine import make_engine

        assert self.sqlite_file is not None
        url = self.engine.url.render_as_string(hide_password=False)
        self.engine.dispose()
        if not self.sqlite_file.exists():
            for suffix in ("-wal", "-shm", "-journal"):
                self.sqlite_file.with_name(self.sqlite_file.name + suffix).unlink(missing_ok=True)
        self.engine = make_engine(url)

    def label(self) -> str:
        return str(self.sqlite_file) if self.sqlite_file else self.engine.url.render_as_string(hide_password=True)

    def came_up(self) -> None:
        if self._away_since is not None:  # also when it is found back at shutdown, backoff or not
            log.warning("llmtap writer: database is back (away %.0f s)", time.monotonic() - self._away_since)
            self._away_since = None
        self.down_until = 0.0
        self._backoff = self.retry_initial


def sqlite_file(engine: Engine) -> Path | None:
    if engine.dialect.name != "sqlite":
        return None
    database = engine.url.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database).expanduser().absolute()


def identity(path: Path | None) -> tuple[int, int] | None:
    if path is None:
        return None
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def store_gone(exc: Exception) -> bool:
    """The file deleted, or the tables gone (a database dropped and made again empty)."""
    if isinstance(exc, StoreVanished):
        return True
    orig = getattr(exc, "orig", None)
    if getattr(orig, "sqlstate", None) == "42P01":  # PostgreSQL's undefined_table
        return True
    return type(orig).__name__ == "OperationalError" and str(orig).startswith("no such table")


def is_unavailable(exc: SQLAlchemyError) -> bool:
    """Away (down, locked, read-only, refusing connections, the store gone) rather than
    refusing a row."""
    from sqlalchemy.exc import IntegrityError, OperationalError

    if store_gone(exc):
        return True
    if isinstance(exc, IntegrityError):
        return False
    if isinstance(exc, OperationalError):
        return True
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    name = type(getattr(exc, "orig", None)).__name__
    return name in ("OperationalError", "InterfaceError", "ConnectionException", "AdminShutdown")


def first_line(exc: Exception) -> str:
    """An error as one line: the driver's message when there is one."""
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else exc.__class__.__name__
