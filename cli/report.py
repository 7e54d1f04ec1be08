"""`llmtap report KIND`: usage, cost, cache, finish, tools, errors, latency,
conversations, budgets and whatif (SPEC §3), each KIND an argparse subparser of its own so
that `report KIND --help` lists the options of that kind only; an option of another kind
is refused in one line that says why (`_Refusals`), not ignored.

Before a report that reads prices (cost, cache), exchanges stored without a price
(imported, or recorded while no pricer ran) or under another price file are priced at
their own dates. `--list` lists single items (cache misses, tool-call problems): a table
in a terminal, the SPEC's objects in JSON. Every report takes `--format
table|json|jsonl|csv` (cli/output.py). An empty store says so. A table ends with a totals
row, and `cost`'s names the price versions used and the unpriced models; times, `--by day`
and `--by hour` are in `--tz` (UTC unless asked), and so are the offsets of the times in
JSON, JSONL and CSV.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llmtap.cli import output, pricing
from llmtap.cli import settings as settings_module
from llmtap.cli.errors import UsageError
from llmtap.cli.timeargs import add_tz, moment
from llmtap.protocols.vocabulary import REPORT_KINDS

if TYPE_CHECKING:
    from sqlalchemy import Engine

KINDS = REPORT_KINDS
PRICED = ("cost", "cache", "conversations")  # the reports that read prices (cache: what a miss cost)
GROUPED = ("usage", "cost", "cache", "finish", "tools", "errors", "latency")  # grouped --by
LISTED = {"cache": "each cache miss", "tools": "each tool call that is not valid, and each conversation problem"}

# Each kind: its line in `llmtap report --help`, and its own help's description.
ABOUT = {
    "usage": ("tokens by class per group", "Requests and tokens (input, cache read and write, output, reasoning)."),
    "cost": ("what the traffic cost", "Cost and its parts; the table names the price versions and unpriced models."),
    "cache": ("prompt-cache hits and misses", "Hit rate and misses by cause; `--list`: each miss, its cause and cost."),
    "finish": ("why answers ended", "Finish reasons (end_turn, max_tokens, tool_use, …) and their shares."),
    "tools": ("tool-call problems", "Tool calls by status; `--list`: each call that is not valid."),
    "errors": ("errors and rate limits", "Errors, rate limits, server errors, overloads and interruptions."),
    "latency": ("time to first byte and token", "Latency percentiles: first byte, first token, total (ms)."),
    "conversations": ("the costliest conversations", "Conversations ranked by cost, the top N (`--top`)."),
    "budgets": (
        "spend against [budgets] limits",
        "Spend against each [budgets] limit of the config in its current period (day, week, month in --tz), "
        "with a linear forecast to the period's end.",
    ),
    "whatif": (
        "the traffic at another model's prices",
        "What the recorded traffic would have cost on another model (--model) at today's prices.",
    ),
}


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "report",
        help="usage, cost, cache, finish, tools, errors, latency, conversations, budgets or whatif",
        description="Reports over the recorded exchanges, computed by DuckDB over the store. "
        "`llmtap report KIND --help` lists the options of that report.",
    )
    kinds = parser.add_subparsers(dest="kind", metavar="KIND", parser_class=type(parser))
    kinds.required = True
    for kind in KINDS:
        line, description = ABOUT[kind]
        _options(kind, kinds.add_parser(kind, help=line, description=description))


def _options(kind: str, parser: argparse.ArgumentParser) -> None:
    """The options of report `kind`; each other report option is refused in one line that
    says why, not listed in this kind's help."""
    refuse = _Refusals(parser)
    if kind in (*GROUPED, "whatif"):
        dims = "team, provider, model, day, hour, key, protocol, tier" + (", status" if kind == "errors" else "")
        parser.add_argument("--by", metavar="COLUMNS", help=f"comma-separated: {dims}")
    else:
        refuse("--by", _why_not_by(kind))
    if kind != "budgets":
        parser.add_argument(
            "--since",
            help="ISO date/time or age (7d): exchanges started at or after (conversations: with a turn at or after)",
        )
        parser.add_argument("--until", help="ISO date/time or age: exchanges started before (conversations: a turn)")
    else:
        refuse("--since", "report budgets counts each limit's current period: it takes no --since")
        refuse("--until", "report budgets counts each limit's current period: it takes no --until")
    if kind == "conversations":
        parser.add_argument("--top", type=_positive, default=20, metavar="N", help="the N costliest (default 20)")
    else:
        refuse("--top", "--top is for report conversations")
    if kind in LISTED:
        parser.add_argument("--list", action="store_true", help=f"single items: {LISTED[kind]}")
    else:
        refuse("--list", f"report {kind} has no --list (report cache and report tools have)", flag=True)
    what = "the budget periods (day, week and month boundaries) and times" if kind == "budgets" else "times"
    add_tz(parser, f"{what} and of --by day/hour" if kind in (*GROUPED, "whatif") else what)
    output.add_format(parser)
    if kind in (*PRICED, "whatif"):
        parser.add_argument("--prices", metavar="FILE", help="local price file (TOML) overriding or adding models")
    else:
        refuse("--prices", f"report {kind} reads no prices: leave out --prices")
    if kind == "whatif":
        parser.add_argument("--model", help="the model to price the recorded traffic at")
        parser.add_argument("--provider", help="that model's provider (genai-prices' id) if ambiguous")
    else:
        refuse("--model", "--model is for report whatif (log and export filter by model)")
        refuse("--provider", "--provider is for report whatif (log and export filter by provider)")
    if kind in ("budgets", "whatif"):
        refuse("--lake", f"report {kind} reads the store, not a lake: leave out --lake")
    else:
        parser.add_argument(
            "--lake",
            metavar="WAREHOUSE",
            help="read the lake `llmtap lake sync` keeps there (a folder or s3://bucket/prefix), "
            "plus the store's rows not synced yet",
        )
    settings_module.add_common(parser)
    parser.set_defaults(run=run, **refuse.defaults)


