"""The numbers a dashboard shows, gathered from the analytics reports in one DuckDB
connection, as plain JSON-able values.

Money stays exact until here and leaves as decimal text (`"0.0123"`): the page formats it
with the CLI's one money format and draws chart heights from it. The series over time
are per hour when the traffic shown spans at most `HOURS_UP_TO` (a bar a day over a day
is one fat bar), per day up to `WEEKS_AFTER_DAYS` days, per week past that (a bar a day
over a year is a blur and its date labels collide); whichever, the key the page reads is
`day` (a date, or `YYYY-MM-DD HH:00` per hour, both wall time in the zone asked for,
UTC unless told) and `period` names which. Every time shown is wall time in that zone too,
and `window` says which period and zone the page covers, and when the last exchange was.

Not responsible for SQL (`analytics.dashboard_queries` asks the store), for HTML (see
`page.py`) nor for formats (the totals' text comes from `analytics.render`; the page's
own from `format.js`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime, timedelta, tzinfo
from decimal import Decimal
from typing import Any

from llmtap.analytics import dashboard_queries, reports
from llmtap.analytics.audit import cost_shown
from llmtap.analytics.dashboard_queries import Connection
from llmtap.analytics.duck import connect
from llmtap.analytics.render import local, money, percent

MISSES_SHOWN = 200
PROBLEMS_SHOWN = 200
# The newest exchanges the page carries, each with its inline detail (`slim`: about 1.5 kB),
# paged in the page 100 rows at a time: 2,000 keep the file near 9 MB, Plotly's 4.6 MB
# included, small enough to mail. `llmtap log` and the served page's filters reach the rest.
EXCHANGES_SHOWN = 2000
TEXT_SHOWN = 600  # characters of an answer the inline detail carries (`show` has it all)
CONVERSATIONS_SHOWN = 100
PROMPT_SHOWN = 80
WEEKS_AFTER_DAYS = 60
HOURS_UP_TO = timedelta(days=2)
TEAMS_SHOWN = 8  # per-team charts: the busiest teams, each its own colour, the rest as one
NOT_CACHEABLE = "below_minimum"  # the listing's cause of a `not_cacheable` turn: no miss (SPEC §5)


def _plain(value: Any, column: str = "", zone: tzinfo = UTC) -> Any:
    if isinstance(value, Decimal):
        return format(value, "f") if column in reports.MONEY else float(value)
    if isinstance(value, datetime):
        return wall(value, zone)
    return value


def wall(moment: datetime, zone: tzinfo = UTC) -> str:
    """A stored time (naive UTC, or aware) as wall time in `zone`, to the second."""
    return local(moment, zone).replace(tzinfo=None).isoformat(sep=" ", timespec="seconds")


def _rows(table: reports.Table, zone: tzinfo = UTC) -> list[dict[str, Any]]:
    return [{k: _plain(v, k, zone) for k, v in row.items()} for row in table.rows]


def collect(
    url: str,
    since: datetime | None = None,
    until: datetime | None = None,
    lake: str | None = None,
    lake_settings: dict[str, str] | None = None,
    tz: str | None = None,
) -> dict[str, Any]:
    """Everything the dashboard draws, for exchanges started in [since, until), its days
    and hours counted in the IANA zone `tz` (UTC when None; an unknown name is
    reports.ReportError); with `lake` (a warehouse), over that lake plus the store's rows
    not synced yet."""
    zone = reports.zone(tz)
    # many reports: copy what they read once
    connection = connect(url, snapshot=True, lake=lake, lake_settings=lake_settings)
    try:

        def run(kind: str, by: list[str] | None = None) -> list[dict[str, Any]]:
            table = reports.run(url, kind, by=by, since=since, until=until, connection=connection, tz=zone.key)
            return _rows(table, zone)

        first, last, latest = dashboard_queries.span(connection, since, until)
        hourly = first is not None and last is not None and last - first <= HOURS_UP_TO

        def over_time(kind: str, *by: str) -> list[dict[str, Any]]:
            """Rows of `kind` per day (or per hour), their period in `day` either way."""
            if not hourly:
                return run(kind, ["day", *by])
            return [{"day": row.pop("hour"), **row} for row in run(kind, ["hour", *by])]

        data: dict[str, Any] = {
            "generated_at": wall(datetime.now(UTC), zone),
            "since": since.isoformat() if since else None,
            "until": until.isoformat() if until else None,
            "window": _window(zone, since, until, first, last, latest),
            "usage_by_team": run("usage", ["team"]),
            "usage_by_day": over_time("usage"),
            "cost_by_team": run("cost", ["team"]),
            "cost_by_day_team": over_time("cost", "team"),
            "cache_by_day_team": over_time("cache", "team"),
            "finish_by_provider": run("finish", ["provider"]),
            "tools_by_team": run("tools", ["team"]),
            "errors_by_provider": run("errors", ["provider"]),
            "errors_by_status": run("errors", ["provider", "status"]),
            "latency_by_model": run("latency", ["model"]),
        }
        # the misses that cost money; a `not_cacheable` turn is listed with cause
        # below_minimum and counted apart, as `report cache` counts it
        misses, causes = dashboard_queries.listing(
            connection, "cache_misses", since, until, MISSES_SHOWN, "cause", skip=("cause", NOT_CACHEABLE)
        )
        data["misses"] = _as_shown(misses, zone)
        data["not_cacheable"] = causes.pop(NOT_CACHEABLE, 0)
        ranked = sorted(causes.items(), key=lambda c: (-c[1], c[0]))  # ties by name: the same order every time
        data["miss_causes"] = [{"cause": k, "misses": n} for k, n in ranked]
        problems, kinds = dashboard_queries.listing(connection, "tool_problems", since, until, PROBLEMS_SHOWN, "status")
        data["problems"] = _as_shown(problems, zone)
        data["problem_count"] = sum(kinds.values())
        data["offenders"] = _offenders(connection)
        data["conversations"], data["conversations_note"] = _conversations(url, connection, since, until, zone)
        data["exchanges"] = _recent(url, connection, since, until, zone)
        data["exchanges_total"] = dashboard_queries.count(connection, since, until)
    finally:
        connection.close()
    data["exchanges_shown"] = EXCHANGES_SHOWN
    data["totals"] = _totals(data)  # before the quiet teams are summed: every team counts
    _other_teams(data)
    data["period"] = "hour" if hourly else _by_period(data)
    return data


def _window(
    zone: tzinfo,
    since: datetime | None,
    until: datetime | None,
    first: datetime | None,
    last: datetime | None,
    latest: datetime | None,
) -> dict[str, Any]:
    """The period the page covers and the zone its times are in, as the header says it:
    the bounds asked for (`since`, `until`: None for open), the first and last exchange
    in it, and the store's last exchange (the empty state names it)."""

    def shown(moment: datetime | None) -> str | None:
        return None if moment is None else local(moment, zone).strftime("%Y-%m-%d %H:%M")

    key = str(getattr(zone, "key", "UTC"))
    start, end = shown(since) or shown(first), shown(until) or shown(last)
    if since is None and until is None:
        text = "all exchanges" if first is None else f"all exchanges, {start}" + ("" if start == end else f" to {end}")
    else:
        text = f"{shown(since) or 'the first exchange'} to {shown(until) or 'now'}"
    return {
        "zone": key,
        "since": shown(since),
        "until": shown(until),
        "first": shown(first),
        "last": shown(last),
        "latest": shown(latest),
        "text": f"{text} · times in {key}",
    }


