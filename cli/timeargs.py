"""Time arguments: `--since/--until` take an ISO date or time (UTC unless it says) or an
age such as `30d`; `--older-than` takes an age; `--tz` takes an IANA zone (`add_tz`), a
name it does not know refused as the command line is read, in one line.

An age is a number and a unit: `s`, `min`, `h`, `d`, `w` (fixed lengths) or `mo`, `y`
(calendar months and years back from now in UTC: Mar 31 less one month is the last day of
February). A bare `m` is refused: `prune --older-than 1m` once read it as minutes and
deleted a whole store, where the user meant a month.

Not responsible for what a command does with the moment.
"""

from __future__ import annotations

import argparse
import calendar
import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from llmtap.cli.errors import UsageError

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|min|h|d|w|mo|y|m)\s*$")
_FIXED = {"s": "seconds", "min": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_EXAMPLES = "e.g. 30d, 12h, 2w, 3mo, 1y, 90min"


def before(value: str, now: datetime | None = None) -> datetime:
    """The UTC moment an age (`30d`, `3mo`) reaches back to from `now` (default: now)."""
    now = now or datetime.now(UTC)
    match = _AGE.match(value)
    if not match:
        raise UsageError(f"not an age: {value!r} ({_EXAMPLES})")
    number, unit = match.groups()
    if unit == "m":
        raise UsageError(f"ambiguous age {value!r}: write {number}mo for months or {number}min for minutes")
    try:
        if unit in _FIXED:
            return now - timedelta(**{_FIXED[unit]: float(number)})
        if "." in number:
            raise UsageError(f"not an age: {value!r} (months and years are whole numbers: {_EXAMPLES})")
        return months_back(now, int(number) * (12 if unit == "y" else 1))
    except (OverflowError, ValueError):
        raise UsageError(f"age {value!r} is too long: it reaches before the year 1") from None


def months_back(moment: datetime, months: int) -> datetime:
    """`moment` less whole calendar months, the day clamped to the target month's last
    (Mar 31 − 1 month = Feb 28, or 29 in a leap year; Feb 29 − 1 year = Feb 28)."""
    index = moment.year * 12 + (moment.month - 1) - months
    year, month = divmod(index, 12)
    if year < 1:
        raise OverflowError("before the year 1")
    day = min(moment.day, calendar.monthrange(year, month + 1)[1])
    return moment.replace(year=year, month=month + 1, day=day)


def moment(value: str | None, now: datetime | None = None) -> datetime | None:
    """An absolute UTC time from an ISO string or an age before now."""
    if value is None:
        return None
    if _AGE.match(value):
        return before(value, now)
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"not a date or time: {value!r} (use e.g. 2026-11-01, 2026-11-01T09:00, 7d)") from None
    try:
        # In UTC now, so a zone at the calendar's edge fails here, not in a query.
        return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    except OverflowError:
        raise UsageError(f"date {value!r} is outside the calendar once in UTC") from None


def zone(name: str | None) -> ZoneInfo:
    """The IANA time zone `name` (None: UTC); a name it does not know is a UsageError."""
    try:
        return ZoneInfo(name.strip() if name and name.strip() else "UTC")
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise UsageError(f"--tz {name!r} is not a time zone (an IANA name such as Europe/Paris, or UTC)") from None


def _zone_name(value: str) -> str:
    return zone(value).key


def add_tz(parser: argparse.ArgumentParser, what: str) -> None:
    """`--tz ZONE` on `parser`: checked as the line is read, kept as the zone's name."""
    parser.add_argument("--tz", metavar="ZONE", type=_zone_name, help=f"IANA time zone of {what} (default UTC)")
