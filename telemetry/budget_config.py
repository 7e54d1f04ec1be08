"""The config file's `[budgets]` table, checked and made into plain, picklable values, and
the calendar periods a limit counts over.

    [budgets]
    webhook = "http://127.0.0.1:9000/alerts"   # optional: POST a JSON alert per crossing
    enforce = true                              # optional (default false): refuse over limit
    thresholds = [50, 80, 100]                  # percent of a limit; these are the default
    default_output_tokens = 32768               # the output reserved for a request that sets no limit
    [budgets.teams]
    search = { usd = 200, period = "month" }
    infra  = { usd = 20, period = "day", thresholds = [90, 100] }
    [budgets.keys]                              # by key fingerprint (`llmtap fingerprint`)
    "9f2c…" = { usd = 5, period = "week" }

A request reserves its estimate against its limits as it passes the gate (budget_gate.py):
its input at a token per four bytes and its output limit (`max_tokens` and the like; a
request that sets none, `default_output_tokens`), at its model's prices.

Periods are calendar periods in UTC: a day from 00:00 UTC, a week from Monday 00:00 UTC,
a month from the 1st 00:00 UTC (`report budgets --tz` shows another zone's calendar; the
proxy counts and enforces in UTC). `BudgetsSection` is the table's model in the config's
schema (cli/config_schema.py); `parse` makes settings of it, or of a plain table, and a
bad value raises ValueError with a one-line message that names the table and the key.

Not responsible for spend (budget_spend.py), alerts (budget_alerts.py), estimates
(budget_estimate.py) or refusals (budget_refusal.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any, Literal, get_args
from urllib.parse import urlsplit

from pydantic import AfterValidator, PlainValidator, model_validator

from llmtap.config import section as config_section
from llmtap.config.section import Section

Period = Literal["day", "week", "month"]
PERIODS: tuple[str, ...] = get_args(Period)
SCOPES = {"teams": "team", "keys": "key"}  # [budgets.<table>] -> a limit's scope
DEFAULT_THRESHOLDS = (50, 80, 100)
# The output a request reserves when it sets no limit of its own: the models' own default
# is then their maximum (32k to 128k tokens for OpenAI's and Google's current models).
DEFAULT_OUTPUT_TOKENS = 32_768


@dataclass(frozen=True)
class Limit:
    scope: str  # team | key
    name: str  # the team, or the key's fingerprint
    usd: Decimal
    period: str  # day | week | month
    thresholds: tuple[int, ...]  # percent, ascending

    @property
    def label(self) -> str:
        return f"{self.scope} {self.name}"

    @property
    def pico(self) -> int:
        """The limit in pico-dollars, as the store keeps cost."""
        return int(self.usd * 10**12)


@dataclass(frozen=True)
class BudgetSettings:
    limits: tuple[Limit, ...] = ()
    webhook: str | None = None
    enforce: bool = False
    default_output_tokens: int = DEFAULT_OUTPUT_TOKENS
    refresh_s: float = 15.0  # re-read spend from the store this often (other proxies, reprices)
    state_poll_s: float = 0.25  # the proxy's side re-reads the over-limit state this often


def _webhook(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"must be an http(s) URL, not {value!r}")
    return value


def _usd(value: Any) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"must be a positive number of dollars, not {value!r}")
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        raise ValueError(f"must be a positive number of dollars, not {value!r}") from None
    if not amount.is_finite() or amount <= 0:
        raise ValueError(f"must be a positive number of dollars, not {value!r}")
    return amount


def _thresholds(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise ValueError("must be a list of percentages, e.g. [50, 80, 100]")
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int) or not 0 < item <= 1000:
            raise ValueError(f"must each be a whole percentage from 1 to 1000, not {item!r}")
    return tuple(sorted(set(value)))


def _output_tokens(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 10_000_000:
        raise ValueError(f"must be a whole number of tokens from 1, not {value!r}")
    return value


Usd = Annotated[Decimal, PlainValidator(_usd)]
Thresholds = Annotated[tuple[int, ...], PlainValidator(_thresholds)]


class LimitEntry(Section):
    """One limit: `search = { usd = 200, period = "month", thresholds = [90, 100] }`."""

    usd: Usd
    period: Period = "month"
    thresholds: Thresholds | None = None  # else the table's


class BudgetsSection(Section):
    """`[budgets]` as the config file has it."""

    webhook: Annotated[str | None, AfterValidator(_webhook)] = None
    enforce: bool = False
    thresholds: Thresholds = DEFAULT_THRESHOLDS
    default_output_tokens: Annotated[int, PlainValidator(_output_tokens)] = DEFAULT_OUTPUT_TOKENS
    teams: dict[str, LimitEntry] = {}
    keys: dict[str, LimitEntry] = {}  # by key fingerprint

    @model_validator(mode="after")
    def _some_limit(self) -> BudgetsSection:
        if not self.teams and not self.keys:
            raise ValueError("sets no limit: add [budgets.teams] or [budgets.keys]")
        return self


def parse(section: BudgetsSection | Mapping[str, Any]) -> BudgetSettings:
    """`[budgets]` as settings; raises ValueError naming the table and key."""
    table = config_section.parse(BudgetsSection, section, ("budgets",))
    limits = [
        Limit(scope, name, entry.usd, entry.period, entry.thresholds or table.thresholds)
        for where, scope in SCOPES.items()
        for name, entry in getattr(table, where).items()
    ]
    return BudgetSettings(
        limits=tuple(limits),
        webhook=table.webhook,
        enforce=table.enforce,
        default_output_tokens=table.default_output_tokens,
    )


def bounds(period: str, now: datetime, zone: tzinfo = UTC) -> tuple[datetime, datetime]:
    """The period [start, end) that holds `now`, as UTC times: calendar days, weeks and
    months in `zone` (UTC: what the proxy counts and enforces; `report budgets --tz`
    shows another zone's). Wall-clock arithmetic in `zone`, so a day across a DST change
    is 23 or 25 hours long."""
    now = now.astimezone(zone)
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "day":
        start, end = day, day + timedelta(days=1)
    elif period == "week":
        start = day - timedelta(days=day.weekday())  # Monday
        end = start + timedelta(days=7)
    else:
        start = day.replace(day=1)
        end = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
    return start.astimezone(UTC), end.astimezone(UTC)
