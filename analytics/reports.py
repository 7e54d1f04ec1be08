"""The reports of `llmtap report KIND`: each one `.sql` file in `sql/`, run by DuckDB over
the store, grouped by the dimensions the user chose (`conversations` is ranked instead:
one row per conversation, the top N by cost).

Grouping columns cannot be bound parameters, so `--by` names are looked up in a fixed
table of SQL expressions (anything else is refused); every value (`--since`, `--until`)
is a bound parameter. Money leaves the SQL as integer pico-dollars and becomes an exact
`Decimal` here. The conversation, cache and tool verdicts are columns of the exchanges
(decided once, when each was written: storage/verdicts.py), so every report is a plain
read; none recomputes a rule (tests/oracles/ holds the window queries that check them).

Not responsible for rendering (see `render.py`) or for pricing (see `pricing.py`).
"""

from __future__ import annotations

import re
from collections.abc import Set as AbstractSet
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from functools import cache
from importlib import resources
from string import Template
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import duckdb
from sqlalchemy import Engine

from llmtap.analytics import lake_daily, lake_views
from llmtap.analytics.duck import connect
from llmtap.analytics.sql_quoting import identifier, literal
from llmtap.protocols.error_kinds import kinds
from llmtap.protocols.who_asked import TAG_NAME

# --by names and the SQL they group on. Values users type never reach SQL text.
DIMENSIONS = {
    "team": "team",
    "provider": "coalesce(provider, '(unknown)')",
    "model": "coalesce(model, model_requested, '(unknown)')",
    "day": "CAST(CAST(started_at AS DATE) AS VARCHAR)",  # YYYY-MM-DD: a fifth of strftime's CPU cheaper
    "hour": "strftime(started_at, '%Y-%m-%d %H:00')",
    "key": "coalesce('…' || key_last4 || ' ' || left(key_fingerprint, 8), '(no key)')",
    "protocol": "protocol",
    "status": "coalesce(CAST(status AS VARCHAR), '(none)')",
    "tier": "coalesce(service_tier, '(not stated)')",
    "user": "coalesce(end_user, '(none)')",  # the end user the request named (SPEC §4)
}
# `--by tag:NAME`: the value of one tag (protocols/who_asked.py); NAME is checked against
# the tag-name pattern and then quoted, so it reaches SQL only as a string literal
TAG_PREFIX = "tag:"
_TAG_VALUE = "coalesce(json_extract_string(tags, {path}), '(none)')"
# `--by day`/`hour` in another zone than UTC: the UTC instant's wall time there (ICU).
_DAY_IN_ZONE = "CAST(CAST((started_at AT TIME ZONE 'UTC') AT TIME ZONE {zone} AS DATE) AS VARCHAR)"
_HOUR_IN_ZONE = "strftime((started_at AT TIME ZONE 'UTC') AT TIME ZONE {zone}, '%Y-%m-%d %H:00')"
GROUPED = ("team", "provider", "model", "day", "hour", "key", "protocol", "tier", "user")
MONEY = (
    "cost_usd",
    "input_cost_usd",
    "cache_read_cost_usd",
    "cache_write_cost_usd",
    "output_cost_usd",
    "fee_cost_usd",
    "extra_cost_usd",
    # report whatif's (analytics/whatif.py): formatted as money in tables
    "whatif_cost_usd",
    "difference_usd",
    "miss_cost_usd",
    "whatif_miss_cost_usd",
)
PICO = Decimal(10) ** 12


class ReportError(ValueError):
    """A report asked for something it cannot give (an unknown --by, say)."""


@dataclass(frozen=True)
class Report:
    name: str
    default_by: tuple[str, ...]
    dimensions: tuple[str, ...] = GROUPED
    list_sql: str | None = None  # the --list variant
    table: tuple[str, ...] = ()  # metric columns a terminal table shows (json/csv: all)
    optional: tuple[str, ...] = ()  # of those, what a narrow terminal leaves out, first first


# the reports whose every read of the exchanges keeps to --since/--until: over a lake they
# read only those days' files (lake_views.window); conversations bills a conversation whole
WINDOWED = frozenset({"usage", "cost", "finish", "errors", "latency", "cache", "tools"})

