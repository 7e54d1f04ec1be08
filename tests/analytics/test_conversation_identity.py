"""Conversation identity (SPEC §5, issue 15) through the CLI, over a store written by the
real writer, on SQLite and PostgreSQL: a client's session id first, then a Responses
previous_response_id chain, else the prefix rule.

The traffic, by hand (team `agents`, one key each where said):
  run-a   `claude -p` run, session sess-a: 3 turns from 10:00 (history grows each turn)
  run-b   a second run at 10:20, session sess-b, the same first prompt: 2 turns; its first
          request has 2 messages, the start of run-a's last one, and reads nothing from
          cache: under the prefix rule it would continue run-a (and was called
          message_edited, message_index 2); with its session it starts a conversation
  long    session sess-long: 2 turns 90 minutes apart, nothing read the second time: one
          conversation (a session is not cut at an hour), the second turn a miss, ttl_expired
  chain   Codex over HTTP without a session: a request whose answer calls `shell`
          (call_c1), then a follow-up naming its response and carrying only the
          function_call_output: one conversation, no orphan_result, no missing_result
  chain-x a chain of 3: a response calling shell twice, a follow-up answering one call
          (missing_result for the other), a new question reading nothing (a miss; a
          chain's follow-up sends only what is new, so no message_edited)
  chain-xs the same inside a Codex session (session_id header on each request)
  ws      the same over WebSocket in one batch with its root, session header on both
  twin    a second key sending the same session id as run-a: a conversation of its own
  pre     no session, no chain (the prefix rule): 3 turns from 14:00, then at 14:20 a
          restart whose 2 messages are the start of turn 3's, nothing read: the same
          conversation, a miss whose cause is ttl_expired (20 minutes > 5), no message_index
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from llmtap.analytics.pricing import Pricer
from llmtap.protocols import decode_exchange
from llmtap.storage.engine import make_engine
from llmtap.storage.migrate import ensure_current
from llmtap.storage.record import Recorded
from llmtap.storage.writer import Writer
from tests.analytics import wire as w
from tests.analytics.conftest import BACKENDS, blank_database
from tests.helpers import llmtap

SONNET = "claude-sonnet-4-5-20250929"
GPT5 = "gpt-5-2025-08-07"
DAY = datetime(2026, 11, 4, tzinfo=UTC)
TEAM = "agents"
KEY = "test-key-agents-CCCC"
TWIN_KEY = "test-key-agents-DDDD"
PROMPT = "fix the failing test in tests/test_invoice.py"
SHELL = {
    "type": "function",
    "name": "shell",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
}


def _turn(session: str | None, at: datetime, n: int, usage: dict[str, Any], tag: str, key: str = KEY) -> Recorded:
    """A Claude Code request of 2n+1 messages: the prompt, then n steps and their results."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
    for step in range(1, n + 1):
        messages += [{"role": "assistant", "content": f"step {step}"}, {"role": "user", "content": f"result {step}"}]
    request = w.anthropic_request(SONNET, messages, system="You are Claude Code. " * 200)
    response = w.anthropic_response(SONNET, usage, msg_id=f"msg_{tag}")
    return _with_session(w.record(w.ANTHROPIC, request, response, at=at, team=TEAM, key=key), session)


def _claude(
    session: str | None, start: datetime, turns: list[tuple[int, dict[str, Any]]], tag: str, key: str = KEY
) -> list[Recorded]:
    """Claude Code turns: (minutes after `start`, usage); turn n carries 2n+1 messages."""
    return [
        _turn(session, start + timedelta(minutes=minutes), n, usage, f"{tag}_{n}", key)
        for n, (minutes, usage) in enumerate(turns)
    ]


def _restart(session: str | None, at: datetime, tag: str) -> Recorded:
    """A first request of 2 messages: the prompt and the first answer of a run before."""
    messages = [{"role": "user", "content": PROMPT}, {"role": "assistant", "content": "step 1"}]
    request = w.anthropic_request(SONNET, messages, system="You are Claude Code. " * 200)
    response = w.anthropic_response(SONNET, w.anthropic_usage(3200, 0, 0, 50), msg_id=f"msg_{tag}")
    return _with_session(w.record(w.ANTHROPIC, request, response, at=at, team=TEAM, key=KEY), session)