def _as_shown(rows: list[dict[str, Any]], zone: tzinfo) -> list[dict[str, Any]]:
    """The items of a `--list` report (`dashboard_queries.listing`) as the page carries them."""
    return [{k: _plain(v, k, zone) for k, v in row.items()} for row in rows]


def _offenders(connection: Connection) -> list[dict[str, Any]]:
    """The tools with the most problems (of the listing `dashboard_queries.listing` kept), and which."""
    by_tool = dashboard_queries.tool_problem_counts(connection)
    ranked = sorted(by_tool.items(), key=lambda item: (-sum(item[1].values()), item[0]))[:15]
    return [{"tool": tool, "problems": sum(counts.values()), "statuses": counts} for tool, counts in ranked]


def _conversations(
    url: str, connection: Connection, since: datetime | None, until: datetime | None, zone: tzinfo
) -> tuple[list[dict[str, Any]], str | None]:
    """The costliest conversations (`llmtap report conversations`), or none and why, on a
    build whose reports have no such report yet."""
    if "conversations" not in reports.REPORTS:
        return [], "Needs `llmtap report conversations`, which this build does not have yet."
    run: Callable[..., reports.Table] = reports.run
    table = run(url, "conversations", since=since, until=until, connection=connection, top=CONVERSATIONS_SHOWN)
    rows = _rows(table, zone)[:CONVERSATIONS_SHOWN]
    for row in rows:  # a glimpse: `show --conversation` has it all
        prompt = row.get("first_prompt")
        if isinstance(prompt, str) and len(prompt) > PROMPT_SHOWN:
            row["first_prompt"] = prompt[: PROMPT_SHOWN - 1] + "…"
    return rows, None


