"""The audit log's query: exchanges newest first (or costliest first, the unpriced last,
or with the most input + output tokens first), one row each, with their tool-call
problems and cache verdict as the store holds them (SPEC §5, "Verdicts are data"), over
DuckDB's `exchanges` and `tool_calls` (analytics/duck.py: the store, or the dashboard's
snapshot of it). Every filter is a bound parameter; NULL means "any".

A row's tool problems are its calls whose stored status is not `valid` (checked against
the request's schema when it was written) and the conversation problems stored in its
`tool_problems` column (duplicate_id, missing_result, orphan_result); its cache miss is
the stored cause of a `miss` or `not_cacheable` verdict (`--cache-miss any` is the
misses alone: a not-cacheable turn is no miss).

Not responsible for deciding any verdict (protocols/rules.py, when the exchange was
written), for the text search (analytics/audit.py looks in the store's text), nor for
rendering the rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from llmtap.analytics.reports import PICO


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

SQL = """
WITH bad_calls AS (  -- the calls whose stored status is a problem
    SELECT exchange_id, count(*) AS problems, list(DISTINCT status) AS statuses
    FROM tool_calls WHERE status <> 'valid' GROUP BY exchange_id
),
listed AS (
    SELECT e.*,
        coalesce(b.problems, 0) + coalesce(json_array_length(e.tool_problems), 0) AS problem_count,
        list_sort(list_distinct(list_concat(
            coalesce(b.statuses, CAST([] AS VARCHAR[])),
            coalesce(CAST(json_extract_string(e.tool_problems, '$[*].status') AS VARCHAR[]), CAST([] AS VARCHAR[]))
        ))) AS problem_kinds,
        CASE WHEN e.cache_verdict IN ('miss', 'not_cacheable') THEN e.cache_cause END AS miss_cause
    FROM exchanges AS e
    LEFT JOIN bad_calls AS b ON b.exchange_id = e.id
    WHERE ($since IS NULL OR e.started_at >= $since) AND ($until IS NULL OR e.started_at < $until)
)
SELECT
    id,
    started_at,
    team,
    key_last4,
    protocol,
    provider,
    coalesce(model, model_requested) AS model,
    status,
    finish_reason,
    usage_input_tokens AS input_tokens,
    usage_cache_read_input_tokens AS cached_tokens,
    usage_output_tokens AS output_tokens,
    cost_total_pico AS cost_usd,
    price_status,
    duration_ms,
    tool_call_count,
    problem_count AS tool_problems,
    nullif(array_to_string(problem_kinds, ','), '') AS tool_problem_kinds,
    miss_cause AS cache_miss,
    request_body_ref IS NOT NULL AS has_bodies,
    error_type,
    decode_error IS NOT NULL AS decode_error
FROM listed
WHERE ($team IS NULL OR team = $team)
  AND ($model IS NULL OR coalesce(model, model_requested) = $model OR model_requested = $model)
  AND ($provider IS NULL OR provider = $provider)
  AND ($status IS NULL OR CAST(status AS VARCHAR) = $status
       OR ($status = 'error' AND (coalesce(status, 0) >= 400 OR error_type IS NOT NULL)))
  AND ($finish IS NULL OR coalesce(finish_reason, 'unknown') = $finish)
  AND ($tool_problem IS NULL
       OR (problem_count > 0 AND ($tool_problem = 'any' OR list_contains(problem_kinds, $tool_problem))))
  AND ($cache_miss IS NULL
       OR ($cache_miss = 'any' AND cache_verdict = 'miss')
       OR ($cache_miss <> 'any' AND miss_cause = $cache_miss))
ORDER BY
    CASE WHEN $sort = 'cost' THEN cost_total_pico END DESC NULLS LAST,
    CASE WHEN $sort = 'tokens' THEN coalesce(usage_input_tokens, 0) + coalesce(usage_output_tokens, 0) END
        DESC NULLS LAST,
    started_at DESC, id DESC
LIMIT $limit OFFSET $offset
"""


def _naive(moment: datetime | None) -> datetime | None:
    """A bound as the views hold times: naive UTC (a naive bound is taken as it is)."""
    if moment is not None and moment.tzinfo is not None:
        return moment.astimezone(UTC).replace(tzinfo=None)
    return moment


def params(filters: LogFilters, limit: int, offset: int) -> dict[str, Any]:
    """SQL's parameters for `filters`, a page of `limit` rows from `offset`."""
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
        "sort": filters.sort or "started",
        "limit": limit,
        "offset": offset,
    }


def rows(result: Any) -> list[dict[str, Any]]:
    """A DuckDB result of SQL as dicts, `cost_usd` as exact dollars."""
    columns = [d[0] for d in result.description]
    out = []
    for values in result.fetchall():
        row = dict(zip(columns, values, strict=True))
        if row.get("cost_usd") is not None:
            row["cost_usd"] = Decimal(int(row["cost_usd"])) / PICO
        out.append(row)
    return out
