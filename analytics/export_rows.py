"""What `llmtap export` writes per exchange: the stored canonical dict (storage/export.py)
with the conversation it belongs to (its stored conversation_id, SPEC §5: the id of the
conversation's first exchange, decided when it was written) and its money as exact
decimal dollars, as a nested row (JSON Lines) or a flat one (CSV, Parquet) whose columns
and types are fixed (COLUMNS), so a file has its money columns even when no row is
priced.

Money: the store's integer pico-dollars become `Decimal` dollars with every digit
(`Decimal(pico).scaleb(-12)`); a row that is not priced has none (NULL), never 0, and a
priced row's part that the store left empty (priced before that part existed) is 0. The
sum of `cost_usd` over an export is the sum `report cost` makes over the same rows.

Not responsible for pricing rows (the caller catches stale rows up first), for deciding
any conversation (protocols/rules.py does, when an exchange is written), nor for files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Engine, select

from llmtap.analytics.render import json_c1_escaped
from llmtap.storage.export import TIMINGS, USAGE_COLUMNS, Only, exchange_pages
from llmtap.storage.schema import exchanges

# (export column, stored pico-dollar part); cost_usd is the sum of the others
MONEY = (
    ("cost_usd", "total"),
    ("input_cost_usd", "input"),
    ("cache_read_cost_usd", "cache_read"),
    ("cache_write_cost_usd", "cache_write"),
    ("output_cost_usd", "output"),
    ("fee_cost_usd", "fee"),
)
PRICE_FIELDS = ("price_status", "price_reason", "price_version", "price_model")
NESTED = ("tags", "server_tool_uses", "tool_calls", "server_tool_calls", "request")
MONEY_TYPE = "DECIMAL(38,12)"  # Parquet: a decimal128 with 12 places, one per pico-dollar

# The flat row (CSV and Parquet) in column order, with each column's DuckDB type: nested
# values are JSON text.
_TEXT, _JSON = "VARCHAR", "VARCHAR"
COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", _TEXT),
    ("conversation_id", _TEXT),
    ("team", _TEXT),
    ("tags", _JSON),
    ("end_user", _TEXT),
    ("attribution", _TEXT),
    ("key_fingerprint", _TEXT),
    ("key_last4", _TEXT),
    ("host", _TEXT),
    ("path", _TEXT),
    ("source", _TEXT),
    *((name, "TIMESTAMPTZ" if name.endswith("_at") else "DOUBLE") for name in TIMINGS),
    ("protocol", _TEXT),
    ("provider", _TEXT),
    ("streamed", "BOOLEAN"),
    ("status", "INTEGER"),
    ("complete", "BOOLEAN"),
    ("model_requested", _TEXT),
    ("model", _TEXT),
    ("response_id", _TEXT),
    ("finish_reason", _TEXT),
    ("finish_reason_raw", _TEXT),
    ("service_tier", _TEXT),
    ("inference_geo", _TEXT),
    ("speed", _TEXT),
    ("server_tool_uses", _JSON),
    ("warmup", "BOOLEAN"),
    *((f"usage_{name}", "BIGINT") for name in USAGE_COLUMNS),
    ("usage_modalities", _JSON),
    ("usage_sub_usages", _JSON),
    ("usage_provenance", _TEXT),
    ("text", _TEXT),
    ("reasoning_blocks", "INTEGER"),
    ("tool_calls", _JSON),
    ("server_tool_calls", _JSON),
    ("error_type", _TEXT),
    ("error_code", _TEXT),
    ("error_message", _TEXT),
    ("request", _JSON),
    ("decode_error", _TEXT),
    ("interrupted", _TEXT),
    *((name, _TEXT) for name in PRICE_FIELDS),
    *((name, MONEY_TYPE) for name, _ in MONEY),
)
MONEY_COLUMNS = frozenset(name for name, _ in MONEY)
_C1 = re.compile("[\x7f-\x9f]")


def export_rows(
    engine: Engine,
    since: datetime | None = None,
    until: datetime | None = None,
    *,
    only: Only | None = None,
) -> Iterator[dict[str, Any]]:
    """Nested export rows of the exchanges started in [since, until) (and of `only`'s
    teams, models and providers), oldest first, a page of the store at a time, each page's
    conversation ids read by primary key with it: no pass over the rest of the store."""
    for page in exchange_pages(engine, since, until, price=True, only=only):
        found = _conversation_ids(engine, [row["id"] for row in page])
        for row in page:
            yield _with_money(row, found.get(row["id"]))


def _conversation_ids(engine: Engine, ids: list[str]) -> dict[str, str | None]:
    with engine.connect() as connection:
        query = select(exchanges.c.id, exchanges.c.conversation_id).where(exchanges.c.id.in_(ids))
        return {row.id: row.conversation_id for row in connection.execute(query)}


def _with_money(row: dict[str, Any], conversation_id: str | None) -> dict[str, Any]:
    price = row.pop("price")
    if row["usage"] is not None:  # the same keys in every row
        row["usage"].setdefault("modalities", {})
        row["usage"].setdefault("sub_usages", [])
    out = {"id": row.pop("id"), "conversation_id": conversation_id, **row}
    out.update({name: price[name.removeprefix("price_")] for name in PRICE_FIELDS})
    priced = price["status"] == "priced"
    for name, part in MONEY:
        pico = price[part]
        if pico is None and priced and part != "total":
            pico = 0  # a part priced before it existed (the fee column came later)
        out[name] = None if pico is None else Decimal(int(pico)).scaleb(-12)
    return out


def flat(row: dict[str, Any]) -> dict[str, Any]:
    """One CSV or Parquet row (COLUMNS, in order): usage and error as columns, nested
    values as JSON text, times as ISO text, money as `Decimal`."""
    usage = row["usage"] or {}
    error = row["error"] or {}
    out = dict(row)
    for name in USAGE_COLUMNS:
        out[f"usage_{name}"] = usage.get(name)
    out["usage_modalities"] = _json(usage["modalities"]) if usage else None
    out["usage_sub_usages"] = _json(usage["sub_usages"]) if usage else None
    for name in ("type", "code", "message"):
        out[f"error_{name}"] = error.get(name)
    for name in NESTED:
        out[name] = _json(row[name])
    return {name: _plain(out[name]) for name, _ in COLUMNS}


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _json(value: Any) -> str:
    return json.dumps(value, default=json_default, ensure_ascii=False)


def json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def decimal_text(value: Decimal) -> str:
    """Money as plain decimal text with its exact digits (`0.000123`, never `1.23E-4`)."""
    return format(value.normalize(), "f") if value else "0"


def jsonl_line(row: dict[str, Any]) -> str:
    """One nested row as a JSON object on one line; money as JSON numbers with their exact
    digits (json.dumps would need floats, which round them); DEL and C1 controls escaped
    (render.json_c1_escaped), as in every JSON llmtap prints."""
    money = [(name, row[name]) for name, _ in MONEY]
    rest = {name: value for name, value in row.items() if name not in MONEY_COLUMNS}
    head = json.dumps(rest, default=json_default, ensure_ascii=False)
    tail = "".join(f', "{name}": {"null" if value is None else decimal_text(value)}' for name, value in money)
    line = head[:-1] + tail + "}"
    return json_c1_escaped(line) if _C1.search(line) else line  # the search is much the cheaper
