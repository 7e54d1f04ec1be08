"""Settings that belong to the store, not to one machine's config (table
`store_settings`): read, set and remove one JSON value by key. The key `price_file`
({name, digest, content}) is the price file every command prices that store with, so a
shared PostgreSQL store prices alike for every machine; `fingerprint_secret` names the
secret its key fingerprints are made with (storage/store_secret.py).

Not responsible for what a value means (the price file: analytics/pricing.py and
cli/pricing.py) or for the schema (migration 0006).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine, delete, insert, select

from llmtap.storage.schema import store_settings

PRICE_FILE = "price_file"


def read(engine: Engine, key: str) -> Any:
    """The value set under `key`, or None."""
    with engine.connect() as connection:
        return read_in(connection, key)


def read_in(connection: Connection, key: str) -> Any:
    return connection.execute(select(store_settings.c.value).where(store_settings.c.key == key)).scalar()


def write(engine: Engine, key: str, value: Any) -> None:
    """Set `key` to `value` (JSON), replacing what was there, in one transaction."""
    with engine.begin() as connection:
        connection.execute(delete(store_settings).where(store_settings.c.key == key))
        connection.execute(insert(store_settings).values(key=key, value=value, updated_at=datetime.now(UTC)))


def add_in(connection: Connection, key: str, value: Any) -> None:
    """Set `key`, which must not be set: raises IntegrityError when another transaction
    set it first (the first one wins, nothing is replaced)."""
    connection.execute(insert(store_settings).values(key=key, value=value, updated_at=datetime.now(UTC)))


def remove(engine: Engine, key: str) -> bool:
    """Remove `key`; whether it was set."""
    with engine.begin() as connection:
        return connection.execute(delete(store_settings).where(store_settings.c.key == key)).rowcount > 0
