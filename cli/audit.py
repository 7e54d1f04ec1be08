"""`llmtap log` (exchanges newest first, with filters) and `llmtap show ID
[--conversation]` (one exchange, or its conversation, in full). SPEC §3.

Everything stored came from a client or an upstream, so in a terminal each value is
printed as text through `render.shown` (markup escaped, control characters as `\\xNN`;
`show` keeps the newlines of an answer, prompt or body), and JSON escapes the C1
controls too. Not responsible for finding or computing what is shown (analytics/audit.py).
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from llmtap.cli import audit_machine, output
from llmtap.cli import settings as settings_module
from llmtap.cli.errors import UsageError
from llmtap.cli.timeargs import add_tz, moment
from llmtap.cli.timeargs import zone as zone_named
from llmtap.protocols.rules import BELOW_MINIMUM
from llmtap.protocols.vocabulary import MISS_CAUSES, TOOL_STATUSES
from llmtap.protocols.vocabulary import TOOL_PROBLEMS as CONVERSATION_PROBLEMS

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

# `log --tool-problem`: any status of a call but `valid`, or a conversation's problem;
# `log --cache-miss`: a cause (protocols/vocabulary.py holds both vocabularies).
TOOL_FILTERS = (*(status for status in TOOL_STATUSES if status != "valid"), *CONVERSATION_PROBLEMS)
TERMINAL_BODY = 4000  # characters of a raw body a terminal shows; --format json shows more


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "log",
        help="recorded exchanges, newest first, with filters",
        description="The audit trail: recorded exchanges, newest first (or by cost or tokens), "
        "filtered by team, model, provider, time, status, finish reason, tool-call problem, cache miss or text.",
    )
    parser.add_argument("--team", help="only this team's exchanges")
    parser.add_argument("--model", help="only this model's (as served, or as requested)")
    parser.add_argument("--provider", help="only this provider's (anthropic, openai, google, …)")
    parser.add_argument("--since", help="ISO date/time or age (7d)")
    parser.add_argument("--until", help="ISO date/time or age")
    parser.add_argument("--status", help="an HTTP status (429), or 'error' for any failure")
    parser.add_argument("--finish", help="a canonical finish reason (end_turn, max_tokens, tool_use, …, unknown)")
    parser.add_argument(
        "--tool-problem",
        nargs="?",
        const="any",
        choices=("any", *TOOL_FILTERS),
        help="only exchanges with tool-call problems (of this kind)",
    )
    parser.add_argument(
        "--cache-miss",
        nargs="?",
        const="any",
        choices=("any", *MISS_CAUSES),
        help="only cache misses (with this cause)",
    )
    parser.add_argument("--search", metavar="TEXT", help="text in answers and, where bodies were kept, prompts")
    parser.add_argument("--limit", type=_positive, default=50, metavar="N", help="at most N exchanges (default 50)")
    parser.add_argument(
        "--sort",
        choices=("started", "cost", "tokens"),
        default="started",
        help="started: newest first (default); cost: costliest first, unpriced last; tokens: input + output",
    )
    add_tz(parser, "the times shown")
    output.add_format(parser)
    settings_module.add_common(parser)
    parser.set_defaults(run=run_log)

    parser = commands.add_parser(
        "show",
        help="one exchange in full, or its conversation",
        description="One exchange in full (who, when, where, request, answer, tool calls, usage, cost, cache, "
        "bodies kept), or with --conversation the turns of its conversation.",
    )
    parser.add_argument("id", help="an exchange id (or an unambiguous prefix of at least 6 characters)")
    parser.add_argument("--conversation", action="store_true", help="the conversation it belongs to, turn by turn")
    add_tz(parser, "the times shown")
    parser.add_argument(
        "--format",
        choices=output.FORMATS,
        type=lambda value: "table" if value == "text" else value,  # `text`: its name before
        default="table",
        help="table: the text view (default); json: the object; jsonl: it on one line, "
        "with --conversation a turn a line; csv: with --conversation, a turn a row",
    )
    settings_module.add_common(parser)
    parser.set_defaults(run=run_show)


def _positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"not a positive number: {value!r}")
    return int(value)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def _shown(value: Any, *, lines: bool = False, style: str = "") -> Text:
    from llmtap.analytics.render import shown

    text = shown("" if value is None else value, lines=lines)
    text.stylize(style)
    return text


def _zone(args: argparse.Namespace) -> Any:
    return zone_named(args.tz)


def _open(args: argparse.Namespace, shown: str | None = None) -> tuple[str, Any]:
    """The store, its stale rows priced first: every one for `log` (it sorts and sums by
    cost), only the exchange `shown` and its conversation's turns for `show` (a lookup by
    index, whatever the store's size)."""
    from sqlalchemy import select

    from llmtap.analytics.reprice import reprice
    from llmtap.cli.pricing import pricer_for
    from llmtap.cli.store import open_store, say_what_waits
    from llmtap.storage.schema import exchanges

    settings = settings_module.load(args)
    engine = open_store(settings)
    say_what_waits(settings)
    pricer = pricer_for(settings, engine)
    if shown is None:
        reprice(engine, pricer)
    else:
        from llmtap.analytics.audit import NotFound, resolve

        try:
            shown = resolve(engine, shown)
        except NotFound:
            return engine.url.render_as_string(hide_password=False), engine  # show says so
        conversation = select(exchanges.c.conversation_id).where(exchanges.c.id == shown).scalar_subquery()
        query = select(exchanges.c.id).where(exchanges.c.conversation_id == conversation)  # by its index
        with engine.connect() as connection:
            ids = sorted({shown, *(str(i) for i in connection.execute(query).scalars())})
        reprice(engine, pricer, ids=ids, only_stale=True)
    return engine.url.render_as_string(hide_password=False), engine


