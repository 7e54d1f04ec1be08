"""Opening the store for a command: an engine at the schema's head, or a one-line error."""

from __future__ import annotations

from sqlalchemy import Engine

from llmtap.cli.settings import Settings
from llmtap.storage.engine import make_engine
from llmtap.storage.migrate import ensure_current


def open_store(settings: Settings, *, migrate: bool = True) -> Engine:
    engine = make_engine(settings.db)
    if migrate:
        ensure_current(engine)
    return engine
