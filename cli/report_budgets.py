"""`llmtap report budgets`: spend against each `[budgets]` limit of the config file in
its current period, with the forecast to the period's end (telemetry/budget_report.py).
Formats as the other reports; money in the one money format in a table (a number to the
fitter, never wrapped), exact in JSON, JSONL and CSV. A period is the calendar day, week
or month that holds now in `--tz` (default: `[budgets] tz`, else UTC); the proxy counts,
alerts and enforces on the periods of `[budgets] tz` whatever `--tz` says, so `alerted`
is of that period. `--since`, `--until` and `--by` do not apply (cli/report.py refuses them).

Not responsible for computing spend (llmtap.telemetry) or for the config's checks
(telemetry/budget_config.py, with the rest of the file's).
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, time
from typing import Any

from llmtap.cli import output
from llmtap.cli import settings as settings_module
from llmtap.cli.errors import UsageError
from llmtap.cli.timeargs import zone as zone_named

# what a narrow terminal leaves out first (render.ranks): the rest are the standing itself
_LESS_NEEDED = ("alerted", "crossed", "period_end", "period_start", "forecast_usd")


def run(args: argparse.Namespace) -> int:
    from llmtap.analytics import render
    from llmtap.analytics.reports import Table
    from llmtap.cli.store import open_store
    from llmtap.telemetry import budget_config, budget_report

    settings = settings_module.load(args)
    section = settings.config.budgets
    if section is None:
        where = f"config file {str(settings.config_path)!r}" if settings.config_path else "no config file"
        raise UsageError(f"report budgets: no [budgets] table ({where}); see `llmtap proxy` and the README")
    try:
        budgets = budget_config.parse(section)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    enforced = budgets.zone
    zone = zone_named(args.tz) if args.tz else enforced
    engine = open_store(settings)
    try:
        found = budget_report.rows(engine, budgets.limits, datetime.now(UTC), zone, enforced)
    finally:
        engine.dispose()
    table = Table(columns=list(budget_report.COLUMNS), rows=found)
    if args.format in output.MACHINE:
        output.write(table, args.format, zone)
    else:
        shown = Table(columns=table.columns, rows=[_readable(row, zone) for row in found], dimensions=["scope", "name"])
        alerts = "" if zone.key == enforced.key else f"; the proxy alerts and enforces on {enforced.key} periods"
        title = f"llmtap report budgets (periods in {zone.key}{alerts}; forecast: linear on the elapsed part)"
        render.as_rich(shown, title, render.make_console(), zone=zone, total=False, optional=_LESS_NEEDED)
    return 0


def _readable(row: dict[str, Any], zone: Any) -> dict[str, Any]:
    """A period's bounds as the days they are (each starts at 00:00 in `zone`; the end is
    the next period's start); money and the percentage stay numbers, for render to format."""
    from llmtap.analytics.render import local

    out = dict(row)
    for column in ("period_start", "period_end"):
        moment = row[column]
        if isinstance(moment, datetime) and local(moment, zone).time() == time(0):
            out[column] = local(moment, zone).date().isoformat()
    return out
