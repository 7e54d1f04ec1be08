"""Cache causes across a Responses `previous_response_id` chain (SPEC §5 Conversation and
Cache): a chained request extends the prefix it names, so the chain's tools (top-level
or in `additional_tools` items), instructions and developer messages stand for it unless
it declares others, and its previous turn is the response it names. Over a store written
by the real writer, on SQLite and PostgreSQL; `report cache --list`, the grouped report,
`show` and the stored verdicts the writer hands its observers as it commits must agree.

The traffic (team `agents`, one key, gpt-5: minimum cacheable 1,024 tokens), each a chain
of its own, Codex-shaped (tools in an `additional_tools` item with a namespace, the system
prompt as developer messages) unless said:
  pause       the follow-up carries only a function_call_output, 10 minutes later, reads
              nothing: ttl_expired (not tools_changed nor system_changed: it declares none)
  pause-ws    the same over WebSocket (`response.create` messages)
  tools       the follow-up declares another tool in an `additional_tools` item: tools_changed
  top-tools   top-level tools and instructions; the follow-up sends other top-level tools
  developer   the follow-up carries a new developer message: system_changed
  instructions top-level instructions; the follow-up sends other instructions: system_changed
  repeats     instructions and a top-level tool sent again by the follow-up, the chain's
              additional_tools and developer message in its history: ttl_expired
  hit         the follow-up reads the chain's prefix: no miss
  two         one Codex session, two chains of one model interleaved (a subagent's): the
              second chain's follow-up is compared with the response it names
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from llmtap.analytics.pricing import Pricer
from llmtap.protocols import decode_exchange
from llmtap.storage.engine import make_engine
from llmtap.storage.migrate import ensure_current
from llmtap.storage.record import Recorded
from llmtap.storage.rows import RowSet
from llmtap.storage.writer import Writer
from tests.analytics import wire as w
from tests.analytics.conftest import BACKENDS, blank_database
from tests.helpers import llmtap

T0 = datetime(2026, 11, 6, 9, tzinfo=UTC)
KEY = "test-key-chains-EEEE"
EXEC = {"type": "custom", "name": "exec", "description": "Runs JavaScript.", "format": {"type": "text"}}
PLAN = {"type": "function", "name": "update_plan", "parameters": {"type": "object", "properties": {}}}
SHELL = {"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {}}}


def _tools_item(*tools: dict[str, Any]) -> dict[str, Any]:
    namespace = {"type": "namespace", "name": "functions", "description": "Local tools.", "tools": list(tools)}
    return {"type": "additional_tools", "role": "developer", "tools": [namespace]}


def _developer(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": text}]}


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _output(call: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call, "output": "README.md"}


def _codex_root(tag: str) -> dict[str, Any]:
    return {
        "model": "gpt-5",
        "stream": True,
        "store": False,
        "input": [_tools_item(EXEC, PLAN), _developer("You are Codex. " * 40), _developer("Sandbox: none."),
                  _user(f"{tag}: list the files")],
    }  # fmt: skip


def _exchange(
    request: dict[str, Any], rid: str, at: datetime, *, cached: int, source: str = "test", session: str | None = None
) -> Recorded:
    body = request
    if source == "websocket":  # Codex puts the fields beside `type` in its response.create
        body = {"type": "response.create", **request}
    response = w.responses_response("gpt-5-2025-08-07", rid, input_tokens=6000, cached=cached, output=40, reasoning=8)
    raw = json.dumps(body).encode()
    exchange = decode_exchange(
        "openai.responses",
        response=json.dumps(response).encode(),
        request=raw,
        path="/v1/responses",
        host="api.openai.com",
        status=101 if source == "websocket" else 200,
        content_type="application/json",
    )
    rec = Recorded(
        exchange=exchange,
        started_at=at,
        ended_at=at + timedelta(seconds=3),
        team="agents",
        key_fingerprint=w.FINGERPRINTS.fingerprint(KEY),
        key_last4=w.FINGERPRINTS.last4(KEY),
        source=source,
        method="WS" if source == "websocket" else "POST",
        host="api.openai.com",
        path="/v1/responses",
        request_body=raw,
        response_body=json.dumps(response).encode(),
        response_content_type="application/json",
    )
    if session:
        rec.request_headers = [("session_id", session)]
    return rec


def _chain(
    hour: int,
    tag: str,
    follow: dict[str, Any],
    *,
    root: dict[str, Any] | None = None,
    after: timedelta = timedelta(seconds=20),
    cached: int = 0,
    source: str = "test",
) -> list[Recorded]:
    """A root request and one follow-up naming its response (`follow` adds to its body)."""
    at = T0 + timedelta(hours=2 * hour)  # over an hour apart: none is the previous of another
    first = _exchange(root or _codex_root(tag), f"resp_{tag}_1", at, cached=0, source=source)
    body = {"model": "gpt-5", "stream": True, "store": False, "previous_response_id": f"resp_{tag}_1",
            "input": [_output(f"call_{tag}")], **follow}  # fmt: skip
    return [first, _exchange(body, f"resp_{tag}_2", at + after, cached=cached, source=source)]


def _top_level(tag: str, tools: list[dict[str, Any]], instructions: str) -> dict[str, Any]:
    return {"model": "gpt-5", "instructions": instructions, "tools": tools, "input": [_user(f"{tag}: go")]}


def _interleaved() -> list[Recorded]:
    """One session: chain A (the agent) and chain B (a subagent with other tools), one
    model; A's follow-up reads its cache, B's comes 11 minutes after B began and reads nothing."""
    at, session = T0 + timedelta(hours=16), "019a-codex-two"
    agent = _codex_root("two-a")
    helper = dict(_codex_root("two-b"), input=[_tools_item(SHELL), _developer("You are a helper."), _user("look")])
    follow = {"model": "gpt-5", "stream": True, "store": False}
    return [
        _exchange(agent, "resp_two_a1", at, cached=0, session=session),
        _exchange(helper, "resp_two_b1", at + timedelta(seconds=5), cached=0, session=session),
        _exchange(dict(follow, previous_response_id="resp_two_a1", input=[_output("call_a")]), "resp_two_a2",
                  at + timedelta(seconds=10), cached=5000, session=session),
        _exchange(dict(follow, previous_response_id="resp_two_b1", input=[_output("call_b")]), "resp_two_b2",
                  at + timedelta(minutes=11), cached=0, session=session),
    ]  # fmt: skip


def traffic() -> dict[str, list[Recorded]]:
    pause = timedelta(minutes=10)
    return {
        "pause": _chain(0, "pause", {}, after=pause),
        "pause-ws": _chain(1, "pause-ws", {}, after=pause, source="websocket"),
        "tools": _chain(2, "tools", {"input": [_tools_item(SHELL), _output("call_tools")]}),
        "top-tools": _chain(
            3,
            "top-tools",
            {"instructions": "Be brief.", "tools": [SHELL, PLAN]},
            root=_top_level("top-tools", [SHELL], "Be brief."),
        ),  # fmt: skip
        "developer": _chain(4, "developer", {"input": [_developer("Approval: never."), _output("call_developer")]}),
        "instructions": _chain(
            5,
            "instructions",
            {"instructions": "Be thorough.", "tools": [SHELL]},
            root=_top_level("instructions", [SHELL], "Be brief."),
        ),  # fmt: skip
        "repeats": _chain(
            6,
            "repeats",
            {"instructions": "Be brief.", "tools": [SHELL]},
            after=pause,
            root=dict(_codex_root("repeats"), instructions="Be brief.", tools=[SHELL]),
        ),  # fmt: skip
        "hit": _chain(7, "hit", {}, cached=5000),
        "two": _interleaved(),
    }


class LiveCauses:
    """The verdicts the writer hands its observers: each committed batch, row by row."""

    def __init__(self) -> None:
        self.causes: dict[str, str | None] = {}

    def observe(self, rows: RowSet) -> None:
        for row in rows.exchanges:
            missed = row["cache_verdict"] in ("miss", "not_cacheable")
            self.causes[row["id"]] = row["cache_cause"] if missed else None

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def convs() -> dict[str, list[Recorded]]:
    return traffic()


@pytest.fixture(scope="module", params=BACKENDS)
def stored(
    request: pytest.FixtureRequest, convs, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, LiveCauses]]:
    folder: Path = tmp_path_factory.mktemp(f"chains-{request.param}")
    live = LiveCauses()
    with blank_database(request.param, folder) as url:
        engine = make_engine(url)
        try:
            ensure_current(engine)
            # a root is stored before its follow-up arrives, except the WebSocket pair
            # (one batch), as the writer takes them
            writer = Writer(engine, spool_dir=folder / "spool", enrich=Pricer().price_rows, observers=[live])
            for name, records in convs.items():
                batches = [records] if name == "pause-ws" else [[rec] for rec in records]
                for batch in batches:
                    for rec in batch:
                        writer.submit(rec)
                    assert writer.flush(30)
            assert writer.close()
        finally:
            engine.dispose()
        yield url, live


def run(url: str, *args: str) -> Any:
    result = llmtap(*args, "--db", url, "--format", "json")
    assert result.code == 0, result.err
    return result.json()


@pytest.fixture(scope="module")
def misses(stored) -> dict[str, dict[str, Any]]:
    return {row["exchange_id"]: row for row in run(stored[0], "report", "cache", "--list")}


CAUSES = {
    "pause": "ttl_expired",
    "pause-ws": "ttl_expired",
    "tools": "tools_changed",
    "top-tools": "tools_changed",
    "developer": "system_changed",
    "instructions": "system_changed",
    "repeats": "ttl_expired",
}


@pytest.mark.parametrize("name", sorted(CAUSES))
def test_a_chained_follow_up_misses_for_what_changed_in_the_prefix_it_names(convs, misses, name):
    root, follow = convs[name]
    miss = misses[follow.id]
    assert (miss["cause"], miss["message_index"], miss["previous_exchange_id"]) == (CAUSES[name], None, root.id)
    assert miss["missed_tokens"] == 6000
    assert root.id not in misses  # the first request of its conversation


def test_a_hit_stays_a_hit(stored, convs, misses):
    root, follow = convs["hit"]
    assert follow.id not in misses
    assert run(stored[0], "show", follow.id)["cache"]["verdict"] == "hit"


def test_an_interleaved_chain_is_compared_with_the_response_it_names(convs, misses):
    a1, b1, a2, b2 = convs["two"]
    assert a2.id not in misses
    miss = misses[b2.id]
    # the turn before it in time is a2, of the other chain (other tools); the one it names is b1
    assert (miss["cause"], miss["previous_exchange_id"]) == ("ttl_expired", b1.id)
    assert miss["gap_s"] == pytest.approx((b2.started_at - b1.ended_at).total_seconds())


def test_show_names_the_cause_and_the_turn_it_follows(stored, convs):
    root, follow = convs["pause-ws"]
    shown = run(stored[0], "show", follow.id)["cache"]
    assert (shown["verdict"], shown["cause"], shown["previous_exchange_id"]) == ("miss", "ttl_expired", root.id)


def test_the_grouped_report_counts_the_misses_it_lists(stored, misses):
    [group] = run(stored[0], "report", "cache")
    assert group["misses"] == len(misses) == len(CAUSES) + 1  # and the interleaved chain's
    assert group["not_cacheable"] == 0


def test_the_live_rule_names_the_same_causes(stored, convs, misses):
    live = stored[1]
    every = [rec for records in convs.values() for rec in records]
    assert set(live.causes) == {rec.id for rec in every}
    assert {i: c for i, c in live.causes.items() if c is not None} == {i: m["cause"] for i, m in misses.items()}
