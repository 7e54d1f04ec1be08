"""Alembic, driven from code: bring a database to the head revision (or any other).

The migration scripts live in `migrations/` (the `llmtap.migrations` package), so this
works from an installed wheel with no alembic.ini. Not responsible for the tables' shape
(see `schema.py`) nor for connections (see `engine.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from llmtap import migrations
from llmtap.storage.errors import StoreError


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(Path(migrations.__file__).parent))
    config.set_main_option("file_template", "%%(year)d_%%(month).2d_%%(day).2d_%%(rev)s_%%(slug)s")
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    _run(engine, lambda config: command.upgrade(config, revision))


def downgrade(engine: Engine, revision: str) -> None:
    _run(engine, lambda config: command.downgrade(config, revision))


def current(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def heads() -> list[str]:
    return list(ScriptDirectory.from_config(alembic_config()).get_heads())


def ensure_current(engine: Engine) -> None:
    """Upgrade a new or older database to head; a no-op when it is already there."""
    try:
        revision = current(engine)
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot open the database: {_first_line(exc)}") from None
    if revision in heads():
        return
    if revision is not None and not _known(revision):
        raise StoreError(
            f"the database is at schema revision {revision!r}, which this llmtap does not know (a newer llmtap's?)"
        )
    upgrade(engine)


def _known(revision: str) -> bool:
    try:
        return ScriptDirectory.from_config(alembic_config()).get_revision(revision) is not None
    except CommandError:
        return False


def _foreign_keys(connection: Connection, *, on: bool) -> None:
    connection.exec_driver_sql(f"PRAGMA foreign_keys={'ON' if on else 'OFF'}")
    connection.commit()


def _run(engine: Engine, action: Callable[[Config], None]) -> None:
    config = alembic_config()
    try:
        with engine.connect() as connection:
            # SQLite's batch mode rebuilds a table (copy, drop, rename): with foreign keys
            # on, dropping `exchanges` would cascade into `tool_calls` and delete its rows.
            # The pragma is a no-op inside a transaction, so it is set before one begins.
            sqlite = connection.dialect.name == "sqlite"
            if sqlite:
                _foreign_keys(connection, on=False)
            try:
                with connection.begin():
                    config.attributes["connection"] = connection
                    action(config)
            finally:
                if sqlite:
                    _foreign_keys(connection, on=True)
    except (SQLAlchemyError, CommandError) as exc:  # CommandError: e.g. an unknown revision
        raise StoreError(f"migration failed: {_first_line(exc)}") from None


def _first_line(exc: Exception) -> str:
    text = str(getattr(exc, "orig", None) or exc)
    return text.strip().splitlines()[0] if text.strip() else exc.__class__.__name__
