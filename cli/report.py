"""`llmtap report KIND`: usage, cost, cache, finish, tools, errors, latency (SPEC §3).

Before a report that reads prices (cost, cache), exchanges stored without a price
(imported, or recorded while no pricer ran) or under another price file are priced at
their own dates. `--list` lists single items (cache misses, tool-call
problems) as JSON objects. An empty store says so.
"""

from __future__ import annotations

import argparse
import sys

from llmtap.cli import pricing
from llmtap.cli import settings as settings_module
from llmtap.cli.errors import UsageError
from llmtap.cli.timeargs import moment

KINDS = ("usage", "cost", "cache", "finish", "tools", "errors", "latency")
PRICED = ("cost", "cache")  # the reports that read prices (cache: what a miss cost)


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "report",
        help="usage, cost, cache, finish, tools, errors or latency, grouped as you ask",
        description="Reports over the recorded exchanges, computed by DuckDB over the store.",
    )
    parser.add_argument("kind", choices=KINDS, metavar="KIND", help=", ".join(KINDS))
    parser.add_argument("--by", help="comma-separated: team, provider, model, day, key, protocol")
    parser.add_argument("--since", help="ISO date/time or age (7d): exchanges started at or after")
    parser.add_argument("--until", help="ISO date/time or age: exchanges started before")
    parser.add_argument("--format", choices=("table", "json", "csv"), default="table")
    parser.add_argument("--list", action="store_true", help="single items: cache misses, tool-call problems")
    parser.add_argument("--prices", metavar="FILE", help="local price file (TOML) overriding or adding models")
    settings_module.add_common(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from llmtap.analytics import reports
    from llmtap.analytics.duck import connect
    from llmtap.cli.store import open_store

    by = [part.strip() for part in args.by.split(",") if part.strip()] if args.by else None
    since, until = moment(args.since), moment(args.until)
    settings = settings_module.load(args)
    pricer = pricing.pricer_for(settings)  # a bad price file fails before the store is opened
    engine = open_store(settings)
    url = engine.url.render_as_string(hide_password=False)
    try:
        duck = connect(url)
        try:
            if args.kind in PRICED:
                pricing.catch_up(engine, pricer, duck)
            table = reports.run(url, args.kind, by=by, since=since, until=until, listing=args.list, connection=duck)
            empty = not table.rows and reports.count_exchanges(url, duck) == 0
        finally:
            duck.close()
    except reports.ReportError as exc:
        raise UsageError(str(exc)) from None
    finally:
        engine.dispose()
    _show(args, table, empty, engine.url.render_as_string(hide_password=True))
    return 0


def _show(args: argparse.Namespace, table, empty: bool, label: str) -> None:
    from rich.console import Console

    from llmtap.analytics import render, reports

    if args.list and args.format == "table":
        args.format = "json"
    if args.format == "json":
        sys.stdout.write(render.as_json(table) + "\n")
    elif args.format == "csv":
        sys.stdout.write(render.as_csv(table))
    elif not table.rows:
        what = "no exchanges recorded yet" if empty else "no exchanges in that period"
        print(f"{args.kind}: {what} in {label}")
    else:
        console = Console() if sys.stdout.isatty() else Console(width=200)
        columns = table.compact(reports.REPORTS[args.kind].table)
        render.as_rich(table, f"llmtap report {args.kind}", console, columns)
    if not table.rows and args.format != "table":
        print(f"llmtap: {args.kind}: nothing to report in {label}", file=sys.stderr)
