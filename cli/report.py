"""`llmtap report KIND`: usage, cost, cache, finish, tools, errors, latency and
conversations (SPEC §3).

Before a report that reads prices (cost, cache), exchanges stored without a price
(imported, or recorded while no pricer ran) or under another price file are priced at
their own dates. `--list` lists single items (cache misses, tool-call
problems) as JSON objects. An empty store says so. A table ends with a totals row, and
`cost`'s names the price versions used and the unpriced models; times, `--by day` and `--by hour` are
in `--tz` (UTC unless asked).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llmtap.cli import pricing
from llmtap.cli import settings as settings_module
from llmtap.cli.errors import UsageError
from llmtap.cli.timeargs import moment

if TYPE_CHECKING:
    from sqlalchemy import Engine

KINDS = ("usage", "cost", "cache", "finish", "tools", "errors", "latency", "conversations", "budgets", "whatif")
PRICED = ("cost", "cache", "conversations")  # the reports that read prices (cache: what a miss cost)


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "report",
        help="usage, cost, cache, finish, tools, errors, latency or conversations, grouped as you ask",
        description="Reports over the recorded exchanges, computed by DuckDB over the store.",
    )
    parser.add_argument("kind", choices=KINDS, metavar="KIND", help=", ".join(KINDS))
    parser.add_argument("--by", help="comma-separated: team, provider, model, day, hour, key, protocol, tier")
    parser.add_argument(
        "--since",
        help="ISO date/time or age (7d): exchanges started at or after (conversations: with a turn at or after)",
    )
    parser.add_argument("--until", help="ISO date/time or age: exchanges started before (conversations: a turn)")
    parser.add_argument(
        "--top", type=_positive, default=20, metavar="N", help="conversations: the N costliest (default 20)"
    )
    parser.add_argument("--tz", metavar="ZONE", help="IANA time zone of times and of --by day/hour (default UTC)")
    parser.add_argument("--format", choices=("table", "json", "csv"), default="table")
    parser.add_argument("--list", action="store_true", help="single items: cache misses, tool-call problems")
    parser.add_argument("--prices", metavar="FILE", help="local price file (TOML) overriding or adding models")
    parser.add_argument("--model", help="whatif: the model to price the recorded traffic at")
    parser.add_argument("--provider", help="whatif: that model's provider (genai-prices' id) if ambiguous")
    parser.add_argument(
        "--lake",
        metavar="WAREHOUSE",
        help="read the lake `llmtap lake sync` keeps there (a folder or s3://bucket/prefix), "
        "plus the store's rows not synced yet",
    )
    settings_module.add_common(parser)
    parser.set_defaults(run=run)


def _positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"not a positive number: {value!r}")
    return int(value)


def run(args: argparse.Namespace) -> int:
    if args.lake and args.kind in ("budgets", "whatif"):
        raise UsageError(f"report {args.kind} reads the store, not a lake: leave out --lake")
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


def _show(args: argparse.Namespace, table, empty: bool, label: str, zone, footer) -> None:
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
        console = render.make_console()
        columns = table.compact(reports.REPORTS[args.kind].table)
        title = f"llmtap report {args.kind}"
        if "day" in table.dimensions or "hour" in table.dimensions:
            title += f" ({'hours' if 'hour' in table.dimensions else 'days'} in {zone.key})"
        optional = () if args.list else reports.REPORTS[args.kind].optional
        render.as_rich(table, title, console, columns, zone=zone, optional=optional)
        if footer is not None:
            for line in render.price_footer_lines(footer):
                render.emit(console, render.shown(line))
    if not table.rows and args.format != "table":
        print(f"llmtap: {args.kind}: nothing to report in {label}", file=sys.stderr)