def run_log(args: argparse.Namespace) -> int:
    from llmtap.analytics import audit

    filters = audit.LogFilters(
        team=args.team,
        model=args.model,
        provider=args.provider,
        status=args.status,
        finish=args.finish,
        tool_problem=args.tool_problem,
        cache_miss=args.cache_miss,
        search=args.search,
        since=moment(args.since),
        until=moment(args.until),
        sort=args.sort,
    )
    zone = _zone(args)
    url, engine = _open(args)
    rows = audit.log(url, engine, filters, limit=args.limit)
    if args.format in output.MACHINE:
        audit_machine.log(rows, args.format, zone)
    elif not rows:
        chosen = {k: v for k, v in vars(filters).items() if k != "sort"}
        print("no exchanges match" if any(chosen.values()) else "no exchanges recorded yet")
    else:
        _log_table(rows, zone)
    return 0


# The log's columns: (header, stored key, free text?, justify, step, folds under). A step
# > 0 is what a narrow terminal gives up, the highest first: the column goes, or with a
# neighbour named, it folds under that neighbour (its value on a line of its own). An id,
# a team, a model, a time and a cost are never left out, cut or wrapped.
_LOG_COLUMNS: tuple[tuple[str, str, bool, str, int, str | None], ...] = (
    ("time", "started_at", False, "left", 6, "id"),
    ("team", "team", False, "left", 0, None),
    ("key", "key_last4", False, "left", 12, None),
    ("protocol", "protocol", False, "left", 13, None),
    ("model", "model", False, "left", 7, "team"),
    ("status", "status", False, "right", 10, None),
    ("finish", "finish_reason", False, "left", 9, None),
    ("input", "input_tokens", False, "right", 4, None),
    ("cached", "cached_tokens", False, "right", 8, None),
    ("output", "output_tokens", False, "right", 5, None),
    ("cost", "cost_usd", False, "right", 0, None),
    ("ms", "duration_ms", False, "right", 11, None),
    ("problems", "tool_problem_kinds", True, "left", 14, None),
    ("id", "id", False, "left", 0, None),
)
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"  # every time of a table: one format, its zone in the header