def _why_not_by(kind: str) -> str:
    if kind == "conversations":
        return "report conversations is ranked by cost: it takes --top, not --by"
    return "report budgets lists each limit: it takes no --by"


class _Refusals:
    """Hidden options of a report kind that exist only to say, in one line, why they do not
    apply; the option's value reads as unset (`defaults`) for the code the kinds share."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser
        self.defaults: dict[str, Any] = {}

    def __call__(self, option: str, message: str, *, flag: bool = False) -> None:
        dest = option.lstrip("-").replace("-", "_")
        self.defaults[dest] = False if flag else None
        self.parser.add_argument(
            option,
            action=_Refused,
            nargs=0 if flag else None,
            dest=f"refused_{dest}",
            default=argparse.SUPPRESS,
            help=argparse.SUPPRESS,
            message=message,
        )


class _Refused(argparse.Action):
    def __init__(self, option_strings: list[str], dest: str, message: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.message = message

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        raise UsageError(self.message)


def _positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"not a positive number: {value!r}")
    return int(value)


def run(args: argparse.Namespace) -> int:
    if args.kind == "budgets":  # spend against the config's [budgets], not a grouping of exchanges
        from llmtap.cli import report_budgets

        return report_budgets.run(args)
    if args.kind == "whatif":  # the recorded traffic at another model's prices
        from llmtap.cli import report_whatif

        return report_whatif.run(args)
    from llmtap.analytics import reports

    by = [part.strip() for part in args.by.split(",") if part.strip()] if args.by else None
    since, until = moment(args.since), moment(args.until)
    try:
        zone = reports.zone(args.tz)
    except reports.ReportError as exc:
        raise UsageError(str(exc)) from None
    footer = None
    with opened(args) as store:
        if args.kind in PRICED:
            with reports.window(store.duck, args.kind, since, until):  # the rows the report reads
                pricing.catch_up(store.engine, store.pricer, store.duck)
        table = reports.run(
            store.url,
            args.kind,
            by=by,
            since=since,
            until=until,
            listing=args.list,
            connection=store.duck,
            top=args.top if args.kind == "conversations" else None,
            tz=zone.key,
            engine=store.engine,
        )
        if args.kind == "cost" and args.format == "table" and table.rows:
            footer = reports.price_footer(store.url, since=since, until=until, connection=store.duck)
        empty = not table.rows and reports.count_exchanges(store.url, store.duck) == 0
    _show(args, table, empty, store.label, zone, footer)
    return 0


@dataclass(frozen=True)
class OpenedStore:
    """What a report reads: the store's engine and URL, its pricer (the explicit price
    file, else the store's), a DuckDB connection over it (and the lake, with `--lake`),
    and the URL to show (password hidden)."""

    engine: Engine
    pricer: Any
    url: str
    duck: Any
    label: str


@contextmanager
def opened(args: argparse.Namespace) -> Iterator[OpenedStore]:
    """The store a report reads, open for the `with` block and closed after it; a report's
    own error (analytics.reports.ReportError) inside becomes the one-line usage error."""
    from llmtap.analytics import reports
    from llmtap.analytics.duck import connect
    from llmtap.cli.store import open_store, say_what_waits

    settings = settings_module.load(args)
    pricing.pricer_for(settings)  # a bad price file fails before the store is opened
    engine = open_store(settings)
    say_what_waits(settings)
    try:
        pricer = pricing.pricer_for(settings, engine)
        url = engine.url.render_as_string(hide_password=False)
        label = engine.url.render_as_string(hide_password=True)
        duck = connect(url, lake=args.lake, lake_settings=lake_file_settings(args, settings))
        try:
            with lake_damage(args.lake):
                yield OpenedStore(engine, pricer, url, duck, label)
        finally:
            duck.close()
    except reports.ReportError as exc:
        raise UsageError(str(exc)) from None
    finally:
        engine.dispose()


@contextmanager
def lake_damage(lake: str | None) -> Iterator[None]:
    """A lake file that went or was damaged while a report read it (DuckDB's error names
    it) as the one-line error it is (analytics.lake_views.unreadable), not an internal one."""
    if not lake:
        yield
        return
    from llmtap.analytics import lake_views

    try:
        yield
    except lake_views.READ_ERRORS as exc:
        error = lake_views.unreadable(lake, exc)
        if error is None:
            raise
        raise error from None


def lake_file_settings(args: argparse.Namespace, settings: settings_module.Settings) -> dict[str, str] | None:
    """For `--lake`: the lake's FileIO settings (`[lake]` in the config: s3.endpoint,
    s3.region, keys), as `lake sync` takes them; the dashboard's `--lake` too."""
    if not args.lake:
        return None
    from llmtap.cli.lake import lake_settings

    return {key: str(value) for key, value in lake_settings(settings, args.lake)[1].items()}


