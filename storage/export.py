"""Stored exchanges read back as canonical dicts (SPEC §2 fields plus identity and timings),
with their stored price (status, version, pico-dollar parts) on request.

Used by `llmtap export`, `show` and anything else that lists exchanges. Rows are fetched in
pages so a large store is never held in memory at once. Not responsible for output formats,
for money as dollars or for conversations (analytics/export_rows.py adds those).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, overload

from sqlalchemy import ColumnElement, Engine, func, select

from llmtap.protocols.who_asked import stored_tags
from llmtap.storage.schema import exchanges, tool_calls

PAGE = 1000

USAGE_COLUMNS = {
    "input_tokens": "usage_input_tokens",
    "cache_read_tokens": "usage_cache_read_input_tokens",
    "cache_write_tokens": "usage_cache_creation_input_tokens",
    "cache_write_5m_tokens": "usage_cache_creation_5m_input_tokens",
    "cache_write_1h_tokens": "usage_cache_creation_1h_input_tokens",
    "output_tokens": "usage_output_tokens",
    "reasoning_tokens": "usage_reasoning_output_tokens",
}
IDENTITY = ("id", "team", "attribution", "key_fingerprint", "key_last4", "host", "path", "source")
TIMINGS = ("started_at", "first_byte_at", "first_token_at", "ended_at", "ttfb_ms", "ttft_ms", "duration_ms")
# The stored price of an exchange: its status and version, and its cost in integer
# pico-dollars (1e-12 USD), by part.
PRICE = {
    "status": "price_status",
    "reason": "price_reason",
    "version": "price_version",
    "model": "price_model",
    "total": "cost_total_pico",
    "input": "cost_input_pico",
    "cache_read": "cost_cache_read_pico",
    "cache_write": "cost_cache_write_pico",
    "output": "cost_output_pico",
    "fee": "cost_fee_pico",
}
CANONICAL = (
    "protocol",
    "provider",
    "streamed",
    "status",
    "complete",
    "model_requested",
    "model",
    "response_id",
    "finish_reason",
    "finish_reason_raw",
)


REQUEST_COLUMNS = tuple(c.name for c in exchanges.c if c.name.startswith("request_") and c.name != "request_body_ref")
# What an export reads of a row: what to_canonical needs and the price. Analysis columns
# (prefix hashes, raw usage, the price's working) are left in the store: decoding their
# JSON would be most of an export's time.
_READ = (
    *IDENTITY,
    "tags",
    "end_user",
    *TIMINGS,
    *CANONICAL,
    *USAGE_COLUMNS.values(),
    "usage_modalities",
    "usage_sub",
    "usage_provenance",
    "service_tier",
    "inference_geo",
    "service_speed",
    "server_tool_uses",
    "warmup",
    "text",
    "reasoning_blocks",
    "server_tool_calls",
    "error_type",
    "error_code",
    "error_message",
    *REQUEST_COLUMNS,
    "decode_error",
    "interrupted",
)
_READ_WITH_PRICE = (*_READ, *PRICE.values())


@overload
def utc(value: datetime) -> datetime: ...
@overload
def utc(value: None) -> None: ...
@overload
def utc(value: datetime | None) -> datetime | None: ...
def utc(value: datetime | None) -> datetime | None:
    """SQLite hands timestamps back without their zone; they were written as UTC."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Only:
    """Which exchanges to read besides their period (`llmtap export --team/--model/
    --provider`): each a set of exact names, empty for any. A model is the one `report
    cost --by model` groups on: the response's, else the requested one."""

    teams: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    providers: tuple[str, ...] = ()

    def conditions(self) -> list[ColumnElement[bool]]:
        c = exchanges.c
        out: list[ColumnElement[bool]] = []
        if self.teams:
            out.append(c.team.in_(self.teams))
        if self.models:
            out.append(func.coalesce(c.model, c.model_requested).in_(self.models))
        if self.providers:
            out.append(c.provider.in_(self.providers))
        return out


def _within(since: datetime | None, until: datetime | None, only: Only | None) -> list[ColumnElement[bool]]:
    out = list(only.conditions()) if only else []
    if since is not None:
        out.append(exchanges.c.started_at >= since)
    if until is not None:
        out.append(exchanges.c.started_at < until)
    return out


def count_exchanges(
    engine: Engine, since: datetime | None = None, until: datetime | None = None, only: Only | None = None
) -> int:
    """How many exchanges `exchange_dicts` would read (a progress bar's total)."""
    with engine.connect() as connection:
        query = select(func.count()).select_from(exchanges).where(*_within(since, until, only))
        return int(connection.execute(query).scalar_one())