def _log_table(rows: list[dict[str, Any]], zone: Any) -> None:
    from llmtap.analytics import layout, render

    keys = {c[0]: c[1] for c in _LOG_COLUMNS}

    def cell(name: str, row: dict[str, Any]) -> str:
        value = row.get(keys[name])
        if name == "time":
            return f"{render.local(value, zone):{TIME_FORMAT}}" if value is not None else ""
        if name == "key":
            return f"…{value}" if value else ""
        if name == "cost":
            return render.money(value) if value is not None else (row["price_status"] or "")
        if name == "ms":
            return f"{value:,.0f}" if value is not None else ""
        if name == "problems":
            miss = row["cache_miss"] and (
                "not cacheable" if row["cache_miss"] == BELOW_MINIMUM else f"cache miss: {row['cache_miss']}"
            )
            return ", ".join(filter(None, [value, miss]))
        if name in ("input", "cached", "output"):
            return _int(value)
        return "" if value is None else str(value)

    priced = [row["cost_usd"] for row in rows if row["cost_usd"] is not None]
    unpriced = len(rows) - len(priced)
    sums = {
        "time": f"total ({len(rows):,})",
        "input": _int(sum(row["input_tokens"] or 0 for row in rows)),
        "cached": _int(sum(row["cached_tokens"] or 0 for row in rows)),
        "output": _int(sum(row["output_tokens"] or 0 for row in rows)),
        "cost": render.money(sum(priced, Decimal(0))) if priced else "unpriced",
    }
    headers = {name: f"time ({render.zone_label(zone)})" if name == "time" else name for name, *_ in _LOG_COLUMNS}
    columns = [
        layout.Column(
            headers[name],
            [render.shown(cell(name, row)) for row in rows],
            layout.FREE if free else layout.WHOLE,
            justify=justify,
            drop=step,
            fold=headers[under] if under else None,
            total=render.shown(sums.get(name, "")),
        )
        for name, _, free, justify, step, under in _LOG_COLUMNS
    ]
    console = render.make_console(fallback_width=220)
    render.print_fitted(console, "", columns)
    if priced and unpriced:
        noun = "exchange" if unpriced == 1 else "exchanges"
        render.emit(
            console, render.shown(f"cost total: {sums['cost']} + {unpriced:,} unpriced {noun} (not in the total)")
        )


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _int(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else ""


def run_show(args: argparse.Namespace) -> int:
    from llmtap.analytics import audit

    zone = _zone(args)
    _, engine = _open(args, shown=args.id)
    try:
        data = audit.conversation(engine, args.id) if args.conversation else audit.show(engine, args.id)
    except audit.NotFound as exc:
        raise UsageError(str(exc)) from None
    if args.format in output.MACHINE:
        audit_machine.show(data, args.format, zone, conversation=args.conversation)
    elif args.conversation:
        _print_conversation(data, zone)
    else:
        _print_exchange(data, zone)
    return 0


def _section(console: Console, title: str, pairs: list[tuple[str, Any]], lines: tuple[str, ...] = ()) -> None:
    """A titled table of name (in words) and value (numbers with separators); the values
    named in `lines` keep their newlines."""
    from rich.table import Table

    from llmtap.analytics.render import emit

    console.print(f"\n[bold]{title}[/]")
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="dim", no_wrap=True)
    table.add_column(overflow="fold")
    for name, value in pairs:
        if value not in (None, "", [], {}):
            table.add_row(_shown(_label(name)), _shown(_value(value), lines=name in lines))
    emit(console, table)


def _label(name: str) -> str:
    return name.removesuffix("_usd").replace("_", " ")


