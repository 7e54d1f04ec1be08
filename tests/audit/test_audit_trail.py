"""The audit trail over a store filled from a HAR of the recorded corpus (bodies kept in
full) and a scripted agent conversation (answers only): llmtap log's filters, llmtap
show's sections, --conversation, search only where text was kept, and no key anywhere."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from llmtap.simulator.provider import SimulatedProvider
from llmtap.simulator.upstream import Seen
from llmtap.storage.engine import make_engine
from llmtap.storage.ingest import HttpExchange, to_record
from llmtap.storage.migrate import ensure_current
from llmtap.storage.secrets import KeyFingerprinter
from llmtap.storage.writer import Writer
from tests.corpus_tools import CORPUS, make_har
from tests.helpers import llmtap

KEY = "sk-ant-api03-AUDITCANARY0000000000000000000000000000000000009"
SYSTEM = "You maintain the billing service. " * 200


def agent_conversation() -> list[HttpExchange]:
    """Four turns of an agent: ask, tool call, result, answer; then a follow-up."""
    provider = SimulatedProvider()
    start = datetime(2026, 11, 3, 10, 0, tzinfo=UTC)
    messages: list[dict] = [{"role": "user", "content": "Why did invoice 77 double-charge? [tool:read_file]"}]
    tools = [
        {
            "name": "read_file",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        }
    ]
    turns = []
    for turn in range(4):
        body = {
            "model": "claude-sonnet-4-5-20250929",
            "max_tokens": 512,
            "tools": tools,
            "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
            "messages": json.loads(json.dumps(messages)),
        }
        raw = json.dumps(body).encode()
        reply = provider(Seen("POST", "/v1/messages", {}, raw, 0.0))
        response = b"".join(reply.chunks)
        at = start + timedelta(seconds=20 * turn)
        turns.append(
            HttpExchange(
                method="POST",
                host="api.anthropic.com",
                path="/v1/messages",
                request_headers=[
                    ("x-api-key", KEY),
                    ("content-type", "application/json"),
                    ("x-llmtap-team", "billing"),
                ],
                request_body=raw,
                status=reply.status,
                response_headers=[("content-type", reply.content_type)],
                response_body=response,
                response_encoded=False,
                started_at=at,
                first_byte_at=at + timedelta(seconds=1),
                ended_at=at + timedelta(seconds=3),
            )
        )
        answer = json.loads(response)
        messages.append({"role": "assistant", "content": answer["content"]})
        calls = [b for b in answer["content"] if b["type"] == "tool_use"]
        if calls:
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": c["id"], "content": "charge() ran twice"} for c in calls
                    ],
                }
            )
        else:
            messages.append({"role": "user", "content": "Thanks. Re-run the checks for it. [malformed]"})
    return turns


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, str]]:
    folder = tmp_path_factory.mktemp("audit")
    env = dict(os.environ, LLMTAP_HOME=str(folder / "home"))
    env.pop("LLMTAP_CONFIG", None)
    url = f"sqlite:///{folder / 'store.db'}"
    har = folder / "corpus.har"
    make_har(CORPUS, har)
    imported = llmtap("import", str(har), "--bodies", "full", "--db", url, env=env, process=True)
    assert imported.code == 0, imported.err
    engine = make_engine(url)
    ensure_current(engine)
    writer = Writer(engine, spool_dir=folder / "spool", body_mode="metadata")
    fingerprinter = KeyFingerprinter.from_file(folder / "home" / "fingerprint.secret")
    for http in agent_conversation():
        writer.submit(to_record(http, fingerprinter=fingerprinter))
    assert writer.close()
    engine.dispose()
    return url, env


def log(store, *args: str) -> list[dict]:
    url, env = store
    result = llmtap("log", "--db", url, "--format", "json", "--limit", "500", *args, env=env)
    assert result.code == 0, result.err
    return json.loads(result.out)


def test_log_lists_everything_newest_first(store):
    rows = log(store)
    assert len(rows) == 49 + 4
    times = [row["started_at"] for row in rows]
    assert times == sorted(times, reverse=True)


def test_filters_narrow_and_combine(store):
    assert {r["team"] for r in log(store, "--team", "beta")} == {"beta"}
    anthropic = log(store, "--provider", "anthropic")
    assert anthropic and all(r["protocol"] == "anthropic.messages" for r in anthropic)
    beta_anthropic = log(store, "--team", "beta", "--provider", "anthropic")
    assert {r["id"] for r in beta_anthropic} == {r["id"] for r in anthropic if r["team"] == "beta"}
    tool_use = log(store, "--finish", "tool_use")
    assert tool_use and all(r["finish_reason"] == "tool_use" for r in tool_use)
    errors = log(store, "--status", "error")
    assert errors and all(r["status"] >= 400 or r["error_type"] for r in errors)
    assert {r["status"] for r in log(store, "--status", "404")} == {404}
    assert {r["model"] for r in log(store, "--model", "gemini-2.5-flash")} == {"gemini-2.5-flash"}
    assert len(log(store, "--limit", "3")) == 3
    assert log(store, "--since", "2026-11-03", "--until", "2026-11-04") == log(store, "--team", "billing")
    assert log(store, "--team", "nobody") == []


def test_tool_problem_and_cache_miss_filters(store):
    problems = log(store, "--tool-problem")
    assert problems and all(r["tool_problems"] > 0 for r in problems)
    # the agent's last call names a tool its request never declared
    assert [r["team"] for r in log(store, "--tool-problem", "unknown_tool")] == ["billing"]
    misses = log(store, "--cache-miss")
    assert misses and all(r["cache_miss"] for r in misses)
    for miss in misses:
        assert log(store, "--cache-miss", miss["cache_miss"], "--team", miss["team"])


def test_search_finds_text_only_where_it_was_kept(store):
    assert {r["team"] for r in log(store, "--search", "Paris")} <= {"alpha", "beta", "gamma"}
    assert log(store, "--search", "Paris")  # answers of the corpus
    assert log(store, "--search", "strawberry")  # a prompt, kept with bodies = full
    # the agent's prompts were not kept (bodies = metadata): its question is not found...
    assert log(store, "--search", "invoice 77") == []
    # ...but its answers were
    assert {r["team"] for r in log(store, "--search", "The tool said what we needed")} == {"billing"}


def test_show_prints_every_section(store):
    url, env = store
    turn = [r for r in log(store, "--team", "billing") if r["tool_call_count"]][-1]  # the oldest: a valid call
    result = llmtap("show", turn["id"], "--db", url, env=env)
    assert result.code == 0
    for section in ("who", "when", "where", "request", "answer", "usage", "cost", "cache"):
        assert f"\n{section}\n" in result.out
    assert "tool call read_file" in result.out
    data = json.loads(llmtap("show", turn["id"][:10], "--format", "json", "--db", url, env=env).out)
    assert data["id"] == turn["id"]
    assert data["who"]["team"] == "billing" and data["who"]["key_last4"] == "0009"
    assert data["answer"]["tool_calls"][0]["status"] == "valid"
    assert data["cost"]["price_version"].startswith("genai-prices")
    assert data["bodies"] is None and data["transcript"] is None  # metadata only
    full = next(r for r in log(store, "--team", "alpha") if r["has_bodies"])
    data = json.loads(llmtap("show", full["id"], "--format", "json", "--db", url, env=env).out)
    assert data["transcript"]["messages"] and data["bodies"]["response"]


def test_conversation_orders_turns_and_totals_them(store):
    url, env = store
    turns = log(store, "--team", "billing")
    data = json.loads(llmtap("show", turns[0]["id"], "--conversation", "--format", "json", "--db", url, env=env).out)
    ids = [t["id"] for t in data["turns"]]
    assert ids == [t["id"] for t in reversed(turns)]
    assert [t["messages"] for t in data["turns"]] == [1, 3, 5, 7]
    assert data["totals"]["turns"] == 4
    assert data["totals"]["input_tokens"] == sum(t["input_tokens"] for t in data["turns"])
    assert data["turns"][1]["cache"]["verdict"] == "hit"  # the cached system prompt is read again
    text = llmtap("show", turns[0]["id"], "--conversation", "--db", url, env=env).out
    assert "4 turns" in text


def test_unknown_id_is_one_line(store):
    url, env = store
    result = llmtap("show", "NOSUCHEXCHANGE", "--db", url, env=env)
    assert result.code == 2 and len(result.err.strip().splitlines()) == 1


def test_nothing_shown_contains_a_key(store):
    url, env = store
    shown = [json.dumps(log(store))]
    for row in log(store)[:12] + log(store, "--team", "alpha")[:6]:
        shown.append(llmtap("show", row["id"], "--db", url, env=env).out)
        shown.append(llmtap("show", row["id"], "--format", "json", "--db", url, env=env).out)
    everything = "\n".join(shown)
    for canary in ("AUDITCANARY", "HARLEAKCANARY"):
        assert canary not in everything
    assert "[REDACTED]" in everything  # the stored headers, redacted
    assert not Path(url.removeprefix("sqlite:///")).read_bytes().count(b"AUDITCANARY")
