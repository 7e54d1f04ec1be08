"""Providers named by genai-prices' provider list, and the hosts that may bill (SPEC §1,
§4; protocols/providers.py, protocols/provider_list.py, protocols/hosts.py).

- every host a provider's `api_pattern` covers is named by that provider's id, the first
  in the list's order where patterns overlap; a look-alike host is nobody's;
- only a fixed name of the list, or a cloud's regional or resource endpoint, may bill:
  a host anyone can stand up under a provider's pattern (`evil.modal.run`, an API
  Management gateway, a Databricks workspace, any top-level domain) is named and never
  billed;
- a provider added to genai-prices' snapshot (its public `set_custom_snapshot`, a
  `DataSnapshot` of its public types) is named, billed and priced with no change here;
- `[[providers]]` entries name and trust their hosts, exact or `*.domain`;
- hostile hosts cost a bounded cache.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from genai_prices import data_snapshot, types

from llmtap.analytics.pricing import Pricer
from llmtap.protocols import provider_list
from llmtap.protocols.hosts import provider_host
from llmtap.protocols.providers import DEFAULT, Configured, ProviderNames, host_pattern, provider_of

NAMED = [
    ("openai.chat", "api.openai.com", "openai"),  # before openai-decisions, on the same host
    ("openai.responses", "API.OpenAI.com", "openai"),
    ("anthropic.messages", "api.anthropic.com", "anthropic"),
    ("anthropic.messages", "api.anthropic.com:443", "anthropic"),
    ("openai.chat", "api.anthropic.com", "anthropic"),  # Anthropic's OpenAI-compatible endpoint
    ("openai.chat", "generativelanguage.googleapis.com", "google"),  # Gemini's compat endpoint
    ("gemini.generate", "us-central1-aiplatform.googleapis.com", "google"),
    ("openai.chat", "openrouter.ai", "openrouter"),
    ("openai.chat", "OpenRouter.ai.", "openrouter"),
    ("openai.chat", "api.openrouter.ai", "openrouter"),
    ("openai.chat", "api.mistral.ai", "mistral"),
    ("openai.chat", "api.groq.com", "groq"),
    ("openai.chat", "api.deepseek.com", "deepseek"),
    ("openai.chat", "api.x.ai", "x-ai"),
    ("openai.chat", "api.together.xyz", "together"),
    ("openai.chat", "api.fireworks.ai", "fireworks"),
    ("openai.chat", "api.cerebras.ai", "cerebras"),
    ("anthropic.messages", "bedrock-runtime.us-east-1.amazonaws.com", "aws"),
    ("openai.chat", "myres.openai.azure.com", "azure"),
    # named, yet (below) never billed: anyone can stand such a host up
    ("openai.chat", "evil.modal.run", "modal"),
    ("openai.chat", "gw.azure-api.net", "azure"),
    ("openai.chat", "api.moonshot.cn", "moonshotai"),
    # nobody's: the host's own name
    ("openai.chat", "api.mistral.ai.evil.com", "api.mistral.ai.evil.com"),
    ("openai.chat", "openrouter.ai.example", "openrouter.ai.example"),
    ("openai.chat", "evilopenrouter.ai", "evilopenrouter.ai"),
    ("openai.chat", "api-mistral.ai", "api-mistral.ai"),
    ("openai.chat", "notapi.openai.com", "notapi.openai.com"),
    ("openai.chat", "api.openai.com.evil.example", "api.openai.com.evil.example"),
    ("openai.chat", "api.moonshot.evil.example", "api.moonshot.evil.example"),
    ("openai.chat", "api.mіstral.ai", "api.mіstral.ai"),  # a Cyrillic і
    ("openai.chat", "localhost:11434", "localhost"),
    ("openai.chat", "vllm.internal:8000", "vllm.internal"),
    ("anthropic.messages", "my-proxy.example", "my-proxy.example"),
    ("gemini.generate", "gateway.internal.example", "google"),
    ("anthropic.messages", None, "anthropic"),
    ("openai.chat", None, "openai"),
]


@pytest.mark.parametrize(("protocol", "host", "provider"), NAMED)
def test_hosts_are_named_by_genai_prices_provider_ids(protocol: str, host: str | None, provider: str) -> None:
    assert provider_of(protocol, host) == provider


def test_the_first_provider_wins_where_patterns_overlap() -> None:
    ids = [p.id for p in data_snapshot.get_snapshot().providers]
    assert ids.index("openai") < ids.index("openai-decisions")  # the data still overlaps so
    assert provider_list.listed("api.openai.com") == provider_list.Listed("openai", True)


BILLABLE = [
    "api.openai.com",
    "api.anthropic.com",
    "openrouter.ai",
    "api.openrouter.ai",
    "api.mistral.ai:443",
    "api.groq.com",
    "api.deepseek.com",
    "api.x.ai",
    "api.together.xyz",
    "api.fireworks.ai",
    "api.cerebras.ai",
    "bedrock-runtime.eu-west-3.amazonaws.com",
    "bedrock-runtime-fips.us-gov-west-1.amazonaws.com",
    "us-central1-aiplatform.googleapis.com",
    "generativelanguage.googleapis.com",
    "myres.openai.azure.com",
]
NOT_BILLABLE = [
    # anyone can deploy here: a Modal app, an API Management gateway, a Databricks
    # workspace's serving endpoint, Moonshot's pattern with an open top-level domain
    "evil.modal.run",
    "evil.modal.direct",
    "gw.azure-api.net",
    "ws.cloud.databricks.com",
    "api.moonshot.cn",
    # look-alikes of fixed names
    "api.mistral.ai.evil.com",
    "openrouter.ai.example",
    "api.openrouter.ai.example",
    "evil-openrouter.ai",
    "xapi.mistral.ai",
    "api.mistral.ai.",
    "api.mіstral.ai",
    "bedrock-runtime.us-east-1.amazonaws.com.evil.example",
    # a provider's domain, not its inference service
    "storage.googleapis.com",
    "s3.amazonaws.com",
    # nothing to name
    "",
    None,
    "127.0.0.1",
    "[::1]:8080",
    "localhost",
    "a" * 300 + ".openrouter.ai",
]


@pytest.mark.parametrize("host", BILLABLE)
def test_fixed_provider_hosts_and_cloud_endpoints_may_bill(host: str) -> None:
    assert provider_host(host)
    assert DEFAULT.billable(host)


@pytest.mark.parametrize("host", NOT_BILLABLE)
def test_hosts_anyone_can_stand_up_never_bill(host: str | None) -> None:
    if host == "api.mistral.ai.":  # the trailing dot of a fully qualified name is the same host
        assert provider_host(host)
        return
    assert not provider_host(host)
    assert not DEFAULT.billable(host)


# -- a provider genai-prices learns -------------------------------------------------------------


def _snapshot_with(*added: types.Provider) -> data_snapshot.DataSnapshot:
    bundled = data_snapshot.get_snapshot()
    return data_snapshot.DataSnapshot(providers=[*bundled.providers, *added], from_auto_update=False)


NEWCO = types.Provider(
    id="newco",
    name="NewCo",
    api_pattern=r"https://api\.newco\.example",
    models=[
        types.ModelInfo(
            id="newco-large",
            match=types.ClauseEquals(equals="newco-large"),
            prices=types.ModelPrice(input_mtok=Decimal(2), output_mtok=Decimal(8)),
        )
    ],
)
OPENCO = types.Provider(id="openco", name="OpenCo", api_pattern=r"https://[a-z0-9-]+\.openco\.example", models=[])


@pytest.fixture
def learned() -> Iterator[None]:
    data_snapshot.set_custom_snapshot(_snapshot_with(NEWCO, OPENCO))
    try:
        yield
    finally:
        data_snapshot.set_custom_snapshot(None)


def test_a_provider_added_to_the_snapshot_is_named_billed_and_priced(learned: None) -> None:
    assert provider_of("openai.chat", "api.newco.example") == "newco"
    assert provider_host("api.newco.example")
    assert provider_of("openai.chat", "tenant.openco.example") == "openco"  # an open label: named,
    assert not provider_host("tenant.openco.example")  # never billed
    row = {
        "provider": "newco",
        "model": "newco-large",
        "protocol": "openai.chat",
        "started_at": datetime(2026, 1, 5, tzinfo=UTC),
        "usage_input_tokens": 1_000_000,
        "usage_output_tokens": 1_000_000,
    }
    cost = Pricer().price_row(row)
    assert (cost.status, cost.total) == ("priced", 10 * 10**12)  # $2 + $8, in pico-dollars


def test_a_provider_leaving_the_snapshot_is_named_by_its_host_again(learned: None) -> None:
    assert provider_of("openai.chat", "api.newco.example") == "newco"
    data_snapshot.set_custom_snapshot(None)
    assert provider_of("openai.chat", "api.newco.example") == "api.newco.example"
    assert not provider_host("api.newco.example")


# -- [[providers]] ------------------------------------------------------------------------------


def test_configured_hosts_name_and_bill() -> None:
    names = ProviderNames([Configured("acme", (host_pattern("LLM.acme.internal"), host_pattern("*.gw.acme.internal")))])
    assert names.name("openai.chat", "llm.acme.internal:8443") == "acme"
    assert names.name("openai.chat", "eu.gw.acme.internal") == "acme"
    assert names.name("openai.chat", "a.b.gw.acme.internal") == "acme"
    assert names.billable("llm.acme.internal") and names.billable("eu.gw.acme.internal")
    for other in ("gw.acme.internal", "evilgw.acme.internal", "llm.acme.internal.evil.example", "acme.internal"):
        assert names.name("openai.chat", other) == other
        assert not names.billable(other)
    assert names.name("openai.chat", "api.mistral.ai") == "mistral"  # the list still names the rest
    assert names.name("openai.chat", "x", listener="openai") == "openai"  # a reverse listener's name first


@pytest.mark.parametrize(
    "bad",
    [
        "*",
        "*.com",
        "*.",
        "llm.*.example",
        "api\\.acme\\.internal",
        "(.*)",
        "a b",
        "",
        "llm.acme.internal/v1",
        "é.example",
    ],
)
def test_configured_host_patterns_are_names_not_regexes(bad: str) -> None:
    with pytest.raises(ValueError, match="must be"):
        host_pattern(bad)


def test_ip_literals_may_be_configured() -> None:
    names = ProviderNames([Configured("lab", (host_pattern("10.0.0.5"), host_pattern("[::1]")))])
    assert names.name("openai.chat", "10.0.0.5:8000") == "lab" and names.billable("10.0.0.5")
    assert names.name("openai.chat", "[::1]:8000") == "lab"
    assert not names.billable("10.0.0.6")


# -- hostile hosts ------------------------------------------------------------------------------


def test_many_hosts_cost_a_bounded_cache() -> None:
    for index in range(provider_list.MAX_HOSTS + 500):
        assert not provider_host(f"h{index}.attacker.example")
    assert provider_list.cached_hosts() <= provider_list.MAX_HOSTS
    assert provider_host("api.mistral.ai")  # still answered
