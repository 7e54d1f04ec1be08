"""Cloud-served exchanges priced as the cloud bills them (SPEC §5): Bedrock by the model
id the path invoked (`aws` in genai-prices), Azure OpenAI at `azure`'s price (which
genai-prices takes from OpenAI's list), Vertex AI's Claude at `google`'s; the maker's
list price where the cloud lists none, and `cost_detail.price_source` says which. Worked
by hand and against genai-prices' own `calc_price`, to the pico-dollar; then through the
real `llmtap import`, `reprice` and `report cost` on a store."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import genai_prices
import pytest
from genai_prices import Usage

from llmtap.analytics.cloud_names import maker_model, names_to_try
from llmtap.analytics.pricing import PICO, Cost, Pricer
from llmtap.protocols.canonical import Exchange
from llmtap.protocols.canonical import Usage as Canonical
from llmtap.protocols.hosts import provider_host
from llmtap.storage.record import Recorded
from llmtap.storage.rows import rows_for
from tests.analytics.conftest import BACKENDS, blank_database
from tests.helpers import llmtap

AT = datetime(2026, 11, 20, 10, 30, tzinfo=UTC)
BEDROCK_HOST = "bedrock-runtime.us-east-1.amazonaws.com"
AZURE_HOST = "myres.openai.azure.com"
VERTEX_HOST = "us-east5-aiplatform.googleapis.com"


def stored(ex: Exchange, host: str, path: str = "/") -> dict[str, Any]:
    """The exchanges row the writer would store for this exchange."""
    return rows_for(Recorded(exchange=ex, started_at=AT, host=host, path=path)).exchanges[0]


def calc(usage: Usage, model: str, provider: str) -> Decimal:
    """genai-prices' own price of the usage, in pico-dollars."""
    return genai_prices.calc_price(usage, model, provider_id=provider, genai_request_timestamp=AT).total_price * PICO


def priced(row: dict[str, Any]) -> Cost:
    cost = Pricer().price_row(row)
    assert cost.status == "priced", cost
    assert cost.detail is not None
    assert sum(p or 0 for p in (cost.input, cost.cache_read, cost.cache_write, cost.output, cost.fee)) == cost.total
    return cost


def _bedrock(model: str, requested: str | None) -> Exchange:
    # c_bedrock_invoke_json_cache_read_max_tokens: 4 fresh + 18,131 cached in, 50 out
    usage = Canonical(input_tokens=18_135, cache_read_tokens=18_131, output_tokens=50)
    return Exchange(
        protocol="anthropic.messages",
        provider="aws",
        model=model,
        model_requested=requested,
        status=200,
        complete=True,
        usage=usage,
    )


def test_bedrock_exchange_by_hand_and_by_genai_prices():
    ex = _bedrock("claude-3-5-haiku-20241022", "anthropic.claude-3-5-haiku-20241022-v1:0")
    cost = priced(stored(ex, BEDROCK_HOST, "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/invoke"))
    # Bedrock's Claude 3.5 Haiku: $0.80 in, $0.08 cache read, $4 out per MTok
    # 4 × 0.8 + 18,131 × 0.08 + 50 × 4 = 3.2 + 1,450.48 + 200 = $1,653.68 per MTok
    assert cost.total == 1_653_680_000
    assert (cost.input, cost.cache_read, cost.output) == (3_200_000, 1_450_480_000, 200_000_000)
    usage = Usage(input_tokens=18_135, cache_read_tokens=18_131, output_tokens=50)
    assert cost.total == calc(usage, "anthropic.claude-3-5-haiku-20241022-v1:0", "aws")
    assert cost.detail["price_source"] == {
        "provider": "aws",
        "model": "regional.anthropic.claude-3-5-haiku-20241022-v1:0",
        "name": "anthropic.claude-3-5-haiku-20241022-v1:0",
    }


