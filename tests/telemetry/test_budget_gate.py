"""The budget gate inside mitmproxy's test context, around a real recorder and writer
(tests/addon's rig): the gate `llmtap proxy` makes (telemetry/budget_gate.py) reads the
committed spend from a state file written as the writer's process writes it, admits a
request only while its estimate fits, holds the estimate until the record is settled and
a later spend is read, refuses in the protocol's shape (the refusal recorded), counts
every credential a request carries, and gates WebSocket upgrades and each
`response.create`."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from mitmproxy import http, websocket
from mitmproxy.test import tflow
from wsproto.frame_protocol import Opcode

from llmtap.addon.budget_gate import BudgetGate, WebSocketBudgetGate
from llmtap.addon.recorder import FOLLOW_KEY, META_KEY
from llmtap.analytics.pricing import Pricer
from llmtap.telemetry import budget_spend, budget_state
from llmtap.telemetry.budget_config import BudgetSettings, parse
from llmtap.telemetry.budget_estimate import Estimator
from llmtap.telemetry.budget_gate import ProxyGate
from tests.addon import conftest as addon_fixtures
from tests.addon.conftest import LISTENER_PORT, Rig
from tests.addon.flows import request_flow

rig = addon_fixtures.rig  # the recorder and writer rig of tests/addon, as a fixture here
KEY = "sk-ant-api03-UNITCANARYBUDGETGATE00000000wxyz"
OTHER = "sk-proj-UNITCANARYBUDGETGATEOTHER0000000abcd"
HAIKU = "claude-haiku-4-5"


def _body(max_tokens: int) -> bytes:
    return json.dumps(
        {"model": HAIKU, "max_tokens": max_tokens, "messages": [{"role": "user", "content": "x"}]}
    ).encode()


@dataclass
class Gated:
    rig: Rig
    gate: ProxyGate
    addon: BudgetGate
    sockets: WebSocketBudgetGate
    settings: BudgetSettings
    state: Path

    def spend(self, **spent_usd: float) -> None:
        """Write the committed spend as the writer's process does (stamped now)."""
        standings = budget_spend.standings(self.settings.limits, datetime.now(UTC))
        for standing in standings:
            standing.spent_pico = int(spent_usd.get(standing.limit.name, 0) * 10**12)
        budget_state.write(self.state, budget_state.encode(standings, datetime.now(UTC)))

    def estimate(self, body: bytes) -> int:
        return self.gate.estimator.estimate(
            protocol="anthropic.messages", path="/v1/messages", host=None, body=body
        ).pico

    def through(self, flow: http.HTTPFlow) -> None:
        """The hooks as mitmproxy runs them: `request` (recorder, then gate); for a response
        an addon made, `responseheaders` and `response` at once."""
        self.rig.recorder.request(flow)
        self.addon.request(flow)
        if flow.response is not None:
            self.rig.recorder.responseheaders(flow)
            self.rig.recorder.response(flow)


@pytest.fixture
def gated(rig: Rig, tmp_path: Path) -> Iterator[Gated]:
    """The gate over team `listener-team` ($0.001 a day), `search` and key KEY."""
    fingerprint = rig.fingerprint(KEY)
    settings = parse(
        {
            "enforce": True,
            "default_output_tokens": 100,
            "teams": {"listener-team": {"usd": 0.001, "period": "day"}, "search": {"usd": 1}},
            "keys": {fingerprint: {"usd": 1, "period": "day"}},
        }
    )
    state = budget_state.path_in(tmp_path)
    gate = ProxyGate(settings, state, Estimator(Pricer(), settings.default_output_tokens), rig.writer)
    gate.start()
    addon = BudgetGate(gate)
    rig.recorder.on_handed = addon.handed
    from mitmproxy.addons import proxyserver  # after tests.addon's conftest quiets its imports' warnings

    rig.tctx.master.addons.add(proxyserver.Proxyserver())  # its `inject.websocket` command
    yield Gated(rig, gate, addon, addon.websockets(rig.recorder.websockets), settings, state)
    gate.close()