# -- hours, days or weeks, and the teams they show -----------------------------------------------------

_SERIES = ("usage_by_day", "cost_by_day_team", "cache_by_day_team")
_PER_TEAM = ("usage_by_team", "cost_by_team", "tools_by_team", "cost_by_day_team", "cache_by_day_team")


def _other_teams(data: dict[str, Any]) -> None:
    """Keep the TEAMS_SHOWN busiest teams (by requests) in every chart per team and sum
    the others into one "(N other teams)": 25 bars, lines or legend entries on one chart
    are a blur, and past a palette's length colours would repeat. `teams_ranked` names
    every team, busiest first; the totals were taken before (every team counts)."""
    ranked = sorted(data["usage_by_team"], key=lambda r: (-r["requests"], str(r["team"])))
    data["teams_ranked"] = [r["team"] for r in ranked]
    data["other_teams"] = None
    if len(ranked) <= TEAMS_SHOWN + 1:
        return
    shown = {r["team"] for r in ranked[:TEAMS_SHOWN]}
    other = f"({len(ranked) - TEAMS_SHOWN} other teams)"
    data["other_teams"] = other
    order = {team: i for i, team in enumerate(data["teams_ranked"][:TEAMS_SHOWN])}
    for name in _PER_TEAM:
        rows = [row if row["team"] in shown else {**row, "team": other} for row in data[name]]
        data[name] = _summed(
            rows,
            lambda row: (row.get("day"), row["team"]),
            lambda row: (str(row.get("day")), order.get(row["team"], TEAMS_SHOWN)),
        )
    _hit_rates(data["cache_by_day_team"])


