"""Opening the store for a command: an engine at the schema's head, or a one-line error."""

from __future__ import annotations

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
