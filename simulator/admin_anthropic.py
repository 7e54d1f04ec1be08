"""A local stand-in for Anthropic's Admin API reports, for `llmtap reconcile`'s tests
(issue 28): the Messages usage report (`GET /v1/organizations/usage_report/messages`), the
cost report (`GET /v1/organizations/cost_report`) and the API key listing
(`GET /v1/organizations/api_keys`), answering from usage, costs and keys planted by the
test, in the shapes, units, limits and pagination the API reference documents
(docs/reconcile-sources.md has the facts and their sources).

What the reference leaves unsaid is chosen here (and in admin_common, for the buckets and
cursors), and said: a cost row grouped by description is one per workspace × model ×
service tier × context window × token type, its description built from them; any key but
the admin key is refused with a 401.

Not responsible for serving HTTP (`upstream.Upstream` takes this as its router) or for
deciding what the planted rows are (the tests plant the gaps they look for).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from llmtap.simulator import admin_common as common
from llmtap.simulator.admin_common import Query, Refused, Width

USAGE_PATH = "/v1/organizations/usage_report/messages"
COST_PATH = "/v1/organizations/cost_report"
KEYS_PATH = "/v1/organizations/api_keys"

# bucket_width -> (its length, default limit, largest limit): the reference's table
USAGE_WIDTHS: dict[str, Width] = {
    "1m": (timedelta(minutes=1), 60, 1440),
    "1h": (timedelta(hours=1), 24, 168),
    "1d": (timedelta(days=1), 7, 31),
}
COST_WIDTHS: dict[str, Width] = {"1d": (timedelta(days=1), 7, 31)}
USAGE_GROUPS = ("api_key_id", "workspace_id", "model", "service_tier", "context_window")
USAGE_FILTERS = {  # query parameter -> the dimension it keeps
    "api_key_ids[]": "api_key_id",
    "workspace_ids[]": "workspace_id",
    "models[]": "model",
    "service_tiers[]": "service_tier",
    "context_window[]": "context_window",
}
COST_GROUPS = ("workspace_id", "description")
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


class AnthropicAdmin(common.AdminRouter):
    """`AnthropicAdmin(admin_key, usage=…, costs=…, keys=…)(seen) -> Reply`."""

    def __init__(
        self, admin_key: str, *, usage: Iterable[Usage] = (), costs: Iterable[Cost] = (), keys: Iterable[Key] = ()
    ) -> None:
        super().__init__(admin_key)
        self.usage = list(usage)
        self.costs = list(costs)
        self.keys = sorted(keys, key=lambda k: k.id)

    def authorized(self, headers: Mapping[str, str]) -> bool:
        return headers.get("x-api-key") == self.admin_key

    def route(self, path: str, query: Query) -> dict[str, Any]:
        if path == USAGE_PATH:
            return self._usage_report(query)
        if path == COST_PATH:
            return self._cost_report(query)
        if path == KEYS_PATH:
            return self._keys(query)
        raise Refused(404, "not_found_error", f"no such endpoint {path}")

    def refusal(self, refused: Refused) -> dict[str, Any]:
        return {"type": "error", "error": {"type": refused.kind, "message": str(refused)}}

    def _usage_report(self, query: Query) -> dict[str, Any]:
        spans, cursor = _report_buckets(query, USAGE_WIDTHS)
        groups = common.choices(query, "group_by[]", USAGE_GROUPS)
        kept = [u for u in self.usage if common.passes(u, query, USAGE_FILTERS)]
        data = [
            {
                "starting_at": _rfc3339(start),
                "ending_at": _rfc3339(end),
                "results": [_usage_result(key, rows) for key, rows in found],
            }
            for start, end, found in common.bucketed(
                kept,
                spans,
                lambda u: u.at.astimezone(UTC),
                common.grouped_by(groups, USAGE_GROUPS),
            )
        ]
        return _page(data, cursor)

    def _cost_report(self, query: Query) -> dict[str, Any]:
        spans, cursor = _report_buckets(query, COST_WIDTHS)
        groups = common.choices(query, "group_by[]", COST_GROUPS)

        def key(cost: Cost) -> tuple[Any, ...]:
            workspace = cost.workspace_id if "workspace_id" in groups else None
            return (workspace, *(_described(cost) if "description" in groups else (None,) * 6))

        data = [
            {
                "starting_at": _rfc3339(start),
                "ending_at": _rfc3339(end),
                "results": [_cost_result(k, sum((c.cents for c in rows), Decimal(0))) for k, rows in found],
            }
            for start, end, found in common.bucketed(self.costs, spans, lambda c: common.midnight(c.day), key)
        ]
        return _page(data, cursor)

    def _keys(self, query: Query) -> dict[str, Any]:
        limit = common.limit_of(query, *KEY_LIMIT)
        keys = [k for k in self.keys if common.one(query, "status") in (None, k.status)]
        workspace = common.one(query, "workspace_id")
        keys = [k for k in keys if workspace is None or k.workspace_id == workspace]
        after, before = common.one(query, "after_id"), common.one(query, "before_id")
        if after is not None and before is not None:
            raise common.bad("give after_id or before_id, not both")
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


def _report_buckets(query: Query, widths: dict[str, Width]) -> tuple[list[tuple[datetime, datetime]], str | None]:
    return common.report_buckets(query, widths, ("starting_at", "ending_at"), _instant)


def _instant(query: Query, name: str) -> datetime | None:
    text = common.one(query, name)
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise common.bad(f"{name}: not an RFC 3339 date-time") from None
    if moment.tzinfo is None:
        raise common.bad(f"{name}: an RFC 3339 date-time has a zone")
    return moment.astimezone(UTC)


def _page(data: list[dict[str, Any]], cursor: str | None) -> dict[str, Any]:
    return {"data": data, "has_more": cursor is not None, "next_page": cursor}


def _usage_result(key: tuple[Any, ...], rows: list[Usage]) -> dict[str, Any]:
    def total(name: str) -> int:
        return sum(getattr(row, name) for row in rows)

    return {
        "uncached_input_tokens": total("uncached_input_tokens"),
        "cache_creation": {
            "ephemeral_1h_input_tokens": total("cache_creation_1h_input_tokens"),
            "ephemeral_5m_input_tokens": total("cache_creation_5m_input_tokens"),
        },
        "cache_read_input_tokens": total("cache_read_input_tokens"),
        "output_tokens": total("output_tokens"),
        "server_tool_use": {"web_search_requests": total("web_search_requests")},
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
    text = format(cents.normalize(), "f")
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
