"""Time arguments: `--since/--until` take an ISO date or time (UTC unless it says) or an
age such as `30d`, `12h`, `90m`; `--older-than` takes an age."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from llmtap.cli.errors import UsageError

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def age(value: str) -> timedelta:
    match = _AGE.match(value)
    if not match:
        raise UsageError(f"not an age: {value!r} (use e.g. 30d, 12h, 90m)")
    try:
        delta = timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})
        _ = datetime.now(UTC) - delta  # every age is taken back from now: it must land in the calendar
    except OverflowError:
        raise UsageError(f"age {value!r} is too long: it reaches before the year 1") from None
    return delta


def moment(value: str | None, now: datetime | None = None) -> datetime | None:
    """An absolute UTC time from an ISO string or an age before now."""
    if value is None:
        return None
    if _AGE.match(value):
        try:
            return (now or datetime.now(UTC)) - age(value)
        except OverflowError:  # a `now` of the caller's, near the year 1
            raise UsageError(f"age {value!r} is too long: it reaches before the year 1") from None
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"not a date or time: {value!r} (use e.g. 2026-11-01, 2026-11-01T09:00, 7d)") from None
    try:
        # In UTC now, so a zone at the calendar's edge fails here, not in a query.
        return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    except OverflowError:
        raise UsageError(f"date {value!r} is outside the calendar once in UTC") from None
