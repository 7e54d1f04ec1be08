"""A Codex CLI session stored and reported (SPEC §2 `warmup`, `tool_calls[].kind`; §5):
the warmup is recorded and billed but left out of finish and latency; custom calls keep
their kind and are never `invalid_json`. Through the real writer and pricer, on SQLite
and (with LLMTAP_TEST_POSTGRES_URL) PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from llmtap.storage import schema
from llmtap.storage.engine import make_engine
from llmtap.storage.record import Recorded
from tests.analytics import wire
from tests.analytics.conftest import BACKENDS, blank_database, fill, report
from tests.helpers import llmtap

FIXTURES = Path(__file__).parents[1] / "fixtures" / "codex"
Store = tuple[str, dict[str, str]]  # the store's URL, and each turn's exchange id
START = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
TEAM = "codex"

# (name, request, stream, seconds after START, time to first byte in ms)
TURNS = [
    ("warmup", "request_warmup", "stream_warmup", 0, 5000.0),
    ("turn1", "request_turn1", "stream_turn1_exec", 10, 300.0),
    ("mix", "request_turn1", "stream_tool_mix", 20, 310.0),
    ("turn2", "request_turn2", "stream_turn2_text", 30, 320.0),
]


def _record(request: str, stream: str, offset: int, ttfb: float) -> Recorded:
    return wire.record(
        wire.RESPONSES,
        json.loads((FIXTURES / f"{request}.json").read_text()),
        (FIXTURES / f"{stream}.sse").read_bytes(),
        at=START + timedelta(seconds=offset),
        team=TEAM,
        ttfb_ms=ttfb,
        ttft_ms=ttfb + 100,
        duration_ms=ttfb + 1000,
    )


@pytest.fixture(scope="module", params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    folder = tmp_path_factory.mktemp(f"codex-{request.param}")
    records = {name: _record(req, stream, offset, ttfb) for name, req, stream, offset, ttfb in TURNS}
    with blank_database(request.param, folder) as url:
        fill(url, list(records.values()), folder / "spool")
        yield url, {name: rec.id for name, rec in records.items()}


def _rows(url: str) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            exchanges = {r.id: dict(r._mapping) for r in conn.execute(select(schema.exchanges))}
            calls = [dict(r._mapping) for r in conn.execute(select(schema.tool_calls).order_by("position"))]
    finally:
        engine.dispose()
    return exchanges, calls


def test_rows_keep_warmup_and_kind(store: Store) -> None:
    url, ids = store
    exchanges, calls = _rows(url)
    assert {name: exchanges[i]["warmup"] for name, i in ids.items()} == {
        "warmup": True,
        "turn1": False,
        "mix": False,
        "turn2": False,
    }
    assert exchanges[ids["warmup"]]["price_status"] == "priced"  # billed like any other
    assert exchanges[ids["warmup"]]["request_system_chars"] > 0
    mix = [c for c in calls if c["exchange_id"] == ids["mix"]]
    assert [(c["name"], c["kind"], c["status"]) for c in mix] == [
        ("apply_patch", "custom", "valid"),
        ("apply_patch", "custom", "schema_violation"),
        ("view_image", "custom", "valid"),
        ("view_image", "custom", "schema_violation"),
        ("note", "custom", "valid"),
        ("send_message", "function", "valid"),
        ("update_plan", "function", "schema_violation"),
        ("nope", "custom", "unknown_tool"),
    ]
    [exec_call] = [c for c in calls if c["exchange_id"] == ids["turn1"]]
    assert (exec_call["kind"], exec_call["arguments"], exec_call["arguments_raw"]) == ("custom", None, "echo hi")


def test_finish_and_latency_leave_the_warmup_out(store: Store) -> None:
    url, _ = store
    finish = {r["finish_reason"]: r["requests"] for r in report(url, "finish", "--by", "team") if r["team"] == TEAM}
    assert finish == {"tool_use": 2, "end_turn": 1}  # turn1 and mix; turn2 (not the warmup)
    [latency] = [r for r in report(url, "latency", "--by", "team") if r["team"] == TEAM]
    assert latency["requests"] == 3
    assert latency["ttfb_p95_ms"] < 1000  # the warmup's 5 s first byte is not among them


def test_usage_and_cost_count_the_warmup(store: Store) -> None:
    url, _ = store
    [usage] = [r for r in report(url, "usage", "--by", "team") if r["team"] == TEAM]
    assert usage["requests"] == 4
    assert usage["input_tokens"] == 2310 + 2310 + 2500 + 2400


def test_tools_list_has_no_invalid_json(store: Store) -> None:
    url, ids = store
    listed = report(url, "tools", "--list")
    # the calls' own statuses (the conversation's, e.g. missing_result, are another matter)
    call_statuses = {"valid", "truncated", "unknown_tool", "invalid_json", "args_lost", "schema_violation"}
    mine = [
        (r["tool"], r["call_id"], r["status"])
        for r in listed
        if r["exchange_id"] == ids["mix"] and r["status"] in call_statuses
    ]
    assert sorted(mine) == [
        ("apply_patch", "call_patch_bad", "schema_violation"),
        ("nope", "call_nope", "unknown_tool"),
        ("update_plan", "call_plan", "schema_violation"),
        ("view_image", "call_img_bad", "schema_violation"),
    ]
    assert not [r for r in listed if r["status"] == "invalid_json"]


def test_export_and_show_carry_warmup_and_kind(store: Store, tmp_path: Path) -> None:
    url, ids = store
    target = tmp_path / "out.jsonl"
    result = llmtap("export", "--format", "jsonl", "-o", str(target), "--db", url)
    assert result.code == 0, result.err
    rows = {row["id"]: row for row in map(json.loads, target.read_text().splitlines())}
    assert {name: rows[i]["warmup"] for name, i in ids.items()} == {
        "warmup": True,
        "turn1": False,
        "mix": False,
        "turn2": False,
    }
    assert [c["kind"] for c in rows[ids["mix"]]["tool_calls"]] == ["custom"] * 5 + ["function"] * 2 + ["custom"]
    shown = llmtap("show", ids["warmup"], "--format", "json", "--db", url)
    assert shown.code == 0, shown.err
    assert '"warmup": true' in shown.out
