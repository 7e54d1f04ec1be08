"""`llmtap report cost`: exact costs checked against genai-prices' own extraction and
arithmetic (`extract_usage` on the wire body, `calc_price` at the exchange's time),
unpriced and usage-missing exchanges, a local price file, and the price version."""

from __future__ import annotations

import json
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import genai_prices
from genai_prices import Usage

from tests.analytics import traffic
from tests.analytics.conftest import by_key, llmtap, report

FLAVORS = {
    "anthropic.messages": "default",
    "openai.chat": "chat",
    "openai.responses": "responses",
    "gemini.generate": "default",
}


def genai_cost(k: traffic.Known) -> Decimal:
    """The exchange's cost as genai-prices computes it, from the wire body when it is one
    JSON document (its own extractor), else from the hand-written canonical usage."""
    when = k.rec.started_at
    if k.rec.response_content_type == "application/json":
        body = json.loads(k.rec.response_body)
        extracted = genai_prices.extract_usage(
            body, provider_id=k.provider_id, api_flavor=FLAVORS[k.rec.exchange.protocol]
        )
        return extracted.calc_price(genai_request_timestamp=when).total_price
    assert k.usage is not None
    usage = Usage(
        input_tokens=k.usage["input_tokens"],
        cache_read_tokens=k.usage["cache_read_tokens"],
        cache_write_tokens=k.usage["cache_write_tokens"],
        output_tokens=k.usage["output_tokens"],
    )
    return genai_prices.calc_price(
        usage, k.rec.exchange.model, provider_id=k.provider_id, genai_request_timestamp=when
    ).total_price


def expected_costs(known: dict[str, traffic.Known], group) -> dict[str, Decimal]:
    sums: dict[str, Decimal] = defaultdict(Decimal)
    for k in known.values():
        if k.usage is not None and k.provider_id is not None:
            sums[group(k)] += genai_cost(k)
    return dict(sums)


def test_cost_by_model_matches_genai_prices_exactly(store, known):
    rows = by_key(report(store, "cost", "--by", "provider,model"), "model")
    expected = expected_costs(known, lambda k: k.rec.exchange.model)
    # one model of each provider at least, and Gemini 2.5 Pro past its 200k tier
    for model, provider in (
        (traffic.SONNET, "anthropic"),
        (traffic.GPT4O, "openai"),
        (traffic.GPT5, "openai"),
        (traffic.PRO, "google"),
        (traffic.FLASH, "google"),
    ):
        assert rows[model]["provider"] == provider
        assert isinstance(rows[model]["cost_usd"], Decimal | int)
        assert rows[model]["cost_usd"] == expected[model], model
        assert rows[model]["unpriced"] == 0
        parts = ("input_cost_usd", "cache_read_cost_usd", "cache_write_cost_usd", "output_cost_usd")
        assert sum(rows[model][p] for p in parts) == rows[model]["cost_usd"]
    # worked by hand too: p2 4000×1.25 + 8000×0.125 + 1500×10 = 21000 µ$; p3 (tier)
    # 250000×2.5 + 1000×15 = 640000 µ$
    assert rows[traffic.PRO]["cost_usd"] == Decimal("0.661")
    # s4: 100×3 + 5000×6 (1h write) + 50×15 = 31050 µ$ (genai-prices agrees)
    s4 = genai_cost(known["s4"])
    assert s4 == Decimal("0.03105")


def test_cost_by_team(store, known):
    rows = by_key(report(store, "cost", "--by", "team"), "team")
    expected = expected_costs(known, lambda k: k.rec.team)
    for team in ("search", "support", "cache", "agents", "ops"):
        assert rows[team]["cost_usd"] == expected[team], team
    assert rows["search"]["usage_missing"] == 1 and rows["search"]["unpriced"] == 0  # s3
    assert rows["ops"]["usage_missing"] == 5  # the five error responses
    assert rows["support"]["unpriced"] == 2 and rows["support"]["priced"] == 3  # p4, p5
    assert sum(r["requests"] for r in rows.values()) == len(known)


def test_unknown_model_is_unpriced_never_zero(store):
    rows = by_key(report(store, "cost", "--by", "model"), "model")
    for model in ("acme-llm-7", "my-finetune-x", traffic.HTML_NAME, traffic.SQL_NAME, traffic.MARKUP_NAME):
        assert rows[model]["unpriced"] == rows[model]["requests"] >= 1, model
        assert rows[model]["priced"] == 0
        assert rows[model]["cost_usd"] is None, f"{model} reported as ${rows[model]['cost_usd']}"
    # a model with only error responses: usage missing, not $0 either
    gpt4o_bare = rows["gpt-4o"]  # o9: a 429 names only the requested model
    assert gpt4o_bare["usage_missing"] == 1 and gpt4o_bare["cost_usd"] is None


def test_price_version_present(store):
    version = f"genai-prices {genai_prices.__version__}"
    rows = report(store, "cost", "--by", "team")
    assert any(row["priced"] for row in rows)
    for row in rows:
        if row["priced"]:
            assert row["price_version"] == version


