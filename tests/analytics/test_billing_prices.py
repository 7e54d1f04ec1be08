"""Billing-grade prices (SPEC §5, issue 14), worked against genai-prices' own top-level
`calc_price` on the same usage and context, to the pico-dollar: what was served (tier,
speed, region), per-use fees, per-modality tokens, long-context tiers, and an advisor's
sub-usage at its own model's price.

Each case is a stored row as `storage/rows.py` makes it from a canonical exchange (hand
built), and again from the billing fixtures (`tests/fixtures/billing/`) decoded by the
real translators, priced and compared with `calc_price` on the usage genai-prices' own
extractor reads from the same body (where it can read it)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import genai_prices
import pytest
from genai_prices import Usage

from llmtap.analytics.price_file import PriceText
from llmtap.analytics.pricing import PICO, Cost, Pricer
from llmtap.protocols import decode_exchange
from llmtap.protocols.canonical import Exchange
from llmtap.protocols.canonical import Usage as Canonical
from llmtap.protocols.providers import provider_of
from llmtap.storage.record import Recorded
from llmtap.storage.rows import rows_for

AT = datetime(2026, 11, 20, 10, 30, tzinfo=UTC)  # flex and priority variants are active
FIXTURES = Path(__file__).parent.parent / "fixtures" / "billing"
HOSTS = {"anthropic": "api.anthropic.com", "openai": "api.openai.com", "google": "generativelanguage.googleapis.com"}


def stored(ex: Exchange, at: datetime = AT) -> dict[str, Any]:
    """The exchanges row the writer would store for this exchange."""
    record = Recorded(exchange=ex, started_at=at, host=HOSTS.get(ex.provider or ""), path="/")
    return rows_for(record).exchanges[0]


def exchange(protocol: str, provider: str, model: str, usage: Canonical, **served: Any) -> Exchange:
    return Exchange(protocol=protocol, provider=provider, model=model, status=200, complete=True, usage=usage, **served)


def pico(usage: Usage, model: str, provider: str, context: dict[str, str] | None = None, at: datetime = AT) -> Decimal:
    """genai-prices' own price of the usage, in pico-dollars."""
    calc = genai_prices.calc_price(
        usage, model, provider_id=provider, genai_request_timestamp=at, price_context=context
    )
    return calc.total_price * PICO


def priced(row: dict[str, Any], pricer: Pricer | None = None) -> Cost:
    cost = (pricer or Pricer()).price_row(row)
    assert cost.status == "priced", cost
    parts = (cost.input, cost.cache_read, cost.cache_write, cost.output, cost.fee)
    assert sum(p or 0 for p in parts) == cost.total  # the parts always sum to the total
    assert cost.detail is not None
    assert sum(p["total"] for p in cost.detail["parts"]) == cost.total
    return cost


def test_flex_responses_call_is_priced_at_the_flex_rate():
    usage = Canonical(input_tokens=12_000, cache_read_tokens=4_000, output_tokens=3_000, reasoning_tokens=2_000)
    row = stored(exchange("openai.responses", "openai", "o3-2025-04-16", usage, service_tier="flex"))
    genai = Usage(input_tokens=12_000, cache_read_tokens=4_000, output_tokens=3_000, output_reasoning_tokens=2_000)
    expected = pico(genai, "o3-2025-04-16", "openai", {"service_tier": "flex"})
    assert expected * 2 == pico(genai, "o3-2025-04-16", "openai")  # flex is half: the context matters
    cost = priced(row)
    assert cost.total == expected
    assert cost.detail == {
        "context": {"service_tier": "flex"},
        "parts": [
            {
                "what": "tokens",
                "model": "o3",
                "input": cost.input,
                "cache_read": cost.cache_read,
                "cache_write": 0,
                "output": cost.output,
                "total": cost.total,
            }
        ],
    }


@pytest.mark.parametrize("tier", ["priority", "default", "auto", None])
def test_responses_call_at_each_openai_tier(tier: str | None):
    usage = Canonical(input_tokens=9_120, cache_read_tokens=2_048, output_tokens=412)
    row = stored(exchange("openai.responses", "openai", "gpt-5.5", usage, service_tier=tier))
    genai = Usage(input_tokens=9_120, cache_read_tokens=2_048, output_tokens=412)
    context = {"service_tier": "priority"} if tier == "priority" else None
    assert priced(row).total == pico(genai, "gpt-5.5", "openai", context)
    if tier == "priority":
        assert pico(genai, "gpt-5.5", "openai", context) > pico(genai, "gpt-5.5", "openai")


