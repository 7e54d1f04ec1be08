"""`llmtap log`'s filters and how they meet its query, sql/log.sql (exchanges newest
first, or costliest, or with the most tokens, over DuckDB's `exchanges` and `tool_calls`:
the store, or the dashboard's snapshot of it): the bound parameters (NULL means "any"),
and its rows with money as exact dollars. A row's tool problems and cache miss are the
stored verdicts (SPEC §5, "Verdicts are data"), read by the query as they are.

Not responsible for the query itself (sql/log.sql), for deciding any verdict
(protocols/rules.py, when the exchange was written), for the text search
(analytics/audit.py looks in the store's text), nor for rendering the rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from llmtap.analytics.reports import PICO, sql


@dataclass
class LogFilters:
    team: str | None = None
    model: str | None = None
    provider: str | None = None
    status: str | None = None  # an HTTP status, or "error"
    finish: str | None = None
    tool_problem: str | None = None  # a status, or "any"
    cache_miss: str | None = None  # a cause, or "any"
    search: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    sort: str | None = None  # started (None: newest first), cost (costliest first, unpriced last), tokens


SORTS = ("started", "cost", "tokens")


def query() -> str:
    """The log's query (sql/log.sql: plain reads of the stored verdict columns)."""
    return sql("log")


def _naive(moment: datetime | None) -> datetime | None:
    """A bound as the views hold times: naive UTC (a naive bound is taken as it is)."""
    if moment is not None and moment.tzinfo is not None:
        return moment.astimezone(UTC).replace(tzinfo=None)
    return moment


def params(filters: LogFilters, limit: int, offset: int) -> dict[str, Any]:
    """The query's parameters for `filters`, a page of `limit` rows from `offset`."""
    return {
        "since": _naive(filters.since),
        "until": _naive(filters.until),
        "team": filters.team,
        "model": filters.model,
        "provider": filters.provider,
        "status": filters.status,
        "finish": filters.finish,
        "tool_problem": filters.tool_problem,
        "cache_miss": filters.cache_miss,
        "ids": None,
        "sort": filters.sort or "started",
        "limit": limit,
        "offset": offset,
    }


def rows(result: Any) -> list[dict[str, Any]]:
    """A DuckDB result of the query as dicts, `cost_usd` as exact dollars."""
    columns = [d[0] for d in result.description]
    out = []
    for values in result.fetchall():
        row = dict(zip(columns, values, strict=True))
        if row.get("cost_usd") is not None:
            row["cost_usd"] = Decimal(int(row["cost_usd"])) / PICO
        out.append(row)
    return out