def _wait(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.02)


def _answer(rig: Rig, flow: http.HTTPFlow) -> None:
    """The upstream's answer, held whole, priced at nothing (no usage)."""
    flow.response = http.Response.make(200, b'{"type":"message","content":[]}', {"content-type": "application/json"})
    rig.recorder.responseheaders(flow)
    rig.recorder.response(flow)


def test_a_team_over_budget_is_refused_and_the_refusal_recorded(gated: Gated) -> None:
    gated.spend(**{"listener-team": 0.001})
    gated.gate.step()
    flow = request_flow(body=_body(5), headers=[("x-api-key", KEY)], listener_port=LISTENER_PORT)
    gated.through(flow)
    assert flow.response is not None and flow.response.status_code == 429
    assert json.loads(flow.response.content or b"")["error"]["type"] == "rate_limit_error"
    assert "team listener-team is over its day budget of $0.001" in (flow.response.text or "")
    (row,) = gated.rig.rows()
    assert (row["team"], row["status"], row["error_type"]) == ("listener-team", 429, "rate_limit_error")
    assert row["key_fingerprint"] == gated.rig.fingerprint(KEY) and row["cost_total_pico"] is None


def test_spend_in_flight_counts_until_its_record_is_counted(gated: Gated) -> None:
    body = _body(60)  # haiku: $5 a million output tokens, so about $0.0003 each
    estimate = gated.estimate(body)
    fits = 10**9 // estimate  # $0.001 of team listener-team
    assert 2 <= fits < 10
    gated.spend()  # nothing committed yet
    gated.gate.step()
    admitted = []
    for _ in range(fits):
        flow = request_flow(body=body, headers=[("x-api-key", KEY)], listener_port=LISTENER_PORT)
        gated.through(flow)
        assert flow.response is None, "refused while its estimate fits"
        assert flow.metadata[META_KEY].reservation is not None
        admitted.append(flow)
    refused = request_flow(body=body, headers=[("x-api-key", KEY)], listener_port=LISTENER_PORT)
    gated.through(refused)
    assert refused.response is not None and refused.response.status_code == 429
    assert refused.response.headers["retry-after"] == "5"  # it fits once the work in flight is settled
    assert "held by requests in flight" in (refused.response.text or "")

    for flow in admitted:
        _answer(gated.rig, flow)  # handed to the writer
    assert gated.rig.writer.flush(10)
    gated.gate.step()  # settled, but no spend read since: still held
    assert gated.gate.ledger.held(("team", "listener-team")) == fits * estimate
    gated.spend()  # the writer's process: nothing of it cost anything
    _wait(lambda: (gated.gate.step(), gated.gate.ledger.held(("team", "listener-team")))[1] == 0)
    again = request_flow(body=body, headers=[("x-api-key", KEY)], listener_port=LISTENER_PORT)
    gated.through(again)
    assert again.response is None


def test_every_credential_a_request_carries_counts(gated: Gated) -> None:
    """KEY's budget is spent: sending it in a header the destination does not read still
    refuses, and the record's key is the destination's."""
    gated.spend(**{gated.rig.fingerprint(KEY): 1})
    gated.gate.step()
    headers = [("authorization", f"Bearer {OTHER}"), ("x-api-key", KEY), ("X-LLMTap-Team", "search")]
    body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]}).encode()
    flow = request_flow("/v1/chat/completions", body=body, headers=headers)
    gated.through(flow)
    assert flow.response is not None and flow.response.status_code == 429
    assert "insufficient_quota" in (flow.response.text or "")
    (row,) = gated.rig.rows()
    assert row["key_fingerprint"] == gated.rig.fingerprint(OTHER)  # OpenAI reads the bearer


