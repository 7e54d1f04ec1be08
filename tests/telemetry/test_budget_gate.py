"""The budget gate addon inside mitmproxy's test context, after a real recorder and writer
(tests/addon's rig) and before the response hooks mitmproxy runs for a response an addon
made: it asks about the team the recorder's attribution found, refuses in the protocol's
shape, the refusal is recorded, and follow-ups and other requests are never asked about."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from mitmproxy import http

from llmtap.addon.budget_gate import BudgetGate
from llmtap.addon.recorder import FOLLOW_KEY, META_KEY
from llmtap.telemetry import budget_spend, budget_state, budgets
from llmtap.telemetry.budget_config import parse
from llmtap.telemetry.settings import Telemetry
from tests.addon import conftest as addon_fixtures
from tests.addon.conftest import LISTENER_PORT, Rig
from tests.addon.flows import request_flow

rig = addon_fixtures.rig  # the recorder and writer rig of tests/addon, as a fixture here
KEY = "sk-ant-api03-UNITCANARYBUDGETGATE00000000wxyz"
ANTHROPIC = json.dumps({"model": "claude-haiku-4-5", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]})


@pytest.fixture
def asked(tmp_path: Path) -> Iterator[tuple[BudgetGate, list[tuple[Any, ...]]]]:
    """The gate `llmtap proxy` makes, with the over-limit file saying team `listener-team`
    and team `search` are over; and the questions it was asked."""
    settings = parse({"enforce": True, "teams": {"listener-team": {"usd": 1}, "search": {"usd": 1}, "ok": {"usd": 1}}})
    over = budget_spend.standings(settings.limits[:2], datetime.now(UTC))
    budget_state.write(budget_state.path_in(tmp_path), budget_state.encode(over, datetime.now(UTC)))
    gate, close = budgets.gate_in_proxy(Telemetry(db_url="sqlite://", spool_dir=tmp_path, budgets=settings))
    assert gate is not None
    questions: list[tuple[Any, ...]] = []

    def recording(*question: Any) -> Any:
        questions.append(question)
        return gate(*question)

    yield BudgetGate(recording), questions
    close()


def _through(rig: Rig, gate: BudgetGate, flow: http.HTTPFlow) -> None:
    """The hooks as mitmproxy runs them: `request` (recorder, then gate); for a response an
    addon made, `responseheaders` and `response` at once."""
    rig.recorder.request(flow)
    gate.request(flow)
    if flow.response is not None:
        rig.recorder.responseheaders(flow)
        rig.recorder.response(flow)


def test_a_team_over_budget_is_refused_and_the_refusal_recorded(rig: Rig, asked: Any) -> None:
    gate, questions = asked
    flow = request_flow(body=ANTHROPIC.encode(), headers=[("x-api-key", KEY)], listener_port=LISTENER_PORT)
    _through(rig, gate, flow)
    assert questions == [("listener-team", rig.fingerprint(KEY), "anthropic.messages", "/v1/messages")]
    assert flow.response is not None and flow.response.status_code == 429
    assert json.loads(flow.response.content or b"")["error"]["type"] == "rate_limit_error"
    (row,) = rig.rows()
    assert (row["team"], row["status"], row["error_type"]) == ("listener-team", 429, "rate_limit_error")
    assert row["key_fingerprint"] == rig.fingerprint(KEY) and row["cost_total_pico"] is None


def test_the_team_header_counts_and_is_still_stripped(rig: Rig, asked: Any) -> None:
    gate, questions = asked
    for team, refused in (("search", True), ("ok", False)):
        flow = request_flow(body=ANTHROPIC.encode(), headers=[("x-api-key", KEY), ("X-LLMTap-Team", team)])
        rig.recorder.request(flow)
        gate.request(flow)
        assert questions[-1][0] == team
        assert (flow.response is not None) is refused
        assert "x-llmtap-team" not in flow.request.headers


def test_follow_ups_and_other_requests_are_never_asked_about(rig: Rig, asked: Any) -> None:
    gate, questions = asked
    poll = request_flow("/v1/responses/resp_1", body=b"", method="GET", listener_port=LISTENER_PORT)
    models = request_flow("/v1/models", body=b"", method="GET", listener_port=LISTENER_PORT)
    form = request_flow(body=b"a=b", listener_port=LISTENER_PORT)
    for flow in (poll, models, form):
        rig.recorder.request(flow)
        gate.request(flow)
        assert flow.response is None
    assert FOLLOW_KEY in poll.metadata and META_KEY in poll.metadata  # tracked, as a follow-up
    assert questions == []