def _with_session(rec: Recorded, session: str | None, header: str = "X-Claude-Code-Session-Id") -> Recorded:
    if session is not None:
        rec.request_headers = [("User-Agent", "claude-cli/2.1.197"), (header, session)]
    return rec


def _responses(
    request: dict[str, Any],
    rid: str,
    output: list[dict[str, Any]],
    at: datetime,
    *,
    source: str = "test",
    cached: int | None = None,
) -> Recorded:
    if cached is None:
        cached = 2048 if request.get("previous_response_id") else 0
    response = {
        "id": rid,
        "object": "response",
        "status": "completed",
        "model": GPT5,
        "output": output,
        "usage": {
            "input_tokens": 2400,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": 40,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 2440,
        },
    }
    exchange = decode_exchange(
        "openai.responses",
        response=json.dumps(response).encode(),
        request=json.dumps(request).encode(),
        path="/v1/responses",
        host="api.openai.com",
        status=200,
        content_type="application/json",
    )
    return Recorded(
        exchange=exchange,
        started_at=at,
        ended_at=at + timedelta(seconds=3),
        team=TEAM,
        key_fingerprint=w.FINGERPRINTS.fingerprint(KEY),
        key_last4=w.FINGERPRINTS.last4(KEY),
        source=source,
        method="WS" if source == "websocket" else "POST",
        host="api.openai.com",
        path="/v1/responses",
        request_body=json.dumps(request).encode(),
        response_body=json.dumps(response).encode(),
        response_content_type="application/json",
    )


def _codex_pair(tag: str, at: datetime, *, source: str = "test") -> list[Recorded]:
    """A request whose answer calls `shell`, and the follow-up carrying only its output."""
    call = f"call_{tag}1"
    first = _responses(
        {"model": "gpt-5", "instructions": "You are Codex.", "tools": [SHELL],
         "input": [{"role": "user", "content": f"{tag}: list the files"}]},
        f"resp_{tag}1",
        [{"type": "function_call", "id": f"fc_{tag}1", "call_id": call, "name": "shell",
          "arguments": json.dumps({"cmd": "ls"})}],
        at,
        source=source,
    )  # fmt: skip
    second = _responses(
        {"model": "gpt-5", "instructions": "You are Codex.", "tools": [SHELL],
         "previous_response_id": f"resp_{tag}1",
         "input": [{"type": "function_call_output", "call_id": call, "output": "README.md\nsrc"}]},
        f"resp_{tag}2",
        [{"type": "message", "id": f"msg_{tag}2", "status": "completed", "role": "assistant",
          "content": [{"type": "output_text", "text": "Two entries.", "annotations": []}]}],
        at + timedelta(seconds=20),
        source=source,
    )  # fmt: skip
    return [first, second]


def _call(tag: str, n: int) -> dict[str, Any]:
    return {"type": "function_call", "id": f"fc_{tag}{n}", "call_id": f"call_{tag}{n}", "name": "shell",
            "arguments": json.dumps({"cmd": f"ls {n}"})}  # fmt: skip


def _longer_chain(at: datetime, tag: str = "x", session: str | None = None) -> list[Recorded]:
    """A chain (in a session where one is given): a response calling shell twice, a
    follow-up answering one call only, then a new question that reads nothing from cache."""

    def ask(previous: str | None, items: list[dict[str, Any]]) -> dict[str, Any]:
        body = {"model": "gpt-5", "instructions": "You are Codex.", "tools": [SHELL], "input": items}
        return {**body, "previous_response_id": previous} if previous else body

    answered = {"type": "function_call_output", "call_id": f"call_{tag}1", "output": "a.txt"}
    done = {"type": "message", "id": f"msg_{tag}", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}  # fmt: skip
    question = [{"role": "user", "content": "and now?"}]
    chain = [
        _responses(
            ask(None, [{"role": "user", "content": f"{tag}: tidy up"}]),
            f"resp_{tag}1",
            [_call(tag, 1), _call(tag, 2)],
            at,
        ),  # fmt: skip
        _responses(ask(f"resp_{tag}1", [answered]), f"resp_{tag}2", [done], at + timedelta(seconds=20)),
        _responses(ask(f"resp_{tag}2", question), f"resp_{tag}3", [done], at + timedelta(seconds=40), cached=0),
    ]
    for rec in chain:
        _with_session(rec, session, header="session_id")
    return chain


