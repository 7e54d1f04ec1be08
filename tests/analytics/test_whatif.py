"""`llmtap report whatif --model M`: each group's what-if total is genai-prices' own
`calc_price` on each exchange's hand-worked usage at M today, summed, to the pico-dollar
(a tier boundary included: Gemini 2.5 Pro past 200k input tokens); the misses' cost at M
is genai-prices' price of the exchange as it was less its price had the missed tokens
been read from cache; unpriced and usage-missing exchanges are counted, never $0; a local
price file names M the way it names any model."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import genai_prices
import pytest
from genai_prices import Usage

from tests.analytics import traffic
from tests.analytics.conftest import by_key, llmtap, report

TARGETS = [
    pytest.param("gemini-2.5-pro", "google", id="gemini-2.5-pro"),  # tiered past 200k
    pytest.param("claude-sonnet-4-5", "anthropic", id="claude-sonnet-4-5"),  # cache writes
    pytest.param("gpt-5", "openai", id="gpt-5"),
]


def usage_of(k: traffic.Known, extra_read: int = 0) -> Usage:
    assert k.usage is not None
    output = k.usage["output_tokens"]
    return Usage(
        input_tokens=k.usage["input_tokens"],
        cache_read_tokens=k.usage["cache_read_tokens"] + extra_read,
        cache_write_tokens=k.usage["cache_write_tokens"],
        output_tokens=output,
        output_reasoning_tokens=min(k.usage.get("reasoning_tokens") or 0, output),
    )


def at_model(usage: Usage, model: str, provider: str) -> Decimal:
    return genai_prices.calc_price(usage, model, provider_id=provider).total_price


def expected(known: dict[str, traffic.Known], model: str, provider: str, group: Callable[[Any], Any]):
    sums: dict[Any, Decimal] = defaultdict(Decimal)
    for k in known.values():
        if k.usage is not None:
            sums[group(k)] += at_model(usage_of(k), model, provider)
    return dict(sums)


def whatif(store: str, *args: str) -> Any:
    return report(store, "whatif", *args)


@pytest.mark.parametrize(("model", "provider"), TARGETS)
def test_each_team_costs_the_sum_of_calc_price_per_exchange(store, known, model, provider):
    rows = by_key(whatif(store, "--model", model, "--provider", provider, "--by", "team"), "team")
    sums = expected(known, model, provider, lambda k: k.rec.team)
    assert set(rows) == {k.rec.team for k in known.values()}
    for team, row in rows.items():
        assert row["whatif_cost_usd"] == sums[team], team
        assert row["requests"] == sum(1 for k in known.values() if k.rec.team == team)
        assert row["whatif_model"].endswith(model) and row["whatif_prices"].startswith("genai-prices ")


def test_a_tier_is_priced_per_exchange_not_on_the_group_sum(store, known):
    # support: p3 has 250,000 input tokens (past Gemini 2.5 Pro's 200k tier), the rest not
    support = [k for k in known.values() if k.rec.team == "support" and k.usage is not None]
    inputs = sorted(k.usage["input_tokens"] for k in support if k.usage)
    assert inputs[-1] > 200_000 >= inputs[-2] and sum(inputs) > 200_000
    row = by_key(whatif(store, "--model", "gemini-2.5-pro", "--by", "team"), "team")["support"]
    per_exchange = sum((at_model(usage_of(k), "gemini-2.5-pro", "google") for k in support), Decimal(0))
    summed = Usage(
        input_tokens=sum(inputs),
        cache_read_tokens=sum(k.usage["cache_read_tokens"] for k in support if k.usage),
        output_tokens=sum(k.usage["output_tokens"] for k in support if k.usage),
    )
    assert row["whatif_cost_usd"] == per_exchange
    assert at_model(summed, "gemini-2.5-pro", "google") != per_exchange  # what a group sum would say


def test_the_recorded_model_itself_costs_what_was_recorded(store):
    # gpt-4o's price did not change between the recorded dates and today's data
    rows = by_key(whatif(store, "--model", traffic.GPT4O, "--provider", "openai", "--by", "model"), "model")
    row = rows[traffic.GPT4O]
    assert row["cost_usd"] > 0 and row["unpriced"] == 0
    assert row["whatif_cost_usd"] == row["cost_usd"]
    assert row["difference_usd"] == 0 and row["ratio"] == 1
    # Gemini 2.5 Pro at gpt-4o: not the same, and said so both ways
    pro = rows[traffic.PRO]
    assert pro["difference_usd"] == pro["whatif_cost_usd"] - pro["cost_usd"] != 0
    assert pro["ratio"] == (pro["whatif_cost_usd"] / pro["cost_usd"]).quantize(Decimal("0.0001"))


def test_unpriced_and_usage_missing_are_counted_never_zero(store, known):
    rows = by_key(whatif(store, "--model", "gpt-5", "--by", "model"), "model")
    for model in ("acme-llm-7", "my-finetune-x", traffic.SQL_NAME):
        row = rows[model]
        assert row["unpriced"] == row["requests"] >= 1, model
        assert row["cost_usd"] is None and row["difference_usd"] is None and row["ratio"] is None
        assert row["whatif_cost_usd"] > 0  # the tokens are known: M's price of them is too
    bare = rows["gpt-4o"]  # only an error response that names the requested model
    assert bare["usage_missing"] == bare["requests"] == 1
    assert bare["whatif_cost_usd"] is None and bare["cost_usd"] is None
    # difference and ratio compare only the exchanges that have an actual price
    support = by_key(whatif(store, "--model", "gpt-5", "--by", "team"), "team")["support"]
    priced = [
        k for k in known.values() if k.rec.team == "support" and k.usage is not None and k.name not in ("p4", "p5")
    ]
    assert support["unpriced"] == 2
    compared = sum((at_model(usage_of(k), "gpt-5", "openai") for k in priced), Decimal(0))
    assert support["difference_usd"] == compared - support["cost_usd"]


def test_the_misses_cost_at_the_model(store, known):
    misses = [m for m in report(store, "cache", "--list") if m["cause"] != "below_minimum"]
    assert misses, "the known traffic has cache misses"
    rows = by_key(whatif(store, "--model", "gemini-2.5-pro", "--by", "team"), "team")
    by_id = {k.id: k for k in known.values()}
    teams: dict[str, dict[str, Any]] = defaultdict(lambda: {"n": 0, "tokens": 0, "at_m": Decimal(0), "actual": []})
    for miss in misses:
        k = by_id[miss["exchange_id"]]
        team = teams[k.rec.team]
        team["n"] += 1
        team["tokens"] += miss["missed_tokens"]
        # what the miss cost at M: the exchange's price as it was less had it read the tokens
        as_was = at_model(usage_of(k), "gemini-2.5-pro", "google")
        as_hit = at_model(usage_of(k, extra_read=miss["missed_tokens"]), "gemini-2.5-pro", "google")
        team["at_m"] += as_was - as_hit
        team["actual"].append(miss["extra_cost_usd"])
    for name, row in rows.items():
        team = teams.get(name, {"n": 0, "tokens": 0, "at_m": Decimal(0), "actual": []})
        assert (row["misses"], row["missed_tokens"]) == (team["n"], team["tokens"]), name
        assert row["whatif_miss_cost_usd"] == team["at_m"], name
        known_costs = [c for c in team["actual"] if c is not None]
        if not team["n"]:
            assert row["miss_cost_usd"] == 0
        elif known_costs:
            assert row["miss_cost_usd"] == sum(known_costs, Decimal(0)), name
        else:
            assert row["miss_cost_usd"] is None, name  # unknown, not $0
    assert rows["cache"]["whatif_miss_cost_usd"] > 0


def test_since_until_and_one_row_by_default(store, known):
    rows = whatif(store, "--model", "gemini-2.5-pro", "--since", "2026-11-03", "--until", "2026-11-04")
    assert len(rows) == 1 and "team" not in rows[0]
    day2 = [k for k in known.values() if traffic.DAY2 <= k.rec.started_at < traffic.DAY2 + traffic.timedelta(days=1)]
    assert 0 < len(day2) < len(known)
    assert rows[0]["requests"] == len(day2)
    total = sum((at_model(usage_of(k), "gemini-2.5-pro", "google") for k in day2 if k.usage), Decimal(0))
    assert rows[0]["whatif_cost_usd"] == total


PRICE_FILE = """
[[price]]
model = "acme-whatif-1"
input_mtok = 1
output_mtok = 3

