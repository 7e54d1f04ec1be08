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
import sys
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from llmtap.cli import settings as settings_module
from llmtap.cli.errors import UsageError
from llmtap.cli.timeargs import moment

if TYPE_CHECKING:
    from rich.console import Console, JustifyMethod
    from rich.text import Text

TOOL_PROBLEMS = (
    "invalid_json",
    "schema_violation",
    "unknown_tool",
    "truncated",
    "args_lost",
    "duplicate_id",
    "missing_result",
    "orphan_result",
)
CACHE_CAUSES = (
    "tools_changed",
    "system_changed",
    "message_edited",
    "ttl_expired",
    "no_breakpoint",
    "below_minimum",
    "unexplained",
)
TERMINAL_BODY = 4000  # characters of a raw body a terminal shows; --format json shows more


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("log", help="recorded exchanges, newest first, with filters")
    parser.add_argument("--team")
    parser.add_argument("--model")
    parser.add_argument("--provider")
    parser.add_argument("--since", help="ISO date/time or age (7d)")
    parser.add_argument("--until", help="ISO date/time or age")
    parser.add_argument("--status", help="an HTTP status (429), or 'error' for any failure")
    parser.add_argument("--finish", help="a canonical finish reason (end_turn, max_tokens, tool_use, …, unknown)")
    parser.add_argument(
        "--tool-problem",
        nargs="?",
        const="any",
        choices=("any", *TOOL_PROBLEMS),
        help="only exchanges with tool-call problems (of this kind)",
    )
    parser.add_argument(
        "--cache-miss",
        nargs="?",
        const="any",
        choices=("any", *CACHE_CAUSES),
        help="only cache misses (with this cause)",
    )
    parser.add_argument("--search", metavar="TEXT", help="text in answers and, where bodies were kept, prompts")
    parser.add_argument("--limit", type=_positive, default=50)
    parser.add_argument("--format", choices=("table", "json", "jsonl"), default="table")
    settings_module.add_common(parser)
    parser.set_defaults(run=run_log)

    parser = commands.add_parser("show", help="one exchange in full, or its conversation")
    parser.add_argument("id", help="an exchange id (or an unambiguous prefix of at least 6 characters)")
    parser.add_argument("--conversation", action="store_true", help="the conversation it belongs to, turn by turn")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    settings_module.add_common(parser)
    parser.set_defaults(run=run_show)


def _positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"not a positive number: {value!r}")
    return int(value)


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def _json(value: Any, indent: int | None = None) -> str:
    from llmtap.analytics.render import json_c1_escaped

    return json_c1_escaped(json.dumps(value, default=_json_default, ensure_ascii=False, indent=indent))


def _shown(value: Any, *, lines: bool = False, style: str = "") -> Text:
    from llmtap.analytics.render import shown

    text = shown("" if value is None else value, lines=lines)
    text.stylize(style)
    return text


def _open(args: argparse.Namespace) -> tuple[str, Any]:
    from llmtap.analytics.reprice import reprice
    from llmtap.cli.pricing import pricer_for
    from llmtap.cli.store import open_store

    settings = settings_module.load(args)
    engine = open_store(settings)
    reprice(engine, pricer_for(settings))
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
    )
    url, engine = _open(args)
    rows = audit.log(url, engine, filters, limit=args.limit)
    if args.format == "json":
        print(_json(rows, indent=2))
    elif args.format == "jsonl":
        for row in rows:
            print(_json(row))
    elif not rows:
        print("no exchanges match" if any(vars(filters).values()) else "no exchanges recorded yet")
    else:
        _log_table(rows)
    return 0


def _log_table(rows: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(header_style="bold", box=None, pad_edge=False)
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("time", "left"),
        ("team", "left"),
        ("key", "left"),
        ("protocol", "left"),
        ("model", "left"),
        ("status", "right"),
        ("finish", "left"),
        ("in", "right"),
        ("cached", "right"),
        ("out", "right"),
        ("cost", "right"),
        ("ms", "right"),
        ("problems", "left"),
        ("id", "left"),
    )
    for name, justify in columns:
        table.add_column(name, justify=justify, no_wrap=name in ("time", "id"))
    for row in rows:
        problems = ", ".join(
            filter(None, [row["tool_problem_kinds"], row["cache_miss"] and f"cache miss: {row['cache_miss']}"])
        )
        cells = (
            f"{row['started_at']:%Y-%m-%d %H:%M:%S}",
            row["team"],
            f"…{row['key_last4']}" if row["key_last4"] else "",
            row["protocol"],
            row["model"] or "",
            str(row["status"] or ""),
            row["finish_reason"] or "",
            _int(row["input_tokens"]),
            _int(row["cached_tokens"]),
            _int(row["output_tokens"]),
            f"${row['cost_usd']:.6f}" if row["cost_usd"] is not None else (row["price_status"] or ""),
            f"{row['duration_ms']:.0f}" if row["duration_ms"] is not None else "",
            problems,
            row["id"],
        )
        table.add_row(*(_shown(cell) for cell in cells))
    console = Console() if sys.stdout.isatty() else Console(width=220)
    console.print(table)