def traffic() -> dict[str, list[Recorded]]:
    u = w.anthropic_usage
    ws = _codex_pair("w", DAY + timedelta(hours=12), source="websocket")
    for rec in ws:
        _with_session(rec, "019a-codex-ws", header="session_id")
    return {
        "run-a": _claude(
            "sess-a",
            DAY + timedelta(hours=10),
            [(0, u(20, 3000, 0, 90)), (1, u(30, 200, 3000, 80)), (2, u(30, 150, 3200, 70))],
            "a",
        ),  # fmt: skip
        "run-b": [
            _restart("sess-b", DAY + timedelta(hours=10, minutes=20), "b0"),
            _turn("sess-b", DAY + timedelta(hours=10, minutes=21), 1, u(30, 200, 3000, 60), "b1"),
        ],
        "long": _claude(
            "sess-long", DAY + timedelta(hours=15), [(0, u(20, 3000, 0, 90)), (90, u(230, 3000, 0, 80))], "l"
        ),  # fmt: skip
        "chain": _codex_pair("c", DAY + timedelta(hours=11)),
        "chain-x": _longer_chain(DAY + timedelta(hours=11, minutes=30)),
        "chain-xs": _longer_chain(DAY + timedelta(hours=11, minutes=40), "y", session="019a-codex-y"),
        "ws": ws,
        "twin": _claude("sess-a", DAY + timedelta(hours=10, minutes=30), [(0, u(20, 3000, 0, 90))], "t", TWIN_KEY),
        "pre": [
            *_claude(
                None,
                DAY + timedelta(hours=14),
                [(0, u(20, 3000, 0, 90)), (1, u(30, 200, 3000, 80)), (2, u(30, 150, 3200, 70))],
                "p",
            ),  # fmt: skip
            _restart(None, DAY + timedelta(hours=14, minutes=20), "p3"),
        ],
    }


@pytest.fixture(scope="module")
def convs() -> dict[str, list[Recorded]]:
    return traffic()