[[price]]
provider = "openai"
model = "my-finetune-x"
input_mtok = 2
output_mtok = 5
"""


def test_a_price_file_names_the_model(store, known, tmp_path: Path):
    prices = tmp_path / "prices.toml"
    prices.write_text(PRICE_FILE)
    rows = by_key(whatif(store, "--model", "acme-whatif-1", "--by", "team", "--prices", str(prices)), "team")
    # no cache prices: a cache read or write is an input token (genai-prices' rule)
    for team, row in rows.items():
        mine = [k.usage for k in known.values() if k.rec.team == team and k.usage is not None]
        by_hand = sum((u["input_tokens"] * 1 + u["output_tokens"] * 3 for u in mine), 0)
        assert row["whatif_cost_usd"] == (Decimal(by_hand) / 10**6 if mine else None), team
        assert row["whatif_model"] == "acme-whatif-1" and "prices.toml" in row["whatif_prices"]
    # an entry for one provider names its model without --provider too
    rows = whatif(store, "--model", "my-finetune-x", "--prices", str(prices))
    everything = [k.usage for k in known.values() if k.usage is not None]
    assert (
        rows[0]["whatif_cost_usd"]
        == Decimal(sum(u["input_tokens"] * 2 + u["output_tokens"] * 5 for u in everything)) / 10**6
    )
    assert rows[0]["whatif_model"] == "openai/my-finetune-x"


def test_table_and_csv(store):
    table = llmtap("report", "whatif", "--model", "gemini-2.5-pro", "--by", "team", "--db", store)
    assert table.code == 0, table.err
    assert "google/gemini-2.5-pro" in table.out and "total" in table.out
    assert "unpriced: 6 exchanges without an actual price" in table.out
    assert "usage missing: 6 without usage" in table.out
    csv = llmtap("report", "whatif", "--model", "gemini-2.5-pro", "--format", "csv", "--db", store)
    assert csv.code == 0, csv.err
    header = csv.out.splitlines()[0].split(",")
    assert header[:6] == [
        "requests",
        "input_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "output_tokens",
        "cost_usd",
    ]
    assert "whatif_cost_usd" in header and "whatif_miss_cost_usd" in header


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--model", "claude-sonet-4-5"), "close: claude-sonnet-4-5"),
        (("--model", "gpt-4o", "--provider", "opnai"), "not a genai-prices provider (close: openai)"),
        (("--model", "nope-not-a-model"), "--model 'nope-not-a-model' has no price"),
        (("--model", "gpt-4o-mnii"), "(close: gpt-4o-mini"),
        (("--model", "claude-sonnet-4-5", "--provider", "openai"), "has no price at openai"),
        ((), "needs --model"),
        (("--model", "gpt-4o", "--list"), "has no --list"),
        (("--model", "gpt-4o", "--by", "colour"), "--by 'colour'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(store, args, message):
    result = llmtap("report", "whatif", *args, "--db", store)
    assert result.code == 2
    assert message in result.err
    assert len(result.err.strip().splitlines()) == 1 and not result.out