def _int(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else ""


def run_show(args: argparse.Namespace) -> int:
    from llmtap.analytics import audit

    url, engine = _open(args)
    try:
        data = audit.conversation(url, engine, args.id) if args.conversation else audit.show(url, engine, args.id)
    except audit.NotFound as exc:
        raise UsageError(str(exc)) from None
    if args.format == "json":
        print(_json(data, indent=2))
    elif args.conversation:
        _print_conversation(data)
    else:
        _print_exchange(data)
    return 0


def _section(console: Console, title: str, pairs: list[tuple[str, Any]], lines: tuple[str, ...] = ()) -> None:
    """A titled table of name and value; the values named in `lines` keep their newlines."""
    from rich.table import Table

    console.print(f"\n[bold]{title}[/]")
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="dim", no_wrap=True)
    table.add_column(overflow="fold")
    for name, value in pairs:
        if value not in (None, "", [], {}):
            text = value if isinstance(value, str) else json.dumps(value, default=_json_default, ensure_ascii=False)
            table.add_row(_shown(name), _shown(text, lines=name in lines))
    console.print(table)


def _print_exchange(data: dict[str, Any]) -> None:
    from rich.console import Console

    console = Console(highlight=False) if sys.stdout.isatty() else Console(width=160, highlight=False)
    console.print(_shown(f"exchange {data['id']}", style="bold"))
    _section(console, "who", [(k, str(v)) for k, v in data["who"].items() if v is not None])
    _section(console, "when", [(k, str(v)) for k, v in data["when"].items() if v is not None])
    _section(console, "where", [(k, str(v)) for k, v in data["where"].items() if v is not None])
    request = data["request"]
    _section(
        console,
        "request",
        [
            ("model", request.get("model")),
            ("stream", str(request.get("stream"))),
            ("max tokens", str(request.get("max_tokens") or "")),
            ("messages by role", request.get("messages_by_role")),
            ("system prompt", f"{request.get('system_chars')} characters"),
            ("tools declared", [t.get("name") for t in request.get("tools") or []]),
            ("server tools", request.get("server_tools")),
            ("tool choice", request.get("tool_choice")),
            ("cache breakpoints", str(request.get("cache_breakpoints") or 0)),
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
            console.print(_shown(role, style="dim") + "  " + _shown(_clip(text or ""), lines=True))
    answer = data["answer"]
    _section(
        console,
        "answer",
        [
            ("model", answer["model"]),
            ("finish", f"{answer['finish_reason']} ({answer['finish_reason_raw']})"),
            ("text", answer["text"] or ""),
            ("refusal", answer["refusal"]),
            ("reasoning blocks", str(answer["reasoning_blocks"])),
            ("error", answer["error"]),
            ("server tool calls", answer["server_tool_calls"]),
            ("interrupted", answer["interrupted"]),
            ("decode error", answer["decode_error"]),
        ],
        lines=("text", "refusal"),
    )
    for call in answer["tool_calls"]:
        detail = f" — {call['status_detail']}" if call.get("status_detail") else ""
        console.print(
            _shown("  tool call ")
            + _shown(call["name"], style="bold")
            + _shown(f" {call['id']}: {call['status']}{detail}")
            + "\n    "
            + _shown(call["arguments_raw"])
        )
    _section(console, "usage", [(k, str(v)) for k, v in data["usage"].items() if k != "raw" and v is not None])
    cost = data["cost"]
    _section(
        console,
        "cost",
        [(k, f"${v:.9f}" if isinstance(v, Decimal) else str(v)) for k, v in cost.items() if v is not None],
    )
    _section(console, "cache", [(k, str(v)) for k, v in data["cache"].items() if v is not None])
    if data.get("bodies"):
        bodies = data["bodies"]
        console.print("\n[bold]raw bodies (as stored: secrets redacted)[/]")
        for name, value in bodies.get("request_headers") or []:
            console.print(_shown(f"{name}:", style="dim") + " " + _shown(value))
        for name in ("request", "response"):
            if bodies.get(name):
                console.print(_shown(name, style="dim") + "\n" + _shown(_clip(bodies[name], TERMINAL_BODY), lines=True))


def _clip(text: str, limit: int = 600) -> str:
    return text if len(text) <= limit else text[:limit] + f" … ({len(text) - limit} more characters)"


def _print_conversation(data: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console() if sys.stdout.isatty() else Console(width=200)
    table = Table(header_style="bold", title=_shown(f"conversation of {data['exchange_id']}"), title_justify="left")
    for name in ("#", "time", "messages", "finish", "in", "cached", "out", "cost", "cache", "tool calls", "id"):
        table.add_column(name, justify="right" if name in ("#", "messages", "in", "cached", "out", "cost") else "left")
    for number, turn in enumerate(data["turns"], 1):
        cache = turn["cache"]
        verdict = f"miss: {cache['cause']}" if cache.get("verdict") == "miss" else cache.get("verdict", "")
        cells = (
            str(number),
            f"{turn['started_at']:%H:%M:%S}",
            str(turn["messages"]),
            turn["finish_reason"] or "",
            _int(turn["input_tokens"]),
            _int(turn["cache_read_tokens"]),
            _int(turn["output_tokens"]),
            f"${turn['cost_usd']:.6f}" if turn["cost_usd"] is not None else "unpriced",
            verdict,
            ", ".join(str(n) for n in turn["tool_calls"]),
            turn["id"],
        )
        table.add_row(*(_shown(cell) for cell in cells))
    totals = data["totals"]
    table.add_row(
        "",
        "total",
        str(totals["turns"]) + " turns",
        "",
        _int(totals["input_tokens"]),
        _int(totals["cache_read_tokens"]),
        _int(totals["output_tokens"]),
        f"${totals['cost_usd']:.6f}",
        f"{totals['cache_misses']} misses",
        "",
        "",
        style="bold",
    )
    console.print(table)