def _value(value: Any) -> str:
    """A value of `show` as text: a number with thousands separators, a structure as JSON."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, (int, float)):
        return f"{value:,}"
    if isinstance(value, str):
        return value
    return json.dumps(value, default=_json_default, ensure_ascii=False)


def _when(value: Any, zone: Any) -> str:
    from llmtap.analytics.render import local

    return f"{local(value, zone):%Y-%m-%d %H:%M:%S.%f}"[:-3] if isinstance(value, datetime) else _value(value)


def _print_exchange(data: dict[str, Any], zone: Any) -> None:
    from llmtap.analytics.render import emit, make_console, zone_label

    console = make_console(fallback_width=160)
    emit(console, _shown(f"exchange {data['id']}", style="bold"))
    _section(console, "who", [(k, v) for k, v in data["who"].items() if v is not None])
    _section(
        console,
        "when",
        [("times in", zone_label(zone)), *((k, _when(v, zone)) for k, v in data["when"].items() if v is not None)],
    )
    _section(console, "where", [(k, v) for k, v in data["where"].items() if v is not None])
    request = data["request"]
    _section(
        console,
        "request",
        [
            ("model", request.get("model")),
            ("stream", str(request.get("stream"))),
            ("max tokens", request.get("max_tokens") or ""),
            ("messages by role", request.get("messages_by_role")),
            ("system prompt", f"{request.get('system_chars')} characters"),
            ("tools declared", [t.get("name") for t in request.get("tools") or []]),
            ("server tools", request.get("server_tools")),
            ("tool choice", request.get("tool_choice")),
            ("cache breakpoints", request.get("cache_breakpoints") or 0),
            ("cache ttl", request.get("cache_ttl")),
            ("prompt cache key", request.get("prompt_cache_key")),
            ("previous response", request.get("previous_response_id")),
            ("thinking", request.get("thinking")),
            ("parameters", request.get("params")),
            ("tool results carried", request.get("tool_result_ids")),
        ],
    )
    if data.get("transcript"):
        script = data["transcript"]
        console.print("\n[bold]transcript[/]")
        turns = [("system", script["system"])] if script["system"] else []
        for role, text in turns + [(m["role"], m["text"]) for m in script["messages"]]:
            emit(console, _shown(role, style="dim") + "  " + _shown(_clip(text or ""), lines=True))
    answer = data["answer"]
    _section(
        console,
        "answer",
        [
            ("model", answer["model"]),
            ("finish", f"{answer['finish_reason']} ({answer['finish_reason_raw']})"),
            ("text", answer["text"] or ""),
            ("refusal", answer["refusal"]),
            ("reasoning blocks", answer["reasoning_blocks"]),
            ("error", answer["error"]),
            ("server tool calls", answer["server_tool_calls"]),
            ("interrupted", answer["interrupted"]),
            ("decode error", answer["decode_error"]),
        ],
        lines=("text", "refusal"),
    )
    for call in answer["tool_calls"]:
        detail = f" — {call['status_detail']}" if call.get("status_detail") else ""
        emit(
            console,
            _shown("  tool call ")
            + _shown(call["name"], style="bold")
            + _shown(f" {call['id']}: {call['status']}{detail}")
            + "\n    "
            + _shown(call["arguments_raw"]),
        )
    _section(console, "usage", [(k, v) for k, v in data["usage"].items() if k != "raw" and v is not None])
    _print_cost(console, data["cost"])
    _print_cache(console, data["cache"])
    _print_problems(console, data.get("tool_problems") or [])
    if data.get("bodies"):
        bodies = data["bodies"]
        console.print("\n[bold]raw bodies (as stored: secrets redacted)[/]")
        for name, value in bodies.get("request_headers") or []:
            emit(console, _shown(f"{name}:", style="dim") + " " + _shown(value))
        for name in ("request", "response"):
            if bodies.get(name):
                emit(console, _shown(name, style="dim") + "\n" + _shown(_clip(bodies[name], TERMINAL_BODY), lines=True))


def _print_cache(console: Console, cache: dict[str, Any]) -> None:
    """The stored verdict, its money (extra cost) in the one money format."""
    from llmtap.analytics.render import money

    pairs = [(k, money(v) if isinstance(v, Decimal) else v) for k, v in cache.items() if v is not None]
    _section(console, "cache", pairs)


def _print_problems(console: Console, problems: list[dict[str, Any]]) -> None:
    """The conversation's tool problems stored on the exchange, one line each."""
    from llmtap.analytics.render import emit

    if not problems:
        return
    console.print("\n[bold]tool problems[/]")
    for problem in problems:
        tool = f" {problem['tool']}" if problem.get("tool") else ""
        following = f" (next request {problem['next_id']})" if problem.get("next_id") else ""
        emit(console, _shown(f"  {problem.get('status')}{tool}: call {problem.get('call_id')}{following}"))


def _print_cost(console: Console, cost: dict[str, Any]) -> None:
    """The price, its parts and the fee (money in the one format; the exact figures are
    `--format json`'s), what was served, and the pricer's detail lines when it kept them."""
    from llmtap.analytics.render import emit, money

    pairs = []
    for key, value in cost.items():
        if key == "detail" or value in (None, {}, []):
            continue
        pairs.append((key, money(value) if isinstance(value, Decimal) else value))
    _section(console, "cost", pairs)
    detail = cost.get("detail")
    if not isinstance(detail, dict):
        return
    lines = [_part_line(part) for part in detail.get("parts") or [] if isinstance(part, dict)]
    if detail.get("multiplier") not in (None, 1):
        lines.append(f"× {detail['multiplier']}")
    if detail.get("context"):
        lines.append("priced for " + json.dumps(detail["context"], default=_json_default, ensure_ascii=False))
    for key, value in detail.items():  # whatever else the pricer noted
        if key not in ("parts", "multiplier", "context") and value not in (None, "", [], {}):
            text = value if isinstance(value, str) else json.dumps(value, default=_json_default, ensure_ascii=False)
            lines.append(f"{key}: {text}")
    for line in lines:
        emit(console, _shown("  " + line))


