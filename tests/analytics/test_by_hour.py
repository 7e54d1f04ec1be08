"""`llmtap report … --by hour`: the hour each exchange started, `YYYY-MM-DD HH:00`, in UTC
or in `--tz`, over the store of test_conversations.py (SQLite, and PostgreSQL when set),
through the CLI. Not responsible for `--by day` (test_tables.py) nor the dashboard's use
of it (tests/dashboards/).
"""

from __future__ import annotations

from collections import Counter
from zoneinfo import ZoneInfo

from tests.analytics.test_conversations import convs, run, store

__all__ = ["convs", "store"]  # the fixtures, shared with test_conversations.py

ZONE = "Asia/Kolkata"  # UTC+05:30: an hour there straddles two UTC hours


def hours(convs, zone: str = "UTC") -> Counter[str]:
    """Requests per hour as worked out here from each turn's start."""
    starts = [turn.started_at.astimezone(ZoneInfo(zone)) for turns in convs.values() for turn in turns]
    return Counter(start.strftime("%Y-%m-%d %H:00") for start in starts)


def test_usage_by_hour_in_utc(store, convs):
    rows = run(store, "report", "usage", "--by", "hour", "--format", "json")
    got = {r["hour"]: r["requests"] for r in rows}
    assert got == hours(convs)
    assert len(got) > 3 and "2026-11-03 03:00" in got  # gamma, the next day at 03:00 UTC
    assert [r["hour"] for r in rows] == sorted(got)


def test_usage_by_hour_in_a_zone(store, convs):
    rows = run(store, "report", "usage", "--by", "hour", "--tz", ZONE, "--format", "json")
    got = {r["hour"]: r["requests"] for r in rows}
    assert got == hours(convs, ZONE) != hours(convs)
    assert "2026-11-03 08:00" in got and "2026-11-03 03:00" not in got  # gamma, 03:00 UTC is 08:30 there
    table = run(store, "report", "usage", "--by", "hour", "--tz", ZONE)
    assert f"hours in {ZONE}" in table.splitlines()[0]


def test_hour_with_other_dimensions(store, convs):
    rows = run(store, "report", "cost", "--by", "hour,team", "--format", "json")
    assert {(r["hour"], r["team"]) for r in rows} == {
        (t.started_at.strftime("%Y-%m-%d %H:00"), t.team) for turns in convs.values() for t in turns
    }
    for kind in ("cache", "errors", "latency", "finish"):
        by_hour = run(store, "report", kind, "--by", "hour", "--format", "json")
        assert by_hour and all("hour" in r for r in by_hour), kind
    # these turns call no tools: the tools report has no row to check here (test_tools.py does)
    assert run(store, "report", "tools", "--by", "hour", "--format", "json") == []
