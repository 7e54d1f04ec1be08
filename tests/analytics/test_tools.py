"""`llmtap report tools`: every tool-call status of SPEC §5 and the conversation problems,
listed one by one (`--list`) and counted per group."""

from __future__ import annotations

import re
from pathlib import Path

from tests.analytics import traffic
from tests.analytics import wire as w
from tests.analytics.conftest import blank_database, by_key, fill, report

# (exchange, call id, tool, status), in the order --list gives them (time, exchange, status)
PROBLEMS = [
    ("t1", "toolu_t1b", "search_docs", "schema_violation"),  # {"query": 7}
    ("t2", "toolu_t2", "launch_rockets", "unknown_tool"),
    ("t3", "call_t3", "get_weather", "invalid_json"),  # '{"city": "Par'
    ("t4", "call_t4", "search_docs", "truncated"),  # finish_reason length inside the call
    ("t5", "toolu_t5", "get_weather", "args_lost"),  # {} against required ["city"]
    ("t6", "call_t6", "get_weather", "invalid_json"),  # no request body captured
    ("cv/0", "toolu_B", "get_weather", "missing_result"),  # cv/1 answers toolu_A only
    ("cv/1", "toolu_A", "get_weather", "duplicate_id"),  # cv/0 already used toolu_A
    ("cv/1", "toolu_ghost", None, "orphan_result"),  # a result no call asked for
]


def test_tools_list_gives_every_problem(store, known):
    items = report(store, "tools", "--list")
    got = [(i["exchange_id"], i["call_id"], i["tool"], i["status"]) for i in items]
    assert got == [(known[e].id, c, t, s) for e, c, t, s in PROBLEMS]
    for item in items:
        assert item["team"] == "agents"
        assert item["detail"], item
        assert {"exchange_id", "team", "tool", "call_id", "status", "detail"} <= set(item)
    details = {i["status"]: i["detail"] for i in items}
    assert "query" in details["schema_violation"] and "string" in details["schema_violation"]
    assert "city" in details["args_lost"]
    assert known["cv/1"].id in details["missing_result"]  # names the request that lacked it


def test_tools_counts_by_team(store):
    rows = by_key(report(store, "tools", "--by", "team"), "team")
    assert set(rows) == {"agents"}  # only the agents called client tools
    agents = {k: v for k, v in rows["agents"].items() if k != "team"}
    assert agents == {
        "tool_calls": 10,  # t1 2, t2-t6 1 each, cv/0 2, cv/1 1
        "valid": 4,  # t1's get_weather, cv/0's two, cv/1's
        "invalid_json": 2,
        "schema_violation": 1,
        "unknown_tool": 1,
        "truncated": 1,
        "args_lost": 1,
        "unchecked": 0,
        "duplicate_id": 1,
        "missing_result": 1,
        "orphan_result": 1,
    }


def test_tools_by_hour_adds_up_to_the_team_counts(store):
    rows = report(store, "tools", "--by", "hour")
    assert rows and all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:00", r["hour"]) for r in rows), rows
    assert [r["hour"] for r in rows] == sorted({r["hour"] for r in rows})
    assert sum(r["tool_calls"] for r in rows) == 10  # test_tools_counts_by_team's agents


def test_tools_counts_by_model_and_overall(store):
    rows = by_key(report(store, "tools", "--by", "model"), "model")
    sonnet, gpt4o = rows[traffic.SONNET], rows[traffic.GPT4O]
    assert (
        sonnet["tool_calls"],
        sonnet["valid"],
        sonnet["schema_violation"],
        sonnet["unknown_tool"],
        sonnet["args_lost"],
    ) == (7, 4, 1, 1, 1)
    assert (sonnet["duplicate_id"], sonnet["missing_result"], sonnet["orphan_result"]) == (1, 1, 1)
    assert (gpt4o["tool_calls"], gpt4o["invalid_json"], gpt4o["truncated"], gpt4o["valid"]) == (3, 2, 1, 0)
    assert (gpt4o["duplicate_id"], gpt4o["missing_result"], gpt4o["orphan_result"]) == (0, 0, 0)


def test_tools_window(store, known):
    items = report(store, "tools", "--list", "--since", "2026-11-02T17:03:00Z", "--until", "2026-11-02T18:00:00Z")
    assert [(i["exchange_id"], i["status"]) for i in items] == [
        (known["t4"].id, "truncated"),
        (known["t5"].id, "args_lost"),
        (known["t6"].id, "invalid_json"),
    ]
    rows = report(store, "tools", "--by", "team", "--since", "2026-11-02T18:00:00Z")
    assert rows == [
        {
            "team": "agents",
            "tool_calls": 3,
            "valid": 3,
            "invalid_json": 0,
            "schema_violation": 0,
            "unknown_tool": 0,
            "truncated": 0,
            "args_lost": 0,
            "unchecked": 0,
            "duplicate_id": 1,
            "missing_result": 1,
            "orphan_result": 1,
        }
    ]


def test_unchecked_calls_are_counted_apart_and_listed(tmp_path: Path) -> None:
    """A call whose check could not run within its bound (here: a schema `pattern` with a
    lookahead, which no linear-time engine runs) is neither valid nor malformed."""
    lookup = {
        "name": "lookup",
        "description": "Look it up.",
        "input_schema": {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(?=a)a+$"}}},
    }
    request = w.anthropic_request(traffic.SONNET, [{"role": "user", "content": "u: go"}], tools=[lookup], cache=None)
    response = w.anthropic_response(
        traffic.SONNET,
        w.anthropic_usage(400, 0, 0, 60),
        text="",
        tool_uses=[("toolu_u1", "lookup", {"s": "aaa"}), ("toolu_u2", "lookup", {"t": 1})],
        msg_id="msg_u",
    )
    record = w.record(w.ANTHROPIC, request, response, at=traffic.at(traffic.DAY1, 9), team="agents")
    with blank_database("sqlite", tmp_path) as url:
        fill(url, [record], tmp_path / "spool")
        [row] = report(url, "tools", "--by", "team")
        items = report(url, "tools", "--list")
    assert (row["tool_calls"], row["valid"], row["unchecked"], row["schema_violation"]) == (2, 1, 1, 0)
    assert [(i["call_id"], i["status"]) for i in items] == [("toolu_u1", "unchecked")]
    assert "linear time" in items[0]["detail"]
