"""A local stand-in for Anthropic's Admin API reports, for `llmtap reconcile`'s tests
(issue 28): the Messages usage report (`GET /v1/organizations/usage_report/messages`), the
cost report (`GET /v1/organizations/cost_report`) and the API key listing
(`GET /v1/organizations/api_keys`), answering from usage, costs and keys planted by the
test, in the shapes, units, limits and pagination the API reference documents
(docs/reconcile-sources.md has the facts and their sources).

What the reference leaves unsaid is chosen here, and said: an omitted `ending_at` ends the
report after `limit` buckets; a cursor (`page`) names the next bucket's start and is only
valid with the parameters it came with; a cost row grouped by description is one per
workspace × model × service tier × context window × token type, its description built
from them; any key but the admin key is refused with a 401.

Not responsible for serving HTTP (`upstream.Upstream` takes this as its router) or for
deciding what the planted rows are (the tests plant the gaps they look for).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import parse_qs, urlsplit

from llmtap.simulator.upstream import Reply, Seen
from llmtap.simulator.wire_common import json_reply

USAGE_PATH = "/v1/organizations/usage_report/messages"
COST_PATH = "/v1/organizations/cost_report"
KEYS_PATH = "/v1/organizations/api_keys"

# bucket_width -> (its length, default limit, largest limit): the reference's table
USAGE_WIDTHS = {
    "1m": (timedelta(minutes=1), 60, 1440),
    "1h": (timedelta(hours=1), 24, 168),
    "1d": (timedelta(days=1), 7, 31),
}
COST_WIDTHS = {"1d": (timedelta(days=1), 7, 31)}
USAGE_GROUPS = ("api_key_id", "workspace_id", "model", "service_tier", "context_window")
USAGE_FILTERS = {  # query parameter -> the dimension it keeps
    "api_key_ids[]": "api_key_id",
    "workspace_ids[]": "workspace_id",
    "models[]": "model",
    "service_tiers[]": "service_tier",
    "context_window[]": "context_window",
}
COST_GROUPS = ("workspace_id", "description")
TOKEN_TYPES = (
    "uncached_input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation.ephemeral_1h_input_tokens",
    "cache_creation.ephemeral_5m_input_tokens",
)
KEY_LIMIT = (20, 1000)  # the key listing's default and largest page


@dataclass(frozen=True)
class Usage:
    """Usage the provider metered at one instant (UTC), for one key, workspace, model,
    tier and context window. `api_key_id` None: the Console's Workbench; `workspace_id`
    None: the default workspace."""

    at: datetime
    model: str
    api_key_id: str | None = None
    workspace_id: str | None = None
    service_tier: str = "standard"
    context_window: str = "0-200k"
    uncached_input_tokens: int = 0
    cache_creation_5m_input_tokens: int = 0
    cache_creation_1h_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    output_tokens: int = 0
    web_search_requests: int = 0


@dataclass(frozen=True)
class Cost:
    """A cost the provider billed on a UTC day, in cents (a decimal: fractions of a cent
    are kept). `cost_type` tokens, web_search or code_execution; the token costs name their
    model, tier, context window and token type, the others leave them None."""

    day: date
    cents: Decimal
    cost_type: str = "tokens"
    workspace_id: str | None = None
    model: str | None = None
    service_tier: str | None = "standard"
    context_window: str | None = "0-200k"
    token_type: str | None = "uncached_input_tokens"


@dataclass(frozen=True)
class Key:
    """An API key as the listing shows it: never the key, only its hint."""

    id: str
    name: str
    partial_key_hint: str
    created_at: datetime
    workspace_id: str | None = None
    status: str = "active"


class Refused(Exception):
    """A request the API would refuse: its status, error type and message."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind = status, kind


