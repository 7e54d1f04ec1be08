"""What the simulated providers' admin reports share (admin_anthropic, admin_openai): time
buckets walked a page at a time with an opaque cursor, the query's single values, lists
and limits, and the refusal a bad request gets.

Chosen here where the references say nothing: a cursor names the next bucket's start and
is valid only with the parameters it came with; a report with no end stops after `limit`
buckets. Not responsible for what a report's rows hold or how its errors are worded on the
wire (each provider's module says).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

from llmtap.simulator.upstream import Reply, Seen
from llmtap.simulator.wire_common import json_reply

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
Query = dict[str, list[str]]
Width = tuple[timedelta, int, int]  # a bucket's length, the default limit, the largest


class Refused(Exception):
    """A request the API would refuse: its status, error type and message."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind = status, kind


class AdminRouter:
    """The router of one provider's admin API for a local `Upstream`: only GETs with the
    admin key are answered (`authorized`), each path by `route` (a JSON payload, or
    Refused), a refusal in the provider's error shape (`refusal`). `seen` lists every
    request's path and query, never its headers (they hold the admin key)."""

    def __init__(self, admin_key: str) -> None:
        self.admin_key = admin_key
        self.seen: list[str] = []

    def __call__(self, seen: Seen) -> Reply:
        parts = urlsplit(seen.path)
        self.seen.append(seen.path)
        query = {name.removesuffix("[]") if self.bare_arrays else name: values for name, values in _parsed(parts.query)}
        try:
            if not self.authorized(seen.headers):
                raise Refused(401, self.unauthorized, "the admin key is missing or wrong")
            if seen.method != "GET":
                raise bad(f"{seen.method} is not allowed here")
            return json_reply(self.route(parts.path, query))
        except Refused as refused:
            return json_reply(self.refusal(refused), refused.status)

    bare_arrays = False  # take `name[]` as `name`
    unauthorized = "authentication_error"

    def authorized(self, headers: Mapping[str, str]) -> bool:
        raise NotImplementedError

    def route(self, path: str, query: Query) -> dict[str, Any]:
        raise NotImplementedError

    def refusal(self, refused: Refused) -> dict[str, Any]:
        raise NotImplementedError


def _parsed(text: str) -> list[tuple[str, list[str]]]:
    return list(parse_qs(text, keep_blank_values=True).items())


def report_buckets(
    query: Query, widths: dict[str, Width], names: tuple[str, str], instant: Callable[[Query, str], datetime | None]
) -> tuple[list[tuple[datetime, datetime]], str | None]:
    """This page's buckets and the next page's cursor, from the start (`names[0]`,
    required, snapped to its bucket) to the end (`names[1]`), read by `instant`."""
    width = width_of(query, widths)
    limit = limit_of(query, width[1], width[2])
    first = instant(query, names[0])
    if first is None:
        raise bad(f"{names[0]}: Field required")
    return buckets(snap(first, width[0]), instant(query, names[1]), width, limit, one(query, "page"))


def passes(row: object, query: Query, filters: Mapping[str, str]) -> bool:
    """Whether `row` is kept by the query's list filters (parameter -> the row's field)."""
    return all(not query.get(name) or getattr(row, field) in query[name] for name, field in filters.items())


def bad(message: str) -> Refused:
    return Refused(400, "invalid_request_error", message)


def one(query: Query, name: str) -> str | None:
    values = query.get(name)
    return values[-1] if values else None


def choices(query: Query, name: str, allowed: Sequence[str]) -> set[str]:
    chosen = set(query.get(name, []))
    unknown = chosen - set(allowed)
    if unknown:
        raise bad(f"{name}: {sorted(unknown)[0]!r} is not one of {', '.join(allowed)}")
    return chosen


def limit_of(query: Query, default: int, largest: int) -> int:
    text = one(query, "limit")
    if text is None:
        return default
    if not text.isdigit() or not 1 <= int(text) <= largest:
        raise bad(f"limit: must be from 1 to {largest}")
    return int(text)


def width_of(query: Query, widths: dict[str, Width]) -> Width:
    name = one(query, "bucket_width") or "1d"
    if name not in widths:
        raise bad(f"bucket_width must be one of {', '.join(widths)}")
    return widths[name]


def midnight(day: date) -> datetime:
    """The UTC instant a day's bucket starts at (a cost's day, in `bucketed`)."""
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def snap(moment: datetime, width: timedelta) -> datetime:
    """The start of the UTC minute, hour or day holding `moment`."""
    return EPOCH + (moment - EPOCH) // width * width


def buckets(
    first: datetime, end: datetime | None, width: Width, limit: int, page: str | None
) -> tuple[list[tuple[datetime, datetime]], str | None]:
    """This page's buckets [start, end) from `first` (already snapped), up to `end` (None:
    `limit` buckets in all), and the cursor of the next page (None: this is the last)."""
    step = width[0]
    last = end if end is not None else first + step * limit
    if last <= first:
        raise bad("the end must be after the start")
    start = _cursor_start(page, first, step) if page else first
    found: list[tuple[datetime, datetime]] = []
    while start + step <= last and len(found) < limit:
        found.append((start, start + step))
        start += step
    more = start + step <= last
    return found, "page_" + base64.b64encode(start.isoformat().encode()).decode() if more else None


def _cursor_start(page: str, first: datetime, step: timedelta) -> datetime:
    """The bucket a cursor names: one of this report's buckets, or refused."""
    try:
        start = datetime.fromisoformat(base64.b64decode(page.removeprefix("page_"), validate=True).decode())
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise bad("page is not a cursor this report gave") from None
    if start.tzinfo is None or start < first or (start - first) % step:
        raise bad("page is not a cursor this report gave")
    return start.astimezone(UTC)


def group_order(item: tuple[tuple[object, ...], object]) -> tuple[str, ...]:
    """A sort key for (group values, sums) pairs: by the values, None first."""
    return tuple("" if value is None else str(value) for value in item[0])


def bucketed[Row](
    rows: Iterable[Row],
    spans: Iterable[tuple[datetime, datetime]],
    when: Callable[[Row], datetime],
    key: Callable[[Row], tuple[Any, ...]],
) -> Iterator[tuple[datetime, datetime, list[tuple[tuple[Any, ...], list[Row]]]]]:
    """Each span [start, end) with its rows (those `when` puts in it) grouped by `key`,
    the groups in `group_order`."""
    rows = list(rows)
    for start, end in spans:
        groups: dict[tuple[Any, ...], list[Row]] = {}
        for row in rows:
            if start <= when(row) < end:
                groups.setdefault(key(row), []).append(row)
        yield start, end, sorted(groups.items(), key=group_order)


def grouped_by(chosen: set[str], names: Sequence[str]) -> Callable[[object], tuple[Any, ...]]:
    """A row's key for `bucketed`: its value of each of `names` that was `chosen` (in
    group_by), None for the others, as the reports leave the dimensions not grouped."""
    return lambda row: tuple(getattr(row, name) if name in chosen else None for name in names)