def test_anthropic_call_with_ten_web_searches_bills_the_fee():
    usage = Canonical(input_tokens=31_874, output_tokens=1_650)
    row = stored(
        exchange("anthropic.messages", "anthropic", "claude-sonnet-4-6", usage, server_tool_uses={"web_search": 10})
    )
    expected = pico(Usage(input_tokens=31_874, output_tokens=1_650, web_searches=10), "claude-sonnet-4-6", "anthropic")
    cost = priced(row)
    assert cost.total == expected
    assert cost.fee == 10 * 10 * 10**9  # $10 per 1,000 searches: 10 searches are $0.10
    fee = cost.detail["parts"][-1]
    assert fee == {
        "what": "fee",
        "kind": "web_search",
        "count": 10,
        "usd_per_1k": "10",
        "total": cost.fee,
        "source": "genai-prices",
    }


def test_compaction_turn_is_billed_on_the_iterations_sum():
    # SPEC §2: the top level says 682 in / 1,320 out; the iterations 60,385 + 682 and 592 + 1,320
    usage = Canonical(input_tokens=60_385 + 682, output_tokens=592 + 1_320)
    row = stored(exchange("anthropic.messages", "anthropic", "claude-opus-4-6", usage))
    expected = pico(Usage(input_tokens=61_067, output_tokens=1_912), "claude-opus-4-6", "anthropic")
    assert priced(row).total == expected
    top_level = pico(Usage(input_tokens=682, output_tokens=1_320), "claude-opus-4-6", "anthropic")
    assert expected > 9 * top_level  # what the top-level counts alone would have billed


def test_advisor_turn_adds_the_advisor_model_at_its_own_price():
    advisor = {
        "kind": "advisor",
        "model": "claude-opus-4-6",
        "input_tokens": 19_708,
        "cache_read_tokens": 18_420,
        "cache_write_tokens": 0,
        "output_tokens": 412,
    }
    usage = Canonical(
        input_tokens=38_586,
        cache_read_tokens=18_420,
        cache_write_tokens=18_420,
        output_tokens=860,
        sub_usages=[advisor],
    )
    row = stored(exchange("anthropic.messages", "anthropic", "claude-sonnet-4-6", usage))
    executor = Usage(input_tokens=38_586, cache_read_tokens=18_420, cache_write_tokens=18_420, output_tokens=860)
    adviser = Usage(input_tokens=19_708, cache_read_tokens=18_420, output_tokens=412)
    expected_executor = pico(executor, "claude-sonnet-4-6", "anthropic")
    expected_advisor = pico(adviser, "claude-opus-4-6", "anthropic")
    cost = priced(row)
    assert cost.total == expected_executor + expected_advisor
    tokens, sub = cost.detail["parts"]
    assert (tokens["what"], tokens["model"], tokens["total"]) == ("tokens", "claude-sonnet-4-6", expected_executor)
    assert (sub["what"], sub["model"], sub["total"]) == ("advisor", "claude-opus-4-6", expected_advisor)
    assert cost.output == tokens["output"] + sub["output"]  # added into the row's parts


def test_advisor_of_a_model_without_a_price_leaves_the_row_unpriced():
    sub = {"kind": "advisor", "model": "claude-unreleased-9", "input_tokens": 10, "output_tokens": 5}
    usage = Canonical(input_tokens=1_000, output_tokens=100, sub_usages=[sub])
    cost = Pricer().price_row(stored(exchange("anthropic.messages", "anthropic", "claude-sonnet-4-6", usage)))
    assert (cost.status, cost.reason, cost.total) == ("unpriced", "unknown_model", None)
    assert "claude-unreleased-9" in cost.detail["unpriced"]


def test_gemini_grounded_call_bills_its_search():
    usage = Canonical(input_tokens=215, output_tokens=508, reasoning_tokens=96)
    row = stored(exchange("gemini.generate", "google", "gemini-2.5-flash", usage, server_tool_uses={"web_search": 1}))
    genai = Usage(input_tokens=215, output_tokens=508, output_reasoning_tokens=96, web_searches=1)
    cost = priced(row)
    assert cost.total == pico(genai, "gemini-2.5-flash", "google")
    assert cost.fee == 35 * 10**9  # $35 per 1,000 grounded prompts


def test_long_context_call_is_priced_in_its_tier():
    usage = Canonical(input_tokens=250_000, cache_read_tokens=100_000, output_tokens=2_000)
    row = stored(exchange("gemini.generate", "google", "gemini-2.5-pro", usage))
    genai = Usage(input_tokens=250_000, cache_read_tokens=100_000, output_tokens=2_000)
    below = Usage(input_tokens=199_999, cache_read_tokens=100_000, output_tokens=2_000)
    cost = priced(row)
    assert cost.total == pico(genai, "gemini-2.5-pro", "google")
    # past 200k the whole call is dearer per token than just below it
    assert cost.total / 250_000 > pico(below, "gemini-2.5-pro", "google") / 199_999