PRICE_FILE = """
# our negotiated gpt-4o rate, and a fine-tune genai-prices does not know
[[price]]
model = "gpt-4o-2024-08-06"
input_mtok = 2
cache_read_mtok = 0.5
output_mtok = 8

[[price]]
provider = "openai"
model = "my-finetune-x"
input_mtok = 1
output_mtok = 4
"""


def test_local_price_file_overrides_and_adds(store, known, tmp_path: Path):
    prices = tmp_path / "prices.toml"
    prices.write_text(PRICE_FILE)
    rows = by_key(report(store, "cost", "--by", "model", "--prices", str(prices)), "model")
    # gpt-4o at $2 / $0.50 / $8 per MTok, by hand (µ$): p1 976×2 + 1024×0.5 + 150×8 = 3664;
    # oai/0 2000×2 + 100×8 = 4800; oai/1 280×2 + 1920×0.5 + 90×8 = 2240; t3 760; t4 728;
    # t6 760; o4 100
    assert rows[traffic.GPT4O]["cost_usd"] == Decimal("0.013052")
    assert rows[traffic.GPT4O]["price_version"].startswith("genai-prices ")
    assert "prices.toml" in rows[traffic.GPT4O]["price_version"]
    # the fine-tune: 1000×1 + 100×4 = 1400 µ$
    assert rows["my-finetune-x"]["cost_usd"] == Decimal("0.0014")
    assert rows["my-finetune-x"]["unpriced"] == 0 and rows["my-finetune-x"]["priced"] == 1
    # other models keep genai-prices' price
    expected = expected_costs(known, lambda k: k.rec.exchange.model)
    assert rows[traffic.SONNET]["cost_usd"] == expected[traffic.SONNET]
    assert rows["acme-llm-7"]["unpriced"] == 1

    # without the file, the report is back to genai-prices alone
    rows = by_key(report(store, "cost", "--by", "model"), "model")
    assert rows[traffic.GPT4O]["cost_usd"] == expected[traffic.GPT4O]
    assert "prices.toml" not in rows[traffic.GPT4O]["price_version"]
    assert rows["my-finetune-x"]["cost_usd"] is None and rows["my-finetune-x"]["unpriced"] == 1


def test_reprice_command_with_price_file(store, tmp_path: Path):
    prices = tmp_path / "prices.toml"
    prices.write_text(PRICE_FILE)
    done = llmtap("reprice", "--prices", str(prices), "--db", store)
    assert done.code == 0, done.err
    assert "priced 60 exchanges" in done.out
    rows = by_key(report(store, "cost", "--by", "model", "--prices", str(prices)), "model")
    assert rows["my-finetune-x"]["cost_usd"] == Decimal("0.0014")
    done = llmtap("reprice", "--no-prices", "--db", store)  # and back: the store's file removed
    assert done.code == 0, done.err
    assert by_key(report(store, "cost", "--by", "model"), "model")["my-finetune-x"]["cost_usd"] is None


def test_bad_price_file_is_one_line(store, tmp_path: Path):
    prices = tmp_path / "bad.toml"
    prices.write_text('[[price]]\nmodel = "m"\ninput_mtok = -1\n')
    result = llmtap("report", "cost", "--prices", str(prices), "--db", store)
    assert result.code == 2
    assert result.err.count("\n") == 1 and "non-negative" in result.err


def test_price_file_with_a_long_name(store, tmp_path: Path):
    """The version names the file; a long name must still fit the column (PostgreSQL
    refuses a value longer than varchar(96))."""
    prices = tmp_path / ("negotiated-prices-for-the-platform-team-" * 3 + ".toml")
    prices.write_text(PRICE_FILE)
    rows = by_key(report(store, "cost", "--by", "model", "--prices", str(prices)), "model")
    assert rows["my-finetune-x"]["cost_usd"] == Decimal("0.0014")
    assert len(rows["my-finetune-x"]["price_version"]) <= 96
    assert by_key(report(store, "cost", "--by", "model"), "model")["my-finetune-x"]["cost_usd"] is None


def test_stale_rows_found_alike_by_duckdb_and_the_store(store, known, tmp_path: Path):
    """The report finds rows to re-price with DuckDB (`stale_ids`), `reprice` with the
    store's SQL (`stale`): the two rules must agree."""
    from sqlalchemy import select

    from llmtap.analytics import duck
    from llmtap.analytics.pricing import Pricer
    from llmtap.analytics.reprice import stale, stale_ids
    from llmtap.storage.engine import make_engine
    from llmtap.storage.schema import exchanges

    prices = tmp_path / "prices.toml"
    prices.write_text(PRICE_FILE + '\n[[price]]\nmodel = "claude-sonnet-4-5*"\ninput_mtok = 1\noutput_mtok = 1\n')
    engine = make_engine(store)
    connection = duck.connect(store)
    try:
        for pricer in (Pricer(), Pricer(prices)):
            with engine.connect() as c:
                by_store = sorted(c.execute(select(exchanges.c.id).where(stale(pricer))).scalars())
            assert stale_ids(connection, pricer) == by_store
        named = {
            k.id
            for k in known.values()
            if k.rec.exchange.model in (traffic.GPT4O, "my-finetune-x")
            or (k.rec.exchange.model or "").startswith("claude-sonnet-4-5")
        }
        assert set(stale_ids(connection, Pricer(prices))) == named
    finally:
        connection.close()
        engine.dispose()
