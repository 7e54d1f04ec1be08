"""A local stand-in for OpenAI's organization Usage and Costs APIs, for `llmtap
reconcile`'s tests (issue 28): `GET /v1/organization/usage/completions`,
`GET /v1/organization/costs`, and the listings of projects and of a project's API keys,
answering from usage, costs, projects and keys planted by the test, in the shapes, units,
limits and pagination the API reference documents (docs/reconcile-sources.md).

Chosen here where the reference says nothing (and in admin_common, for the buckets and
cursors): an array parameter is taken as repeated keys with or without `[]`; `amount.value`
is dollars (the reference's example implies it), a JSON number; a `line_item` is
"MODEL, TOKEN_CLASS" (its one documented example); a request without the admin key gets a
401 `invalid_api_key`.

Not responsible for serving HTTP (`upstream.Upstream` takes this as its router) or for
what the planted rows are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from llmtap.simulator import admin_common as common
from llmtap.simulator.admin_common import Query, Refused, Width

USAGE_PATH = "/v1/organization/usage/completions"
COSTS_PATH = "/v1/organization/costs"
PROJECTS_PATH = "/v1/organization/projects"
_PROJECT_KEYS = re.compile(r"/v1/organization/projects/([^/]+)/api_keys")

USAGE_WIDTHS: dict[str, Width] = {
    "1m": (timedelta(minutes=1), 60, 1440),
    "1h": (timedelta(hours=1), 24, 168),
    "1d": (timedelta(days=1), 7, 31),
}
COST_WIDTHS: dict[str, Width] = {"1d": (timedelta(days=1), 7, 180)}
USAGE_GROUPS = ("project_id", "user_id", "api_key_id", "model", "batch", "service_tier")
USAGE_FILTERS = {"project_ids": "project_id", "user_ids": "user_id", "api_key_ids": "api_key_id", "models": "model"}
COST_GROUPS = ("project_id", "line_item", "api_key_id")
COST_FILTERS = {"project_ids": "project_id", "api_key_ids": "api_key_id"}
PROJECT_LIMIT = (20, 100)
PROJECT_KEY_LIMIT = (20, 100)  # the reference gives no largest: chosen


@dataclass(frozen=True)
class Usage:
    """Completions usage metered at one instant (UTC). `input_tokens` includes the cached
    ones, as the reference says of its own field."""

    at: datetime
    model: str
    project_id: str | None = None
    user_id: str | None = None
    api_key_id: str | None = None
    batch: bool = False
    service_tier: str = "default"
    input_tokens: int = 0
    input_cached_tokens: int = 0
    output_tokens: int = 0
    input_audio_tokens: int = 0
    output_audio_tokens: int = 0
    num_model_requests: int = 1


@dataclass(frozen=True)
class Cost:
    """A cost billed on a UTC day, in dollars, with its line item ("MODEL, TOKEN_CLASS")
    and quantity."""

    day: date
    dollars: Decimal
    line_item: str
    project_id: str | None = None
    api_key_id: str | None = None
    quantity: Decimal = Decimal(0)


@dataclass(frozen=True)
class Project:
    id: str
    name: str
    created_at: datetime
    status: str = "active"


@dataclass(frozen=True)
class ProjectKey:
    """A project's API key as the listing shows it: only its redacted value."""

    id: str
    project_id: str
    name: str
    redacted_value: str
    created_at: datetime


