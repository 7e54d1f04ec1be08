"""Alembic, driven from code: bring a database to the head revision (or any other).

The migration scripts live in `migrations/` (the `llmtap.migrations` package), so this
works from an installed wheel with no alembic.ini. Several processes may start on one
store at once (a fleet of proxies on one PostgreSQL, two commands on one SQLite file):
one migrates, the others wait for it and then find the store current. On PostgreSQL a
session advisory lock serialises them; on SQLite the migration's transaction begins with
`BEGIN IMMEDIATE`, the file's write lock, so Alembic reads the revision only once no other
process can change it (pysqlite would otherwise run the DDL outside any transaction).

Not responsible for the tables' shape (see `schema.py`) nor for connections (see `engine.py`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from llmtap import migrations
from llmtap.storage.errors import StoreError

if TYPE_CHECKING:
    from alembic.config import Config

# One key for "llmtap migrates this database" (advisory locks are per database); the
# number is arbitrary, chosen not to collide with small keys other tools pick.
ADVISORY_LOCK_KEY = 0x6C6C_6D74_6170_0001  # "llmtap" 0001
# How long a process waits for another's migration before it gives up. A migration of a
# large SQLite store rebuilds tables; minutes, not hours.
LOCK_WAIT_S = 600.0


def alembic_config() -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(Path(migrations.__file__).parent))
    config.set_main_option("file_template", "%%(year)d_%%(month).2d_%%(day).2d_%%(rev)s_%%(slug)s")
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    from alembic import command

    _run(engine, lambda config: command.upgrade(config, revision))


def downgrade(engine: Engine, revision: str) -> None:
    from alembic import command

    _run(engine, lambda config: command.downgrade(config, revision))


def current(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def heads() -> list[str]:
    from alembic.script import ScriptDirectory

    return list(ScriptDirectory.from_config(alembic_config()).get_heads())


def ensure_current(engine: Engine) -> None:
    """Upgrade a new or older database to head; a no-op when it is already there. A store
    at head is known by one read of its revision table, without Alembic (its import and
    the scripts' reading are most of a report's start-up)."""
    if _at_head(engine):
        return
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


def _at_head(engine: Engine) -> bool:
    """Whether the store's one revision is migrations.HEAD (False when it cannot tell: no
    revision table yet, several rows, or any error, which the slow path then reports)."""
    try:
        with engine.connect() as connection:
            found = connection.execute(text("SELECT version_num FROM alembic_version")).fetchall()
    except SQLAlchemyError:
        return False
    return [tuple(row) for row in found] == [(migrations.HEAD,)]


def _known(revision: str) -> bool:
    from alembic.script import ScriptDirectory
    from alembic.util import CommandError

    try:
        return ScriptDirectory.from_config(alembic_config()).get_revision(revision) is not None
    except CommandError:
        return False


def _foreign_keys(connection: Connection, *, on: bool) -> None:
    connection.exec_driver_sql(f"PRAGMA foreign_keys={'ON' if on else 'OFF'}")
    connection.commit()


def _run(engine: Engine, action: Callable[[Config], None]) -> None:
    from alembic.util import CommandError

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
                with _one_migrator(connection), connection.begin():
                    if sqlite:
                        _begin_immediate(connection)
                    config.attributes["connection"] = connection
                    action(config)
            finally:
                if sqlite:
                    _foreign_keys(connection, on=True)
    except (SQLAlchemyError, CommandError) as exc:  # CommandError: e.g. an unknown revision
        raise StoreError(f"migration failed: {_first_line(exc)}") from None


@contextmanager
def _one_migrator(connection: Connection) -> Iterator[None]:
    """On PostgreSQL, hold the migration lock for the session around the migration's
    transaction: taken and committed before that transaction begins, so the migration
    reads the revision the previous holder committed whatever the isolation level. The
    lock ends with the session if the process dies."""
    if connection.dialect.name != "postgresql":
        yield
        return
    connection.exec_driver_sql(f"SET lock_timeout = {int(LOCK_WAIT_S * 1000)}")
    connection.exec_driver_sql(f"SELECT pg_advisory_lock({ADVISORY_LOCK_KEY})")
    connection.commit()
    try:
        yield
    finally:
        connection.rollback()
        connection.exec_driver_sql(f"SELECT pg_advisory_unlock({ADVISORY_LOCK_KEY})")
        connection.exec_driver_sql("RESET lock_timeout")
        connection.commit()


def _begin_immediate(connection: Connection) -> None:
    """Take SQLite's write lock now, waiting (beyond the busy timeout) while another
    process migrates. pysqlite runs DDL in autocommit mode unless a transaction is open;
    after this, the whole migration is one transaction (SQLite's DDL is transactional)."""
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            connection.exec_driver_sql("BEGIN IMMEDIATE")
            return
        except OperationalError as exc:
            if "locked" not in str(exc.orig) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _first_line(exc: Exception) -> str:
    text = str(getattr(exc, "orig", None) or exc)
    return text.strip().splitlines()[0] if text.strip() else exc.__class__.__name__