def test_audio_tokens_at_the_audio_rate():
    modalities = {"input_audio_tokens": 12_864, "cache_audio_read_tokens": 6_072}
    usage = Canonical(input_tokens=214_380, cache_read_tokens=131_072, output_tokens=3_515, modalities=modalities)
    row = stored(exchange("gemini.generate", "google", "gemini-2.5-flash", usage))
    genai = Usage(input_tokens=214_380, cache_read_tokens=131_072, output_tokens=3_515, **modalities)
    cost = priced(row)
    assert cost.total == pico(genai, "gemini-2.5-flash", "google")
    text_only = pico(
        Usage(input_tokens=214_380, cache_read_tokens=131_072, output_tokens=3_515), "gemini-2.5-flash", "google"
    )
    assert cost.total != text_only  # the audio rate is not the text rate


@pytest.mark.parametrize("tier", ["flex", "priority", None])
@pytest.mark.parametrize("input_tokens", [100_000, 300_000])
def test_tiers_and_context_combine(tier: str | None, input_tokens: int):
    """gpt-5.5's flex prices have their own long-context tier (past 272k), its priority
    prices none: the tier is the one of the prices the context selects."""
    usage = Canonical(input_tokens=input_tokens, cache_read_tokens=50_000, output_tokens=4_000)
    row = stored(exchange("openai.responses", "openai", "gpt-5.5", usage, service_tier=tier))
    genai = Usage(input_tokens=input_tokens, cache_read_tokens=50_000, output_tokens=4_000)
    context = {"service_tier": tier} if tier else None
    assert priced(row).total == pico(genai, "gpt-5.5", "openai", context)


GEO_FILE = """
[[price]]
provider = "google"
model = "acme-omni-1"
input_mtok = 1
cache_read_mtok = 0.25
input_audio_mtok = 4
cache_audio_read_mtok = 1
output_mtok = 8

[[geo]]
provider = "google"
model = "acme-omni-*"
geo = "eu"
multiplier = 1.25

[[geo]]
provider = "anthropic"
model = "claude-sonnet-4-5*"
geo = "us"
multiplier = 1.05
"""


def test_price_file_modalities_and_region_multiplier_combine():
    """A price file's model with audio prices, served in a region its [[geo]] prices at
    1.25×: every token part, audio included, is 1.25× what its own prices say."""
    from genai_prices import types

    modalities = {"input_audio_tokens": 3_000, "cache_audio_read_tokens": 1_000}
    usage = Canonical(input_tokens=10_000, cache_read_tokens=2_000, output_tokens=500, modalities=modalities)
    row = stored(exchange("gemini.generate", "google", "acme-omni-1", usage, inference_geo="eu"))
    pricer = Pricer(PriceText("omni.toml", GEO_FILE))
    price = types.ModelPrice(
        input_mtok=Decimal(1),
        cache_read_mtok=Decimal("0.25"),
        input_audio_mtok=Decimal(4),
        cache_audio_read_mtok=Decimal(1),
        output_mtok=Decimal(8),
    )
    genai = Usage(input_tokens=10_000, cache_read_tokens=2_000, output_tokens=500, **modalities)
    # by hand: text 6,000 × $1 + 1,000 × $0.25, audio 2,000 × $4 + 1,000 × $1, output 500 × $8
    assert price.calc_price(genai)["total_price"] == Decimal("0.01925")
    cost = priced(row, pricer)
    assert cost.total == price.calc_price(genai)["total_price"] * PICO * Decimal("1.25")
    assert cost.detail["multiplier"] == "1.25" and cost.version == pricer.file_version
    # the file's [[geo]] also replaces the built-in table for the models it names
    anthropic = Canonical(input_tokens=1_000, output_tokens=100)
    sonnet = stored(exchange("anthropic.messages", "anthropic", "claude-sonnet-4-5", anthropic, inference_geo="us"))
    expected = pico(Usage(input_tokens=1_000, output_tokens=100), "claude-sonnet-4-5", "anthropic")
    assert priced(sonnet, pricer).total == expected * Decimal("1.05")
    assert priced(sonnet).total == expected  # built in: Sonnet 4.5 keeps the standard rate