def test_bedrock_response_model_unknown_to_aws_is_priced_by_the_path_model():
    # c_bedrock_invoke_json_text: the response says claude-3-sonnet-28k-20240229, which no list has
    ex = _bedrock("claude-3-sonnet-28k-20240229", "us.anthropic.claude-3-sonnet-20240229-v1:0")
    cost = priced(stored(ex, BEDROCK_HOST))
    usage = Usage(input_tokens=18_135, cache_read_tokens=18_131, output_tokens=50)
    assert cost.total == calc(usage, "us.anthropic.claude-3-sonnet-20240229-v1:0", "aws")
    assert cost.detail["price_source"]["provider"] == "aws"
    assert cost.detail["price_source"]["name"] == "us.anthropic.claude-3-sonnet-20240229-v1:0"
    assert "fallback" not in cost.detail["price_source"]


def test_a_model_aws_does_not_list_falls_back_to_the_makers_price_and_says_so():
    ex = _bedrock("claude-3-sonnet-28k-20240229", None)
    with pytest.raises(LookupError):
        genai_prices.calc_price(Usage(input_tokens=1), "claude-3-sonnet-28k-20240229", provider_id="aws")
    cost = priced(stored(ex, BEDROCK_HOST))
    usage = Usage(input_tokens=18_135, cache_read_tokens=18_131, output_tokens=50)
    assert cost.total == calc(usage, "claude-3-sonnet-28k-20240229", "anthropic")
    source = cost.detail["price_source"]
    assert source["provider"] == "anthropic"
    assert "aws lists no price for claude-3-sonnet-28k-20240229" in source["fallback"]


def test_a_model_nobody_lists_stays_unpriced_not_zero():
    cost = Pricer().price_row(
        stored(_bedrock("anthropic.claude-nonesuch-v1:0", "anthropic.claude-nonesuch-v1:0"), BEDROCK_HOST)
    )
    assert (cost.status, cost.total, cost.reason) == ("unpriced", None, "unknown_model")


def test_azure_exchange_by_hand_and_by_genai_prices():
    usage = Canonical(input_tokens=12_000, cache_read_tokens=8_192, output_tokens=700)
    ex = Exchange(
        protocol="openai.chat",
        provider="azure",
        model="gpt-4o-2024-11-20",
        model_requested="my-gpt4o",  # the deployment: no list knows it
        status=200,
        complete=True,
        usage=usage,
    )
    cost = priced(stored(ex, AZURE_HOST, "/openai/deployments/my-gpt4o/chat/completions"))
    # GPT-4o: $2.50 in, $1.25 cached, $10 out per MTok
    # 3,808 × 2.5 + 8,192 × 1.25 + 700 × 10 = 9,520 + 10,240 + 7,000 = $26,760 per MTok
    assert cost.total == 26_760_000_000
    genai = Usage(input_tokens=12_000, cache_read_tokens=8_192, output_tokens=700)
    assert cost.total == calc(genai, "gpt-4o-2024-11-20", "azure")
    source = cost.detail["price_source"]
    assert (source["provider"], source["model"]) == ("openai", "gpt-4o")
    assert source["fallback"] == "azure lists gpt-4o at openai's price"


def test_vertex_claude_is_priced_at_googles_list():
    usage = Canonical(input_tokens=1_238, cache_read_tokens=1_210, output_tokens=41)
    ex = Exchange(
        protocol="anthropic.messages",
        provider="google",
        model="claude-3-7-sonnet-20250219",
        model_requested="claude-3-7-sonnet@20250219",
        status=200,
        complete=True,
        usage=usage,
    )
    cost = priced(stored(ex, VERTEX_HOST))
    genai = Usage(input_tokens=1_238, cache_read_tokens=1_210, output_tokens=41)
    assert cost.total == calc(genai, "claude-3-7-sonnet@20250219", "google")
    assert cost.detail["price_source"]["provider"] == "google"


def test_rows_of_other_providers_carry_no_price_source():
    usage = Canonical(input_tokens=100, output_tokens=10)
    ex = Exchange(protocol="anthropic.messages", provider="anthropic", model="claude-3-5-haiku-20241022", usage=usage)
    assert "price_source" not in priced(stored(ex, "api.anthropic.com")).detail


