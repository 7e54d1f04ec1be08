"""The config file's `[budgets]` table, checked and made into plain, picklable values, and
the calendar periods a limit counts over.

    [budgets]
    webhook = "http://127.0.0.1:9000/alerts"   # optional: POST a JSON alert per crossing
    webhook_format = "slack"                    # optional: "llmtap" (the default) or "slack" (Slack, Teams)
    tz = "Europe/Berlin"                        # optional (default "UTC"): the zone of the periods
    enforce = true                              # optional (default false): refuse over limit
    thresholds = [50, 80, 100]                  # percent of a limit; these are the default
    default_output_tokens = 32768               # the output reserved for a request that sets no limit
    [budgets.teams]
    search = { usd = 200, period = "month" }
    infra  = { usd = 20, period = "day", thresholds = [90, 100] }
    [budgets.keys]                              # by key fingerprint (`llmtap fingerprint`)
    "9f2c…" = { usd = 5, period = "week" }
    [budgets.tags]                              # by tag (SPEC §4): NAME=VALUE
    "project=atlas" = { usd = 50 }

A request reserves its estimate against its limits as it passes the gate (budget_gate.py):
its input at a token per four bytes and its output limit (`max_tokens` and the like; a
request that sets none, `default_output_tokens`), at its model's prices.

Periods are calendar periods in `tz` (an IANA zone, UTC unless it says): a day from local
midnight, a week from Monday's, a month from the 1st's, so a day across a DST change is 23
or 25 hours long. The proxy counts, alerts and enforces on them; `report budgets --tz`
shows another zone's calendar. `BudgetsSection` is the table's model in the config's
schema (cli/config_schema.py); `parse` makes settings of it, or of a plain table, and a
bad value raises ValueError with a one-line message that names the table and the key.

Not responsible for spend (budget_spend.py), alerts (budget_alerts.py), estimates
(budget_estimate.py) or refusals (budget_refusal.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any, Literal, get_args
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AfterValidator, PlainValidator, model_validator

from llmtap.config import section as config_section
from llmtap.config.section import Section
from llmtap.protocols.who_asked import parse_tags

Period = Literal["day", "week", "month"]
WebhookFormat = Literal["llmtap", "slack"]  # budget_alerts.py: its own JSON, or a Slack (and Teams) message
PERIODS: tuple[str, ...] = get_args(Period)
SCOPES = {"teams": "team", "keys": "key", "tags": "tag"}  # [budgets.<table>] -> a limit's scope
DEFAULT_THRESHOLDS = (50, 80, 100)
# The output a request reserves when it sets no limit of its own: the models' own default
# is then their maximum (32k to 128k tokens for OpenAI's and Google's current models).
DEFAULT_OUTPUT_TOKENS = 32_768


@dataclass(frozen=True)
class Limit:
    scope: str  # team | key | tag
    name: str  # the team, the key's fingerprint, or the tag as NAME=VALUE
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
    webhook_format: str = "llmtap"  # llmtap | slack
    tz: str = "UTC"  # the IANA zone of the periods (a name: the settings stay plain and picklable)
    enforce: bool = False
    default_output_tokens: int = DEFAULT_OUTPUT_TOKENS
    refresh_s: float = 15.0  # re-read spend from the store this often (other proxies, reprices)
    state_poll_s: float = 0.25  # the proxy's side re-reads the over-limit state this often

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.tz)


def _webhook(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"must be an http(s) URL, not {value!r}")
    return value


def _zone(value: str) -> str:
    try:
        return ZoneInfo(value).key
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(f"must be an IANA time zone such as Europe/Berlin or UTC, not {value!r}") from None


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


def _tag_limits(table: dict[str, Any]) -> dict[str, Any]:
    """`[budgets.tags]`: each name is one tag as a request carries it, `NAME=VALUE`."""
    for name in table:
        tag, equals, value = name.partition("=")
        if not equals or parse_tags(name) != {tag: value}:  # read back exactly as written
            raise ValueError(f"{name!r} is not a tag as NAME=VALUE (a name of a-z, 0-9, _ and -; a value without ',')")
    return table


class LimitEntry(Section):
    """One limit: `search = { usd = 200, period = "month", thresholds = [90, 100] }`."""

    usd: Usd
    period: Period = "month"
    thresholds: Thresholds | None = None  # else the table's


class BudgetsSection(Section):
    """`[budgets]` as the config file has it."""

    webhook: Annotated[str | None, AfterValidator(_webhook)] = None
    webhook_format: WebhookFormat = "llmtap"
    tz: Annotated[str, AfterValidator(_zone)] = "UTC"
    enforce: bool = False
    thresholds: Thresholds = DEFAULT_THRESHOLDS
    default_output_tokens: Annotated[int, PlainValidator(_output_tokens)] = DEFAULT_OUTPUT_TOKENS
    teams: dict[str, LimitEntry] = {}
    keys: dict[str, LimitEntry] = {}  # by key fingerprint
    tags: Annotated[dict[str, LimitEntry], AfterValidator(_tag_limits)] = {}  # by tag: "NAME=VALUE"

    @model_validator(mode="after")
    def _some_limit(self) -> BudgetsSection:
        if not self.teams and not self.keys and not self.tags:
            raise ValueError("sets no limit: add [budgets.teams], [budgets.keys] or [budgets.tags]")
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
        webhook_format=table.webhook_format,
        tz=table.tz,
        enforce=table.enforce,
        default_output_tokens=table.default_output_tokens,
    )


def bounds(period: str, now: datetime, zone: tzinfo = UTC) -> tuple[datetime, datetime]:
    """The period [start, end) that holds `now`, as UTC times: calendar days, weeks (from
    Monday) and months in `zone`, each from the first moment of its first day there. A day
    across a DST change is 23 or 25 hours long."""
    today = now.astimezone(zone).date()
    if period == "day":
        first, after = today, today + timedelta(days=1)
    elif period == "week":
        first = today - timedelta(days=today.weekday())
        after = first + timedelta(days=7)
    else:
        first = today.replace(day=1)
        after = (first + timedelta(days=31)).replace(day=1)
    return day_start(first, zone), day_start(after, zone)


def day_start(day: date, zone: tzinfo) -> datetime:
    """The first moment of the calendar day `day` in `zone`, as a UTC time: its midnight
    (the first of two when the clocks go back over it), or, where the clocks jump over
    midnight (America/Santiago, Asia/Beirut in some years), the moment they jump."""
    midnight = datetime.combine(day, time(0), zone)
    first, second = midnight.astimezone(UTC), midnight.replace(fold=1).astimezone(UTC)
    if first <= second:
        return first
    # In a gap, fold=0 reads midnight with the offset before the jump, fold=1 with the one
    # after: the jump lies between the two. Search it to the second.
    low, high = int(second.timestamp()), int(first.timestamp())
    while high - low > 1:
        middle = (low + high) // 2
        if datetime.fromtimestamp(middle, zone).date() >= day:
            high = middle
        else:
            low = middle
    return datetime.fromtimestamp(high, UTC)
