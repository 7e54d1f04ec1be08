"""Price stored exchanges: the ones recorded before a price was known (imported, or stored
while the pricer was off), the ones a local price file now names or no longer names (so
`llmtap report cost --prices FILE` reports with that file, and without it reports
genai-prices alone again), or all of them after the price data changed. Each priced row
keeps the version of the price data it was priced with.

Not responsible for the prices themselves (see `pricing.py`).
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, Engine, and_, bindparam, or_, select, update

from llmtap.analytics.pricing import FILE_MARK, Pricer, cost_columns, tokens_of
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


def stale(pricer: Pricer) -> ColumnElement[bool]:
    """Rows whose stored price may differ from what `pricer` says: never priced; priced
    with a price file that is not the pricer's; of a model the pricer's file names, but
    priced without that file."""
    c = exchanges.c
    other_file = and_(c.price_version.contains(FILE_MARK, autoescape=True), c.price_version != pricer.file_version)
    conditions = [c.price_status.is_(None), other_file]
    named = []
    for override in pricer.overrides:
        if override.pattern.endswith("*"):
            model = c.model.startswith(override.pattern[:-1], autoescape=True)
        else:
            model = c.model == override.pattern
        named.append(and_(model, c.provider == override.provider) if override.provider else model)
    if named:
        conditions.append(and_(or_(*named), c.price_version.is_distinct_from(pricer.file_version)))
    return or_(*conditions)


def reprice(engine: Engine, pricer: Pricer, *, everything: bool = False) -> int:
    """Price the stale rows (see `stale`), or every row; returns how many were priced."""
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
            query = query.where(stale(pricer))
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