def _part_line(part: dict[str, Any]) -> str:
    """One part of `cost_detail`: tokens (of the model, or an advisor's) or a per-use fee."""
    from llmtap.analytics.render import money

    def usd(key: str) -> str:
        value = part.get(key)
        return money(value) if isinstance(value, Decimal) else str(value)

    what = str(part.get("what") or "part")
    if what == "fee":
        rate = f" at ${part['usd_per_1k']} per 1,000" if part.get("usd_per_1k") is not None else ""
        source = f" ({part['source']})" if part.get("source") else ""
        return f"fee {part.get('kind')}: {_value(part.get('count'))} uses{rate}{source} = {usd('total')}"
    pieces = [
        f"{key.replace('_', ' ')} {usd(key)}" for key in ("input", "cache_read", "cache_write", "output") if key in part
    ]
    model = f" {part['model']}" if part.get("model") else ""
    return f"{what}{model}: {', '.join(pieces)} = {usd('total')}"


def _clip(text: str, limit: int = 600) -> str:
    return text if len(text) <= limit else text[:limit] + f" … ({len(text) - limit} more characters)"


def _print_conversation(data: dict[str, Any], zone: Any) -> None:
    from llmtap.analytics import layout, render

    turns = data["turns"]
    totals = data["totals"]

    def verdict(turn: dict[str, Any]) -> str:
        cache = turn["cache"]
        return f"miss: {cache['cause']}" if cache.get("verdict") == "miss" else str(cache.get("verdict", ""))

    priced = [t["cost_usd"] for t in turns if t["cost_usd"] is not None]
    # (header, cells, free text?, justify, total, step, folds under): as the log's columns
    spec: list[tuple[str, list[str], bool, str, str, int, str | None]] = [
        ("#", [f"{n:,}" for n in range(1, len(turns) + 1)], False, "right", "", 0, None),
        (
            f"time ({render.zone_label(zone)})",
            [f"{render.local(t['started_at'], zone):{TIME_FORMAT}}" for t in turns],
            False,
            "left",
            "total",
            4,
            "id",
        ),
        ("messages", [_int(t["messages"]) for t in turns], False, "right", f"{totals['turns']:,} turns", 9, None),
        ("finish", [t["finish_reason"] or "" for t in turns], False, "left", "", 8, None),
        ("input", [_int(t["input_tokens"]) for t in turns], False, "right", _int(totals["input_tokens"]), 3, None),
        (
            "cached",
            [_int(t["cache_read_tokens"]) for t in turns],
            False,
            "right",
            _int(totals["cache_read_tokens"]),
            6,
            None,
        ),
        ("output", [_int(t["output_tokens"]) for t in turns], False, "right", _int(totals["output_tokens"]), 5, None),
        (
            "cost",
            [render.money(t["cost_usd"]) if t["cost_usd"] is not None else "unpriced" for t in turns],
            False,
            "right",
            render.money(sum(priced, Decimal(0))) if priced else "unpriced",
            0,
            None,
        ),
        ("cache", [verdict(t) for t in turns], True, "left", f"{totals['cache_misses']:,} misses", 7, None),
        ("tool calls", [", ".join(str(n) for n in t["tool_calls"]) for t in turns], True, "left", "", 10, None),
        (
            "problems",
            [", ".join(str(s) for s in t.get("tool_problems") or []) for t in turns],
            True,
            "left",
            _count(totals.get("tool_problems", 0), "tool problem"),
            11,
            None,
        ),
        ("id", [t["id"] for t in turns], False, "left", "", 0, None),
    ]
    columns = [
        layout.Column(
            header,
            [render.shown(c) for c in cells],
            layout.FREE if free else layout.WHOLE,
            justify=justify,
            drop=step,
            fold=under,
            total=render.shown(total),
        )
        for header, cells, free, justify, total, step, under in spec
    ]
    identity = data.get("identity") or {}
    told = {"session": "client session", "chain": "response chain", "prefix": "same first message"}
    title = f"conversation of {data['exchange_id']}"
    if identity.get("rule") in told:
        title += f" ({told[identity['rule']]}"
        title += f" {identity['session_id']})" if identity.get("session_id") else ")"
    console = render.make_console()
    render.print_fitted(console, title, columns, formats="--format json")
    if priced and len(priced) < len(turns):
        render.emit(console, render.shown(f"cost total: {totals['cost_shown']} (the unpriced not in the total)"))
