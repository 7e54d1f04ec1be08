"""Price stored exchanges: the ones recorded before a price was known (imported, or stored
while the pricer was off), or all of them after the price data or the local price file
changed. Each priced row keeps the version of the price data it was priced with.

Not responsible for the prices themselves (see `pricing.py`).
"""

from __future__ import annotations

from sqlalchemy import Engine, bindparam, select, update

from llmtap.analytics.pricing import Pricer, cost_columns, tokens_of
from llmtap.storage.export import utc
from llmtap.storage.rows import PRICE_COLUMNS
from llmtap.storage.schema import exchanges

PAGE = 2000
_INPUT = (
    "id",
    "provider",
    "model",
    "started_at",
    "usage_input_tokens",
    "usage_cache_read_input_tokens",
    "usage_cache_creation_input_tokens",
    "usage_cache_creation_5m_input_tokens",
    "usage_cache_creation_1h_input_tokens",
    "usage_output_tokens",
    "usage_reasoning_output_tokens",
)


def reprice(engine: Engine, pricer: Pricer, *, everything: bool = False) -> int:
    """Price the rows never priced (or every row); returns how many were priced."""
    columns = [exchanges.c[name] for name in _INPUT]
    done = 0
    last_id = ""
    statement = (
        update(exchanges)
        .where(exchanges.c.id == bindparam("row_id"))
        .values({name: bindparam(name) for name in PRICE_COLUMNS})
    )
    while True:
        query = select(*columns).where(exchanges.c.id > last_id).order_by(exchanges.c.id).limit(PAGE)
        if not everything:
            query = query.where(exchanges.c.price_status.is_(None))
        with engine.begin() as connection:
            rows = [dict(row) for row in connection.execute(query).mappings()]
            if not rows:
                return done
            updates = []
            for row in rows:
                cost = pricer.price(row["provider"], row["model"], utc(row["started_at"]), tokens_of(row))
                updates.append({"row_id": row["id"], **cost_columns(cost)})
            connection.execute(statement, updates)
        done += len(rows)
        last_id = rows[-1]["id"]
