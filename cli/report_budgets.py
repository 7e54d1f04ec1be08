"""`llmtap report budgets`: spend against each `[budgets]` limit of the config file in
its current UTC period, with the forecast to the period's end (telemetry/budget_report.py).
Table, JSON or CSV as the other reports; money in the one money format in a table (a
number to the fitter, never wrapped), exact in JSON and CSV. `--since`, `--until`, `--by`
and `--tz` do not apply: a budget's period is the calendar period (UTC) that holds now.

Not responsible for computing spend (llmtap.telemetry) or for the config's checks
(telemetry/budget_config.py, with the rest of the file's).
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime, time
from typing import Any

from llmtap.cli import settings as settings_module
from llmtap.cli.errors import UsageError

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
    engine = open_store(settings)
    try:
        found = budget_report.rows(engine, budgets.limits, datetime.now(UTC))
    finally:
        engine.dispose()
    table = Table(columns=list(budget_report.COLUMNS), rows=found)
    if args.format == "json":
        sys.stdout.write(render.as_json(table) + "\n")
    elif args.format == "csv":
        sys.stdout.write(render.as_csv(table))
    else:
        shown = Table(columns=table.columns, rows=[_readable(row) for row in found], dimensions=["scope", "name"])
        title = "llmtap report budgets (periods in UTC; forecast: linear on the elapsed part)"
        render.as_rich(shown, title, render.make_console(), total=False, optional=_LESS_NEEDED)
    return 0


def _readable(row: dict[str, Any]) -> dict[str, Any]:
    """A period's bounds as the days they are (each starts at 00:00 UTC; the end is the
    next period's start); money and the percentage stay numbers, for render to format."""
    out = dict(row)
    for column in ("period_start", "period_end"):
        moment = row[column]
        if isinstance(moment, datetime) and moment.time() == time(0):
            out[column] = moment.date().isoformat()
    return out
