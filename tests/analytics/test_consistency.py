"""The same answers by different routes: a snapshot connection (the dashboard's) against
views over the store, and the grouped cache report against its --list."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import pytest

from llmtap.analytics import duck, reports
from tests.analytics import traffic

GROUPINGS = (None, ["team"], ["day", "provider"], ["tier"])
RUNS = [
    (kind, by, False)
    for kind in reports.REPORTS
    for by in (GROUPINGS if reports.REPORTS[kind].dimensions else (None,))  # conversations: ranked
]
RUNS += [("cache", None, True), ("tools", None, True), ("errors", ["status", "model"], False)]


@pytest.fixture(scope="module")
def snapshot(store):
    connection = duck.connect(store, snapshot=True)
    yield connection
    connection.close()


@pytest.mark.parametrize("kind,by,listing", RUNS)
def test_snapshot_gives_the_same_answers(store, snapshot, kind, by, listing):
    since = datetime(2026, 11, 2, 14, 30, tzinfo=UTC)
    for window in ({}, {"since": since}):
        direct = reports.run(store, kind, by=by, listing=listing, **window)
        copied = reports.run(store, kind, by=by, listing=listing, connection=snapshot, **window)
        assert copied.rows == direct.rows and copied.columns == direct.columns


@pytest.mark.parametrize(
    "window",
    [{}, {"since": datetime(2026, 11, 2, 14, 47, tzinfo=UTC)}, {"until": datetime(2026, 11, 2, 15, 35, tzinfo=UTC)}],
)
def test_grouped_cache_misses_match_the_list(store, window):
    items = reports.run(store, "cache", listing=True, **window).rows
    grouped = reports.run(store, "cache", by=["team"], **window).rows
    # below_minimum: not cacheable (SPEC §5), counted apart and not a miss
    listed = [item for item in items if item["cause"] != "below_minimum"]
    apart = Counter(item["team"] for item in items if item["cause"] == "below_minimum")
    per_team = Counter(item["team"] for item in listed)
    tokens = Counter()
    for item in listed:
        tokens[item["team"]] += item["missed_tokens"]
    assert grouped, window
    for row in grouped:
        assert row["not_cacheable"] == apart[row["team"]], row["team"]
        assert row["misses"] == per_team[row["team"]], row["team"]
        assert row["missed_tokens"] == tokens[row["team"]], row["team"]
        priced = [i["extra_cost_usd"] for i in listed if i["team"] == row["team"] and i["extra_cost_usd"] is not None]
        if per_team[row["team"]] and not priced:
            assert row["extra_cost_usd"] is None
        else:
            assert row["extra_cost_usd"] == sum(priced)
    assert sum(per_team.values()) == len(listed) and (not window or len(listed) < 6)
    assert window or sum(apart.values()) == 2  # hour-small/1 and small/1
    assert traffic.SQL_NAME in per_team or window