class AnthropicAdmin:
    """`AnthropicAdmin(admin_key, usage=…, costs=…, keys=…)(seen) -> Reply`. `seen`
    lists every request's path and query (never its headers: they hold the admin key)."""

    def __init__(
        self,
        admin_key: str,
        *,
        usage: Iterable[Usage] = (),
        costs: Iterable[Cost] = (),
        keys: Iterable[Key] = (),
    ) -> None:
        self.admin_key = admin_key
        self.usage = list(usage)
        self.costs = list(costs)
        self.keys = sorted(keys, key=lambda k: k.id)
        self.seen: list[str] = []

    def __call__(self, seen: Seen) -> Reply:
        parts = urlsplit(seen.path)
        self.seen.append(seen.path)
        query = parse_qs(parts.query, keep_blank_values=True)
        try:
            if seen.headers.get("x-api-key") != self.admin_key:
                raise Refused(401, "authentication_error", "invalid x-api-key")
            if seen.method != "GET":
                raise Refused(405, "invalid_request_error", f"{seen.method} is not allowed here")
            if parts.path == USAGE_PATH:
                return json_reply(self._usage_report(query))
            if parts.path == COST_PATH:
                return json_reply(self._cost_report(query))
            if parts.path == KEYS_PATH:
                return json_reply(self._keys(query))
            raise Refused(404, "not_found_error", f"no such endpoint {parts.path}")
        except Refused as refused:
            error = {"type": refused.kind, "message": str(refused)}
            return json_reply({"type": "error", "error": error}, refused.status)

    def _usage_report(self, query: dict[str, list[str]]) -> dict[str, Any]:
        buckets, next_start = _buckets(query, USAGE_WIDTHS)
        groups = _choices(query, "group_by[]", USAGE_GROUPS)
        kept = [u for u in self.usage if _passes(u, query)]
        data = []
        for start, end in buckets:
            sums: dict[tuple[Any, ...], dict[str, int]] = {}
            for row in kept:
                if start <= row.at.astimezone(UTC) < end:
                    key = tuple(getattr(row, name) if name in groups else None for name in USAGE_GROUPS)
                    _add_usage(sums.setdefault(key, {}), row)
            results = [_usage_result(key, counts) for key, counts in sorted(sums.items(), key=_sort_key)]
            data.append({"starting_at": _rfc3339(start), "ending_at": _rfc3339(end), "results": results})
        return _page(data, next_start)

    def _cost_report(self, query: dict[str, list[str]]) -> dict[str, Any]:
        buckets, next_start = _buckets(query, COST_WIDTHS)
        groups = _choices(query, "group_by[]", COST_GROUPS)
        data = []
        for start, end in buckets:
            sums: dict[tuple[Any, ...], Decimal] = {}
            for cost in self.costs:
                if start.date() == cost.day:
                    workspace = cost.workspace_id if "workspace_id" in groups else None
                    described = _described(cost) if "description" in groups else (None,) * 6
                    key = (workspace, *described)
                    sums[key] = sums.get(key, Decimal(0)) + cost.cents
            results = [_cost_result(key, cents) for key, cents in sorted(sums.items(), key=_sort_key)]
            data.append({"starting_at": _rfc3339(start), "ending_at": _rfc3339(end), "results": results})
        return _page(data, next_start)

    def _keys(self, query: dict[str, list[str]]) -> dict[str, Any]:
        limit = _limit(query, *KEY_LIMIT)
        keys = [k for k in self.keys if _one(query, "status") in (None, k.status)]
        workspace = _one(query, "workspace_id")
        keys = [k for k in keys if workspace is None or k.workspace_id == workspace]
        after, before = _one(query, "after_id"), _one(query, "before_id")
        if after is not None and before is not None:
            raise Refused(400, "invalid_request_error", "give after_id or before_id, not both")
        if before is not None:
            earlier = [k for k in keys if k.id < before]
            page, more = earlier[-limit:], len(earlier) > limit
        else:
            later = [k for k in keys if after is None or k.id > after]
            page, more = later[:limit], len(later) > limit
        return {
            "data": [_key_object(k) for k in page],
            "first_id": page[0].id if page else None,
            "last_id": page[-1].id if page else None,
            "has_more": more,
        }


def _buckets(
    query: dict[str, list[str]], widths: dict[str, tuple[timedelta, int, int]]
) -> tuple[list[tuple[datetime, datetime]], datetime | None]:
    """This page's buckets [start, end), and the start of the next page's first (None:
    this is the last page): from `starting_at` snapped to its bucket, or the cursor."""
    width_name = _one(query, "bucket_width") or "1d"
    if width_name not in widths:
        raise Refused(400, "invalid_request_error", f"bucket_width must be one of {', '.join(widths)}")
    width, default, largest = widths[width_name]
    limit = _limit(query, default, largest)
    first = _snap(_instant(query, "starting_at", required=True), width)
    assert first is not None
    ending = _instant(query, "ending_at", required=False)
    last = ending if ending is not None else first + width * limit  # undocumented: `limit` buckets
    if last <= first:
        raise Refused(400, "invalid_request_error", "ending_at must be after starting_at")
    page = _one(query, "page")
    start = _cursor(page, first, width) if page else first
    buckets: list[tuple[datetime, datetime]] = []
    while start + width <= last and len(buckets) < limit:
        buckets.append((start, start + width))
        start += width
    return buckets, start if start + width <= last else None


def _page(data: list[dict[str, Any]], next_start: datetime | None) -> dict[str, Any]:
    cursor = None if next_start is None else "page_" + base64.b64encode(_rfc3339(next_start).encode()).decode()
    return {"data": data, "has_more": cursor is not None, "next_page": cursor}