@pytest.fixture(scope="module", params=BACKENDS)
def store(request: pytest.FixtureRequest, convs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp(f"identity-{request.param}")
    with blank_database(request.param, folder) as url:
        engine = make_engine(url)
        try:
            ensure_current(engine)
            # one batch per group, as the writer takes them: the HTTP chain's root is stored
            # before its follow-up arrives, the WebSocket pair arrives in one batch
            for name, records in convs.items():
                writer = Writer(
                    engine, spool_dir=folder / f"spool-{name}", enrich=Pricer().price_rows, body_mode="full"
                )
                if name == "chain":
                    writer.submit(records[0])
                    assert writer.flush(30)
                    records = records[1:]
                for record in records:
                    writer.submit(record)
                assert writer.close()
        finally:
            engine.dispose()
        yield url


def run(url: str, *args: str) -> Any:
    result = llmtap(*args, "--db", url, "--format", "json")
    assert result.code == 0, result.err
    return result.json()


def conversations(url: str) -> dict[str, dict[str, Any]]:
    return {row["conversation_id"]: row for row in run(url, "report", "conversations", "--top", "100")}


def misses(url: str) -> dict[str, dict[str, Any]]:
    return {row["exchange_id"]: row for row in run(url, "report", "cache", "--list")}


def test_two_runs_with_the_same_prompt_and_different_sessions_are_two_conversations(store, convs):
    found = conversations(store)
    a, b, twin = convs["run-a"], convs["run-b"], convs["twin"]
    assert found[a[0].id]["turns"] == 3
    assert found[b[0].id]["turns"] == 2  # not turns 4 and 5 of run-a, 20 minutes after it
    assert found[twin[0].id]["turns"] == 1  # another key's session of the same id
    assert b[0].id not in misses(store)  # the first request of a conversation is never a miss
    shown = run(store, "show", b[0].id, "--conversation")
    assert [t["id"] for t in shown["turns"]] == [b[0].id, b[1].id]
    assert shown["identity"] == {"rule": "session", "session_id": "sess-b"}
    table = llmtap("show", b[0].id, "--conversation", "--db", store, env={"COLUMNS": "200"})
    assert table.code == 0 and f"conversation of {b[0].id} (client session sess-b)" in table.out, table.err
    exchange = run(store, "show", a[1].id)
    assert exchange["who"]["session_id"] == "sess-a"
    assert exchange["cache"]["verdict"] == "hit"


def test_a_session_is_not_cut_at_an_hour_and_its_late_turn_is_a_ttl_miss(store, convs):
    first, late = convs["long"]
    assert conversations(store)[first.id]["turns"] == 2
    miss = misses(store)[late.id]
    assert (miss["cause"], miss["message_index"], miss["previous_exchange_id"]) == ("ttl_expired", None, first.id)
    assert miss["gap_s"] > 3600
    shown = run(store, "show", first.id, "--conversation")
    assert [t["id"] for t in shown["turns"]] == [first.id, late.id]
    assert shown["totals"]["cache_misses"] == 1


@pytest.mark.parametrize("name", ["chain", "ws"])
def test_a_follow_up_with_only_tool_output_continues_the_response_it_names(store, convs, name):
    root, follow = convs[name]
    found = conversations(store)
    assert found[root.id]["turns"] == 2
    assert follow.id not in found
    problems = run(store, "report", "tools", "--list")
    assert [p for p in problems if p["exchange_id"] in (root.id, follow.id)] == []  # no orphan, no missing
    shown = run(store, "show", follow.id, "--conversation")
    assert [t["id"] for t in shown["turns"]] == [root.id, follow.id]
    assert shown["turns"][0]["tool_calls"] == ["shell"]
    rule = "chain" if name == "chain" else "session"
    assert shown["identity"]["rule"] == rule
    assert follow.id not in misses(store)


@pytest.mark.parametrize("name", ["chain-x", "chain-xs"])
def test_a_chain_is_one_line_for_the_cache_and_its_follow_up_must_answer_every_call(store, convs, name):
    """A chain's requests are compared with the one before them in the chain, whatever
    their first message: a follow-up that reads nothing is a miss, and no message of it
    was edited (it sends only what is new); a follow-up that answers one of two calls
    leaves the other without its result."""
    root, answer, question = convs[name]
    assert conversations(store)[root.id]["turns"] == 3
    miss = misses(store)[question.id]
    assert (miss["cause"], miss["message_index"], miss["previous_exchange_id"]) == ("unexplained", None, answer.id)
    assert answer.id not in misses(store)  # read 2048 of the 2400 before it
    problems = [p for p in run(store, "report", "tools", "--list") if p["exchange_id"] in (root.id, answer.id)]
    call = "call_x2" if name == "chain-x" else "call_y2"
    assert [(p["exchange_id"], p["call_id"], p["status"]) for p in problems] == [(root.id, call, "missing_result")]
    shown = run(store, "show", question.id, "--conversation")
    assert [t["id"] for t in shown["turns"]] == [root.id, answer.id, question.id]
    assert shown["identity"]["rule"] == ("chain" if name == "chain-x" else "session")


def test_the_prefix_rule_still_holds_without_session_or_chain(store, convs):
    turns = convs["pre"]
    found = conversations(store)
    assert found[turns[0].id]["turns"] == 4
    assert all(t.id not in found for t in turns[1:])
    restart = misses(store)[turns[3].id]
    # its 2 messages are the start of turn 3's 5: no message was edited
    assert (restart["cause"], restart["message_index"]) == ("ttl_expired", None)
    assert restart["previous_exchange_id"] == turns[2].id
    shown = run(store, "show", turns[3].id, "--conversation")
    assert [t["id"] for t in shown["turns"]] == [t.id for t in turns]
    assert shown["identity"] == {"rule": "prefix", "session_id": None}


def test_every_turn_is_in_exactly_one_conversation(store, convs):
    """Each group above is one conversation (run-a and its twin, of another key, two)."""
    found = conversations(store)
    assert sorted(found) == sorted(records[0].id for records in convs.values())
    assert sum(row["turns"] for row in found.values()) == sum(len(records) for records in convs.values())