# `--list` in a terminal: (columns, the optional ones, first left out first)
LIST_TABLES = {
    "cache": (
        ("exchange_id", "team", "model", "started_at", "cause", "message_index", "missed_tokens", "extra_cost_usd",
         "gap_s", "previous_exchange_id"),
        ("previous_exchange_id", "gap_s", "message_index", "started_at", "missed_tokens"),
    ),
    "tools": (
        ("exchange_id", "team", "tool", "call_id", "status", "detail", "started_at"),
        ("started_at", "call_id"),
    ),
}  # fmt: skip


def _show(args: argparse.Namespace, table, empty: bool, label: str, zone, footer) -> None:
    from llmtap.analytics import render, reports

    if args.format in output.MACHINE:
        output.write(table, args.format, zone)
    elif not table.rows:
        what = "no exchanges recorded yet" if empty else "no exchanges in that period"
        print(f"{args.kind}: {what} in {label}")
    elif args.list:
        _list_table(args.kind, table, zone)
    else:
        console = render.make_console()
        columns = table.compact(reports.REPORTS[args.kind].table)
        title = f"llmtap report {args.kind}"
        if "day" in table.dimensions or "hour" in table.dimensions:
            title += f" ({'hours' if 'hour' in table.dimensions else 'days'} in {zone.key})"
        render.as_rich(table, title, console, columns, zone=zone, optional=reports.REPORTS[args.kind].optional)
        if footer is not None:
            for line in render.price_footer_lines(footer):
                render.emit(console, render.shown(line))
    if not table.rows and args.format != "table":
        print(f"llmtap: {args.kind}: nothing to report in {label}", file=sys.stderr)


def _list_table(kind: str, table, zone) -> None:
    """`--list` as a table: the SPEC's keys of each item, a totals row of the misses'
    tokens and extra cost (a message index is a position, not a count: shown as text)."""
    from llmtap.analytics import render
    from llmtap.analytics.reports import Table

    wanted, optional = LIST_TABLES[kind]
    columns = [c for c in wanted if c in table.columns]
    rows = [
        {**row, "message_index": "" if row["message_index"] is None else str(row["message_index"])}
        if "message_index" in row
        else row
        for row in table.rows
    ]
    title = "llmtap report cache --list: each cache miss" if kind == "cache" else "llmtap report tools --list"
    render.as_rich(
        Table(table.columns, rows), title, render.make_console(), columns, zone=zone, total=kind == "cache",
        optional=optional,
    )  # fmt: skip
