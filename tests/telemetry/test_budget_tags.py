"""Budget limits per tag (SPEC §4, `[budgets.tags] "NAME=VALUE" = {...}`): the table's
names checked, a tag's spend read from the store (SQLite, and PostgreSQL when set) and
counted from committed rows, and the gate refusing a request whose tag is over its limit
whatever its team. Not responsible for how tags are read off a request
(tests/addon/test_tags_header.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from llmtap.addon.budget_gate import BudgetGate
from llmtap.analytics.pricing import Pricer
from llmtap.telemetry import budget_spend, budget_state
from llmtap.telemetry.budget_config import Limit, parse
from llmtap.telemetry.budget_estimate import Estimator
from llmtap.telemetry.budget_gate import ProxyGate
from tests.addon.conftest import LISTENER_PORT, Rig
from tests.addon.flows import request_flow
from tests.telemetry.test_budget_gate import KEY, Gated, _body, rig
from tests.telemetry.test_budgets import NOW, PICO, _row, _store, engine

__all__ = ["engine", "rig"]  # the fixtures, shared

HOSTILE = "at_l%s"  # LIKE's wildcards: must match itself only


def _tagged(team: str, usd: str, tags: dict[str, str] | None, started: Any = NOW) -> dict[str, Any]:
    row = _row(team, usd, started)
    row["tags"] = json.dumps(dict(sorted(tags.items())), separators=(",", ":")) if tags else None
    return row


@pytest.mark.parametrize("name", ["project", "Project=x", "p=a,b", "p=", "=x", "p= x"])
def test_a_tag_limit_names_one_tag(name: str) -> None:
    with pytest.raises(ValueError, match=r"\[budgets.tags\] .* is not a tag as NAME=VALUE"):
        parse({"tags": {name: {"usd": 1}}})
    (limit,) = parse({"tags": {"project=atlas": {"usd": 5, "period": "day"}}}).limits
    assert (limit.scope, limit.name, limit.usd) == ("tag", "project=atlas", Decimal(5))


def test_a_tags_spend_is_read_from_the_store(engine: Engine) -> None:
    _store(
        engine,
        [
            _tagged("a", "1.5", {"project": "atlas"}),
            _tagged("b", "2", {"feature": "x", "project": "atlas", "zz": "1"}),  # any team, any place in the object
            _tagged("b", "4", {"project": "atlas2"}),
            _tagged("b", "8", {"xproject": "atlas"}),
            _tagged("b", "16", {"project": "atlasx"}),
            _tagged("b", "32", {"project": "atlas"}, NOW - timedelta(days=40)),  # another month
            _tagged("c", "64", {"project": "atxl5s"}),  # what LIKE's _ and % would match
            _tagged("c", "128", {"project": HOSTILE}),
            _tagged("c", "256", None),
        ],
    )
    limits = [
        Limit("tag", "project=atlas", Decimal(100), "month", (100,)),
        Limit("tag", f"project={HOSTILE}", Decimal(1000), "month", (100,)),
    ]
    found = budget_spend.standings(limits, NOW)
    assert budget_spend.read(engine, found) == [int(Decimal("3.5") * PICO), 128 * PICO]


def test_committed_rows_count_toward_their_tags() -> None:
    tracker = budget_spend.Tracker([Limit("tag", "project=atlas", Decimal(10), "day", (50, 100))], NOW)
    assert tracker.add([_tagged("a", "6", {"project": "atlas", "env": "prod"})])
    assert not tracker.add([_tagged("a", "6", {"project": "zephyr"}), _tagged("a", "6", None)])
    assert not tracker.add([{**_tagged("a", "6", None), "tags": "{not json"}])
    (standing,) = tracker.standings
    assert standing.spent_usd == Decimal(6) and standing.crossed() == (50,)


@pytest.fixture
def tag_gated(rig: Rig, tmp_path: Path) -> Iterator[Gated]:
    settings = parse({"enforce": True, "default_output_tokens": 100, "tags": {"project=atlas": {"usd": 0.001}}})
    state = budget_state.path_in(tmp_path)
    gate = ProxyGate(settings, state, Estimator(Pricer(), settings.default_output_tokens), rig.writer)
    gate.start()
    addon = BudgetGate(gate)
    rig.recorder.on_handed = addon.handed
    yield Gated(rig, gate, addon, addon.websockets(rig.recorder.websockets), settings, state)
    gate.close()


def test_a_tag_over_its_limit_is_refused_whatever_the_team(tag_gated: Gated) -> None:
    tag_gated.spend(**{"project=atlas": 0.001})
    tag_gated.gate.step()
    over = request_flow(
        body=_body(5), headers=[("x-api-key", KEY), ("X-LLMTap-Tags", "project=atlas")], listener_port=LISTENER_PORT
    )
    tag_gated.through(over)
    assert over.response is not None and over.response.status_code == 429
    assert "tag project=atlas is over its month budget" in (over.response.text or "")
    other = request_flow(body=_body(5), headers=[("x-api-key", KEY), ("X-LLMTap-Tags", "project=zephyr")])
    tag_gated.through(other)
    assert other.response is None  # another tag: let through