def test_fast_anthropic_call_at_the_fast_rate():
    usage = Canonical(input_tokens=7_306, cache_read_tokens=4_096, output_tokens=540)
    row = stored(exchange("anthropic.messages", "anthropic", "claude-opus-4-8", usage, speed="fast"))
    genai = Usage(input_tokens=7_306, cache_read_tokens=4_096, output_tokens=540)
    expected = pico(genai, "claude-opus-4-8", "anthropic", {"speed": "fast"})
    assert expected > pico(genai, "claude-opus-4-8", "anthropic")
    cost = priced(row)
    assert cost.total == expected and cost.detail["context"] == {"speed": "fast"}


def test_us_only_inference_is_a_tenth_dearer_on_every_token():
    usage = Canonical(input_tokens=7_306, cache_read_tokens=4_096, cache_write_tokens=100, output_tokens=540)
    genai = Usage(input_tokens=7_306, cache_read_tokens=4_096, cache_write_tokens=100, output_tokens=540)
    row = stored(exchange("anthropic.messages", "anthropic", "claude-opus-4-6", usage, inference_geo="us"))
    cost = priced(row)
    assert cost.total == pico(genai, "claude-opus-4-6", "anthropic") * Decimal("1.1")
    assert cost.detail["multiplier"] == "1.1" and cost.detail["geo"] == "us"
    # global inference, and a model from before Opus 4.6, are billed at the standard rate
    row = stored(exchange("anthropic.messages", "anthropic", "claude-opus-4-6", usage, inference_geo="global"))
    assert priced(row).total == pico(genai, "claude-opus-4-6", "anthropic")
    row = stored(exchange("anthropic.messages", "anthropic", "claude-sonnet-4-5", usage, inference_geo="us"))
    assert priced(row).total == pico(genai, "claude-sonnet-4-5", "anthropic")


def test_anthropic_priority_tier_without_a_price_says_standard_rates():
    usage = Canonical(input_tokens=1_000, output_tokens=100)
    row = stored(exchange("anthropic.messages", "anthropic", "claude-opus-4-8", usage, service_tier="priority"))
    cost = priced(row)
    assert cost.total == pico(Usage(input_tokens=1_000, output_tokens=100), "claude-opus-4-8", "anthropic")
    assert "service_tier=priority" in cost.detail["note"] and "standard" in cost.detail["note"]
    standard = stored(exchange("anthropic.messages", "anthropic", "claude-opus-4-8", usage, service_tier="standard"))
    assert "note" not in priced(standard).detail


def test_tier_context_and_period_do_not_share_rates():
    """The rates cache keys on the model, the context and the price period: a flex call,
    a standard call and a call before flex prices existed each get their own rates."""
    usage = Canonical(input_tokens=10_000, output_tokens=1_000)
    genai = Usage(input_tokens=10_000, output_tokens=1_000)
    pricer = Pricer()
    early = datetime(2026, 7, 1, tzinfo=UTC)  # o3's flex variant starts 2026-10-12
    cases = [("flex", AT), (None, AT), ("flex", early), ("priority", AT), ("flex", AT)]
    for tier, at in cases:
        row = stored(exchange("openai.responses", "openai", "o3", usage, service_tier=tier), at)
        context = {"service_tier": tier} if tier else None
        assert priced(row, pricer).total == pico(genai, "o3", "openai", context, at), (tier, at)


FEE_FILE = """
[[fee]]
provider = "anthropic"
kind = "web_fetch"
usd_per_1k = 2.5

[[fee]]
model = "claude-sonnet-4-6"
kind = "web_search"
usd_per_1k = 8
"""


def test_price_file_fees_add_a_kind_and_override_genai_prices():
    usage = Canonical(input_tokens=1_000, output_tokens=100)
    uses = {"web_search": 4, "web_fetch": 3}
    row = stored(exchange("anthropic.messages", "anthropic", "claude-sonnet-4-6", usage, server_tool_uses=uses))
    without = priced(row)
    assert without.fee == 4 * 10 * 10**9  # genai-prices' $10/1k; web_fetch has no fee
    fetch = next(p for p in without.detail["parts"] if p.get("kind") == "web_fetch")
    assert (fetch["total"], fetch["source"]) == (0, None)
    pricer = Pricer(PriceText("fees.toml", FEE_FILE))
    with_file = priced(row, pricer)
    assert with_file.fee == 4 * 8 * 10**9 + 3 * Decimal("2.5") * 10**9
    sources = {p["kind"]: p["source"] for p in with_file.detail["parts"] if p["what"] == "fee"}
    assert sources == {"web_search": "price file", "web_fetch": "price file"}
    assert with_file.version == pricer.file_version and "fees.toml" in with_file.version


# -- the billing fixtures through the real decoder ---------------------------------------

