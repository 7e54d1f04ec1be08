"""Whether the store changed since the served dashboard last gathered its data.

At a million exchanges one gathering (`data.collect`) takes seconds, and the page polls
every few seconds: gathering again when nothing changed only keeps a core busy. `StoreMark`
reads a cheap mark of the store's state; `Fresh` keeps the last gathering and hands it out
again while the mark stands (and for at most `MAX_AGE_S`, so a page never shows data older
than that whatever the mark says).

The mark: on SQLite, the size and modification time of the database file and its WAL
(every commit appends to the WAL; a checkpoint rewrites the file); on PostgreSQL, the
row counters of the tables reports read (`pg_stat_user_tables`, cumulative inserts, updates
and deletes; flushed within about a second of a commit). Where neither can be read (no such
file, statistics off) there is no mark and every poll gathers again.

Not responsible for what is gathered (`data.py`) nor for serving it (`serve.py`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, bindparam, text

MAX_AGE_S = 300.0
_TABLES = ("exchanges", "tool_calls", "store_settings")


def store_mark(engine: Engine) -> tuple[Any, ...] | None:
    """A value that changes whenever the store's content does (None: cannot tell)."""
    url = engine.url
    if url.get_backend_name() == "sqlite":
        if not url.database or url.database == ":memory:":
            return None
        marks: list[tuple[int, int] | None] = []
        for suffix in ("", "-wal"):
            try:
                found = os.stat(url.database + suffix)
            except OSError:
                marks.append(None)
                continue
            marks.append((found.st_size, found.st_mtime_ns))
        return tuple(marks) if marks[0] is not None else None
    if url.get_backend_name() == "postgresql":
        query = text(
            "SELECT relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables "
            "WHERE schemaname = current_schema() AND relname = ANY(:names) ORDER BY relname"
        ).bindparams(bindparam("names", value=list(_TABLES)))
        with engine.connect() as connection:
            rows = connection.execute(query).all()
        return tuple(tuple(row) for row in rows) or None
    return None


class Fresh:
    """The last value `gather` made, made again only when `mark` changed (or it aged)."""

    def __init__(
        self, gather: Callable[[], Any], mark: Callable[[], Any], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._gather = gather
        self._mark = mark
        self._clock = clock
        self._lock = threading.Lock()
        self._value: Any = None
        self._made_at = 0.0
        self._made_with: Any = None

    def __call__(self) -> Any:
        with self._lock:
            mark = self._mark()
            now = self._clock()
            if self._value is None or mark is None or mark != self._made_with or now - self._made_at > MAX_AGE_S:
                self._value = self._gather()
                # the mark read before gathering: a write during it shows on the next poll
                self._made_with, self._made_at = mark, now
            return self._value