def _cursor(page: str, first: datetime, width: timedelta) -> datetime:
    """The bucket a `next_page` cursor names: one of this report's buckets, or refused."""
    try:
        start = datetime.fromisoformat(base64.b64decode(page.removeprefix("page_"), validate=True).decode())
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise Refused(400, "invalid_request_error", "page is not a cursor this report gave") from None
    if start.tzinfo is None or start < first or (start - first) % width:
        raise Refused(400, "invalid_request_error", "page is not a cursor this report gave")
    return start.astimezone(UTC)


def _instant(query: dict[str, list[str]], name: str, *, required: bool) -> datetime | None:
    text = _one(query, name)
    if text is None:
        if required:
            raise Refused(400, "invalid_request_error", f"{name}: Field required")
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise Refused(400, "invalid_request_error", f"{name}: not an RFC 3339 date-time") from None
    if moment.tzinfo is None:
        raise Refused(400, "invalid_request_error", f"{name}: an RFC 3339 date-time has a zone")
    return moment.astimezone(UTC)


def _snap(moment: datetime | None, width: timedelta) -> datetime | None:
    """The start of the UTC minute, hour or day holding `moment`."""
    if moment is None:
        return None
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    return epoch + (moment - epoch) // width * width


def _limit(query: dict[str, list[str]], default: int, largest: int) -> int:
    text = _one(query, "limit")
    if text is None:
        return default
    if not text.isdigit() or not 1 <= int(text) <= largest:
        raise Refused(400, "invalid_request_error", f"limit: must be from 1 to {largest}")
    return int(text)


def _one(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[-1] if values else None


def _choices(query: dict[str, list[str]], name: str, allowed: Sequence[str]) -> set[str]:
    chosen = set(query.get(name, []))
    unknown = chosen - set(allowed)
    if unknown:
        raise Refused(
            400, "invalid_request_error", f"{name}: {sorted(unknown)[0]!r} is not one of {', '.join(allowed)}"
        )
    return chosen


def _passes(row: Usage, query: dict[str, list[str]]) -> bool:
    return all(not query.get(name) or getattr(row, field) in query[name] for name, field in USAGE_FILTERS.items())


def _add_usage(counts: dict[str, int], row: Usage) -> None:
    for name in (
        "uncached_input_tokens",
        "cache_creation_5m_input_tokens",
        "cache_creation_1h_input_tokens",
        "cache_read_input_tokens",
        "output_tokens",
        "web_search_requests",
    ):
        counts[name] = counts.get(name, 0) + getattr(row, name)


def _usage_result(key: tuple[Any, ...], counts: dict[str, int]) -> dict[str, Any]:
    return {
        "uncached_input_tokens": counts["uncached_input_tokens"],
        "cache_creation": {
            "ephemeral_1h_input_tokens": counts["cache_creation_1h_input_tokens"],
            "ephemeral_5m_input_tokens": counts["cache_creation_5m_input_tokens"],
        },
        "cache_read_input_tokens": counts["cache_read_input_tokens"],
        "output_tokens": counts["output_tokens"],
        "server_tool_use": {"web_search_requests": counts["web_search_requests"]},
        **dict(zip(USAGE_GROUPS, key, strict=True)),
    }


def _described(cost: Cost) -> tuple[Any, ...]:
    """(description, cost_type, model, service_tier, context_window, token_type): what a
    cost row grouped by description carries (the non-token costs name no model)."""
    if cost.cost_type != "tokens":
        label = {"web_search": "Web Search Usage", "code_execution": "Code Execution Usage"}.get(cost.cost_type)
        return (label or cost.cost_type, cost.cost_type, None, None, None, None)
    words = " ".join(w.capitalize() for w in (cost.token_type or "").replace(".", " ").replace("_", " ").split())
    description = f"{cost.model} Usage - {words}"
    return (description, "tokens", cost.model, cost.service_tier, cost.context_window, cost.token_type)


def _cost_result(key: tuple[Any, ...], cents: Decimal) -> dict[str, Any]:
    workspace, description, cost_type, model, tier, window, token_type = key
    return {
        "currency": "USD",
        "amount": _cents_text(cents),
        "workspace_id": workspace,
        "description": description,
        "cost_type": cost_type,
        "context_window": window,
        "model": model,
        "service_tier": tier,
        "token_type": token_type,
    }


def _cents_text(cents: Decimal) -> str:
    try:
        text = format(cents.normalize(), "f")
    except InvalidOperation:  # never for a finite amount
        text = str(cents)
    return text if "." in text else f"{text}.00"


def _key_object(key: Key) -> dict[str, Any]:
    return {
        "id": key.id,
        "type": "api_key",
        "name": key.name,
        "partial_key_hint": key.partial_key_hint,
        "status": key.status,
        "workspace_id": key.workspace_id,
        "created_at": _rfc3339(key.created_at),
        "created_by": {"id": "user_01simulated", "type": "user"},
    }


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _sort_key(item: tuple[tuple[Any, ...], Any]) -> tuple[str, ...]:
    return tuple("" if value is None else str(value) for value in item[0])