class OpenAIAdmin(common.AdminRouter):
    """`OpenAIAdmin(admin_key, usage=…, costs=…, projects=…, keys=…)(seen) -> Reply`."""

    bare_arrays = True
    unauthorized = "invalid_request_error"

    def __init__(
        self,
        admin_key: str,
        *,
        usage: Iterable[Usage] = (),
        costs: Iterable[Cost] = (),
        projects: Iterable[Project] = (),
        keys: Iterable[ProjectKey] = (),
    ) -> None:
        super().__init__(admin_key)
        self.usage = list(usage)
        self.costs = list(costs)
        self.projects = sorted(projects, key=lambda p: p.id)
        self.keys = sorted(keys, key=lambda k: k.id)

    def authorized(self, headers: Mapping[str, str]) -> bool:
        return headers.get("authorization") == f"Bearer {self.admin_key}"

    def route(self, path: str, query: Query) -> dict[str, Any]:
        if path == USAGE_PATH:
            return self._usage(query)
        if path == COSTS_PATH:
            return self._costs(query)
        if path == PROJECTS_PATH:
            return _listing(self.projects, query, PROJECT_LIMIT, _project_object)
        keys_of = _PROJECT_KEYS.fullmatch(path)
        if keys_of:
            keys = [k for k in self.keys if k.project_id == keys_of.group(1)]
            return _listing(keys, query, PROJECT_KEY_LIMIT, _key_object)
        raise Refused(404, "invalid_request_error", f"Invalid URL (GET {path})")

    def refusal(self, refused: Refused) -> dict[str, Any]:
        code = "invalid_api_key" if refused.status == 401 else None
        return {"error": {"message": str(refused), "type": refused.kind, "param": None, "code": code}}

    def _usage(self, query: Query) -> dict[str, Any]:
        spans, cursor = _report_buckets(query, USAGE_WIDTHS)
        groups = common.choices(query, "group_by", USAGE_GROUPS)
        batch = common.one(query, "batch")
        if batch not in (None, "true", "false"):
            raise common.bad("batch: must be true or false")
        kept = [
            u
            for u in self.usage
            if common.passes(u, query, USAGE_FILTERS) and (batch is None or u.batch == (batch == "true"))
        ]
        data = [
            _bucket(start, end, [_usage_result(key, rows) for key, rows in found])
            for start, end, found in common.bucketed(
                kept,
                spans,
                lambda u: u.at.astimezone(UTC),
                common.grouped_by(groups, USAGE_GROUPS),
            )
        ]
        return _page(data, cursor)

    def _costs(self, query: Query) -> dict[str, Any]:
        spans, cursor = _report_buckets(query, COST_WIDTHS)
        groups = common.choices(query, "group_by", COST_GROUPS)
        kept = [c for c in self.costs if common.passes(c, query, COST_FILTERS)]
        data = [
            _bucket(start, end, [_cost_result(key, rows, "line_item" in groups) for key, rows in found])
            for start, end, found in common.bucketed(
                kept,
                spans,
                lambda c: common.midnight(c.day),
                common.grouped_by(groups, COST_GROUPS),
            )
        ]
        return _page(data, cursor)


def _usage_result(key: tuple[Any, ...], rows: list[Usage]) -> dict[str, Any]:
    counts = {name: sum(getattr(row, name) for row in rows) for name in _USAGE_COUNTS}
    return {"object": "organization.usage.completions.result", **counts, **dict(zip(USAGE_GROUPS, key, strict=True))}


def _cost_result(key: tuple[Any, ...], rows: list[Cost], itemized: bool) -> dict[str, Any]:
    return {
        "object": "organization.costs.result",
        "amount": {"value": float(sum((c.dollars for c in rows), Decimal(0))), "currency": "usd"},
        **dict(zip(COST_GROUPS, key, strict=True)),
        "quantity": float(sum((c.quantity for c in rows), Decimal(0))) if itemized else None,
    }


_USAGE_COUNTS = (
    "input_tokens",
    "input_cached_tokens",
    "output_tokens",
    "input_audio_tokens",
    "output_audio_tokens",
    "num_model_requests",
)


def _report_buckets(query: Query, widths: dict[str, Width]) -> tuple[list[tuple[datetime, datetime]], str | None]:
    return common.report_buckets(query, widths, ("start_time", "end_time"), _seconds)


def _seconds(query: Query, name: str) -> datetime | None:
    text = common.one(query, name)
    if text is None:
        return None
    if not text.isdigit() or len(text) > 12:
        raise common.bad(f"{name}: must be Unix seconds")
    return common.EPOCH + timedelta(seconds=int(text))


def _bucket(start: datetime, end: datetime, results: list[dict[str, Any]]) -> dict[str, Any]:
    return {"object": "bucket", "start_time": _unix(start), "end_time": _unix(end), "results": results}


def _page(data: list[dict[str, Any]], cursor: str | None) -> dict[str, Any]:
    return {"object": "page", "data": data, "has_more": cursor is not None, "next_page": cursor}


def _listing(items: list[Any], query: Query, limits: tuple[int, int], shown: Any) -> dict[str, Any]:
    """A cursor listing (`after`, `limit` → `first_id`, `last_id`, `has_more`), by id."""
    limit = common.limit_of(query, *limits)
    after = common.one(query, "after")
    later = [item for item in items if after is None or item.id > after]
    page = later[:limit]
    return {
        "object": "list",
        "data": [shown(item) for item in page],
        "first_id": page[0].id if page else None,
        "last_id": page[-1].id if page else None,
        "has_more": len(later) > limit,
    }


def _project_object(project: Project) -> dict[str, Any]:
    return {
        "id": project.id,
        "object": "organization.project",
        "name": project.name,
        "created_at": _unix(project.created_at),
        "archived_at": None,
        "status": project.status,
    }


def _key_object(key: ProjectKey) -> dict[str, Any]:
    return {
        "object": "organization.project.api_key",
        "redacted_value": key.redacted_value,
        "name": key.name,
        "created_at": _unix(key.created_at),
        "last_used_at": None,
        "id": key.id,
        "owner": {"type": "user", "user": {"id": "user_simulated", "name": "Simulated", "role": "owner"}},
    }


def _unix(moment: datetime) -> int:
    return int((moment.astimezone(UTC) - common.EPOCH).total_seconds())
