"""What `llmtap report budgets` shows: each limit's spend in its current period (in
`[budgets] tz`, or the calendar of `--tz`) as the store says it now, the percentage of the
limit, a forecast to the end of the period, the thresholds the spend has reached and those
whose alert was sent (the proxy alerts and enforces on the periods of `[budgets] tz`,
whatever `--tz` says).

The forecast is linear on the elapsed part of the period: spent × period length ÷ time
elapsed (early in a period it swings widely). Rows are dicts of plain values; money is
an exact Decimal in dollars, `percent` a ratio (0.5 for 50 %).

Not responsible for rendering (cli/report_budgets.py, analytics/render.py) or for
counting spend as traffic flows (budgets.py).
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from decimal import Decimal
from typing import Any

from sqlalchemy import Engine

from llmtap.telemetry import budget_alerts, budget_spend
from llmtap.telemetry.budget_config import Limit

MICRO = Decimal("0.000001")  # forecasts to a millionth of a dollar, ratios to a ten-thousandth of a percent
COLUMNS = (
    "scope",
    "name",
    "period",
    "period_start",
    "period_end",
    "limit_usd",
    "spent_usd",
    "percent",
    "forecast_usd",
    "crossed",
    "alerted",
)


def forecast(spent: Decimal, start: datetime, end: datetime, now: datetime) -> Decimal:
    """Spend at the period's end if it goes on at the rate so far (linear)."""
    elapsed = Decimal(str((now - start).total_seconds()))
    if elapsed <= 0:
        return spent
    return spent * Decimal(str((end - start).total_seconds())) / elapsed


def rows(
    engine: Engine, limits: tuple[Limit, ...], now: datetime, zone: tzinfo = UTC, enforced_in: tzinfo = UTC
) -> list[dict[str, Any]]:
    """One row per limit: its period in `zone` (calendar days, weeks, months there), the
    spend and forecast in it; `alerted` is of the period the proxy alerts on (its
    calendar: `enforced_in`, `[budgets] tz`)."""
    found = budget_spend.standings(limits, now, zone)
    enforced = budget_spend.standings(limits, now, enforced_in)
    out = []
    for standing, utc_period, spent in zip(found, enforced, budget_spend.read(engine, found), strict=True):
        standing.spent_pico = spent
        usd = standing.spent_usd
        alerted = budget_alerts.fired(engine, standing.limit, utc_period.start)
        out.append(
            {
                "scope": standing.limit.scope,
                "name": standing.limit.name,
                "period": standing.limit.period,
                "period_start": standing.start,
                "period_end": standing.end,
                "limit_usd": standing.limit.usd,
                "spent_usd": usd,
                "percent": standing.ratio.quantize(MICRO),
                "forecast_usd": forecast(usd, standing.start, standing.end, now).quantize(MICRO),
                "crossed": ", ".join(f"{t}%" for t in standing.crossed()),
                "alerted": ", ".join(f"{t}%" for t in sorted(alerted)),
            }
        )
    return out
