"""The config file's `[budgets]` table, checked and made into plain, picklable values, and
the calendar periods a limit counts over.

    [budgets]
    webhook = "http://127.0.0.1:9000/alerts"   # optional: POST a JSON alert per crossing
    enforce = true                              # optional (default false): refuse over limit
    thresholds = [50, 80, 100]                  # percent of a limit; these are the default
    [budgets.teams]
    search = { usd = 200, period = "month" }
    infra  = { usd = 20, period = "day", thresholds = [90, 100] }
    [budgets.keys]                              # by key fingerprint (`llmtap fingerprint`)
    "9f2c…" = { usd = 5, period = "week" }

Periods are calendar periods in UTC: a day from 00:00 UTC, a week from Monday 00:00 UTC,
a month from the 1st 00:00 UTC. A bad value raises ValueError with a one-line message
that names the table and the key.

Not responsible for spend (budget_spend.py), alerts (budget_alerts.py) or refusals
(budget_refusal.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import urlsplit

PERIODS = ("day", "week", "month")
SCOPES = {"teams": "team", "keys": "key"}  # [budgets.<table>] -> a limit's scope
DEFAULT_THRESHOLDS = (50, 80, 100)
_KNOWN = frozenset(("webhook", "enforce", "thresholds", "teams", "keys"))


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
    refresh_s: float = 15.0  # re-read spend from the store this often (other proxies, reprices)
    state_poll_s: float = 0.25  # the proxy's side re-reads the over-limit state this often


def parse(section: Any) -> BudgetSettings:
    """`[budgets]` as settings; raises ValueError naming the table and key."""
    if not isinstance(section, dict):
        raise ValueError("[budgets] must be a table")
    unknown = sorted(set(section) - _KNOWN)
    if unknown:
        raise ValueError(f"[budgets]: unknown key {unknown[0]!r} (known: {', '.join(sorted(_KNOWN))})")
    webhook = section.get("webhook")
    if webhook is not None:
        parts = urlsplit(webhook) if isinstance(webhook, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"[budgets] webhook must be an http(s) URL, not {webhook!r}")
    enforce = section.get("enforce", False)
    if not isinstance(enforce, bool):
        raise ValueError(f"[budgets] enforce must be true or false, not {enforce!r}")
    thresholds = _thresholds("[budgets] thresholds", section.get("thresholds", list(DEFAULT_THRESHOLDS)))
    limits: list[Limit] = []
    for table, scope in SCOPES.items():
        entries = section.get(table, {})
        if not isinstance(entries, dict):
            raise ValueError(f"[budgets.{table}] must be a table of name = {{ usd = …, period = … }}")
        where = f"[budgets.{table}]"
        limits.extend(_limit(where, scope, str(name), entry, thresholds) for name, entry in entries.items())
    if not limits:
        raise ValueError("[budgets] sets no limit: add [budgets.teams] or [budgets.keys]")
    return BudgetSettings(limits=tuple(limits), webhook=webhook, enforce=enforce)


def _limit(where: str, scope: str, name: str, entry: Any, thresholds: tuple[int, ...]) -> Limit:
    if not isinstance(entry, dict):
        raise ValueError(f'{where} {name}: want {{ usd = 20, period = "day" }}, not {entry!r}')
    unknown = sorted(set(entry) - {"usd", "period", "thresholds"})
    if unknown:
        raise ValueError(f"{where} {name}: unknown key {unknown[0]!r} (known: usd, period, thresholds)")
    usd = _usd(f"{where} {name}.usd", entry.get("usd"))
    period = entry.get("period", "month")
    if period not in PERIODS:
        raise ValueError(f"{where} {name}.period must be one of {', '.join(PERIODS)}, not {period!r}")
    own = _thresholds(f"{where} {name}.thresholds", entry["thresholds"]) if "thresholds" in entry else thresholds
    return Limit(scope=scope, name=name, usd=usd, period=period, thresholds=own)


def _usd(where: str, value: Any) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{where} must be a positive number of dollars, not {value!r}")
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        raise ValueError(f"{where} must be a positive number of dollars, not {value!r}") from None
    if not amount.is_finite() or amount <= 0:
        raise ValueError(f"{where} must be a positive number of dollars, not {value!r}")
    return amount


def _thresholds(where: str, value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise ValueError(f"{where} must be a list of percentages, e.g. [50, 80, 100]")
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int) or not 0 < item <= 1000:
            raise ValueError(f"{where}: each must be a whole percentage from 1 to 1000, not {item!r}")
    return tuple(sorted(set(value)))


def bounds(period: str, now: datetime) -> tuple[datetime, datetime]:
    """The UTC period [start, end) that holds `now`."""
    now = now.astimezone(UTC)
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "day":
        return day, day + timedelta(days=1)
    if period == "week":
        start = day - timedelta(days=day.weekday())  # Monday
        return start, start + timedelta(days=7)
    start = day.replace(day=1)
    end = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
    return start, end
