"""Spend against each budget limit in its current period: read from the store (one SQL
query per scope for all limits), then kept up to date from the rows each commit adds.

Spend is the sum of `cost_total_pico` of the exchanges in the period (by `started_at`,
UTC) whose team, or key fingerprint, the limit names. An unpriced exchange (no cost: an
unknown model, usage missing, an unverified host) adds nothing. A refusal the proxy made
itself (429) has no usage and costs nothing.

Not responsible for what crossing a limit does (budget_alerts.py, budget_state.py), nor
for pricing (the rows arrive priced: analytics/pricing.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from decimal import Decimal
from typing import Any

from sqlalchemy import ColumnElement, Engine, and_, case, func, or_, select

from llmtap.protocols.who_asked import stored_tags
from llmtap.storage.schema import exchanges
from llmtap.telemetry.budget_config import Limit, bounds

PICO = Decimal(10) ** 12


@dataclass
class Standing:
    """One limit's spend in its current period [start, end)."""

    limit: Limit
    start: datetime
    end: datetime
    spent_pico: int = 0

    @property
    def spent_usd(self) -> Decimal:
        return Decimal(self.spent_pico) / PICO

    @property
    def ratio(self) -> Decimal:
        return Decimal(self.spent_pico) / Decimal(self.limit.pico)

    @property
    def over(self) -> bool:
        return self.spent_pico >= self.limit.pico

    def crossed(self) -> tuple[int, ...]:
        """The thresholds (percent) the spend has reached."""
        return tuple(t for t in self.limit.thresholds if self.spent_pico * 100 >= self.limit.pico * t)


def utc(moment: datetime) -> datetime:
    """A stored time (naive UTC on SQLite, aware on PostgreSQL) as an aware UTC time."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def standings(limits: Iterable[Limit], now: datetime, zone: tzinfo = UTC) -> list[Standing]:
    """Each limit's period that holds `now` (calendar periods in `zone`: the proxy's is
    `[budgets] tz`)."""
    return [Standing(limit, *bounds(limit.period, now, zone)) for limit in limits]


def read(engine: Engine, found: Sequence[Standing]) -> list[int]:
    """Each standing's spend in its period, as the store says now (pico-dollars). One
    query per scope (teams, keys), grouped by name, one sum per distinct period: the team
    query walks the (team, started_at) index, and the work grows with the period's rows,
    not with rows x limits."""
    if not found:
        return []
    windows = sorted({(s.start, s.end) for s in found})
    started, cost = exchanges.c.started_at, exchanges.c.cost_total_pico
    sums = [func.sum(case((and_(started >= a, started < b), cost), else_=0)) for a, b in windows]
    totals: dict[tuple[str, str, int], int] = {}
    with engine.connect() as connection:
        for standing in {s.limit.name: s for s in found if s.limit.scope == "tag"}.values():
            query = (
                select(*sums)
                .where(tagged(standing.limit.name), started >= windows[0][0], started < max(b for _, b in windows))
                .where(cost.is_not(None))
            )
            for row in connection.execute(query):
                for index, value in enumerate(row):
                    totals[("tag", standing.limit.name, index)] = int(value or 0)
        for scope, column in (("team", exchanges.c.team), ("key", exchanges.c.key_fingerprint)):
            names = sorted({s.limit.name for s in found if s.limit.scope == scope})
            if not names:
                continue
            query = (
                select(column, *sums)
                .where(column.in_(names), started >= windows[0][0], started < max(b for _, b in windows))
                .where(cost.is_not(None))
                .group_by(column)
            )
            for name, *values in connection.execute(query):
                for index, value in enumerate(values):
                    totals[(scope, name, index)] = int(value or 0)
    return [totals.get((s.limit.scope, s.limit.name, windows.index((s.start, s.end))), 0) for s in found]


def tagged(tag: str) -> ColumnElement[bool]:
    """The stored rows that carry `tag` (`NAME=VALUE`): their `tags` text is compact JSON
    with sorted names (storage/rows.py), and a name or value holds no `,` (who_asked.py),
    so the pair is the text `"NAME":"VALUE"` right after `{` or `,` and before `,` or `}`."""
    name, _, value = tag.partition("=")
    pair = json.dumps({name: value}, separators=(",", ":"), ensure_ascii=False)[1:-1]
    like = pair.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    column = exchanges.c.tags
    return or_(*(column.like(f"{head}{like}{tail}", escape="\\") for head in ("{", "%,") for tail in ("}", ",%")))


class Tracker:
    """The standings of all limits, rolled to the current period, fed by committed rows.
    Not thread-safe: its owner (budgets.BudgetObserver) holds a lock around it."""

    def __init__(self, limits: Sequence[Limit], now: datetime, zone: tzinfo = UTC) -> None:
        self.zone = zone  # whose calendar the periods are
        self.standings = standings(limits, now, zone)
        self._by_team: dict[str, list[Standing]] = {}
        self._by_key: dict[str, list[Standing]] = {}
        self._by_tag: dict[str, list[Standing]] = {}  # "NAME=VALUE"
        indexes = {"team": self._by_team, "key": self._by_key, "tag": self._by_tag}
        for standing in self.standings:
            indexes[standing.limit.scope].setdefault(standing.limit.name, []).append(standing)

    def roll(self, now: datetime) -> list[Standing]:
        """Start a new period for each limit whose period ended; those that rolled."""
        rolled = []
        for standing in self.standings:
            if now >= standing.end:
                standing.start, standing.end = bounds(standing.limit.period, now, self.zone)
                standing.spent_pico = 0
                rolled.append(standing)
        return rolled

    def load(self, engine: Engine) -> None:
        for standing, spent in zip(self.standings, read(engine, self.standings), strict=True):
            standing.spent_pico = spent

    def add(self, rows: Iterable[dict[str, Any]]) -> bool:
        """Count each priced exchange row toward the limits it falls under; whether any did."""
        counted = False
        for row in rows:
            cost = row.get("cost_total_pico")
            if not cost:
                continue
            started = row.get("started_at")
            if not isinstance(started, datetime):
                continue
            started = utc(started)
            fingerprint = row.get("key_fingerprint")
            matching = self._by_team.get(row.get("team") or "", [])
            if fingerprint:
                matching = matching + self._by_key.get(fingerprint, [])
            if self._by_tag and row.get("tags"):
                for tag in (f"{name}={value}" for name, value in stored_tags(row["tags"]).items()):
                    matching = matching + self._by_tag.get(tag, [])
            for standing in matching:
                if standing.start <= started < standing.end:
                    standing.spent_pico += int(cost)
                    counted = True
        return counted
