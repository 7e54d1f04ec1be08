"""`llmtap report usage`: per-team sums worked out by hand from the wire numbers in
`traffic.py`, the --since/--until window, and every --by dimension."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from tests.analytics import traffic
from tests.analytics.conftest import by_key, report
from tests.analytics.wire import FINGERPRINTS

METRICS = (
    "requests",
    "input_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "output_tokens",
    "reasoning_tokens",
    "usage_missing",
)


def row(requests: int, inp: int, read: int, write: int, out: int, reasoning: int, missing: int) -> dict[str, int]:
    return dict(zip(METRICS, (requests, inp, read, write, out, reasoning, missing), strict=True))


# Added up by hand (Anthropic input = input_tokens + cache creation + cache read; Gemini
# output = candidates + thoughts), exchange by exchange, in traffic.py's order.
BY_TEAM = {
    # s1 1200/300; s2 1000 (600 cached)/200 (128 reasoning); s3 no usage; s4 100+5000 written/50
    "search": row(4, 7300, 600, 5000, 550, 128, 1),
    # p1 2000 (1024 cached)/150; p2 12000 (8000 cached)/300+1200; p3 250000/1000; p4 500/100; p5 1000/100
    "support": row(5, 265500, 9024, 0, 2850, 1200, 0),
    "cache": row(22, 57325, 14070, 31270, 1740, 0, 0),
    "agents": row(9, 11480, 6100, 3200, 346, 0, 0),
    # five flash calls 100/20, o1-o3 100/10, o4 50/0, o8 and o11 100/1 (partial); o5-o7, o9, o10 errors
    "ops": row(16, 1050, 0, 0, 132, 0, 5),
    traffic.SQL_NAME: row(2, 3100, 0, 0, 20, 0, 0),
    traffic.HTML_NAME: row(1, 100, 0, 0, 10, 0, 0),
    traffic.MARKUP_NAME: row(1, 100, 0, 0, 10, 0, 0),
}


def test_usage_by_team_matches_hand_sums(store):
    rows = report(store, "usage", "--by", "team")
    assert [r["team"] for r in rows] == sorted(BY_TEAM)
    for r in rows:
        assert {k: r[k] for k in METRICS} == BY_TEAM[r["team"]], r["team"]
        # uncached = input - read - write, per row
        assert r["uncached_input_tokens"] == r["input_tokens"] - r["cache_read_tokens"] - r["cache_write_tokens"]
    # JSON keys: the --by column, then metrics (SPEC §3)
    assert list(rows[0])[0] == "team" and set(METRICS) <= set(rows[0])


def test_usage_default_is_by_team(store):
    assert report(store, "usage") == report(store, "usage", "--by", "team")


def test_since_until_window(store):
    later = by_key(report(store, "usage", "--since", "2026-11-03"), "team")
    assert set(later) == {"search", "support"}
    assert {k: later["search"][k] for k in METRICS} == row(1, 5100, 0, 5000, 50, 0, 0)  # s4
    assert {k: later["support"][k] for k in METRICS} == row(2, 262000, 8000, 0, 2500, 1200, 0)  # p2, p3

    earlier = by_key(report(store, "usage", "--until", "2026-11-03"), "team")
    assert {k: earlier["search"][k] for k in METRICS} == row(3, 2200, 600, 0, 500, 128, 1)  # s1-s3
    assert {k: earlier["support"][k] for k in METRICS} == row(3, 3500, 1024, 0, 350, 0, 0)  # p1, p4, p5
    assert sum(r["requests"] for r in earlier.values()) + 3 == 60

    # since is inclusive, until exclusive; an offset is honoured (10:00Z = 11:00+01:00)
    window = by_key(
        report(store, "usage", "--since", "2026-11-02T11:00:00+01:00", "--until", "2026-11-02T11:00:00Z"), "team"
    )
    assert set(window) == {"search"} and window["search"]["requests"] == 1  # s2 at 10:00
    assert window["search"]["reasoning_tokens"] == 128
    assert report(store, "usage", "--since", "2030-01-01") == []


def test_by_day(store, known):
    rows = by_key(report(store, "usage", "--by", "day"), "day")
    assert list(rows) == ["2026-11-02", "2026-11-03"]
    assert {k: rows["2026-11-03"][k] for k in METRICS} == row(3, 267100, 8000, 5000, 2550, 1200, 0)
    assert rows["2026-11-02"]["requests"] == len(known) - 3


def _sums(known: dict[str, traffic.Known], group: Callable[[traffic.Known], str]) -> dict[str, dict[str, int]]:
    """Per-group sums of the hand-written canonical usage of every exchange."""
    sums: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(METRICS, 0))
    for k in known.values():
        s = sums[group(k)]
        s["requests"] += 1
        if k.usage is None:
            s["usage_missing"] += 1
            continue
        s["input_tokens"] += k.usage["input_tokens"]
        s["cache_read_tokens"] += k.usage["cache_read_tokens"]
        s["cache_write_tokens"] += k.usage["cache_write_tokens"]
        s["output_tokens"] += k.usage["output_tokens"]
        s["reasoning_tokens"] += k.usage.get("reasoning_tokens", 0)
    return dict(sums)


def test_team_table_and_per_exchange_sums_agree(known):
    """The hand-added team table above agrees with the per-exchange hand numbers."""
    assert _sums(known, lambda k: k.rec.team) == BY_TEAM


def test_by_model_provider_protocol(store, known):
    models = by_key(report(store, "usage", "--by", "model"), "model")
    expected = _sums(known, lambda k: k.rec.exchange.model)
    assert {m: {k: r[k] for k in METRICS} for m, r in models.items()} == expected
    assert models[traffic.SONNET]["requests"] == 36

    providers = by_key(report(store, "usage", "--by", "provider"), "provider")
    assert set(providers) == {"anthropic", "openai", "google", "llm.internal.example"}
    expected = _sums(known, lambda k: k.rec.exchange.provider)
    assert {p: {k: r[k] for k in METRICS} for p, r in providers.items()} == expected

    protocols = by_key(report(store, "usage", "--by", "protocol"), "protocol")
    expected = _sums(known, lambda k: k.rec.exchange.protocol)
    assert {p: {k: r[k] for k in METRICS} for p, r in protocols.items()} == expected
    assert protocols["openai.responses"]["requests"] == 1


def test_by_key_and_two_dimensions(store):
    def label(key: str) -> str:
        return f"…{key[-4:]} {FINGERPRINTS.fingerprint(key)[:8]}"

    rows = by_key(report(store, "usage", "--by", "team,key"), "team", "key")
    anthropic_key, openai_key = label(traffic.KEY_SEARCH_ANTHROPIC), label(traffic.KEY_SEARCH_OPENAI)
    assert {k for k in rows if k[0] == "search"} == {("search", anthropic_key), ("search", openai_key)}
    assert {k: rows["search", anthropic_key][k] for k in METRICS} == row(2, 6300, 0, 5000, 350, 0, 0)  # s1, s4
    assert {k: rows["search", openai_key][k] for k in METRICS} == row(2, 1000, 600, 0, 200, 128, 1)  # s2, s3
    assert rows["support", "(no key)"]["requests"] == 5
    assert list(rows["search", anthropic_key])[:2] == ["team", "key"]
