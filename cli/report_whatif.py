"""`llmtap report whatif --model M [--provider P]`: what the recorded traffic (per `--by`
group, default one row) would have cost on model M at today's prices, with the same token
counts, beside what it cost, and what its prompt-cache misses cost on each.

M's price comes from the same place other reports' prices do: the explicit price file,
else the store's, else genai-prices. Rows stored without a price are priced first (as for
`report cost`), so the comparison never reads a stale actual. An unknown model or provider
is a one-line error naming close matches.

Not responsible for the arithmetic (analytics/whatif.py) or the table's look (render.py).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from llmtap.cli import output, pricing
from llmtap.cli.errors import UsageError
from llmtap.cli.timeargs import moment

# what a terminal shows (json and csv: every column), and what a narrow one leaves out first
TABLE = (
    "requests",
    "input_tokens",
    "cache_read_tokens",
    "output_tokens",
    "cost_usd",
    "whatif_cost_usd",
    "difference_usd",
    "ratio",
    "missed_tokens",
    "miss_cost_usd",
    "whatif_miss_cost_usd",
    "unpriced",
    "usage_missing",
)
OPTIONAL = ("cache_read_tokens", "usage_missing", "missed_tokens", "requests", "input_tokens", "output_tokens")


def run(args: argparse.Namespace) -> int:
    from llmtap.analytics import reports, whatif
    from llmtap.cli.report import opened

    if not args.model:
        raise UsageError("report whatif needs --model M: the model to price the recorded traffic at")
    if args.list:
        raise UsageError("report whatif has no --list")
    by = [part.strip() for part in args.by.split(",") if part.strip()] if args.by else None
    since, until = moment(args.since), moment(args.until)
    try:
        zone = reports.zone(args.tz)
        reports.dimensions_for(whatif.REPORT, by)
    except reports.ReportError as exc:
        raise UsageError(str(exc)) from None
    with opened(args) as store:
        try:
            target = whatif.target(args.model, args.provider, store.pricer)
        except whatif.WhatIfError as exc:
            raise UsageError(str(exc)) from None
        pricing.catch_up(store.engine, store.pricer, store.duck)
        table = whatif.run(store.url, target, by=by, since=since, until=until, connection=store.duck, tz=zone.key)
        empty = not table.rows and reports.count_exchanges(store.url, store.duck) == 0
    _show(args, table, empty, store.label, zone, target)
    return 0


def _show(args: argparse.Namespace, table: Any, empty: bool, label: str, zone: Any, target: Any) -> None:
    from llmtap.analytics import render

    if args.format in output.MACHINE:
        output.write(table, args.format, zone)
    elif not table.rows:
        what = "no exchanges recorded yet" if empty else "no exchanges in that period"
        print(f"whatif: {what} in {label}")
    else:
        console = render.make_console()
        title = f"llmtap report whatif: the recorded traffic at {target.label}'s prices today"
        if "day" in table.dimensions or "hour" in table.dimensions:
            title += f" ({'hours' if 'hour' in table.dimensions else 'days'} in {zone.key})"
        shown = _for_terminal(table)
        render.as_rich(shown, title, console, shown.compact(TABLE), zone=zone, optional=OPTIONAL)
        for line in footer_lines(table, target):
            render.emit(console, render.shown(line))
    if not table.rows and args.format != "table":
        print(f"llmtap: whatif: nothing to report in {label}", file=sys.stderr)


def _for_terminal(table: Any) -> Any:
    """The table with the ratio as text (`0.41×`): a ratio is no sum, so its total stays
    blank (the footer gives the overall one)."""
    from llmtap.analytics.reports import Table

    rows = [{**row, "ratio": "" if row["ratio"] is None else f"{row['ratio']:.2f}×"} for row in table.rows]
    return Table(table.columns, rows, table.dimensions)


def footer_lines(table: Any, target: Any) -> list[str]:
    """What the table's totals cannot say: the overall ratio, the prices used, and what is
    in one total and not in the other."""
    from decimal import Decimal

    from llmtap.analytics import render

    actual: list[Decimal] = [row["cost_usd"] for row in table.rows if row["cost_usd"] is not None]
    compared: list[Decimal] = [
        row["difference_usd"] + row["cost_usd"] for row in table.rows if row["cost_usd"] is not None
    ]
    lines = [f"{target.label} at {target.prices}, today's price; actual cost at each exchange's own date"]
    if actual and sum(actual):
        ratio = Decimal(sum(compared)) / Decimal(sum(actual))
        lines.append(f"overall: {ratio:.2f}× the actual cost of the exchanges that have one")
    unpriced = sum(row["unpriced"] for row in table.rows)
    if unpriced:
        lines.append(
            f"unpriced: {unpriced:,} exchange{'s' if unpriced != 1 else ''} without an actual price: "
            "in whatif_cost_usd, not in cost_usd, difference or ratio (never $0)"
        )
    unverified = sum(row["unverified_host"] for row in table.rows)
    if unverified:
        lines.append(f"of those, {unverified:,} went to an unverified host: their usage is not priced at any model")
    missing = sum(row["usage_missing"] for row in table.rows)
    if missing:
        lines.append(f"usage missing: {missing:,} without usage, in neither total (not $0)")
    actual_misses = sum((r["miss_cost_usd"] or Decimal(0) for r in table.rows), Decimal(0))
    at_target = sum((r["whatif_miss_cost_usd"] for r in table.rows), Decimal(0))
    lines.append(
        "misses: missed_tokens at the input instead of the cache-read rate "
        f"(actual: {render.money(actual_misses)}, at {target.label}: {render.money(at_target)})"
    )
    return lines
