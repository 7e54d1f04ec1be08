"""`llmtap report budgets`: spend against each `[budgets]` limit of the config file in
its current UTC period, with the forecast to the period's end (telemetry/budget_report.py).
Table, JSON or CSV as the other reports; money in the one money format in a table, exact
in JSON and CSV. `--since`, `--until`, `--by` and `--tz` do not apply: a budget's period is
the calendar period (UTC) that holds now.

Not responsible for computing spend (llmtap.telemetry) or for the config's checks
(telemetry/budget_config.py, with the rest of the file's).
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Any

from llmtap.cli import settings as settings_module
from llmtap.cli.errors import UsageError

_MONEY = ("limit_usd", "spent_usd", "forecast_usd")


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
        shown = Table(columns=table.columns, rows=[_readable(row, render) for row in found])
        title = "llmtap report budgets (periods in UTC; forecast: linear on the elapsed part)"
        render.as_rich(shown, title, render.make_console(), total=False)
    return 0


def _readable(row: dict[str, Any], render: Any) -> dict[str, Any]:
    out = dict(row)
    for column in _MONEY:
        out[column] = render.money(row[column])
    out["percent"] = render.percent(row["percent"])
    return out