def exchange_dicts(
    engine: Engine,
    since: datetime | None = None,
    until: datetime | None = None,
    *,
    price: bool = False,
    only: Only | None = None,
) -> Iterator[dict[str, Any]]:
    """Canonical dicts of the exchanges started in [since, until) (and of `only`'s teams,
    models and providers), oldest first; with `price`, each also has `price`: its stored
    price (see PRICE)."""
    for page in exchange_pages(engine, since, until, price=price, only=only):
        yield from page


def exchange_pages(
    engine: Engine,
    since: datetime | None = None,
    until: datetime | None = None,
    *,
    price: bool = False,
    only: Only | None = None,
) -> Iterator[list[dict[str, Any]]]:
    """`exchange_dicts` a page (PAGE rows) at a time."""
    last: tuple[Any, str] | None = None
    within = _within(since, until, only)
    while True:
        columns = [exchanges.c[name] for name in (_READ_WITH_PRICE if price else _READ)]
        query = select(*columns).order_by(exchanges.c.started_at, exchanges.c.id).limit(PAGE)
        if within:
            query = query.where(*within)
        if last is not None:
            # The first condition alone is what the index on started_at serves: a range
            # scan from the last page on, where the OR alone would scan from the start.
            query = query.where(
                exchanges.c.started_at >= last[0],
                (exchanges.c.started_at > last[0]) | ((exchanges.c.started_at == last[0]) & (exchanges.c.id > last[1])),
            )
        with engine.connect() as connection:
            rows = connection.execute(query).mappings().all()
            calls = tool_calls_by_exchange(connection, [row["id"] for row in rows])
        if not rows:
            return
        page = []
        for row in rows:
            out = to_canonical(row, calls.get(row["id"], []))
            if price:
                out["price"] = {name: row[column] for name, column in PRICE.items()}
            page.append(out)
        yield page
        last = (rows[-1]["started_at"], rows[-1]["id"])


def tool_calls_by_exchange(connection: Any, ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The canonical tool calls of each exchange in `ids`, in their order."""
    if not ids:
        return {}
    query = (
        select(tool_calls)
        .where(tool_calls.c.exchange_id.in_(ids))
        .order_by(tool_calls.c.exchange_id, tool_calls.c.position)
    )
    out: dict[str, list[dict[str, Any]]] = {}
    for call in connection.execute(query).mappings():
        out.setdefault(call["exchange_id"], []).append(
            {
                "id": call["call_id"],
                "name": call["name"],
                "arguments": call["arguments"],
                "arguments_raw": call["arguments_raw"],
                "valid_json": call["valid_json"],
                "kind": call["kind"],
                "status": call["status"],
                "status_detail": call["status_detail"],
            }
        )
    return out


def to_canonical(row: Any, calls: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {key: row[key] for key in IDENTITY}
    # SPEC §4: the request's tags (an object of text; {} when it had none) and end user
    out["tags"] = stored_tags(row["tags"])
    out["end_user"] = row["end_user"]
    out.update({key: utc(row[key]) if key.endswith("_at") else row[key] for key in TIMINGS})
    out.update({key: row[key] for key in CANONICAL})
    out["service_tier"] = row["service_tier"]
    out["inference_geo"] = row["inference_geo"]
    out["speed"] = row["service_speed"]
    out["server_tool_uses"] = row["server_tool_uses"] or {}
    out["warmup"] = bool(row["warmup"])
    usage = None
    if row["usage_input_tokens"] is not None:
        usage = {name: row[column] for name, column in USAGE_COLUMNS.items()}
        # only where the payload split them or another model was used (an advisor):
        # `show` lists every key, and an export fills in the empty ones
        if row["usage_modalities"]:
            usage["modalities"] = row["usage_modalities"]
        if row["usage_sub"]:
            usage["sub_usages"] = row["usage_sub"]
    out["usage"] = usage
    out["usage_provenance"] = row["usage_provenance"]
    out["text"] = row["text"]
    out["reasoning_blocks"] = row["reasoning_blocks"]
    out["tool_calls"] = calls
    out["server_tool_calls"] = row["server_tool_calls"] or []
    error = None
    if row["error_type"] or row["error_code"] or row["error_message"]:
        error = {"type": row["error_type"], "code": row["error_code"], "message": row["error_message"]}
    out["error"] = error
    out["request"] = {key.removeprefix("request_"): row[key] for key in REQUEST_COLUMNS}
    out["decode_error"] = row["decode_error"]
    out["interrupted"] = row["interrupted"]
    return out
