"""Only a provider's host is billed by what it says (SPEC §4), and every record says which
rule named its team: a HAR imported with `llmtap import` (the real command), then
`llmtap reprice` and `llmtap report cost`. An entry to a host that is no provider's, which
claims a billion tokens of an expensive model, stays `unpriced` (`unverified_host`)
through a re-price; the entries to provider hosts are priced as before."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from llmtap.storage import schema
from llmtap.storage.engine import make_engine
from tests.analytics.conftest import BACKENDS, blank_database
from tests.corpus_tools import har_entry, read_case
from tests.helpers import llmtap

HAR_CASE = "a_anth_json_cache_write"
FORGED = {
    "id": "msg_forged",
    "type": "message",
    "role": "assistant",
    "model": "claude-opus-4-1-20250805",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 1_000_000_000, "output_tokens": 100_000_000},
}


@pytest.fixture(params=BACKENDS)
def blank(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with blank_database(request.param, tmp_path_factory.mktemp(f"trust-{request.param}")) as url:
        yield url


def _har(corpus_dir: Path, out: Path) -> None:
    from datetime import UTC, datetime, timedelta

    case, body, request = read_case(corpus_dir / HAR_CASE)
    start = datetime(2026, 11, 5, 9, tzinfo=UTC)
    with_team = har_entry(case, body, request, "search", start)
    without_team = har_entry(case, body, request, "", start + timedelta(minutes=1))
    without_team["request"]["headers"] = [h for h in without_team["request"]["headers"] if h["name"] != "X-LLMTap-Team"]
    forged = har_entry(case, json.dumps(FORGED).encode(), request, "victims", start + timedelta(minutes=2))
    forged["request"]["url"] = "https://llm.attacker.example/v1/messages"
    har = {
        "log": {
            "version": "1.2",
            "creator": {"name": "t", "version": "1"},
            "entries": [with_team, without_team, forged],
        }
    }
    out.write_text(json.dumps(har))


def test_imported_unverified_host_stays_unpriced_through_reprice(blank: str, corpus_dir: Path, tmp_path: Path):
    har = tmp_path / "mixed.har"
    _har(corpus_dir, har)
    env = {"LLMTAP_HOME": str(tmp_path / "home")}
    assert llmtap("import", str(har), "--db", blank, env=env, process=True).code == 0
    assert llmtap("reprice", "--db", blank, env=env, process=True).code == 0

    engine = make_engine(blank)
    try:
        with engine.connect() as connection:
            ex = schema.exchanges
            rows = connection.execute(
                select(
                    ex.c.team, ex.c.attribution, ex.c.host, ex.c.price_status, ex.c.price_reason, ex.c.cost_total_pico
                ).order_by(ex.c.started_at)
            ).all()
    finally:
        engine.dispose()
    (team, rule, _, status, reason, cost), (team2, rule2, *_), forged = rows
    assert (team, rule, status, reason) == ("search", "header", "priced", None) and cost > 0
    assert (team2, rule2) == ("unattributed", "none")
    assert forged[:6] == ("victims", "header", "llm.attacker.example", "unpriced", "unverified_host", None)

    cost = llmtap("report", "cost", "--by", "team", "--format", "json", "--db", blank, env=env, process=True)
    by_team = {row["team"]: row for row in json.loads(cost.out)}
    assert by_team["victims"]["cost_usd"] is None
    assert (by_team["victims"]["unpriced"], by_team["victims"]["unverified_host"]) == (1, 1)
    assert by_team["search"]["unverified_host"] == 0