@pytest.mark.parametrize(
    ("provider", "model", "requested", "names"),
    [
        (
            "aws",
            "claude-3-5-haiku-20241022",
            "us.anthropic.claude-3-5-haiku-20241022-v1:0",
            ["us.anthropic.claude-3-5-haiku-20241022-v1:0", "claude-3-5-haiku-20241022"],
        ),
        ("azure", "gpt-4o-2024-11-20", "my-gpt4o", ["gpt-4o-2024-11-20", "my-gpt4o"]),
        ("aws", "x", "x", ["x"]),
        ("anthropic", "claude-3-5-haiku-20241022", "claude-3-5-haiku-20241022", ["claude-3-5-haiku-20241022"]),
        ("openai", "gpt-4o", None, ["gpt-4o"]),
    ],
)
def test_names_to_try(provider: str, model: str, requested: str | None, names: list[str]):
    assert names_to_try(provider, model, requested) == names


@pytest.mark.parametrize(
    ("name", "maker"),
    [
        ("us.anthropic.claude-3-sonnet-20240229-v1:0", "claude-3-sonnet-20240229"),
        ("anthropic.claude-3-5-haiku-20241022-v1:0", "claude-3-5-haiku-20241022"),
        ("global.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5-20250929"),
        ("us-gov.anthropic.claude-3-haiku-20240307-v1:0", "claude-3-haiku-20240307"),
        ("meta.llama3-8b-instruct-v1:0", "llama3-8b-instruct"),
        ("claude-3-7-sonnet@20250219", "claude-3-7-sonnet@20250219"),
        ("gpt-4o", "gpt-4o"),
    ],
)
def test_maker_model(name: str, maker: str):
    assert maker_model(name) == maker


@pytest.mark.parametrize(
    ("host", "known"),
    [
        (BEDROCK_HOST, True),
        ("bedrock-runtime-fips.us-gov-west-1.amazonaws.com:443", True),
        (AZURE_HOST, True),
        ("myres.cognitiveservices.azure.com", True),
        ("proj.services.ai.azure.com", True),
        (VERTEX_HOST, True),
        ("aiplatform.googleapis.com", True),
        ("bedrock-runtime.us-east-1.amazonaws.com.evil.example", False),
        ("evil-openai.azure.com.example", False),
        ("bedrock.us-east-1.amazonaws.com", False),  # the control plane: no generations
        ("s3.amazonaws.com", False),
        ("services.ai.azure.com", False),
    ],
)
def test_cloud_hosts_are_billed_hosts(host: str, known: bool):
    assert provider_host(host) is known


# -- through the real commands ---------------------------------------------------------------

# a global cross-region profile: Bedrock bills it at the list price, while a regional
# (`us.`) profile, and Anthropic's own id on Bedrock, cost 10% more
BEDROCK_PATH = "/model/global.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke"
BEDROCK_REQUEST = {
    "anthropic_version": "bedrock-2023-05-31",
    "max_tokens": 50,
    "messages": [{"role": "user", "content": "hi"}],
}
BEDROCK_RESPONSE = {
    "id": "msg_bdrk_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [{"type": "text", "text": "Hello."}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 21, "output_tokens": 22},
}


def _entry(host: str, path: str, request: dict[str, Any], response: dict[str, Any], at: datetime) -> dict[str, Any]:
    sent, body = json.dumps(request), json.dumps(response)
    return {
        "startedDateTime": at.isoformat().replace("+00:00", "Z"),
        "time": 500.0,
        "request": {
            "method": "POST",
            "url": f"https://{host}{path}",
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "content-type", "value": "application/json"}, {"name": "X-LLMTap-Team", "value": "t"}],
            "queryString": [],
            "cookies": [],
            "headersSize": -1,
            "bodySize": len(sent),
            "postData": {"mimeType": "application/json", "text": sent},
        },
        "response": {
            "status": 200,
            "statusText": "",
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "content-type", "value": "application/json"}],
            "cookies": [],
            "content": {"size": len(body), "mimeType": "application/json", "text": body},
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": len(body),
        },
        "cache": {},
        "timings": {"send": 1, "wait": 400, "receive": 99},
    }


