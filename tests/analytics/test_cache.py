"""`llmtap report cache`: hit rate per team, and `--list`: exactly the misses of the known
conversations, each with its cause (SPEC §5), message_index, missed_tokens and extra cost.

Claude Sonnet 4.5 bills input at $3 and cache reads at $0.30 per MTok, so each missed
token costs 2.7 µ$ more than a hit would have (3 000 000 − 300 000 pico-dollars).
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from tests.analytics import traffic
from tests.analytics.conftest import by_key, report
from tests.helpers import llmtap

EXTRA_PER_TOKEN = Decimal("0.0000027")

# (exchange, cause, message_index, missed_tokens), in time order; missed_tokens is what a
# hit would have read: the previous turn's input (all of it was the shared prefix). A
# previous turn under the model's minimum cacheable length could not have been read
# (`not_cacheable`, SPEC §5): listed as below_minimum, with nothing missed and no cost.
MISSES = [
    ("tools/1", "tools_changed", None, 3020),  # a second tool added
    ("system/1", "system_changed", None, 3020),  # the system prompt rewritten
    ("edit/2", "message_edited", 1, 3120),  # the assistant's first answer rewritten; edit/1 read 3000
    ("ttl/1", "ttl_expired", None, 3020),  # 7 minutes later, 5-minute TTL
    ("hour-small/1", "below_minimum", None, 0),  # 1h TTL and 10 minutes: not expired; 800 < 1024
    ("nobp/1", "no_breakpoint", None, 3020),  # no cache_control anywhere
    ("small/1", "below_minimum", None, 0),  # 700 < 1024, Sonnet 4.5's minimum
    ("h/1", "no_breakpoint", None, 1500),  # the hostile names: a model without a price
]


def test_cache_list_names_each_miss_and_its_cause(store, known):
    items = report(store, "cache", "--list")
    assert [item["exchange_id"] for item in items] == [known[name].id for name, *_ in MISSES]
    for item, (name, cause, index, missed) in zip(items, MISSES, strict=True):
        rec = known[name].rec
        assert item["cause"] == cause, name
        assert item["message_index"] == index, name
        assert item["missed_tokens"] == missed, name
        assert item["team"] == rec.team and item["model"] == rec.exchange.model
        assert datetime.fromisoformat(item["started_at"]) == rec.started_at  # zoned (SPEC §3)
        if cause == "below_minimum":  # not cacheable: no miss that costs money
            assert item["extra_cost_usd"] == 0, name
        elif known[name].provider_id:
            assert item["extra_cost_usd"] == missed * EXTRA_PER_TOKEN, name
        else:  # no price for the model: the extra cost is unknown, not $0
            assert item["extra_cost_usd"] is None
    assert items[3]["gap_s"] == 418  # 14:47:00 - 14:40:02
    # SPEC §3 keys
    assert {
        "exchange_id",
        "team",
        "model",
        "started_at",
        "cause",
        "message_index",
        "missed_tokens",
        "extra_cost_usd",
    } <= set(items[0])


def test_hits_are_not_misses(store, known):
    listed = {item["exchange_id"] for item in report(store, "cache", "--list")}
    for name in ("hit/1", "hit/2", "edit/1", "hour/1", "oai/1", "cv/1", "cv/2"):
        assert known[name].id not in listed, name  # hour/1: 10 minutes under a 1h TTL


def test_cache_list_window(store, known):
    # since 14:47 (inclusive): ttl/1 onwards; its previous turn, before the window, still counts
    items = report(store, "cache", "--list", "--since", "2026-11-02T14:47:00Z", "--until", "2026-11-02T16:00:00Z")
    assert [i["exchange_id"] for i in items] == [known[n].id for n in ("ttl/1", "hour-small/1", "nobp/1", "small/1")]
    assert items[0]["cause"] == "ttl_expired"


def test_cache_by_team(store):
    rows = by_key(report(store, "cache", "--by", "team"), "team")
    cache = rows["cache"]
    # inputs 9495 (hit) + 6240 + 6140 + 9460 (edit) + 6190 + 6200 + 1700 + 6220 + 1480 + 4200 (OpenAI)
    assert (cache["requests"], cache["input_tokens"], cache["cache_read_tokens"]) == (22, 57325, 14070)
    assert cache["hit_rate"] == round(Decimal(14070) / Decimal(57325), 4) == Decimal("0.2454")
    # 7 requests read under 5%; two of them (hour-small/1, small/1) follow a turn under
    # Sonnet 4.5's 1,024-token minimum: not cacheable, counted apart, no miss
    assert cache["misses"] == 5 and cache["not_cacheable"] == 2
    assert cache["missed_tokens"] == 3020 * 4 + 3120 == 15200
    assert cache["extra_cost_usd"] == 15200 * EXTRA_PER_TOKEN == Decimal("0.04104")

    agents = rows["agents"]
    assert (agents["input_tokens"], agents["cache_read_tokens"], agents["misses"]) == (11480, 6100, 0)
    assert agents["hit_rate"] == Decimal("0.5314") and agents["extra_cost_usd"] == 0

    hostile = rows[traffic.SQL_NAME]
    assert (hostile["misses"], hostile["missed_tokens"], hostile["extra_cost_usd"]) == (1, 1500, None)

    ops = rows["ops"]  # error responses have no usage: they count as requests, add no input
    assert ops["requests"] == 16 and ops["hit_rate"] == 0 and ops["misses"] == 0
    rated = [row for row in rows.values() if row["input_tokens"]]
    assert len(rated) > 3
    for row in rated:
        assert row["hit_rate"] == round(Decimal(row["cache_read_tokens"]) / row["input_tokens"], 4)


def test_cache_default_grouping_is_team_and_model(store):
    rows = by_key(report(store, "cache"), "team", "model")
    assert rows["cache", traffic.SONNET]["misses"] == 5
    assert rows["cache", traffic.GPT4O]["hit_rate"] == Decimal("0.4571")  # 1920 / 4200


def test_a_turn_under_the_minimum_is_not_cacheable_in_show_and_log(store, known):
    """SPEC §5: a prefix under the model's minimum is `not_cacheable`, counted apart from the
    misses: `show` says so, a conversation's miss count leaves it out, and `log --cache-miss`
    (any cause) does not list it; asked for by its cause, it is listed."""
    small = known["small/1"].id
    shown = llmtap("show", small, "--format", "json", "--db", store)
    assert shown.code == 0, shown.err
    assert shown.json()["cache"]["verdict"] == "not_cacheable"
    assert shown.json()["cache"]["cause"] == "below_minimum"
    conversation = llmtap("show", small, "--conversation", "--format", "json", "--db", store).json()
    turns = conversation["turns"]
    assert conversation["totals"]["cache_misses"] == sum(t["cache"].get("verdict") == "miss" for t in turns)
    assert any(t["cache"].get("verdict") == "not_cacheable" for t in turns)
    listed = {row["id"] for row in llmtap("log", "--cache-miss", "--format", "json", "--db", store).json()}
    assert small not in listed and known["small/0"].id not in listed
    missed = [known[name].id for name, cause, *_ in MISSES if cause != "below_minimum"]
    assert missed and set(missed) <= listed
    by_cause = llmtap("log", "--cache-miss", "below_minimum", "--format", "json", "--db", store).json()
    assert small in {row["id"] for row in by_cause}
