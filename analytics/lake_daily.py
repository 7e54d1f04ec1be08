"""The lake's daily summary, `llmtap.daily` (SPEC §5 "Summaries are data"): what it holds,
the SQL that makes it (sql/lake_daily.sql, run by `lake sync` over the lake's rows and by
a report over the rows the summary does not hold), and a report's read of it.

One row per UTC day × team × provider × model (coalesce(model, model_requested)) ×
protocol × service tier × key (last 4, fingerprint) × price version, status and reason ×
HTTP status × finish reason, with what the usage, cost, finish, errors, latency and cache
reports (and cost's footer) sum: requests, tokens by class, cost parts in pico-dollars,
counts of warmups, errors by kind and cache verdicts, tool calls by status, conversation
problems, and three latency histograms. Each row is of one grain (GRAIN): ALL, as above;
TEAM, the same sums by day × team × price version, status and reason × finish reason only
(histograms empty), about a twentieth of the rows, which the reports grouped by team
and/or day read (grain_for; latency reads ALL). Stored a file a month and grain.

CONVERSATION, a third grain, holds a day's sums of each conversation (the conversation
stored with each exchange): what report conversations ranks, read by
gather_conversations with the rows of the days the summary does not hold, so that a
conversation is billed whole without a scan of every exchange.

Latency histograms: a value x > 0 falls in bucket floor(log2(x) × SUB_BUCKETS) (8 a
doubling), 0 in a bucket of its own, x < 0 mirrored; a bucket stands for its geometric
middle, within RELATIVE_ERROR = 2^(1/16) − 1 ≈ 4.43% of every value in it. A percentile
(DuckDB's quantile_cont: interpolated between two order statistics) read off the merged
histograms (sql/latency_daily.sql) interpolates between the two stand-ins, so it too is
within ±4.43% of the exact one (tests/lake/test_daily_kept.py checks it).

A report reads, over a lake whose summary is as new as its exchanges (the summary's
`llmtap.summarized` is the exchanges table's current snapshot): the summary's rows of the
days wholly inside its --since/--until window that the store's tail does not touch, plus
the summary SQL run over the rows of the other days of the window (the days of the tail's
rows and of the lake rows deleted since the watermark, and the window's partial first and
last days), each read with lake_views.window so only those days' files are read. A row
of the store's tail keeps its day (a row keeps its `started_at`: lake/sync.py relies on
the same). Days are UTC: `--by hour`, and `--by day` in another zone, read rows.

Not responsible for writing the summary (lake/sync.py keeps it, lake/schema.py shapes
it), for the rows' views (lake_views.py) or for the reports' own columns (reports.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import duckdb

from llmtap.analytics.sql_quoting import identifier, literal
from llmtap.protocols.vocabulary import TOOL_PROBLEMS, TOOL_STATUSES

SUMMARIZED = "llmtap.summarized"  # snapshot summary: the exchanges snapshot the summary is of
SUMMARIZED_TOOL_CALLS = "llmtap.summarized_tool_calls"  # and the tool_calls one ("": none yet)
SHAPED = "llmtap.summary_shape"  # and the shape of its rows (SHAPE)
TABLE = "daily"  # in the lake's namespace
SUB_BUCKETS = 8  # histogram buckets per doubling
RELATIVE_ERROR = 2 ** (1 / (2 * SUB_BUCKETS)) - 1  # ≈ 0.0443: a bucket's middle to its edges
_OFFSET = 100_000  # bucket numbers: x > 0 above it, x < 0 below its negative, 0 is 0
HISTOGRAMS = {"ttfb_hist": "ttfb_ms", "ttft_hist": "ttft_ms", "total_hist": "duration_ms"}
HISTOGRAM_TYPE = "STRUCT(b INTEGER, n BIGINT)[]"
# the summary's columns, in order, as DuckDB types (lake/schema.py makes the Iceberg ones)
GROUPS = (
    ("day", "DATE"),
    ("team", "VARCHAR"),
    ("provider", "VARCHAR"),
    ("model", "VARCHAR"),
    ("protocol", "VARCHAR"),
    ("service_tier", "VARCHAR"),
    ("key_last4", "VARCHAR"),
    ("key_fingerprint", "VARCHAR"),
    ("price_version", "VARCHAR"),
    ("price_status", "VARCHAR"),
    ("price_reason", "VARCHAR"),
    ("status", "BIGINT"),
    ("finish_reason", "VARCHAR"),
)
_COUNTS = (
    "requests usage_missing input_tokens cache_read_tokens cache_write_tokens uncached_input_tokens "
    "output_tokens reasoning_tokens"
).split()
_PICO = "cost_input_pico cost_cache_read_pico cost_cache_write_pico cost_output_pico cost_fee_pico cost_total_pico"
_MORE = (
    "generations incomplete errors rate_limited server_errors overloaded stream_errors interrupted decode_errors"
).split()
MEASURES = (
    *((name, "BIGINT") for name in _COUNTS),
    *((name, "DECIMAL(38,0)") for name in _PICO.split()),
    *((name, "BIGINT") for name in _MORE),
    ("retry_after_max_s", "DOUBLE"),
    ("retry_after_sum_s", "DOUBLE"),
    ("retry_after_count", "BIGINT"),
    ("cache_first", "BIGINT"),
    ("cache_hits", "BIGINT"),
    ("cache_misses", "BIGINT"),
    ("cache_not_cacheable", "BIGINT"),
    ("cache_missed_tokens", "BIGINT"),
    ("cache_extra_cost_pico", "DECIMAL(38,0)"),
    ("latency_requests", "BIGINT"),
    *((name, HISTOGRAM_TYPE) for name in HISTOGRAMS),
    # tools.sql: the tool calls by status, and the problems across a conversation
    ("tool_calls", "BIGINT"),
    *((status, "BIGINT") for status in TOOL_STATUSES),
    *((problem, "BIGINT") for problem in TOOL_PROBLEMS),
)
ROW_COLUMNS = (*GROUPS, *MEASURES)  # what sql/lake_daily.sql makes of rows
# Each summary row is of one grain: ALL, grouped by every one of GROUPS; TEAM, the same
# measures summed again by TEAM_GROUPS only (the others NULL, the histograms empty): a
# twentieth of the rows, for the reports by team and day (TEAM_REPORTS, TEAM_DIMENSIONS).
GRAIN = "grain"
ALL, TEAM = "all", "team"
TEAM_GROUPS = ("day", "team", "price_version", "price_status", "price_reason", "finish_reason")
TEAM_REPORTS = frozenset({"usage", "cost", "finish", "errors", "cache", "tools"})  # not latency: no histograms
TEAM_DIMENSIONS = frozenset({"team", "day"})
# CONVERSATION, a third grain: day × conversation (the conversation stored with each
# exchange) with what conversations.sql sums (CONVERSATION_SUMS; the other GROUPS and
# measures NULL, the histograms empty), and these columns of its own (NULL in the others'):
# report conversations reads it (gather_conversations), a conversation billed whole.
CONVERSATION = "conversation"
CONVERSATION_COLUMNS = (
    ("conversation_id", "VARCHAR"),
    ("unpriced", "BIGINT"),
    ("first_started_at", "TIMESTAMP"),
    ("last_ended_at", "TIMESTAMP"),
    ("opens", "BOOLEAN"),  # the day holds the conversation's first exchange (its id is the conversation's)
)
COLUMNS = (*ROW_COLUMNS, (GRAIN, "VARCHAR"), *CONVERSATION_COLUMNS)
# the rows' shape: a summary made in another (older) one is not read, and made again whole
SHAPE = hashlib.sha256(repr(COLUMNS).encode()).hexdigest()[:12]
# the reports it answers (not listing), and the --by names it can group on
REPORTS = frozenset({"usage", "cost", "finish", "errors", "latency", "cache", "tools"})  # and conversations
DIMENSIONS = frozenset({"team", "provider", "model", "day", "key", "protocol", "status", "tier"})
ENABLED = "llmtap_lake_daily"  # DuckDB variable: the connection's lake has a current summary
ROWS = "daily_rows"  # the view a report's *_daily.sql reads
SUMMARY_VIEW = "lake_summary"  # the summary's rows, every grain (grain_rows: one of them)
GONE_DAYS = "llmtap_lake_gone_days"  # DuckDB variable: the query of the deleted rows' days
CONVERSATION_ROWS = "conversation_rows"  # the view conversations_daily.sql reads


def _bucket(column: str) -> str:
    """The histogram bucket of a value, as SQL (see the module's docstring)."""
    scale = f"{SUB_BUCKETS}"
    return (
        f"CASE WHEN {column} > 0 THEN {_OFFSET} + CAST(floor(log2({column}) * {scale}) AS INTEGER) "
        f"WHEN {column} < 0 THEN -{_OFFSET} - CAST(floor(log2(-{column}) * {scale}) AS INTEGER) ELSE 0 END"
    )


def _histogram(column: str) -> str:
    counted = f"histogram({_bucket(column)}) FILTER (WHERE timed AND {column} IS NOT NULL)"
    return (
        f"CAST(coalesce([{{'b': entry.key, 'n': entry.value}} FOR entry IN map_entries({counted})], []) "
        f"AS {HISTOGRAM_TYPE})"
    )


def _tool_sql() -> tuple[str, str]:
    """lake_daily.sql's tool parts: each exchange's count of calls by status (over the
    calls), and their sums with the row's problems' counts (over a group's rows)."""
    counts = ["count(*) AS calls_tool_calls"]
    counts += [f"count(*) FILTER (WHERE status = {literal(status)}) AS calls_{status}" for status in TOOL_STATUSES]
    sums = [
        f"CAST(coalesce(sum(llmtap_calls.calls_{name}), 0) AS BIGINT) AS {identifier(name)}"
        for name in ("tool_calls", *TOOL_STATUSES)
    ]
    sums += [
        f"CAST(coalesce(sum(len(list_filter(llmtap_problems, p -> p = {literal(problem)}))), 0) AS BIGINT) "
        f"AS {identifier(problem)}"
        for problem in TOOL_PROBLEMS
    ]
    return ",\n        ".join(counts), ",\n    ".join(sums)


def summary_sql(source: str, where: str = "true", tool_calls: str = "tool_calls") -> str:
    """sql/lake_daily.sql over `source` (a relation in the exchanges' columns, with
    `started_at` a naive UTC timestamp) filtered by `where`, with the tool calls of
    `tool_calls` (a relation with the calls' exchange_id and status; those of other rows
    than `source`'s are not counted)."""
    from llmtap.analytics.reports import sql

    text = sql("lake_daily")
    for name, column in HISTOGRAMS.items():
        text = text.replace(f"${name}", _histogram(column))
    counts, sums = _tool_sql()
    text = text.replace("$tool_call_counts", counts).replace("$tool_sums", sums)
    return text.replace("$source", source).replace("$where", where).replace("$tool_calls", tool_calls)


def team_sql(source: str) -> str:
    """The TEAM grain's rows of `source` (rows of the ALL grain, in ROW_COLUMNS): its
    measures summed again by TEAM_GROUPS (retry_after_max_s: the largest), in COLUMNS."""
    parts = []
    for name, data_type in ROW_COLUMNS:
        if name in TEAM_GROUPS:
            parts.append(identifier(name))
        elif (name, data_type) in GROUPS:
            parts.append(f"CAST(NULL AS {data_type}) AS {identifier(name)}")
        elif data_type == HISTOGRAM_TYPE:
            parts.append(f"CAST([] AS {HISTOGRAM_TYPE}) AS {identifier(name)}")
        elif name == "retry_after_max_s":
            parts.append(f"CAST(max({identifier(name)}) AS {data_type}) AS {identifier(name)}")
        else:
            parts.append(f"CAST(sum({identifier(name)}) AS {data_type}) AS {identifier(name)}")
    parts.append(f"'{TEAM}' AS {GRAIN}")
    parts.append(_nulls(CONVERSATION_COLUMNS))
    return f"SELECT {', '.join(parts)} FROM {source} GROUP BY {', '.join(identifier(name) for name in TEAM_GROUPS)}"


def _nulls(columns: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"CAST(NULL AS {data_type}) AS {identifier(name)}" for name, data_type in columns)


# What the CONVERSATION grain sums of each day's rows of a conversation: conversations.sql's
# per-row expressions, as lake_daily.sql sums them for the other grains.
CONVERSATION_SUMS = {
    "requests": "count(*)",
    "usage_missing": "count(*) FILTER (WHERE usage_input_tokens IS NULL)",
    "input_tokens": "sum(usage_input_tokens)",
    "cache_read_tokens": "sum(usage_cache_read_input_tokens)",
    "cache_write_tokens": "sum(usage_cache_creation_input_tokens)",
    "output_tokens": "sum(usage_output_tokens)",
    "cost_input_pico": "sum(cost_input_pico)",
    "cost_cache_read_pico": "sum(cost_cache_read_pico)",
    "cost_cache_write_pico": "sum(cost_cache_write_pico)",
    "cost_output_pico": "sum(cost_output_pico)",
    "cost_fee_pico": "sum(CASE WHEN cost_total_pico IS NOT NULL THEN coalesce(cost_fee_pico, 0) END)",
    "cost_total_pico": "sum(cost_total_pico)",
    "unpriced": "count(*) FILTER (WHERE price_status = 'unpriced')",
    "first_started_at": "min(started_at)",
    "last_ended_at": "max(coalesce(ended_at, started_at))",
    # conversations_daily.sql ranks a conversation with this row alone as it is
    "opens": "coalesce(bool_or(id = conversation_id), false)",
}
CONVERSATION_READ = ("conversation_id", *CONVERSATION_SUMS)  # what gather_conversations' view holds


def conversation_sql(source: str, where: str = "true") -> str:
    """The CONVERSATION grain's rows of `source` (a relation in the exchanges' columns, with
    `started_at` a naive UTC timestamp) filtered by `where`, in COLUMNS."""
    parts = []
    for name, data_type in COLUMNS:
        if name == "day":
            parts.append("CAST(started_at AS DATE) AS day")
        elif name == GRAIN:
            parts.append(f"'{CONVERSATION}' AS {GRAIN}")
        elif name == "conversation_id":
            parts.append("CAST(conversation_id AS VARCHAR) AS conversation_id")
        elif name in CONVERSATION_SUMS:
            parts.append(f"CAST({CONVERSATION_SUMS[name]} AS {data_type}) AS {identifier(name)}")
        elif data_type == HISTOGRAM_TYPE:
            parts.append(f"CAST([] AS {HISTOGRAM_TYPE}) AS {identifier(name)}")
        else:
            parts.append(f"CAST(NULL AS {data_type}) AS {identifier(name)}")
    return f"SELECT {', '.join(parts)} FROM {source} WHERE {where} GROUP BY CAST(started_at AS DATE), conversation_id"


def middle_sql(bucket: str) -> str:
    """middle() as SQL, of the bucket number in column `bucket`."""
    octave = f"((abs({bucket}) - {_OFFSET} + 0.5) / {SUB_BUCKETS})"
    return f"(CASE WHEN {bucket} = 0 THEN 0.0 ELSE sign({bucket}) * pow(2.0, {octave}) END)"


# --- the sync's summarizing ----------------------------------------------------------


class Summarizer:
    """Makes a lake's summary rows from its files on one DuckDB connection (its extensions
    loaded once, for every month a sync makes again): DuckDB reads the lake's files with its
    iceberg extension, as the reports do, only the days asked for. `metadata`: the exchanges
    table's current metadata file; `tool_calls`: the tool_calls table's (None: it holds
    none yet). Not responsible for which days to make (lake/daily.py) or for writing them."""

    def __init__(
        self, metadata: str, tool_calls: str | None, warehouse: str, properties: Mapping[str, str] | None = None
    ) -> None:
        from llmtap.analytics import lake_views
        from llmtap.analytics.duck import memory_settings

        self._metadata, self._tool_calls, self._warehouse = metadata, tool_calls, warehouse
        # within a report's memory bound, spilling past it: a month of 100M rows held 2.8 GB
        self._connection = duckdb.connect(
            config={
                "autoinstall_known_extensions": False,
                "autoload_known_extensions": False,
                "threads": 2,
                **memory_settings(),
            }
        )
        try:
            lake_views.load_extensions(self._connection, warehouse, properties or {})
        except BaseException:
            self._connection.close()
            raise

    def __enter__(self) -> Summarizer:
        return self

    def __exit__(self, *_: object) -> None:
        self._connection.close()

    def rows(self, days: Sequence[date] | None, held: str | None = None, span: tuple[date, date] | None = None) -> Any:
        """The summary rows of `days` (None: every day) as a pyarrow Table in COLUMNS' order
        and types, by day; with `held` (the summary table's current metadata file) and
        `span` ([first, end)), also the rows it holds of the span's other days: a month's
        whole summary, its changed days made again."""
        from llmtap.analytics import lake_views

        names = ", ".join(
            f"CAST({identifier(name)} AS {data_type}) AS {identifier(name)}" for name, data_type in ROW_COLUMNS
        )
        exchanges, calls = self._sources(days)
        query = f"SELECT {names} FROM ({summary_sql(exchanges, tool_calls=calls)})"
        conversations = conversation_sql(exchanges)
        if held is not None and span is not None:
            others = f"day >= DATE '{span[0].isoformat()}' AND day < DATE '{span[1].isoformat()}'"
            others += f" AND {_not_on(days or ())}"
            scan = f"iceberg_scan({literal(held)})"
            query += f" UNION ALL SELECT {names} FROM {scan} WHERE {GRAIN} = '{ALL}' AND {others}"
            # a summary of the current shape holds the grain (an older one is made again whole)
            every = ", ".join(f"CAST({identifier(n)} AS {t}) AS {identifier(n)}" for n, t in COLUMNS)
            conversations += f" UNION ALL SELECT {every} FROM {scan} WHERE {GRAIN} = '{CONVERSATION}' AND {others}"
        query = (
            f"WITH llmtap_all AS MATERIALIZED ({query}) "
            f"SELECT *, '{ALL}' AS {GRAIN}, {_nulls(CONVERSATION_COLUMNS)} FROM llmtap_all "
            f"UNION ALL {team_sql('llmtap_all')} UNION ALL {conversations}"
        )
        try:
            return self._connection.execute(f"SELECT * FROM ({query}) ORDER BY {GRAIN}, day").to_arrow_table()
        except lake_views.READ_ERRORS as exc:
            raise lake_views.LakeError(
                f"cannot read the lake at {self._warehouse}: {lake_views.first_line(exc)}"
            ) from None

    def _sources(self, days: Sequence[date] | None) -> tuple[str, str]:
        """The lake's exchanges of `days` (None: all) with `started_at` naive UTC, and
        their tool calls, as relations."""
        within = "true"
        if days is not None:
            # on the lake's own started_at (timestamptz): the scan prunes its days' files by it
            # (a tool call carries its exchange's started_at, so its files are the same days')
            spans = _merged([(_start(day), _end(day)) for day in days])
            within = (
                " OR ".join(
                    f"(started_at >= TIMESTAMPTZ '{low.isoformat(sep=' ')}+00' "
                    f"AND started_at < TIMESTAMPTZ '{high.isoformat(sep=' ')}+00')"
                    for low, high in spans
                )
                or "false"
            )
        exchanges = (
            "(SELECT * REPLACE (make_timestamp(epoch_us(started_at)) AS started_at) "
            f"FROM iceberg_scan({literal(self._metadata)}) WHERE {within})"
        )
        calls = (
            f"(SELECT exchange_id, status FROM iceberg_scan({literal(self._tool_calls)}) WHERE {within})"
            if self._tool_calls is not None
            else "(SELECT CAST(NULL AS VARCHAR) AS exchange_id, CAST(NULL AS VARCHAR) AS status WHERE false)"
        )
        return exchanges, calls


def summarize(
    metadata: str,
    tool_calls: str | None,
    warehouse: str,
    days: Sequence[date] | None,
    properties: Mapping[str, str] | None = None,
) -> Any:
    """The summary rows of `days` (None: every day) of the lake (Summarizer.rows)."""
    with Summarizer(metadata, tool_calls, warehouse, properties) as summarizer:
        return summarizer.rows(days)


# --- a report's read -------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """Which days a report reads from the summary and which as rows: the summary's days
    are [first, last) less `dirty`; `rows` are the half-open instants read as rows."""

    first: date | None
    last: date | None
    dirty: tuple[date, ...]
    rows: tuple[tuple[datetime, datetime], ...]


def answers(connection: duckdb.DuckDBPyConnection, kind: str, by: Sequence[str], tz: str, listing: bool) -> bool:
    """Whether report `kind` grouped `by` can read the connection's lake summary."""
    if listing or kind not in REPORTS or not set(by) <= DIMENSIONS:
        return False
    if "day" in by and tz != "UTC":
        return False
    return enabled(connection)


def enabled(connection: duckdb.DuckDBPyConnection) -> bool:
    """Whether the connection reads a lake whose daily summary is current (`attach` set it)."""
    try:
        found = connection.execute(f"SELECT getvariable('{ENABLED}')").fetchone()
    except duckdb.Error:
        return False
    return bool(found and found[0])


def attach(
    connection: duckdb.DuckDBPyConnection,
    metadata: str,
    held: AbstractSet[str],
    gone_keys: str | None,
    gone_days: str | None,
) -> None:
    """Make the summary at `metadata` readable on `connection` (its lake's views made by
    lake_views.attach): `lake_summary`, the summary's rows of every grain as DuckDB types
    (`held`: the columns the summary's files have; the others read as NULL), read a grain
    at a time through grain_rows(); `lake_tail_days`, the days of the store's tail;
    `lake_gone_keys`, the keys deleted since the watermark; `gone_days`, a query of the
    days their lake rows are in, kept as the variable GONE_DAYS and run by dirty_days only
    when there are such keys (it scans the lake's keys, and a view of it would be bound
    at every report: 50 ms at 100M exchanges). Each view over the lake's files is bound
    when made, so there is one."""
    select = ", ".join(
        f"CAST({identifier(name)} AS {data_type}) AS {identifier(name)}"
        if name in held
        else f"CAST(NULL AS {data_type}) AS {identifier(name)}"
        for name, data_type in COLUMNS
    )
    scan = f"iceberg_scan({literal(metadata)})"
    connection.execute(f"CREATE OR REPLACE TEMP VIEW {SUMMARY_VIEW} AS SELECT {select} FROM {scan}")
    connection.execute(
        "CREATE OR REPLACE TEMP VIEW lake_tail_days AS SELECT DISTINCT CAST(started_at AS DATE) AS day "
        "FROM lake_tail_exchanges"
    )
    keys = gone_keys or "SELECT CAST(NULL AS VARCHAR) AS exchange_id WHERE false"
    connection.execute(f"CREATE OR REPLACE TEMP VIEW lake_gone_keys AS {keys}")
    connection.execute(f"SET VARIABLE {GONE_DAYS} = {literal(gone_days or '')}")
    connection.execute(f"SET VARIABLE {ENABLED} = true")


def grain_rows(grain: str) -> str:
    """The summary's rows of one grain, as an SQL subquery."""
    return f"(SELECT * FROM {SUMMARY_VIEW} WHERE {GRAIN} = {literal(grain)})"


def _empty_table(name: str, columns: Sequence[tuple[str, str]]) -> str:
    """A statement making temp table `name` with `columns` (name, DuckDB type) and no rows:
    made from the types, not from a query over the summary, which would bind its files."""
    typed = ", ".join(f"{identifier(column)} {data_type}" for column, data_type in columns)
    return f"CREATE OR REPLACE TEMP TABLE {name} ({typed})"


def dirty_days(connection: duckdb.DuckDBPyConnection) -> set[date]:
    """The days whose summary rows the store's tail makes stale: its rows' days, and the
    days of the lake rows deleted since the watermark."""
    days = {day for (day,) in connection.execute("SELECT day FROM lake_tail_days").fetchall() if day is not None}
    if connection.execute("SELECT 1 FROM lake_gone_keys LIMIT 1").fetchone() is not None:
        found = connection.execute(f"SELECT getvariable('{GONE_DAYS}')").fetchone()
        if found and found[0]:
            days |= {day for (day,) in connection.execute(str(found[0])).fetchall() if day is not None}
    return days


def plan(
    connection: duckdb.DuckDBPyConnection,
    since: datetime | None,
    until: datetime | None,
    stale: set[date] | None = None,
) -> Plan:
    """The days of window [since, until) (naive UTC) the summary answers, and the rest
    (`stale`: dirty_days(), when the caller has them already)."""
    dirty = sorted(
        day
        for day in (dirty_days(connection) if stale is None else stale)
        if (since is None or _end(day) > since) and (until is None or _start(day) < until)
    )
    first = None if since is None else (since.date() if since.time() == time(0) else since.date() + timedelta(1))
    last = None if until is None else until.date()
    rows: list[tuple[datetime, datetime]] = []
    if since is not None and until is not None and first is not None and last is not None and first >= last:
        rows.append((since, until))  # within a day, or two partial ones
    else:
        if since is not None and first is not None and _start(first) > since:
            rows.append((since, _start(first)))
        for day in dirty:
            rows.append((_later(since, _start(day)), _earlier(until, _end(day))))
        if until is not None and last is not None and _start(last) < until:
            rows.append((_start(last), until))
    return Plan(first, last, tuple(dirty), tuple(_merged(rows)))


def grain_for(kind: str, by: Sequence[str]) -> str:
    """The summary grain report `kind` grouped `by` reads (TEAM: fewer rows, same sums)."""
    return TEAM if kind in TEAM_REPORTS and set(by) <= TEAM_DIMENSIONS else ALL


def gather(
    connection: duckdb.DuckDBPyConnection, since: datetime | None, until: datetime | None, grain: str = ALL
) -> Plan:
    """Make `daily_rows` (a view: the summary's rows of `grain` of the days it answers,
    and a temp table of the summary SQL over the rows of the others), for window
    [since, until)."""
    from llmtap.analytics.lake_views import window

    chosen = plan(connection, since, until)
    conditions = ["true", *_whole_days(chosen), _not_on(chosen.dirty)]
    if chosen.first is not None and chosen.last is not None and chosen.first >= chosen.last:
        conditions = ["false"]
    names = ", ".join(identifier(name) for name, _ in ROW_COLUMNS)
    # the rows' part is small (a few days) and made now; the summary's is read through a
    # view, so that a report reads only the summary columns it sums
    connection.execute(_empty_table("daily_parts", ROW_COLUMNS))
    for low, high in chosen.rows:
        with window(connection, low, high):
            connection.execute(
                f"INSERT INTO daily_parts SELECT {names} FROM ({summary_sql('exchanges', _between(low, high))})"
            )
    summary = grain_rows(TEAM if grain == TEAM else ALL)
    connection.execute(
        f"CREATE OR REPLACE TEMP VIEW {ROWS} AS SELECT *, CAST(day AS TIMESTAMP) AS started_at, "
        f"CAST(NULL AS VARCHAR) AS model_requested FROM (SELECT {names} FROM {summary} "
        f"WHERE {' AND '.join(conditions)} UNION ALL SELECT {names} FROM daily_parts)"
    )
    return chosen


def gather_conversations(connection: duckdb.DuckDBPyConnection, since: datetime | None, until: datetime | None) -> None:
    """Make `conversation_rows` (CONVERSATION_READ and `in_window`) for report
    conversations over window [since, until) (naive UTC): a conversation is billed whole,
    so its sums are over every day: the summary's CONVERSATION rows of the days the
    store's tail and the deletions leave alone, and the same sums made now from the rows
    of the others. `in_window` marks a row of a conversation with a turn in the window: a
    summary row of a day wholly inside it, and a row per conversation with a turn in the
    window's other instants (plan(): its partial and dirty days, read as rows; no sums)."""
    from llmtap.analytics.lake_views import window

    stale = dirty_days(connection)
    names = ", ".join(identifier(name) for name in CONVERSATION_READ)
    nothing = _nulls([(n, t) for n, t in COLUMNS if n in CONVERSATION_READ[1:]])
    everywhere = since is None and until is None
    types = dict(COLUMNS)
    connection.execute(
        _empty_table("conversation_parts", [*((n, types[n]) for n in CONVERSATION_READ), ("in_window", "BOOLEAN")])
    )
    for low, high in _merged([(_start(day), _end(day)) for day in stale]):
        made = conversation_sql("exchanges", _between(low, high))
        with window(connection, low, high):
            connection.execute(f"INSERT INTO conversation_parts SELECT {names}, {everywhere} FROM ({made})")
    chosen = plan(connection, since, until, stale)
    for low, high in () if everywhere else chosen.rows:
        with window(connection, low, high):
            connection.execute(
                f"INSERT INTO conversation_parts SELECT DISTINCT CAST(conversation_id AS VARCHAR), {nothing}, "
                f"true FROM exchanges WHERE {_between(low, high)}"
            )
    inside = " AND ".join(["true", *_whole_days(chosen)])
    connection.execute(
        f"CREATE OR REPLACE TEMP VIEW {CONVERSATION_ROWS} AS SELECT {names}, ({inside}) AS in_window "
        f"FROM {grain_rows(CONVERSATION)} WHERE {_not_on(stale)} UNION ALL SELECT * FROM conversation_parts"
    )


def _whole_days(chosen: Plan) -> list[str]:
    """The summary's days of a plan, [first, last), as SQL conditions on `day`."""
    conditions = []
    if chosen.first is not None:
        conditions.append(f"day >= DATE '{chosen.first.isoformat()}'")
    if chosen.last is not None:
        conditions.append(f"day < DATE '{chosen.last.isoformat()}'")
    return conditions


def _not_on(days: Iterable[date]) -> str:
    """Not one of `days`, as an SQL condition on `day` (`true` for none)."""
    listed = ", ".join(repr(d.isoformat()) for d in sorted(days))
    return f"day NOT IN ({listed})" if listed else "true"


def _between(low: datetime, high: datetime) -> str:
    """Rows started in [low, high) (naive UTC), as SQL."""
    return f"started_at >= TIMESTAMP '{low.isoformat(sep=' ')}' AND started_at < TIMESTAMP '{high.isoformat(sep=' ')}'"


def _start(day: date) -> datetime:
    return datetime.combine(day, time(0))


def _end(day: date) -> datetime:
    return _start(day) + timedelta(days=1)


def _later(a: datetime | None, b: datetime) -> datetime:
    return b if a is None else max(a, b)


def _earlier(a: datetime | None, b: datetime) -> datetime:
    return b if a is None else min(a, b)


def _merged(spans: list[tuple[datetime, datetime]]) -> list[tuple[datetime, datetime]]:
    """Half-open spans, overlapping and touching ones joined."""
    merged: list[tuple[datetime, datetime]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def utc_days(values: Iterable[int]) -> list[date]:
    """Iceberg day partition values (days since 1970-01-01) as dates."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC).date()
    return sorted({epoch + timedelta(days=int(v)) for v in values})