@pytest.fixture(params=BACKENDS)
def blank(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with blank_database(request.param, tmp_path_factory.mktemp(f"cloud-{request.param}")) as url:
        yield url


def test_imported_bedrock_traffic_is_priced_by_its_path_model_through_reprice(blank: str, tmp_path: Path):
    env = {"LLMTAP_HOME": str(tmp_path / "home"), "LLMTAP_PRICES": None}
    start = datetime(2026, 11, 10, 9, tzinfo=UTC)
    entries = [
        _entry(BEDROCK_HOST, BEDROCK_PATH, BEDROCK_REQUEST, BEDROCK_RESPONSE, start),
        _entry("127.0.0.1:9999", BEDROCK_PATH, BEDROCK_REQUEST, BEDROCK_RESPONSE, start + timedelta(minutes=1)),
    ]
    har = tmp_path / "bedrock.har"
    har.write_text(
        json.dumps({"log": {"version": "1.2", "creator": {"name": "t", "version": "1"}, "entries": entries}})
    )
    assert llmtap("import", str(har), "--db", blank, env=env).code == 0
    # Claude Sonnet 4.5, global profile: 21 × $3 + 22 × $15 per MTok = $0.000393
    one = Decimal("0.000393")
    usage = Usage(input_tokens=21, output_tokens=22)
    assert calc(usage, "global.anthropic.claude-sonnet-4-5-20250929-v1:0", "aws") == one * PICO
    # what the response's model alone would be billed at on Bedrock: the regional rate
    assert calc(usage, "claude-sonnet-4-5-20250929", "aws") == Decimal("1.1") * one * PICO

    def by_provider() -> dict[str, Any]:
        done = llmtap("report", "cost", "--by", "provider,model", "--format", "json", "--db", blank, env=env)
        assert done.code == 0, done.err
        return {row["provider"]: row for row in json.loads(done.out, parse_float=Decimal) if row.get("provider")}

    rows = by_provider()
    assert set(rows) == {"aws"}  # the local upstream served Bedrock's path: aws, yet unverified
    assert rows["aws"]["cost_usd"] == one and rows["aws"]["unpriced"] == 1
    assert rows["aws"]["model"] == "claude-sonnet-4-5-20250929"
    done = llmtap("reprice", "--db", blank, env=env)
    assert done.code == 0, done.err
    rows = by_provider()
    assert rows["aws"]["cost_usd"] == one and rows["aws"]["unpriced"] == 1  # reprice reads the path's model too


@pytest.mark.parametrize(
    ("model", "tokens"),
    [
        ("us.anthropic.claude-3-haiku-20240307-v1:0", 2048),  # Converse records the path's id
        ("anthropic.claude-3-5-haiku-20241022-v1:0", 2048),
        ("claude-3-haiku-20240307", 2048),
        ("global.anthropic.claude-sonnet-4-5-20250929-v1:0", 1024),
        ("us.anthropic.claude-haiku-4-5-20251001-v1:0", 4096),
    ],
)
def test_cloud_model_ids_find_their_minimum_cacheable_length(model: str, tokens: int):
    """The rules' table of minimum cacheable lengths, as the writer matches it
    (protocols/rules.py) and as the window oracle's SQL ILIKE does (tests/oracles)."""
    import duckdb

    from llmtap.protocols.rules import MINIMUM_CACHEABLE, minimum

    assert minimum(model) == tokens
    case = " ".join(f"WHEN served_model ILIKE '{p}' THEN {t}" for p, t in MINIMUM_CACHEABLE)
    found = duckdb.sql(f"SELECT CASE {case} END FROM (SELECT $m AS served_model)", params={"m": model}).fetchone()
    assert found == (tokens,)
