"""Opening the store for a command: an engine at the schema's head, or a one-line error;
and, for a command that reads it, a line about records still waiting in the spool."""

from __future__ import annotations

import sys

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from llmtap.cli.settings import Settings
from llmtap.storage.engine import make_engine
from llmtap.storage.errors import StoreError
from llmtap.storage.migrate import ensure_current


def open_store(settings: Settings, *, migrate: bool = True) -> Engine:
    """The store at head; with `migrate=False` (`db upgrade`, `db current`) as it is, but
    reachable all the same: a database that cannot be opened is one line either way."""
    engine = make_engine(settings.db)
    if migrate:
        ensure_current(engine)
        return engine
    try:
        with engine.connect():
            pass
    except SQLAlchemyError as exc:
        first = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        raise StoreError(f"cannot open the database: {first[0] if first else type(exc).__name__}") from None
    return engine


def say_what_waits(settings: Settings) -> None:
    """One line on stderr when the spool holds records the store does not have yet (the
    database was away when they came): a report, the log or a dashboard does not count
    them. The next proxy or `llmtap import` on this spool writes them."""
    from llmtap.storage.spool import waiting

    size, records = waiting(settings.spool_dir)
    if not size:
        return
    what = f"{records} records" if records is not None else f"{size / (1 << 20):.0f} MiB of records"
    print(
        f"llmtap: {what} wait in the spool at {settings.spool_dir} and are not in the store yet "
        "(the next proxy or `llmtap import` writes them)",
        file=sys.stderr,
    )