_FLAVORS = {"anthropic.messages": "default", "openai.chat": "chat", "openai.responses": "responses"}
_FLAVORS["gemini.generate"] = "default"


def _fixture_row(folder: Path) -> tuple[dict[str, Any], dict[str, Any], bytes, Exchange]:
    case = json.loads((folder / "case.json").read_text())
    body = (folder / "response.body").read_bytes()
    request = folder / "request.json"
    ex = decode_exchange(
        case["protocol"],
        response=body,
        request=request.read_bytes() if request.is_file() else None,
        path=case["path"],
        host=case["host"],
        status=case["status"],
        content_type=case["content_type"],
        provider=provider_of(case["protocol"], case["host"], case["path"]),  # as it is stored
    )
    record = Recorded(exchange=ex, started_at=AT, host=case["host"], path=case["path"])
    return case, rows_for(record).exchanges[0], body, ex


def _genai_usage(case: dict[str, Any], body: bytes, ex: Exchange) -> Usage:
    """The usage genai-prices' own extractor reads from a JSON body; for a stream (which
    it cannot read) or a compaction turn (whose top level leaves compaction out, SPEC §2)
    the canonical usage; plus the searches its extractor does not count."""
    assert ex.usage is not None
    usage = None
    compaction = "compaction" in case["id"]
    if not case["streamed"] and not compaction:
        provider = ex.provider or ""
        usage = genai_prices.extract_usage(
            json.loads(body), provider_id=provider, api_flavor=_FLAVORS[case["protocol"]]
        ).usage
    if usage is None:
        u = ex.usage
        values = {
            "input_tokens": u.input_tokens,
            "cache_read_tokens": u.cache_read_tokens,
            "cache_write_tokens": u.cache_write_tokens,
            "output_tokens": u.output_tokens,
            "output_reasoning_tokens": u.reasoning_tokens,
            **u.modalities,
        }
        usage = Usage(**{k: v for k, v in values.items() if v})
    searches = ex.server_tool_uses.get("web_search")
    if searches and not usage.reported_value("web_searches"):
        usage.web_searches = searches
    return usage


def _context(ex: Exchange) -> dict[str, str] | None:
    context = {}
    if ex.service_tier in ("flex", "priority"):
        context["service_tier"] = ex.service_tier
    if ex.speed == "fast":
        context["speed"] = "fast"
    return context or None


@pytest.mark.parametrize("folder", sorted(FIXTURES.iterdir()) if FIXTURES.is_dir() else [], ids=lambda p: p.name)
def test_billing_fixture_priced_as_genai_prices_prices_it(folder: Path):
    case, row, body, ex = _fixture_row(folder)
    assert ex.model and ex.provider and ex.usage is not None
    expected = pico(_genai_usage(case, body, ex), ex.model, ex.provider, _context(ex))
    for sub in ex.usage.sub_usages:  # each model calc_price'd on its own, summed
        sub_usage = Usage(
            input_tokens=sub["input_tokens"],
            cache_read_tokens=sub["cache_read_tokens"],
            cache_write_tokens=sub["cache_write_tokens"],
            output_tokens=sub["output_tokens"],
        )
        expected += pico(sub_usage, sub["model"], ex.provider, _context(ex))
    if ex.inference_geo == "us":  # genai-prices has no region context: Anthropic's 1.1×
        expected *= Decimal("1.1")
    cost = priced(row)
    assert cost.total == expected, case["id"]
    assert cost.fee == sum(p["total"] for p in cost.detail["parts"] if p["what"] == "fee")


def test_a_request_of_auto_is_priced_at_the_tier_that_served_it():
    """`auto` names no price: the stored tier is what the response says served it."""
    _, row, _, ex = _fixture_row(FIXTURES / "openai_responses_auto_priority_stream")
    assert row["service_tier"] == "priority"
    usage = Usage(input_tokens=6_230, output_tokens=980, output_reasoning_tokens=896)
    standard = pico(usage, "gpt-5.5", "openai")
    assert priced(row).total == pico(usage, "gpt-5.5", "openai", {"service_tier": "priority"}) > standard
    _, default_row, _, _ = _fixture_row(FIXTURES / "openai_responses_auto_default")
    assert default_row["service_tier"] == "default"
    assert priced(default_row).detail["context"] == {}


def test_every_billing_case_is_here():
    names = {p.name for p in FIXTURES.iterdir()} if FIXTURES.is_dir() else set()
    wanted = {"openai_responses_flex", "anthropic_web_search_10", "anthropic_compaction_stream", "anthropic_advisor"}
    assert wanted <= names
