"""Scratch PostgreSQL databases for benchmarks and tests: a fresh database per run,
dropped afterwards (`WITH (FORCE)`), never the server itself.

Not responsible for the schema (callers migrate) or for SQLite (a temp file does).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from llmtap.storage.engine import normalize_url


@contextmanager
def scratch_postgres(admin_url: str, prefix: str = "llmtap_scratch") -> Iterator[str]:
    """CREATE DATABASE <prefix>_<random>, yield its URL, DROP it after."""
    admin_url = normalize_url(admin_url)
    name = f"{prefix}_{secrets.token_hex(6)}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def postgres_reachable(admin_url: str) -> bool:
    try:
        engine = create_engine(normalize_url(admin_url), connect_args={"connect_timeout": 3}, poolclass=NullPool)
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        engine.dispose()
        return True
    except Exception:  # noqa: BLE001 - unreachable for any reason: the caller skips it
        return False