REPORTS = {
    "usage": Report(
        "usage",
        ("team",),
        table=(
            "requests",
            "input_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "output_tokens",
            "reasoning_tokens",
            "usage_missing",
        ),
    ),
    "cost": Report(
        "cost",
        ("team",),
        table=(
            "requests",
            "input_tokens",
            "cache_read_tokens",
            "output_tokens",
            "cost_usd",
            "unpriced",
            "usage_missing",
        ),
    ),
    "cache": Report(
        "cache",
        ("team", "model"),
        list_sql="cache_misses",
        table=(
            "requests",
            "input_tokens",
            "cache_read_tokens",
            "hit_rate",
            "misses",
            "not_cacheable",
            "missed_tokens",
            "extra_cost_usd",
        ),
        optional=("cache_read_tokens", "requests"),
    ),
    "finish": Report("finish", ("provider",), table=("finish_reason", "requests", "share", "incomplete")),
    "tools": Report(
        "tools",
        ("team",),
        list_sql="tool_problems",
        table=(
            "tool_calls",
            "valid",
            "invalid_json",
            "schema_violation",
            "unknown_tool",
            "truncated",
            "args_lost",
            "unchecked",
            "duplicate_id",
            "missing_result",
            "orphan_result",
        ),
    ),
    "errors": Report(
        "errors",
        ("provider",),
        dimensions=(*tuple(DIMENSIONS),),
        table=(
            "requests",
            "errors",
            "error_rate",
            "rate_limited",
            "server_errors",
            "overloaded",
            "interrupted",
            "retry_after_max_s",
        ),
    ),
    "latency": Report(
        "latency",
        ("model", "provider"),
        table=("requests", "ttfb_p50_ms", "ttft_p50_ms", "ttft_p95_ms", "total_p50_ms", "total_p95_ms"),
    ),
    # ranked, not grouped: no --by; `top` limits the rows (the CLI's --top N, default 20)
    "conversations": Report(
        "conversations",
        (),
        dimensions=(),
        table=(
            "conversation_id",
            "team",
            "model",
            "turns",
            "input_tokens",
            "cache_read_tokens",
            "output_tokens",
            "cost_usd",
            "unpriced",
            "usage_missing",
            "started_at",
            "first_prompt",
        ),
        optional=("cache_read_tokens", "usage_missing", "started_at", "unpriced", "turns", "first_prompt", "team"),
    ),
}
FIRST_PROMPT_CHARS = 60  # of the first user message, in `report conversations`


@dataclass
class Table:
    columns: list[str]
    rows: list[dict[str, Any]]
    dimensions: list[str] = field(default_factory=list)

    def compact(self, metrics: tuple[str, ...]) -> list[str]:
        """The columns a terminal shows: the grouping, then the chosen metrics."""
        if not metrics:
            return self.columns
        return [c for c in self.columns if c in self.dimensions or c in metrics]


# ERROR_KINDS (protocols/error_kinds.py): the error types and codes errors.sql counts as
# each status, lower-cased (it compares them so), as SQL lists.
_ERROR_TYPE_LISTS = {
    "$rate_limited_types": kinds("rate_limited"),
    "$server_error_types": kinds("server_error", "overloaded"),
    "$overloaded_types": kinds("overloaded"),
}

# The first columns of cost_daily.sql, usage_daily.sql and cache_daily.sql: the summary's
# requests and input token counts summed alike (`daily_rows`, analytics/lake_daily.py).
_DAILY_TOKENS = """sum(requests) AS requests,
    coalesce(sum(input_tokens), 0) AS input_tokens,
    coalesce(sum(cache_read_tokens), 0) AS cache_read_tokens,
    coalesce(sum(cache_write_tokens), 0) AS cache_write_tokens,"""

# cost.sql's and cost_daily.sql's stored prices summed by part (NULL for a group none of
# whose rows is priced); the fee column after it is each file's own.
_COST_PARTS = """sum(cost_total_pico) AS cost_usd,
    sum(cost_input_pico) AS input_cost_usd,
    sum(cost_cache_read_pico) AS cache_read_cost_usd,
    sum(cost_cache_write_pico) AS cache_write_cost_usd,
    sum(cost_output_pico) AS output_cost_usd,"""


def _sql_list(words: tuple[str, ...]) -> str:
    return "(" + ", ".join(literal(word.lower()) for word in words) + ")"