def _hit_rates(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        row["hit_rate"] = round(row["cache_read_tokens"] / row["input_tokens"], 4) if row["input_tokens"] else None


def _by_period(data: dict[str, Any]) -> str:
    """ "day", or "week" (the series' `day` becomes the Monday of its week, the rows of a
    week summed) when the days shown span more than WEEKS_AFTER_DAYS."""
    days = sorted({row["day"] for row in data["usage_by_day"] if row.get("day")})
    if not days or (date.fromisoformat(days[-1]) - date.fromisoformat(days[0])).days < WEEKS_AFTER_DAYS:
        return "day"
    for name in _SERIES:
        weekly = [{**row, "day": _monday(row["day"])} for row in data[name]]
        data[name] = _summed(weekly, lambda row: (row["day"], row.get("team")))
    _hit_rates(data["cache_by_day_team"])
    return "week"


def _monday(day: str) -> str:
    moment = date.fromisoformat(day)
    return (moment - timedelta(days=moment.weekday())).isoformat()


def _summed(
    rows: Iterable[dict[str, Any]],
    key: Callable[[dict[str, Any]], tuple[Any, ...]],
    order: Callable[[dict[str, Any]], tuple[Any, ...]] | None = None,
) -> list[dict[str, Any]]:
    """Rows with the same key summed: counts added, money added exactly (None only when
    every row's is None), rates left for the caller to recompute; in `order` (default:
    by day, then team)."""
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        into = out.get(key(row))
        if into is None:
            out[key(row)] = dict(row)
            continue
        for column, value in row.items():
            if column in reports.MONEY:
                into[column] = _add_money(into[column], value)
            elif isinstance(value, int) and not isinstance(value, bool) and column != "day":
                into[column] = (into.get(column) or 0) + value
    return sorted(out.values(), key=order or (lambda r: (str(r["day"]), str(r.get("team")))))


def _add_money(a: str | None, b: str | None) -> str | None:
    if a is None or b is None:
        return a if b is None else b
    return format(Decimal(a) + Decimal(b), "f")


def _totals(data: dict[str, Any]) -> dict[str, Any]:
    """The summary cards' figures. Over no exchanges there is no cost and no hit rate
    (None, never $0.00 or 0.0%); a cost over unpriced requests says how many it leaves
    out, as `report cost` does; not-cacheable turns are counted apart from the misses."""
    usage = data["usage_by_team"]
    cost = data["cost_by_team"]
    cache = data["cache_by_day_team"]  # (a cache pass per report: one is enough for the totals)
    input_tokens = sum(r["input_tokens"] for r in usage)
    cache_read = sum(r["cache_read_tokens"] for r in usage)
    requests = sum(r["requests"] for r in usage)
    priced = [Decimal(r["cost_usd"]) for r in cost if r["cost_usd"] is not None]
    unpriced = sum(r["unpriced"] for r in cost)
    hit_rate = cache_read / input_tokens if input_tokens else None
    return {
        "requests": requests,
        "teams": len(usage),
        "input_tokens": input_tokens,
        "output_tokens": sum(r["output_tokens"] for r in usage),
        # a team with nothing priced has no cost (None), not $0: it adds nothing here
        "cost_usd": format(sum(priced, Decimal(0)), "f") if priced else None,
        "cost_text": (money(sum(priced, Decimal(0))) if priced else "unpriced") if requests else None,
        "cost_note": _cost_note(priced, unpriced, sum(r["usage_missing"] for r in usage)),
        "unpriced": unpriced,
        "usage_missing": sum(r["usage_missing"] for r in usage),
        "hit_rate": None if hit_rate is None else round(hit_rate, 4),
        "hit_rate_text": None if hit_rate is None else percent(hit_rate),
        "misses": sum(r.get("misses") or 0 for r in cache),
        "not_cacheable": sum(r.get("not_cacheable") or 0 for r in cache),
        "errors": sum(r["errors"] for r in data["errors_by_provider"]),
        "tool_problems": data["problem_count"],
    }


def _cost_note(priced: list[Decimal], unpriced: int, usage_missing: int) -> str:
    """What a cost total leaves out: `+ 3 unpriced requests, not in the total` (the
    CLI's words, `analytics.audit.cost_shown`), and requests without usage."""
    notes = []
    if unpriced:
        whole = cost_shown(priced, unpriced, noun="request")
        plural = "s" if unpriced != 1 else ""
        notes.append(whole.split(" ", 1)[1] + ", not in the total" if priced else f"{unpriced:,} request{plural}")
    if usage_missing:
        notes.append(f"{usage_missing:,} without usage")
    return "; ".join(notes)


def _recent(
    url: str, connection: Connection, since: datetime | None, until: datetime | None, zone: tzinfo
) -> list[dict[str, Any]]:
    """The newest exchanges as `llmtap log` lists them, with their inline details
    (`dashboard_queries.recent`)."""
    found = dashboard_queries.recent(url, connection, since, until, EXCHANGES_SHOWN)
    return [{**{k: _plain(v, k, zone) for k, v in row.items()}, "detail": slim(detail)} for row, detail in found]


def slim(detail: dict[str, Any] | None) -> dict[str, Any] | None:
    """An exchange's inline detail as the page carries it: what the detail view shows
    (the tools' names, not their schemas; the answer's first TEXT_SHOWN characters; the
    cost's parts, not the pricer's notes), so 2,000 of them stay a few MB."""
    if detail is None:
        return None
    request = {k: v for k, v in detail["request"].items() if k not in ("prefix", "tool_call_ids", "tool_result_ids")}
    request["tools"] = [{"name": t.get("name")} for t in request.get("tools") or [] if isinstance(t, dict)]
    answer = dict(detail["answer"])
    text = answer.get("text") or ""
    if len(text) > TEXT_SHOWN:
        answer["text"], answer["text_clipped"] = text[:TEXT_SHOWN], True
    cost = {k: v for k, v in detail["cost"].items() if k != "detail" and v is not None}
    return {**detail, "request": request, "answer": answer, "cost": cost}
