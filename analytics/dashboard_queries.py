"""The dashboard's own SQL, over the DuckDB connection its reports share
(`duck.connect(..., snapshot=True)`): the span and count of the exchanges shown, the
newest items of a `--list` report with a count per kind, the tools with the most
problems, and the newest exchanges as `llmtap log` lists them, with their details (their
verdicts are the stored ones, SPEC §5: none is worked out here).

A listing is kept in the connection as the temp table `dashboard_<name>`: the tools'
counts read it rather than run the report again (100k+ items at 1M exchanges). Bounds
are exchanges started in [since, until); an aware time is taken in UTC, a naive one as
stored (naive UTC).

Not responsible for what the page makes of the answers (dashboards/data.py: JSON-able
values, wall times, series per period, the teams shown) nor for the reports themselves
(reports.py and its .sql files).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import duckdb

from llmtap.analytics import audit, audit_log, reports

# what dashboards/ holds and passes back, without importing duckdb itself
type Connection = duckdb.DuckDBPyConnection


def _naive(moment: datetime | None) -> datetime | None:
    if moment is not None and moment.tzinfo is not None:
        return moment.astimezone(UTC).replace(tzinfo=None)
    return moment


def _bounds(since: datetime | None, until: datetime | None) -> dict[str, Any]:
    return {"since": _naive(since), "until": _naive(until)}


def span(
    connection: Connection, since: datetime | None, until: datetime | None
) -> tuple[datetime | None, datetime | None, datetime | None]:
    """The first and last start of the exchanges shown, and the last of the store's: the
    min and max of the snapshot's `started_at`, not a pass of its own over the rows."""
    first, last, latest = connection.execute(
        "SELECT min(started_at) FILTER (WHERE in_window), max(started_at) FILTER (WHERE in_window), max(started_at) "
        "FROM (SELECT started_at, ($since IS NULL OR started_at >= $since) AND ($until IS NULL OR started_at < $until)"
        " AS in_window FROM exchanges)",
        _bounds(since, until),
    ).fetchone() or (None, None, None)
    return first, last, latest


def count(connection: Connection, since: datetime | None, until: datetime | None) -> int:
    """How many exchanges started in [since, until)."""
    found = connection.execute(
        "SELECT count(*) FROM exchanges "
        "WHERE ($since IS NULL OR started_at >= $since) AND ($until IS NULL OR started_at < $until)",
        _bounds(since, until),
    ).fetchone()
    return int(found[0]) if found else 0


def listing(
    connection: Connection,
    name: str,
    since: datetime | None,
    until: datetime | None,
    shown: int,
    kind: str,
    skip: tuple[str, str] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The newest `shown` items of the `--list` report `name` (less those whose column
    `skip[0]` is `skip[1]`), money in dollars (Decimal), and how many there are of each
    `kind` (all of them): counted in DuckDB, not by fetching every item. Keeps the
    items as `dashboard_<name>` for `tool_problem_counts`."""
    table = f"dashboard_{name}"
    connection.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS {reports.sql(name)}", _bounds(since, until))
    counts = dict(connection.execute(f'SELECT "{kind}", count(*) FROM {table} GROUP BY 1').fetchall())
    where, params = ("", {}) if skip is None else (f'WHERE "{skip[0]}" IS DISTINCT FROM $skip', {"skip": skip[1]})
    result = connection.execute(
        f"SELECT * FROM {table} {where} ORDER BY started_at DESC, exchange_id DESC LIMIT {shown}", params
    )
    columns = [d[0] for d in result.description]
    rows = []
    for values in result.fetchall():
        row = dict(zip(columns, values, strict=True))
        rows.append({k: _dollars(v) if k in reports.MONEY else v for k, v in row.items()})
    return rows, {str(k): int(v) for k, v in counts.items()}


def _dollars(pico: Any) -> Decimal | None:
    return None if pico is None else Decimal(int(pico)) / reports.PICO


def tool_problem_counts(connection: Connection) -> dict[str, dict[str, int]]:
    """Problems per tool and status, of the `tool_problems` listing `listing` kept (a
    result without a call counts under "(result without a call)")."""
    found = connection.execute(
        "SELECT coalesce(tool, '(result without a call)') AS tool, status, count(*) "
        "FROM dashboard_tool_problems GROUP BY 1, 2"
    ).fetchall()
    by_tool: dict[str, dict[str, int]] = defaultdict(dict)
    for tool, status, n in found:
        by_tool[tool][status] = int(n)
    return dict(by_tool)


def recent(
    url: str, connection: Connection, since: datetime | None, until: datetime | None, limit: int
) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """The newest `limit` exchanges as `llmtap log` lists them (its own SQL, over this
    connection's snapshot), each with its inline detail (`audit.details`, None when it has
    none): their misses and tool problems are the stored verdicts, read with the rows."""
    from llmtap.storage.engine import make_engine

    rows = audit_log.rows(
        connection.execute(
            audit_log.query(), audit_log.params(audit_log.LogFilters(since=since, until=until), limit, 0)
        )
    )
    engine = make_engine(url)
    try:
        extra = audit.details(engine, [row["id"] for row in rows])
    finally:
        engine.dispose()
    return [(row, extra.get(row["id"])) for row in rows]
