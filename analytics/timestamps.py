"""The one way machine output writes a moment (SPEC §3, "every timestamp in machine output
carries its zone"): ISO 8601 with its UTC offset, in the zone asked for (`--tz`), else
UTC as `+00:00`. JSON, JSONL and CSV of `report` (its rows and `--list`), `log`, `show`
and `report budgets` all write their times through `iso`.

A stored time without a zone is UTC (SQLite keeps naive UTC; DuckDB reads TIMESTAMP
naive). Not responsible for terminal tables' times (render.local, a wall time under a
header that names the zone) nor for the buckets `--by day` / `--by hour`, which are
labels of a calendar day or hour in `--tz`, not moments.
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo


def iso(moment: datetime, zone: tzinfo | None = None) -> str:
    """`moment` as ISO 8601 with its offset in `zone` (default UTC):
    `2026-11-01T09:00:00.123000+01:00`; microseconds only when it has them."""
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return aware.astimezone(zone or UTC).isoformat()
