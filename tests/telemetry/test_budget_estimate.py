"""What a request may cost as it passes the gate (telemetry/budget_estimate.py), priced by
the real genai-prices data, and the ledger that holds it until its cost is counted
(telemetry/budget_ledger.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from llmtap.analytics.pricing import Pricer
from llmtap.protocols.hosts import UNVERIFIED_HOST
from llmtap.telemetry.budget_estimate import PARSE_LIMIT, Estimator
from llmtap.telemetry.budget_ledger import Ledger

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
DEFAULT_OUTPUT = 1000


@pytest.fixture(scope="module")
def estimator() -> Estimator:
    return Estimator(Pricer(), DEFAULT_OUTPUT, clock=lambda: NOW)


def _priced(model: str, protocol: str, input_tokens: int, output_tokens: int, **extra: Any) -> int:
    row = {"provider": None, "protocol": protocol, "model": model, "started_at": NOW, **extra}
    row |= {"usage_input_tokens": input_tokens, "usage_output_tokens": output_tokens}
    cost = Pricer().price_row(row)
    assert cost.total is not None
    return cost.total


def _ask(estimator: Estimator, protocol: str, path: str, body: dict[str, Any] | bytes, **kw: Any) -> Any:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return estimator.estimate(protocol=protocol, path=path, host=kw.pop("host", None), body=raw, **kw), raw


def test_input_is_a_token_per_four_bytes_and_output_the_requests_own_limit(estimator: Estimator) -> None:
    body = {"model": "claude-haiku-4-5", "max_tokens": 300, "messages": [{"role": "user", "content": "x" * 401}]}
    estimate, raw = _ask(estimator, "anthropic.messages", "/v1/messages", body, host="api.anthropic.com")
    assert (estimate.input_tokens, estimate.output_tokens) == (-(-len(raw) // 4), 300)
    assert estimate.priced and estimate.model == "claude-haiku-4-5"
    assert estimate.pico == _priced("claude-haiku-4-5", "anthropic.messages", estimate.input_tokens, 300)


@pytest.mark.parametrize(
    ("protocol", "path", "body", "output"),
    [
        ("openai.chat", "/v1/chat/completions", {"model": "gpt-4o", "messages": []}, DEFAULT_OUTPUT),
        ("openai.chat", "/v1/chat/completions", {"model": "gpt-4o", "messages": [], "max_tokens": 7}, 7),
        ("openai.chat", "/v1/chat/completions", {"model": "gpt-4o", "messages": [], "max_completion_tokens": 9}, 9),
        ("openai.chat", "/v1/chat/completions", {"model": "gpt-4o", "messages": [], "max_tokens": 7, "n": 3}, 21),
        ("openai.responses", "/v1/responses", {"model": "gpt-4o", "input": "x", "max_output_tokens": 50}, 50),
        ("openai.responses", "/v1/responses", {"type": "response.create", "response": {"model": "gpt-4o",
                                                                                        "max_output_tokens": 60}}, 60),
        ("openai.responses", "/v1/responses", {"type": "response.create", "model": "gpt-4o", "generate": False}, 0),
        ("gemini.generate", "/v1beta/models/gemini-2.0-flash:generateContent",
         {"contents": [], "generationConfig": {"maxOutputTokens": 40, "candidateCount": 2}}, 80),
        ("gemini.generate", "/v1beta/models/gemini-2.0-flash:generateContent", {"contents": []}, DEFAULT_OUTPUT),
    ],
)  # fmt: skip
def test_the_output_limit_each_protocol_names(
    estimator: Estimator, protocol: str, path: str, body: dict[str, Any], output: int
) -> None:
    estimate, _ = _ask(estimator, protocol, path, body)
    assert estimate.output_tokens == output
    assert estimate.priced and estimate.pico > 0


def test_what_reserves_nothing(estimator: Estimator) -> None:
    """No price, no trusted destination, no model: nothing to reserve (their spend is never
    counted either); the gate still refuses them once a limit is reached."""
    unknown = {"model": "my-own-finetune-zz", "messages": []}
    assert _ask(estimator, "openai.chat", "/v1/chat/completions", unknown)[0].pico == 0
    known = {"model": "gpt-4o", "messages": []}
    estimate, _ = _ask(estimator, "openai.chat", "/v1/chat/completions", known, price_reason=UNVERIFIED_HOST)
    assert (estimate.pico, estimate.priced) == (0, False)
    assert _ask(estimator, "openai.chat", "/v1/chat/completions", {"messages": []})[0].pico == 0


def test_a_cache_breakpoint_is_priced_as_a_cache_write(estimator: Estimator) -> None:
    plain = {"model": "claude-sonnet-4-5", "max_tokens": 1, "system": "s" * 4000, "messages": []}
    marked = plain | {"system": [{"type": "text", "text": "s" * 3970, "cache_control": {"type": "ephemeral"}}]}
    a, _ = _ask(estimator, "anthropic.messages", "/v1/messages", plain)
    b, _ = _ask(estimator, "anthropic.messages", "/v1/messages", marked)
    assert b.input_tokens <= a.input_tokens + 20 and b.pico > a.pico * 1.2  # $3.75 rather than $3 a million


def test_a_body_too_big_to_parse_takes_the_priciest_model_it_names(estimator: Estimator) -> None:
    cheap, dear = "claude-haiku-4-5", "claude-opus-4-1"
    body = json.dumps(
        {"model": cheap, "max_tokens": 1, "messages": [{"role": "user", "content": "x" * PARSE_LIMIT}],
         "metadata": {"note": {"model": dear}}}
    ).encode()  # fmt: skip
    estimate, _ = _ask(estimator, "anthropic.messages", "/v1/messages", body)
    assert estimate.model == dear and estimate.output_tokens == DEFAULT_OUTPUT  # its max_tokens is not read
    assert estimate.pico == _priced(dear, "anthropic.messages", estimate.input_tokens, DEFAULT_OUTPUT)


def test_a_tier_the_request_asks_for_is_priced() -> None:
    estimator = Estimator(Pricer(), DEFAULT_OUTPUT, clock=lambda: NOW)
    body = {"model": "gpt-5", "input": "x", "max_output_tokens": 100000}
    standard, _ = _ask(estimator, "openai.responses", "/v1/responses", body, host="api.openai.com")
    flex, _ = _ask(
        estimator, "openai.responses", "/v1/responses", body | {"service_tier": "flex"}, host="api.openai.com"
    )
    assert flex.pico < standard.pico


# -- the ledger --------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_reservation_goes_once_its_record_is_settled_and_a_later_spend_read() -> None:
    clock = Clock()
    ledger = Ledger(clock=clock)
    team, key = ("team", "a"), ("key", "k")
    first = ledger.reserve([team, key], 30)
    second = ledger.reserve([team], 5)
    assert (ledger.held(team), ledger.held(key)) == (35, 30)
    ledger.ended(first)
    ledger.settle(submitted=10, backlog=1)  # its record is the 10th at most: not yet settled
    clock.now = 101.0
    assert ledger.release(stamp=200.0) == 0 and ledger.held(team) == 35
    ledger.settle(submitted=12, backlog=2)  # the first ten are settled now
    assert ledger.release(stamp=clock.now - 0.5) == 0, "a spend read before it settled does not count it"
    clock.now = 102.0
    assert ledger.release(stamp=clock.now) == 1
    assert (ledger.held(team), ledger.held(key), len(ledger)) == (5, 0, 1)
    ledger.ended(second)
    ledger.settle(submitted=13, backlog=0)
    clock.now = 103.0
    assert ledger.release(stamp=clock.now) == 1 and ledger.held(team) == 0 and len(ledger) == 0


def test_reservations_expire_when_no_release_can_come(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    ledger = Ledger(clock=clock, stale_s=600, settled_s=60)
    lost = ledger.reserve([("team", "a")], 10)  # never handed over (a bug)
    settled = ledger.reserve([("team", "a")], 20)  # settled, but no spend from the writer comes
    ledger.ended(settled)
    ledger.settle(submitted=1, backlog=0)
    clock.now += 61
    assert ledger.release(stamp=None) == 1 and ledger.held(("team", "a")) == 10
    clock.now += 600
    assert ledger.release(stamp=None) == 1 and len(ledger) == 0
    ledger.ended(lost)  # late: nothing left to end
    assert [r.getMessage() for r in caplog.records] == [
        "llmtap budgets: 1 reservations expired unreleased (no spend from the writer)"
    ]
