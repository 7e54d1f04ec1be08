"""The served conversation page says what its turns cost in the CLI's one money format,
and a total over unpriced turns says so: never `$None`, never `$0`."""

from __future__ import annotations

from decimal import Decimal

from llmtap.analytics.audit import cost_shown
from llmtap.dashboards import page


def _turn(turn_id: str, cost: Decimal | None) -> dict:
    return {
        "id": turn_id,
        "started_at": "2026-11-30 10:00:00",
        "finish_reason": "end_turn",
        "messages": 1,
        "input_tokens": 1200,
        "cache_read_tokens": 0,
        "output_tokens": 80,
        "cost_usd": cost,
        "tool_calls": [],
        "tool_problems": [],
        "cache": {"verdict": "first"},
    }


def _page(costs: list[Decimal | None]) -> str:
    turns = [_turn(f"T{i}", cost) for i, cost in enumerate(costs)]
    priced = [c for c in costs if c is not None]
    totals = {
        "turns": len(turns),
        "input_tokens": 1200 * len(turns),
        "cache_read_tokens": 0,
        "output_tokens": 80 * len(turns),
        "cost_usd": sum(priced, Decimal(0)) if priced else None,
        "cost_shown": cost_shown(priced, len(costs) - len(priced)),
        "cache_misses": 0,
        "tool_problems": 0,
    }
    return page.render_conversation({"exchange_id": "T0", "turns": turns, "totals": totals}, store="store")


def test_a_wholly_unpriced_conversation_says_unpriced() -> None:
    html = _page([None, None])
    assert "$None" not in html and "$0" not in html
    assert html.count("unpriced") >= 3  # the total and each turn


def test_priced_turns_read_as_the_cli_reads_them() -> None:
    html = _page([Decimal("0.0123456"), None, Decimal("1234.5")])
    assert "$0.01235" in html and "$1,234.50" in html
    assert "$1,234.51 + 1 unpriced turn" in html


def test_a_turns_tool_problems_are_on_the_page() -> None:
    turns = [_turn("T0", None), {**_turn("T1", None), "tool_problems": ["missing_result", "orphan_result"]}]
    totals = {
        "turns": 2,
        "input_tokens": 2400,
        "cache_read_tokens": 0,
        "output_tokens": 160,
        "cost_usd": None,
        "cost_shown": cost_shown([], 2),
        "cache_misses": 0,
        "tool_problems": 2,
    }
    html = page.render_conversation({"exchange_id": "T0", "turns": turns, "totals": totals}, store="store")
    assert "missing_result, orphan_result" in html and "2 tool problems" in html
