"""analytics/reconcile.py without servers: Anthropic's token costs shared out over the
keys of a workspace exactly (the shares sum to the line, to the last digit), partial key
hints matched by their last characters, and each cause rule on its own row.

Not responsible for the HTTP side or the CLI (tests/cli/test_reconcile_cli.py).
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

from llmtap.analytics.reconcile import reconcile
from llmtap.analytics.reconcile_sources import CostRow, Fetched, UsageRow, hint_tail

DAY = date(2026, 11, 2)
MODEL = "claude-sonnet-4-5-20250929"


def _usage(key: str | None, uncached: int, output: int = 0, *, batch: bool = False) -> UsageRow:
    tokens = {
        "input_tokens": uncached,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "output_tokens": output,
        "_uncached": uncached,
        "_output": output,
    }
    return UsageRow(
        DAY, MODEL, key, "wrk_1", tokens, batch=batch, tier="batch" if batch else "standard", window="0-200k"
    )


def _cost(cents: str, token_type: str = "uncached_input_tokens", tier: str = "standard") -> CostRow:
    return CostRow(
        DAY, Decimal(cents) / 100, "tokens", MODEL, None, "wrk_1", token_type, tier == "batch", tier, "0-200k"
    )


def _recorded(last4: str, uncached: int, cost: str, output: int = 0, unpriced: int = 0) -> dict[str, Any]:
    return {
        "day": DAY.isoformat(),
        "model": MODEL,
        "key": f"…{last4} 1a2b3c4d",
        "provider": "anthropic",
        "requests": 1,
        "input_tokens": uncached,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "output_tokens": output,
        "cost_usd": Decimal(cost),
        "fee_cost_usd": Decimal(0),
        "unpriced": unpriced,
        "usage_missing": 0,
    }


def test_hint_tails() -> None:
    assert hint_tail("sk-ant-api03-R2D...igAA") == "igAA"
    assert hint_tail("sk-abc...def") == "def"
    assert hint_tail("sk-proj-…wxyz") == "wxyz"


def test_a_workspace_cost_is_shared_over_its_keys_exactly() -> None:
    fetched = Fetched("anthropic", keys={"k1": ("AAAA", "wrk_1"), "k2": ("BBBB", "wrk_1"), "k3": ("CCCC", "wrk_1")})
    fetched.usage = [_usage("k1", 1), _usage("k2", 1), _usage("k3", 1)]
    fetched.costs = [_cost("1")]  # one cent over three keys: no share is a whole number
    _columns, rows = reconcile(fetched, [])
    *body, total = rows
    shares = [row["provider_cost_usd"] for row in body]
    assert len(shares) == 3 and sum(shares) == Decimal("0.01") == total["provider_cost_usd"]
    assert all(share > 0 for share in shares)
    assert {row["key"] for row in body} == {"…AAAA", "…BBBB", "…CCCC"}
    assert all(row["causes"] == ["not_recorded"] for row in body)


def test_each_rule_on_its_own_row() -> None:
    fetched = Fetched("anthropic", keys={"k1": ("AAAA", "wrk_1"), "k2": ("BBBB", "wrk_1"), "k3": ("CC", "wrk_1")})
    fetched.usage = [_usage("k1", 100), _usage("k2", 100), _usage("k3", 100, 5)]
    fetched.costs = [_cost("3")]  # one cent each
    recorded = [
        _recorded("AAAA", 100, "0.01"),  # agrees
        _recorded("BBBB", 100, "0.02"),  # price_differs
        _recorded("ZZCC", 100, "0.01", output=4, unpriced=1),  # "CC" matches "ZZCC": tokens differ, unpriced
    ]
    _columns, rows = reconcile(fetched, recorded)
    causes = {row["key"]: row["causes"] for row in rows[:-1]}
    assert causes == {"…AAAA": [], "…BBBB": ["price_differs"], "…CC": ["unpriced", "tokens_differ"]}
    assert rows[-1]["gap_usd"] == Decimal("0.03") - Decimal("0.04")


def test_a_gap_under_half_a_cent_is_no_gap() -> None:
    fetched = Fetched("anthropic", keys={"k1": ("AAAA", "wrk_1")})
    fetched.usage = [_usage("k1", 100)]
    fetched.costs = [_cost("1.4")]
    _columns, rows = reconcile(fetched, [_recorded("AAAA", 100, "0.01")])
    assert rows[0]["causes"] == [] and rows[0]["gap_usd"] == Decimal("0.004")
