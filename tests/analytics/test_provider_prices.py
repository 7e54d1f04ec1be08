"""Exchanges of the providers genai-prices knows beside the model makers (OpenRouter,
Mistral, Groq, DeepSeek, xAI) are priced at that provider's own prices, looked up by the
provider id their host names (SPEC §5); a `[[providers]]` entry's traffic is priced from
its own price file and nothing else."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import genai_prices
import pytest
from genai_prices import Usage

from llmtap.analytics.price_file import PriceFileError, PriceText, ProviderPrices
from llmtap.analytics.pricing import FILE_MARK, PICO, UNKNOWN_MODEL, Pricer
from llmtap.protocols import decode_exchange
from llmtap.protocols.providers import provider_of
from llmtap.storage.record import Recorded
from llmtap.storage.rows import rows_for

AT = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
PATH = "/v1/chat/completions"


def chat_row(host: str, model: str, *, prompt: int = 1_200, cached: int = 0, completion: int = 300) -> dict[str, Any]:
    """The row the writer stores for a Chat exchange to `host`, named as the proxy names it."""
    usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion}
    if cached:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    body = {
        "id": "x",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": usage,
    }
    request = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    exchange = decode_exchange(
        "openai.chat",
        response=json.dumps(body).encode(),
        request=json.dumps(request).encode(),
        path=PATH,
        host=host,
        status=200,
        content_type="application/json",
        provider=provider_of("openai.chat", host, PATH),
    )
    return rows_for(Recorded(exchange=exchange, started_at=AT, host=host, path=PATH)).exchanges[0]


def genai_pico(provider: str, model: str, usage: Usage) -> Decimal:
    return genai_prices.calc_price(usage, model, provider_id=provider, genai_request_timestamp=AT).total_price * PICO


PROVIDERS = [
    ("openrouter.ai", "openrouter", "anthropic/claude-sonnet-4", "anthropic/claude-sonnet-4"),
    ("api.mistral.ai", "mistral", "mistral-large-latest", "mistral-large"),
    ("api.groq.com", "groq", "llama-3.3-70b-versatile", "llama-3.3-70b-versatile"),
    ("api.deepseek.com", "deepseek", "deepseek-chat", "deepseek-chat"),
    ("api.x.ai", "x-ai", "grok-3", "grok-3"),
]


@pytest.mark.parametrize(("host", "provider", "model", "listed"), PROVIDERS)
def test_priced_at_the_providers_own_prices(host: str, provider: str, model: str, listed: str) -> None:
    row = chat_row(host, model, cached=1_024 if provider in ("openrouter", "deepseek") else 0)
    assert row["provider"] == provider and row["price_reason"] is None  # named by its id, and billable
    cost = Pricer().price_row(row)
    assert cost.status == "priced", cost
    assert cost.model == listed  # the provider's own listing, not the maker's
    cached = row["usage_cache_read_input_tokens"] or 0
    usage = Usage(input_tokens=1_200, cache_read_tokens=cached or None, output_tokens=300)
    assert cost.total == genai_pico(provider, model, usage)


def test_openrouter_is_not_priced_as_the_models_maker() -> None:
    cost = Pricer().price_row(chat_row("openrouter.ai", "anthropic/claude-sonnet-4"))
    assert cost.model == "anthropic/claude-sonnet-4"
    maker = genai_prices.calc_price(
        Usage(input_tokens=1_200, output_tokens=300), "claude-sonnet-4", genai_request_timestamp=AT
    )
    assert maker.provider.id == "anthropic" and maker.model.id != cost.model


def test_a_model_the_provider_does_not_list_is_unpriced() -> None:
    cost = Pricer().price_row(chat_row("api.groq.com", "no-such-model-1"))
    assert (cost.status, cost.reason) == ("unpriced", UNKNOWN_MODEL)


def test_rows_stored_under_a_hosts_name_are_priced_as_the_provider_it_names() -> None:
    """A row recorded before this naming (`openrouter.ai`) and not reprocessed yet."""
    row = chat_row("openrouter.ai", "anthropic/claude-sonnet-4")
    old = {**row, "provider": "openrouter.ai"}
    assert Pricer().price_row(old).total == Pricer().price_row(row).total
    lookalike = {**row, "provider": "openrouter.ai.example"}  # a maker's list price, as any compatible host
    assert Pricer().price_row(lookalike).model != "anthropic/claude-sonnet-4"


# -- [[providers]] price files -------------------------------------------------------------------

ACME = PriceText(
    "acme.toml",
    """
[[price]]
model = "llama-3.3-70b"
input_mtok = 0.1
output_mtok = 0.4

[[fee]]
kind = "web_search"
usd_per_1k = 2
""",
)


def acme_row(model: str) -> dict[str, Any]:
    return {**chat_row("openrouter.ai", model), "provider": "acme"}


def test_a_configured_providers_traffic_is_priced_from_its_own_file() -> None:
    pricer = Pricer(None, [ProviderPrices("acme", ACME)])
    cost = pricer.price_row(acme_row("llama-3.3-70b"))
    assert cost.status == "priced"
    assert cost.total == 1_200 * 100_000 + 300 * 400_000  # $0.1 and $0.4 per million, in pico-dollars
    assert cost.version is not None and FILE_MARK in cost.version and "acme" in cost.version
    # a model its file does not name: unpriced, never at a maker's or anyone else's rate
    assert pricer.price_row(acme_row("gpt-4o")).status == "unpriced"
    # the file is acme's only: OpenRouter's traffic of the same model is OpenRouter's
    other = pricer.price_row(chat_row("openrouter.ai", "anthropic/claude-sonnet-4"))
    assert other.version == pricer.version and other.model == "anthropic/claude-sonnet-4"


def test_a_configured_providers_file_comes_before_the_main_file() -> None:
    main = PriceText("prices.toml", '[[price]]\nmodel = "llama-3.3-70b"\ninput_mtok = 9\noutput_mtok = 9\n')
    pricer = Pricer(main, [ProviderPrices("acme", ACME)])
    assert pricer.price_row(acme_row("llama-3.3-70b")).total == 1_200 * 100_000 + 300 * 400_000
    groq = {**chat_row("api.groq.com", "llama-3.3-70b"), "model": "llama-3.3-70b"}
    assert pricer.price_row(groq).total == 1_500 * 9_000_000  # the main file, for everyone else


def test_a_configured_providers_file_changes_the_version() -> None:
    first = Pricer(None, [ProviderPrices("acme", ACME)])
    changed = Pricer(None, [ProviderPrices("acme", PriceText("acme.toml", ACME.content.replace("0.4", "0.5")))])
    assert first.file_version != changed.file_version
    assert any(n.provider == "acme" and n.pattern == "llama-3.3-70b" for n in first.namings)  # reprice finds its rows


def test_a_configured_providers_file_names_no_other_provider() -> None:
    text = PriceText("acme.toml", '[[price]]\nprovider = "openai"\nmodel = "gpt-4o"\ninput_mtok = 0\noutput_mtok = 0\n')
    with pytest.raises(PriceFileError, match="acme"):
        Pricer(None, [ProviderPrices("acme", text)])
