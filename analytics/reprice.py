"""Price stored exchanges: the ones recorded before a price was known (imported, or stored
while the pricer was off), the ones a local price file now names or no longer names (so
`llmtap report cost --prices FILE` reports with that file, and without it reports
genai-prices alone again), or all of them after the price data changed. Each priced row
keeps the version of the price data it was priced with.

Not responsible for the prices themselves (see `pricing.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, time, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Engine, and_, bindparam, or_, select, true, update

from llmtap.analytics import lake_daily
from llmtap.analytics.pricing import FILE_MARK, Pricer, cost_columns
from llmtap.storage.export import utc
from llmtap.storage.rows import PRICE_COLUMNS
from llmtap.storage.schema import exchanges

PAGE = 2000
_INPUT = (
    "id",
    "provider",
    "model",
    "model_requested",  # a cloud row is priced by the model id its path named (analytics/cloud_names.py)
    "started_at",
    "usage_input_tokens",
    "usage_cache_read_input_tokens",
    "usage_cache_creation_input_tokens",
    "usage_cache_creation_5m_input_tokens",
    "usage_cache_creation_1h_input_tokens",
    "usage_output_tokens",
    "usage_reasoning_output_tokens",
    "price_reason",  # `unverified_host` keeps a row unpriced whatever the prices say
    "protocol",
    "usage_modalities",
    "usage_sub",
    "service_tier",
    "inference_geo",
    "service_speed",
    "server_tool_uses",
)
# What a price changes when it changes: whether the row is priced, and its money (a new
# price version, or new working in `cost_detail`, with the same money is no change).
_MONEY = (
    "price_status",
    "cost_input_pico",
    "cost_cache_read_pico",
    "cost_cache_write_pico",
    "cost_output_pico",
    "cost_fee_pico",
    "cost_total_pico",
)
Progress = Callable[[int, int], None]  # (rows priced, of them whose money changed), a page at a time


def stale(pricer: Pricer) -> ColumnElement[bool]:
    """Rows whose stored price may differ from what `pricer` says: never priced; priced
    with a price file that is not the pricer's; of a model the pricer's file names, but
    priced without that file. (`stale_ids` says the same to DuckDB: keep them together.)"""
    c = exchanges.c
    other_file = and_(c.price_version.contains(FILE_MARK, autoescape=True), c.price_version != pricer.file_version)
    conditions = [c.price_status.is_(None), other_file]
    named: list[ColumnElement[bool]] = []
    for naming in pricer.namings:
        if naming.pattern is None:
            model: ColumnElement[bool] = true()
        elif naming.pattern.endswith("*"):
            model = c.model.startswith(naming.pattern[:-1], autoescape=True)
        else:
            model = c.model == naming.pattern
        named.append(and_(model, c.provider == naming.provider) if naming.provider else model)
    if named:
        conditions.append(and_(or_(*named), c.price_version.is_distinct_from(pricer.file_version)))
    return or_(*conditions)


def stale_ids(duck: Any, pricer: Pricer) -> list[str]:
    """The ids of the stale rows, found by DuckDB (a connection of `analytics.duck`): the
    same rule as `stale`, in one parallel pass over a few columns — a SQLite store scans
    its wide rows several times slower itself (1.5 s against 0.3 s at 1M exchanges).

    Over a lake with a current daily summary (analytics/lake_daily.py), the summary's rows
    say which days can hold a stale lake row (it groups by every column the rule reads;
    its model is coalesce(model, model_requested), so it flags a superset): only those
    days' files are read, and the store's tail is read whole (it is small)."""
    where, params = _stale_where(pricer)
    if not lake_daily.enabled(duck):
        query = f"SELECT id FROM exchanges WHERE {where} ORDER BY id"
        return [row[0] for row in duck.execute(query, params).fetchall()]
    from llmtap.analytics import lake_views

    since, until = lake_views.current_window(duck)
    found = {row[0] for row in duck.execute(f"SELECT id FROM lake_tail_exchanges WHERE {where}", params).fetchall()}
    for low, high in _flagged_spans(duck, where, params, since, until):
        query = f"SELECT id FROM exchanges WHERE ({where}) AND started_at >= $low AND started_at < $high"
        with lake_views.window(duck, low, high):
            rows = duck.execute(query, {**params, "low": low, "high": high})
            found.update(row[0] for row in rows.fetchall())
    return sorted(found)


def _stale_where(pricer: Pricer) -> tuple[str, dict[str, Any]]:
    """`stale` as a DuckDB condition on the columns provider, model, price_status and
    price_version, with its parameters."""
    conditions = ["price_status IS NULL", "(contains(price_version, $mark) AND price_version <> $version)"]
    params: dict[str, Any] = {"mark": FILE_MARK, "version": pricer.file_version}
    named = []
    for index, naming in enumerate(pricer.namings):
        if naming.pattern is None:
            model = "true"
        elif naming.pattern.endswith("*"):
            params[f"p{index}"] = naming.pattern[:-1]
            model = f"starts_with(model, $p{index})"
        else:
            params[f"p{index}"] = naming.pattern
            model = f"model = $p{index}"
        if naming.provider:
            params[f"v{index}"] = naming.provider
            model = f"({model} AND provider = $v{index})"
        named.append(model)
    if named:
        conditions.append(f"(({' OR '.join(named)}) AND price_version IS DISTINCT FROM $version)")
    return " OR ".join(conditions), params


def _flagged_spans(
    duck: Any, where: str, params: dict[str, Any], since: datetime | None, until: datetime | None
) -> list[tuple[datetime, datetime]]:
    """The spans of the days the summary flags as holding a stale row, within [since, until)."""
    held = lake_daily.grain_rows(lake_daily.ALL)
    days = [row[0] for row in duck.execute(f"SELECT DISTINCT day FROM {held} WHERE {where}", params).fetchall()]
    spans: list[tuple[datetime, datetime]] = []
    for day in sorted(d for d in days if d is not None):
        low = datetime.combine(day, time(0))
        high = low + timedelta(days=1)
        low, high = max(low, since) if since else low, min(high, until) if until else high
        if low >= high:
            continue
        if spans and spans[-1][1] >= low:
            spans[-1] = (spans[-1][0], high)
        else:
            spans.append((low, high))
    return spans


def reprice(
    engine: Engine,
    pricer: Pricer,
    *,
    everything: bool = False,
    ids: list[str] | None = None,
    only_stale: bool = False,
    progress: Progress | None = None,
) -> int:
    """Price the stale rows (see `stale`), every row, or the rows `ids` names (with
    `only_stale`, the stale ones among them); returns how many were priced. `progress` is
    told after each page how many it priced and of those how many changed in money (only
    then is the old price read to compare)."""
    columns: list[Any] = [exchanges.c[name] for name in _INPUT]
    if progress is not None:
        columns += [exchanges.c[name].label(f"old_{name}") for name in _MONEY]
    if ids is not None:
        done = 0
        for start in range(0, len(ids), PAGE):
            query = select(*columns).where(exchanges.c.id.in_(ids[start : start + PAGE]))
            if only_stale:
                query = query.where(stale(pricer))
            done += len(_price(engine, pricer, query, progress))
        return done
    done = 0
    last_id = ""
    while True:  # pages in id order: a priced row may still match (everything), so seek past it
        query = select(*columns).where(exchanges.c.id > last_id).order_by(exchanges.c.id).limit(PAGE)
        if not everything:
            query = query.where(stale(pricer))
        priced = _price(engine, pricer, query, progress)
        if not priced:
            return done
        done += len(priced)
        last_id = priced[-1]


def _price(engine: Engine, pricer: Pricer, query: Any, progress: Progress | None = None) -> list[str]:
    """Price the rows the query selects, in one transaction; returns their ids."""
    statement = (
        update(exchanges)
        .where(exchanges.c.id == bindparam("row_id"))
        .values({name: bindparam(name) for name in PRICE_COLUMNS})
    )
    with engine.begin() as connection:
        rows = [dict(row) for row in connection.execute(query).mappings()]
        if not rows:
            return []
        updates = []
        changed = 0
        for row in rows:
            cost = cost_columns(pricer.price_row({**row, "started_at": utc(row["started_at"])}))
            updates.append({"row_id": row["id"], **cost})
            if progress is not None:
                changed += any(row[f"old_{name}"] != cost[name] for name in _MONEY)
        connection.execute(statement, updates)
    if progress is not None:
        progress(len(rows), changed)
    return [row["id"] for row in rows]