def test_follow_ups_and_other_requests_are_let_through_unreserved(gated: Gated) -> None:
    gated.spend(**{"listener-team": 0.001})
    gated.gate.step()
    poll = request_flow("/v1/responses/resp_1", body=b"", method="GET", listener_port=LISTENER_PORT)
    models = request_flow("/v1/models", body=b"", method="GET", listener_port=LISTENER_PORT)
    form = request_flow(body=b"a=b", listener_port=LISTENER_PORT)
    for flow in (poll, models, form):
        gated.through(flow)
        assert flow.response is None
    assert FOLLOW_KEY in poll.metadata and META_KEY in poll.metadata  # tracked, as a follow-up
    assert len(gated.gate.ledger) == 0


# -- WebSocket mode ---------------------------------------------------------------------


def _upgrade(team: str) -> http.HTTPFlow:
    flow = tflow.twebsocketflow(messages=False)
    flow.request.path = "/v1/responses"
    flow.request.headers["Authorization"] = f"Bearer {OTHER}"
    flow.request.headers["X-LLMTap-Team"] = team
    flow.request.headers["Upgrade"] = "websocket"
    flow.response = None
    flow.websocket = websocket.WebSocketData()
    return flow


def _say(gated: Gated, flow: http.HTTPFlow, content: bytes, from_client: bool = True) -> websocket.WebSocketMessage:
    """A message through the hooks in the proxy's order: the WebSocket gate, then the recorder."""
    assert flow.websocket is not None
    message = websocket.WebSocketMessage(Opcode.TEXT, from_client, content)
    flow.websocket.messages.append(message)
    gated.sockets.websocket_message(flow)
    gated.rig.recorder.websocket_message(flow)
    return message


def _create(**fields: Any) -> bytes:
    return json.dumps({"type": "response.create", "model": "gpt-4o-mini", "input": "hi", **fields}).encode()


def test_a_websocket_upgrade_is_refused_while_the_team_is_over(gated: Gated) -> None:
    gated.spend(search=1)
    gated.gate.step()
    flow = _upgrade("search")
    gated.rig.recorder.request(flow)
    gated.addon.request(flow)
    assert flow.response is not None and flow.response.status_code == 429
    assert json.loads(flow.response.content or b"")["error"]["code"] == "insufficient_quota"
    assert flow.response.headers["x-llmtap-refused"] == "budget"


def test_each_response_create_is_admitted_or_refused_and_recorded(gated: Gated) -> None:
    gated.spend()
    gated.gate.step()
    flow = _upgrade("search")
    gated.rig.recorder.request(flow)
    gated.addon.request(flow)
    assert flow.response is None  # under budget: the session opens
    gated.rig.recorder.websocket_start(flow)
    first = _say(gated, flow, _create(max_output_tokens=10))
    assert not first.dropped
    session = gated.rig.recorder.websockets.sessions[flow.id]
    assert session.meta is not None and session.meta.reservation is not None  # the exchange holds it

    gated.spend(search=1)  # over now (another proxy's spend, say)
    gated.gate.step()
    second = _say(gated, flow, _create(max_output_tokens=10, stream_id="lane-2"))
    assert second.dropped, "a refused response.create was forwarded"
    assert session.meta is not None and session.meta.reservation is not None  # the first is still in flight
    completed = {"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-4o-mini",
                 "output": [], "usage": {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4}}  # fmt: skip
    _say(gated, flow, json.dumps({"type": "response.completed", "response": completed}).encode(), False)
    gated.rig.recorder.websocket_end(flow)

    rows = sorted(gated.rig.rows(), key=lambda r: r["status"])
    assert [(r["status"], r["response_id"], r["error_type"]) for r in rows] == [
        (101, "resp_1", None),
        (429, None, "insufficient_quota"),
    ]
    assert "team search is over its month budget" in rows[1]["error_message"]
    assert rows[1]["team"] == "search" and rows[1]["source"] == "websocket"
