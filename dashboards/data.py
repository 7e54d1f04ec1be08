"""The numbers a dashboard shows, gathered from the analytics reports in one DuckDB
connection, as plain JSON-able values.

Money stays exact until here and leaves as a decimal string (for tables) and a float
(for chart heights). Not responsible for HTML (see `page.py`).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from llmtap.analytics import reports
from llmtap.analytics.duck import connect

MISSES_SHOWN = 200
PROBLEMS_SHOWN = 200
EXCHANGES_SHOWN = 500


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    return value


def _rows(table: reports.Table) -> list[dict[str, Any]]:
    return [{k: _plain(v) for k, v in row.items()} for row in table.rows]


def _money(value: Any) -> str:
    return f"{Decimal(str(value)):.6f}" if value is not None else ""


def collect(url: str, since: datetime | None = None, until: datetime | None = None) -> dict[str, Any]:
    """Everything the dashboard draws, for exchanges started in [since, until)."""
    connection = connect(url, snapshot=True)  # fifteen reports: copy what they read once
    try:

        def run(kind: str, by: list[str] | None = None, listing: bool = False) -> list[dict[str, Any]]:
            table = reports.run(url, kind, by=by, since=since, until=until, listing=listing, connection=connection)
            return _rows(table)

        data: dict[str, Any] = {
            "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "since": since.isoformat() if since else None,
            "until": until.isoformat() if until else None,
            "usage_by_team": run("usage", ["team"]),
            "usage_by_day": run("usage", ["day"]),
            "cost_by_team": run("cost", ["team"]),
            "cost_by_day_team": run("cost", ["day", "team"]),
            "cache_by_day": run("cache", ["day"]),
            "cache_by_team": run("cache", ["team"]),
            "misses": run("cache", listing=True)[-MISSES_SHOWN:][::-1],
            "finish_by_provider": run("finish", ["provider"]),
            "tools_by_team": run("tools", ["team"]),
            "problems": run("tools", listing=True)[-PROBLEMS_SHOWN:][::-1],
            "errors_by_provider": run("errors", ["provider"]),
            "errors_by_status": run("errors", ["provider", "status"]),
            "latency_by_model": run("latency", ["model"]),
        }
    finally:
        connection.close()
    data["exchanges"] = recent_exchanges(url, since, until)
    data["totals"] = _totals(data)
    data["offenders"] = _offenders(data["problems"])
    return data


def _totals(data: dict[str, Any]) -> dict[str, Any]:
    usage = data["usage_by_team"]
    cost = data["cost_by_team"]
    errors = data["errors_by_provider"]
    input_tokens = sum(r["input_tokens"] for r in usage)
    cache_read = sum(r["cache_read_tokens"] for r in usage)
    return {
        "requests": sum(r["requests"] for r in usage),
        "teams": len(usage),
        "input_tokens": input_tokens,
        "output_tokens": sum(r["output_tokens"] for r in usage),
        # a team with nothing priced has no cost (None), not $0: it adds nothing here
        "cost_usd": _money(sum(Decimal(str(r["cost_usd"])) for r in cost if r["cost_usd"] is not None)),
        "unpriced": sum(r["unpriced"] for r in cost),
        "usage_missing": sum(r["usage_missing"] for r in usage),
        "hit_rate": round(cache_read / input_tokens, 4) if input_tokens else 0,
        "misses": len(data["misses"]),
        "errors": sum(r["errors"] for r in errors),
        "tool_problems": len(data["problems"]),
    }


def _offenders(problems: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tools with the most problems, and which."""
    by_tool: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for problem in problems:
        by_tool[problem.get("tool") or "(result without a call)"][problem["status"]] += 1
    rows: list[dict[str, Any]] = [
        {"tool": tool, "problems": sum(counts.values()), "statuses": dict(counts)} for tool, counts in by_tool.items()
    ]
    return sorted(rows, key=lambda r: (-r["problems"], r["tool"]))[:15]


def recent_exchanges(url: str, since: datetime | None, until: datetime | None) -> list[dict[str, Any]]:
    """The newest exchanges as the audit log lists them, with their inline details."""
    from llmtap.analytics import audit
    from llmtap.storage.engine import make_engine

    engine = make_engine(url)
    try:
        rows = audit.log(url, engine, audit.LogFilters(since=since, until=until), limit=EXCHANGES_SHOWN)
        extra = audit.details(url, engine, [row["id"] for row in rows])
    finally:
        engine.dispose()
    out = []
    for row in rows:
        plain = {k: _plain(v) for k, v in row.items()}
        plain["cost_usd"] = _money(row["cost_usd"]) if row["cost_usd"] is not None else row["price_status"]
        plain["detail"] = extra.get(row["id"])
        out.append(plain)
    return out
