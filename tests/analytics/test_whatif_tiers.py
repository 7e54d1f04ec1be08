"""`report whatif` worked by hand on a store of five exchanges: the served tier (flex,
priority) picks the other model's price variant, an input past a tier's start prices
every token of that one exchange at the tier's rate, not its neighbours', and an
exchange from an unverified host is priced at no model."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal

import genai_prices
import pytest
from genai_prices import Usage

from tests.analytics import wire as w
from tests.analytics.conftest import BACKENDS, blank_database, by_key, fill, report

AT = datetime(2026, 11, 20, 12, tzinfo=UTC)


def chat(tier: str | None, n: int):
    body = w.chat_response("gpt-4o-2024-08-06", w.chat_usage(1000, 100, cached=200), cid=f"chatcmpl-tier-{n}")
    if tier is not None:
        body["service_tier"] = tier
    rec = w.record(w.CHAT, w.chat_request("gpt-4o", f"question {n}"), body, at=AT, team="tiers")
    assert rec.exchange.service_tier == tier
    return rec


def unverified():
    rec = chat(None, 4)
    rec.host, rec.price_reason = "llm.example.net", "unverified_host"
    return rec


def long_gemini():
    return w.record(
        w.gemini("gemini-2.5-pro"),
        w.gemini_request("a long document"),
        w.gemini_response("gemini-2.5-pro", prompt=250_000, candidates=1000),
        at=AT,
        team="tiers",
    )


@pytest.fixture(scope="module", params=BACKENDS)
def small(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp(f"tiers-{request.param}")
    with blank_database(request.param, folder) as url:
        fill(url, [chat(None, 1), chat("flex", 2), chat("priority", 3), long_gemini(), unverified()], folder / "spool")
        yield url


def test_the_served_tier_picks_the_price_variant(small):
    rows = by_key(report(small, "whatif", "--model", "gpt-5", "--provider", "openai", "--by", "tier"), "tier")
    # gpt-5 per MTok: standard $1.25 input, $0.125 cache read, $10 output; flex half;
    # priority double. 1000 input of which 200 read from cache, 100 output (µ$):
    # the gpt-4o one, the long Gemini one, and the unverified one (in no what-if)
    assert rows["(not stated)"]["requests"] == 3 and rows["(not stated)"]["unverified_host"] == 1
    assert rows["flex"]["whatif_cost_usd"] == Decimal("0.0010125")  # 800×0.625 + 200×0.0625 + 100×5
    assert rows["priority"]["whatif_cost_usd"] == Decimal("0.00405")  # 800×2.5 + 200×0.25 + 100×20
    # 800×1.25 + 200×0.125 + 100×10 = 2025, and the Gemini one 250,000×1.25 + 1000×10
    assert rows["(not stated)"]["whatif_cost_usd"] == Decimal("0.002025") + Decimal("0.3225")
    for tier, context in (("flex", {"service_tier": "flex"}), ("priority", {"service_tier": "priority"})):
        usage = Usage(input_tokens=1000, cache_read_tokens=200, output_tokens=100)
        price = genai_prices.calc_price(usage, "gpt-5", provider_id="openai", price_context=context)
        assert rows[tier]["whatif_cost_usd"] == price.total_price


def test_a_tier_start_prices_only_the_exchange_past_it(small):
    rows = by_key(report(small, "whatif", "--model", "gemini-2.5-pro", "--by", "model"), "model")
    # past 200k input: every token at the long-context rate, $2.50 input and $15 output
    assert rows["gemini-2.5-pro"]["whatif_cost_usd"] == Decimal("0.64")  # 250,000×2.5 + 1000×15
    assert rows["gemini-2.5-pro"]["ratio"] == 1 and rows["gemini-2.5-pro"]["difference_usd"] == 0
    # the three short ones stay at $1.25 input, $0.125 cache read, $10 output (no Gemini
    # variant for flex or priority in genai-prices: standard rates)
    short = Usage(input_tokens=1000, cache_read_tokens=200, output_tokens=100)
    each = genai_prices.calc_price(short, "gemini-2.5-pro", provider_id="google").total_price
    assert each == Decimal("0.002025")
    assert rows["gpt-4o-2024-08-06"]["whatif_cost_usd"] == 3 * each  # not the unverified one
    assert rows["gpt-4o-2024-08-06"]["requests"] == 4 and rows["gpt-4o-2024-08-06"]["unpriced"] == 1
    one = by_key(report(small, "whatif", "--model", "gemini-2.5-pro"), "whatif_model")["google/gemini-2.5-pro"]
    assert one["whatif_cost_usd"] == Decimal("0.64") + 3 * each
    assert one["requests"] == 5 and one["input_tokens"] == 254_000 and one["unverified_host"] == 1


def test_a_per_request_price_counts_once_per_exchange(small, tmp_path):
    prices = tmp_path / "prices.toml"
    prices.write_text('[[price]]\nmodel = "per-call-x"\ninput_mtok = 1\noutput_mtok = 2\nrequests_kcount = 5\n')
    row = report(small, "whatif", "--model", "per-call-x", "--prices", str(prices))[0]
    # tokens (µ$): 3 × (1000×1 + 100×2) + 250,000×1 + 1000×2 = 255,600; and $5 per 1,000
    # requests for the four exchanges with usage (the unverified one has no what-if)
    assert row["whatif_cost_usd"] == Decimal("0.2556") + 4 * Decimal("0.005")