@cache
def sql(name: str) -> str:
    """One report's SQL text, by name (package data, so it works from an installed wheel),
    with the lists of error kinds and the columns several reports sum alike spliced in where
    asked."""
    text = resources.files("llmtap.analytics").joinpath("sql", f"{name}.sql").read_text()
    for placeholder, words in _ERROR_TYPE_LISTS.items():
        text = text.replace(placeholder, _sql_list(words))
    text = text.replace("$daily_tokens", _DAILY_TOKENS).replace("$cost_parts", _COST_PARTS)
    for edge in ("low", "high"):  # latency_daily.sql: a histogram bucket's value (lake_daily.py)
        text = text.replace(f"$middle_{edge}", lake_daily.middle_sql(edge))
    return text


def zone(name: str | None) -> ZoneInfo:
    """The IANA time zone `name` (None: UTC); a name it does not know is a ReportError."""
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        raise ReportError(f"--tz {name!r} is not a time zone (an IANA name such as Europe/Paris, or UTC)") from None


def dimensions_for(report: Report, by: list[str] | None) -> list[str]:
    chosen = by if by else list(report.default_by)
    for name in chosen:
        if name.startswith(TAG_PREFIX) and "team" in report.dimensions:
            if not TAG_NAME.fullmatch(name.removeprefix(TAG_PREFIX)):
                raise ReportError(f"--by {name!r}: a tag name is 1 to 32 of a-z, 0-9, _ and -")
        elif name not in report.dimensions:
            raise ReportError(f"--by {name!r} is not one of {', '.join(report.dimensions)} for {report.name}")
    if len(set(chosen)) != len(chosen):
        raise ReportError("--by names a column twice")
    return chosen


def build(
    report: Report, by: list[str], tz: str = "UTC", extra: dict[str, str] | None = None, source: str | None = None
) -> str:
    """`extra`: grouping columns (name: SQL expression, never user text) after `by`, for a
    caller that splits each group further (report whatif: by another model's tier).
    `source`: another .sql file than the report's own (its `_daily` one, over a lake's
    summary: analytics/lake_daily.py)."""
    by = [*by, *(extra or {})]
    names = [identifier(name) for name in by]
    positions = [str(i + 1) for i in range(len(by))]
    known = dict(DIMENSIONS)
    if zone(tz).key != "UTC":  # a key zoneinfo found: letters, digits, / _ + - only
        quoted = literal(zone(tz).key)
        known["day"] = _DAY_IN_ZONE.format(zone=quoted)
        known["hour"] = _HOUR_IN_ZONE.format(zone=quoted)
    known.update(extra or {})
    for name in by:
        if name.startswith(TAG_PREFIX) and name not in known and TAG_NAME.fullmatch(name.removeprefix(TAG_PREFIX)):
            known[name] = _TAG_VALUE.format(path=literal(f'$."{name.removeprefix(TAG_PREFIX)}"'))
    text = Template(sql(source or report.name)).safe_substitute(
        dims="".join(f"{known[name]} AS {identifier(name)},\n    " for name in by),
        names="".join(f"{n},\n    " for n in names),
        group_by=f"GROUP BY {', '.join(positions)}" if by else "",
        group_finish=f"GROUP BY {', '.join([*positions, str(len(by) + 1)])}",
        order_by=", ".join(positions) or "1",
        partition=", ".join(known[name] for name in by) or "NULL",
        keys="".join(f"coalesce(calls.{n}, conversation.{n}) AS {n},\n    " for n in names),
        join=f"USING ({', '.join(names)})" if by else "ON true",
    )
    return text


def _body(name: str) -> str:
    return Template(sql(name)).safe_substitute()


def _bounds(since: datetime | None, until: datetime | None) -> dict[str, Any]:
    return {"since": _naive_utc(since), "until": _naive_utc(until)}


def _naive_utc(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment


def window(
    connection: duckdb.DuckDBPyConnection, kind: str, since: datetime | None, until: datetime | None
) -> AbstractContextManager[None]:
    """What report `kind` reads of a lake, for a query it runs: only the days of its window
    when it keeps to them (WINDOWED), else every day."""
    return lake_views.window(connection, since, until) if kind in WINDOWED else nullcontext()


def run(
    url: str,
    kind: str,
    *,
    by: list[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    listing: bool = False,
    connection: duckdb.DuckDBPyConnection | None = None,
    top: int | None = None,
    tz: str = "UTC",
    engine: Engine | None = None,
) -> Table:
    """Report `kind` as rows. `top` limits the rows of `conversations` (the others ignore
    it); `tz` is the zone `--by day` and `--by hour` count in. `connection` and `engine`:
    the command's open handles on the store (DuckDB's, SQLAlchemy's), used instead of
    opening others."""
    report = REPORTS[kind]
    if top is not None and top < 1:
        raise ReportError("--top takes a positive number")
    own = connection is None
    connection = connection or connect(url)
    try:
        dims: list[str] = []
        params = _bounds(since, until)
        if listing:
            if report.list_sql is None:
                raise ReportError(f"report {kind} has no --list")
            query = _body(report.list_sql)
        else:
            if kind == "conversations" and by:
                raise ReportError("report conversations is ranked by cost: it takes --top, not --by")
            dims = dimensions_for(report, by)
            query = build(report, dims, tz)
            if kind == "conversations":
                params["top"] = top
        if kind == "conversations" and not listing and lake_daily.enabled(connection):
            # over a lake's summary by conversation plus the rows it does not hold
            lake_daily.gather_conversations(connection, params["since"], params["until"])
            columns, rows, texts = _fetched(connection, _body("conversations_daily"), {"top": top})
        elif lake_daily.answers(connection, kind, dims, zone(tz).key, listing):
            # over a lake's summary plus the rows it does not hold (lake_daily.gather)
            lake_daily.gather(connection, params["since"], params["until"], lake_daily.grain_for(kind, dims))
            columns, rows, texts = _fetched(connection, build(report, dims, tz, source=f"{kind}_daily"), {})
        else:
            with window(connection, kind, since, until):
                columns, rows, texts = _fetched(connection, query, params)
        if kind == "conversations" and not listing:
            columns, rows = _with_first_exchanges(connection, columns, rows)
    finally:
        if own:
            connection.close()
    table = Table(columns, _as_dicts(columns, rows, texts), dims)
    if kind == "conversations" and not listing:
        from llmtap.analytics.prompts import with_first_prompts

        with_first_prompts(url, table, FIRST_PROMPT_CHARS, engine)
    return table


FIRST_IDS_PER_QUERY = 1000  # bound parameters in one conversation_first.sql


def _with_first_exchanges(
    connection: duckdb.DuckDBPyConnection, columns: list[str], rows: list[tuple[Any, ...]]
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The ranked conversations with their first exchange's team and model after the id,
    and its body reference and protocol last (for with_first_prompts), NULL where there is
    none: read by id for these rows only (conversation_first.sql), over every day."""
    ids = [row[0] for row in rows if row[0] is not None]
    found: dict[str, tuple[Any, ...]] = {}
    for start in range(0, len(ids), FIRST_IDS_PER_QUERY):
        chunk = ids[start : start + FIRST_IDS_PER_QUERY]
        names = [f"first_{i}" for i in range(len(chunk))]
        query = sql("conversation_first").replace("IN ($ids)", "IN (" + ", ".join(f"${n}" for n in names) + ")")
        result = connection.execute(query, dict(zip(names, chunk, strict=True)))
        for conversation_id, *first in result.fetchall():
            found[conversation_id] = tuple(first)
    empty = (None, None, None, None)
    merged = []
    for row in rows:
        team, model, body_ref, protocol = found.get(row[0], empty)
        merged.append((row[0], team, model, *row[1:], body_ref, protocol))
    return [columns[0], "team", "model", *columns[1:], "first_body_ref", "first_protocol"], merged


def price_footer(
    url: str,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    connection: duckdb.DuckDBPyConnection | None = None,
) -> dict[str, Any]:
    """What `report cost` names under its table: the price versions of the priced rows,
    each unpriced model with its requests and tokens, and how many exchanges had no usage
    or went to an unverified host."""
    own = connection is None
    connection = connection or connect(url)
    try:
        bounds = _bounds(since, until)
        if lake_daily.answers(connection, "cost", [], "UTC", False):  # a lake's summary and the rows it lacks
            lake_daily.gather(connection, bounds["since"], bounds["until"])
            rows = connection.execute(_body("cost_footer_daily")).fetchall()
        else:
            with lake_views.window(connection, since, until):  # cost_footer.sql keeps to the window too
                rows = connection.execute(_body("cost_footer"), bounds).fetchall()
    finally:
        if own:
            connection.close()
    versions: set[str] = set()
    unpriced: dict[str, dict[str, int]] = {}
    missing = unverified = 0
    for status, reason, model, version, requests, input_tokens, output_tokens in rows:
        if status == "priced" and version:
            versions.add(version)
        elif status == "usage_missing":
            missing += requests
        elif status == "unpriced":
            entry = unpriced.setdefault(model, {"requests": 0, "input_tokens": 0, "output_tokens": 0})
            entry["requests"] += requests
            entry["input_tokens"] += input_tokens
            entry["output_tokens"] += output_tokens
            unverified += requests if reason == "unverified_host" else 0
    return {
        "price_versions": sorted(versions),
        "unpriced_models": [{"model": m, **v} for m, v in sorted(unpriced.items(), key=lambda i: -i[1]["requests"])],
        "usage_missing": missing,
        "unverified_host": unverified,
    }


# 128-bit whole numbers (sums of BIGINT, pico-dollars): DuckDB hands them to Python at about
# a microsecond each, 64-bit ones at a tenth of that
_WHOLE_DECIMAL = re.compile(r"DECIMAL\(\d+,\s*0\)")


def _fetched(
    connection: duckdb.DuckDBPyConnection, query: str, params: dict[str, Any]
) -> tuple[list[str], list[tuple[Any, ...]], set[str]]:
    """The query's columns and rows, and the columns of them fetched as text. Its 128-bit
    whole numbers (sums, money in pico-dollars) are fetched as BIGINT, which every sum of
    a real fleet fits; when one does not, DuckDB refuses the cast and they are fetched as
    text instead, which _as_dicts makes ints (Decimal dollars for money) again, exact
    either way. A cost report's 18,250 rows by team and day: 0.05 s to fetch, where text
    took 0.1 s and DuckDB's own ints and Decimals 0.3 s (more than its query over the
    lake's summary).

    The types come from the query bound with LIMIT 0 (a millisecond), and the rows from
    `execute`: the relation API runs a query with parameters when it is made, and again
    for its rows (a --list of 128k cache misses at 1M exchanges: 1.1 s, against 0.3 s)."""
    inner = f"(\n{query}\n) AS report"  # (a comment on the query's last line ends at the newline)
    found = connection.execute(f"SELECT * FROM {inner} LIMIT 0", params or None).description or []
    columns = [str(d[0]) for d in found]
    wide = {  # (a DECIMAL that is not money stays DuckDB's Decimal, as it always was)
        name
        for name, kind in ((str(d[0]), str(d[1])) for d in found)
        if kind == "HUGEINT" or (name in MONEY and _WHOLE_DECIMAL.fullmatch(kind))
    }
    if not wide:
        return columns, connection.execute(query, params or None).fetchall(), set()
    try:
        return columns, connection.execute(_cast(inner, columns, wide, "BIGINT"), params or None).fetchall(), set()
    except (duckdb.ConversionException, duckdb.OutOfRangeException):  # a sum past 2^63: as its digits
        return columns, connection.execute(_cast(inner, columns, wide, "VARCHAR"), params or None).fetchall(), wide


def _cast(inner: str, columns: list[str], wide: set[str], to: str) -> str:
    """The query's rows, in its order, with the `wide` columns cast `to` a type."""
    cast = (f"CAST({identifier(c)} AS {to}) AS {identifier(c)}" if c in wide else identifier(c) for c in columns)
    return f"SELECT {', '.join(cast)} FROM {inner}"


def _as_dicts(
    columns: list[str], rows: list[tuple[Any, ...]], texts: AbstractSet[str] = frozenset()
) -> list[dict[str, Any]]:
    """Rows as dicts, pico-dollar columns as Decimal dollars, the whole numbers fetched as
    text (`texts`, _fetched) as ints. Only those columns are visited (a --list can be 100k+
    rows: a loop over every key would show)."""
    dicts = [dict(zip(columns, values, strict=False)) for values in rows]  # one query made both: strict costs 20%
    for name in columns:
        if name in MONEY:
            for row in dicts:
                value = row[name]
                if value is not None:  # its text's digits are the number's, else DuckDB's number
                    row[name] = (Decimal(value) if type(value) is str else Decimal(int(value))) / PICO
        elif name in texts:
            for row in dicts:
                value = row[name]
                if value is not None:
                    row[name] = int(value)
    return dicts


def count_exchanges(url: str, connection: duckdb.DuckDBPyConnection | None = None) -> int:
    own = connection is None
    connection = connection or connect(url)
    try:
        row = connection.execute("SELECT count(*) FROM exchanges").fetchone()
        assert row is not None  # count(*) always returns its one row
        return int(row[0])
    finally:
        if own:
            connection.close()
