"""`llmtap import` of the agents' own session logs (storage/importers/agent_logs.py and its
readers): files the real CLIs wrote here (tests/fixtures/agent_logs, with what the proxy
recorded of the same runs), files of their documented shapes (a streamed message's
partial lines, a resumed session, Codex's repeated `token_count`, Gemini CLI's older
whole-file sessions), and hostile ones. Each call once, priced, and never beside the same
call recorded live. The end-to-end agent tests import the logs of their own runs too."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import llmtap

LOGS = Path(__file__).parents[1] / "fixtures" / "agent_logs"
RECORDED = json.loads((LOGS / "recorded.json").read_text())["recorded"]
COLUMNS = (
    "response_id",
    "usage_input_tokens",
    "usage_cache_read_input_tokens",
    "usage_cache_creation_input_tokens",
    "usage_output_tokens",
    "cost_total_pico",
)


def _import(db: Path, home: Path, *paths: Path | str, team: str | None = "agents") -> Any:
    args = ["import", *map(str, paths), "--db", f"sqlite:///{db}"]
    if team:
        args += ["--team", team]
    return llmtap(*args, env={"LLMTAP_HOME": str(home), "LLMTAP_CONFIG": None})


def _rows(db: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(db) as connection:
        connection.row_factory = sqlite3.Row
        query = "select *, usage_input_tokens i from exchanges order by started_at"
        return [dict(row) for row in connection.execute(query)]


def _as_recorded(row: dict[str, Any]) -> dict[str, Any]:
    names = ("response_id", "input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens", "cost_pico")
    return dict(zip(names, (row[c] for c in COLUMNS), strict=True))


@pytest.mark.parametrize("agent", sorted(RECORDED))
def test_a_real_cli_log_imports_as_the_proxy_recorded_the_same_run(agent: str, tmp_path: Path) -> None:
    done = _import(tmp_path / "s.db", tmp_path / "home", LOGS / agent)
    assert done.code == 0, done.err
    rows = _rows(tmp_path / "s.db")
    assert [r["team"] for r in rows] == ["agents"] * len(rows)
    assert {r["attribution"] for r in rows} == {"import"} and {r["source"] for r in rows} == {"agent_log"}
    # the agent tests' Codex model is no model genai-prices knows; the proxy left it unpriced too
    assert {r["price_status"] for r in rows} == ({"unpriced"} if agent == "codex" else {"priced"})
    got = [_as_recorded(r) for r in rows]
    want = RECORDED[agent]
    if agent == "gemini":  # the CLI's log keeps no response id: tokens and cost alone
        got = [{k: v for k, v in g.items() if k != "response_id"} for g in got]
        want = [{k: v for k, v in w.items() if k != "response_id"} for w in want]
    assert got == want


def test_a_second_import_and_a_resumed_copy_add_nothing(tmp_path: Path) -> None:
    db, home = tmp_path / "s.db", tmp_path / "home"
    assert _import(db, home, LOGS).code == 0
    first = _rows(db)
    assert len(first) == sum(len(calls) for calls in RECORDED.values())
    # a resumed session: its file starts with a copy of the earlier one's lines
    resumed = tmp_path / "resumed" / "projects" / "-work"
    resumed.mkdir(parents=True)
    original = next((LOGS / "claude" / "projects" / "-work").glob("*.jsonl"))
    (resumed / "0f0f0f0f-resumed.jsonl").write_bytes(original.read_bytes())
    again = _import(db, home, LOGS, tmp_path / "resumed")
    assert again.code == 0, again.err
    assert len(_rows(db)) == len(first)
    assert "were recorded already" in again.out


def _claude_line(message_id: str, output: int, at: str, **more: Any) -> str:
    usage = {"input_tokens": 10, "cache_creation_input_tokens": 2000, "cache_read_input_tokens": 0}
    message = {"id": message_id, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5"}
    message |= {"content": [], "stop_reason": None, "usage": usage | {"output_tokens": output}}
    line = {"type": "assistant", "sessionId": "s-1", "uuid": f"u-{output}", "timestamp": at, "message": message}
    return json.dumps(line | more)


def test_a_streamed_messages_partial_lines_are_one_call_at_its_final_usage(tmp_path: Path) -> None:
    """Older Claude Code versions wrote a line per block as the stream went, the first with
    the output so far (1 token), the last with the final count: one call, of 350."""
    log = tmp_path / "projects" / "-w" / "s-1.jsonl"
    log.parent.mkdir(parents=True)
    lines = [
        json.dumps({"type": "user", "sessionId": "s-1", "timestamp": "2026-11-02T10:00:00Z", "message": {}}),
        _claude_line("msg_A", 1, "2026-11-02T10:00:01Z"),
        _claude_line("msg_A", 120, "2026-11-02T10:00:02Z"),
        _claude_line("msg_A", 350, "2026-11-02T10:00:03Z"),
        _claude_line("msg_B", 7, "2026-11-02T10:00:04Z", isApiErrorMessage=True),
    ]
    log.write_text("\n".join(lines) + "\n")
    done = _import(tmp_path / "s.db", tmp_path / "home", log)
    assert done.code == 0, done.err
    (row,) = _rows(tmp_path / "s.db")
    assert (row["response_id"], row["usage_output_tokens"], row["usage_input_tokens"]) == ("msg_A", 350, 2010)
    assert row["usage_cache_creation_input_tokens"] == 2000 and row["price_status"] == "priced"


def _codex(kind: str, payload: dict[str, Any], at: str = "2026-11-02T10:00:00Z") -> str:
    return json.dumps({"timestamp": at, "type": kind, "payload": payload})


def _count(last: tuple[int, int, int, int], total: tuple[int, int, int, int]) -> dict[str, Any]:
    def usage(n: tuple[int, int, int, int]) -> dict[str, int]:
        names = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens")
        return dict(zip(names, n, strict=True)) | {"total_tokens": n[0] + n[2]}

    return {"type": "token_count", "info": {"total_token_usage": usage(total), "last_token_usage": usage(last)}}


def test_an_older_codex_log_counts_each_response_once(tmp_path: Path) -> None:
    """Before `token_usage_record`, a rollout had only `token_count` events, which may come
    twice for one response (the same running total again)."""
    log = tmp_path / "sessions" / "2025" / "10" / "01" / "rollout-x.jsonl"
    log.parent.mkdir(parents=True)
    lines = [
        _codex("session_meta", {"id": "s-9", "model_provider": "openai"}),
        _codex("turn_context", {"model": "gpt-5"}),
        _codex("event_msg", {"type": "token_count", "info": None}),
        _codex("event_msg", _count((1000, 200, 50, 10), (1000, 200, 50, 10)), "2025-10-01T10:00:01Z"),
        _codex("event_msg", _count((1000, 200, 50, 10), (1000, 200, 50, 10)), "2025-10-01T10:00:01Z"),
        _codex("event_msg", _count((1500, 1000, 80, 0), (2500, 1200, 130, 10)), "2025-10-01T10:00:05Z"),
    ]
    log.write_text("\n".join(lines) + "\n")
    assert _import(tmp_path / "s.db", tmp_path / "home", log).code == 0
    rows = _rows(tmp_path / "s.db")
    assert [(r["usage_input_tokens"], r["usage_cache_read_input_tokens"], r["usage_output_tokens"]) for r in rows] == [
        (1000, 200, 50),
        (1500, 1000, 80),
    ]
    assert {r["model"] for r in rows} == {"gpt-5"} and {r["price_status"] for r in rows} == {"priced"}
    assert rows[0]["usage_reasoning_output_tokens"] == 10


def test_a_codex_session_of_another_provider_is_kept_unpriced(tmp_path: Path) -> None:
    log = tmp_path / "rollout-y.jsonl"
    lines = [
        _codex("session_meta", {"id": "s-8", "model_provider": "ollama"}),
        _codex("turn_context", {"model": "gpt-5"}),
        _codex("event_msg", _count((100, 0, 5, 0), (100, 0, 5, 0))),
    ]
    log.write_text("\n".join(lines) + "\n")
    assert _import(tmp_path / "s.db", tmp_path / "home", log).code == 0
    (row,) = _rows(tmp_path / "s.db")
    assert row["price_status"] == "unpriced" and row["usage_input_tokens"] == 100


def test_an_older_whole_file_gemini_session(tmp_path: Path) -> None:
    chats = tmp_path / "tmp" / "p" / "chats"
    chats.mkdir(parents=True)
    message = {"id": "m1", "timestamp": "2025-09-01T08:00:00Z", "type": "gemini", "model": "gemini-2.5-flash"}
    tokens = {"input": 3000, "output": 40, "cached": 1000, "thoughts": 60, "tool": 0, "total": 3100}
    session = {"sessionId": "g-1", "projectHash": "x", "messages": [{"type": "user"}, message | {"tokens": tokens}]}
    (chats / "session-2025-09-01T08-00-g1.json").write_text(json.dumps(session))
    assert _import(tmp_path / "s.db", tmp_path / "home", tmp_path).code == 0
    (row,) = _rows(tmp_path / "s.db")
    # SPEC §2: output includes the thoughts, and they are billed
    assert (row["usage_input_tokens"], row["usage_cache_read_input_tokens"]) == (3000, 1000)
    assert (row["usage_output_tokens"], row["usage_reasoning_output_tokens"]) == (100, 60)
    assert row["price_status"] == "priced" and row["cost_output_pico"] > 0


def test_hostile_lines_are_skipped_one_line_each_and_the_rest_imported(tmp_path: Path) -> None:
    log = tmp_path / "projects" / "-w" / "s-1.jsonl"
    log.parent.mkdir(parents=True)
    good = _claude_line("msg_ok", 30, "2026-11-02T10:00:01Z")
    hostile = [
        _claude_line("msg_neg", -5, "2026-11-02T10:00:02Z"),  # a negative count: not usage
        _claude_line("<script>", 3, "2026-11-02T10:00:02Z"),  # an id that is no id
        _claude_line("msg_t", 3, "yesterday"),  # no timestamp
        "{not json",
        "[1, 2]",
        "[" * 100_000,  # nesting past the parser
        json.dumps({"type": "assistant", "sessionId": "s-1", "message": {"id": "msg_x", "usage": {"a": 1e308}}}),
    ]
    log.write_text(good + "\n" + "\n".join(hostile) + "\n" + _claude_line("msg_late", 9, "2026-11-02T10:00:09Z"))
    done = _import(tmp_path / "s.db", tmp_path / "home", log)
    assert done.code == 0, done.err
    assert [r["response_id"] for r in _rows(tmp_path / "s.db")] == ["msg_ok", "msg_neg", "msg_late"]
    neg = next(r for r in _rows(tmp_path / "s.db") if r["response_id"] == "msg_neg")
    assert neg["usage_output_tokens"] is None or neg["usage_output_tokens"] >= 0
    assert done.err.count("skipped") == 3 and "Traceback" not in done.err
    assert all(len(line) < 300 for line in done.err.splitlines())


def test_a_line_over_the_bound_is_skipped_without_being_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from llmtap.storage.importers import agent_calls

    monkeypatch.setattr(agent_calls, "MAX_LINE", 4096)
    log = tmp_path / "s.jsonl"
    big = _claude_line("msg_big", 3, "2026-11-02T10:00:01Z", padding="x" * 50_000)
    log.write_text(_claude_line("msg_a", 3, "2026-11-02T10:00:00Z") + "\n" + big + "\n")
    done = _import(tmp_path / "s.db", tmp_path / "home", log)
    assert done.code == 0, done.err
    assert [r["response_id"] for r in _rows(tmp_path / "s.db")] == ["msg_a"]
    assert "over 0 MiB, skipped" in done.err or "skipped" in done.err


def test_a_log_after_the_live_recording_adds_nothing_and_a_shared_id_of_another_request_stays(tmp_path: Path) -> None:
    """Live first (a HAR of the same calls as the proxy would have captured them), then the
    log: nothing new. A stored exchange with the same response id but other input tokens
    (a caching gateway's reused id) is another request: the logged call is kept."""
    db, home = tmp_path / "s.db", tmp_path / "home"
    log = tmp_path / "projects" / "-w" / "s-1.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text(_claude_line("msg_live", 30, "2026-11-02T10:00:01Z") + "\n")
    assert _import(db, home, log).code == 0
    with sqlite3.connect(db) as connection:  # the same call, as if recorded by the proxy
        connection.execute("update exchanges set source = 'proxy'")
    again = _import(db, home, log)
    assert again.code == 0 and len(_rows(db)) == 1, again.out
    with sqlite3.connect(db) as connection:  # now another request that reused the id
        connection.execute("update exchanges set usage_input_tokens = 999999")
    other = tmp_path / "other" / "s-2.jsonl"
    other.parent.mkdir()
    other.write_text(_claude_line("msg_live", 30, "2026-11-02T10:05:01Z") + "\n")
    assert _import(db, home, other).code == 0
    assert len(_rows(db)) == 2


def test_a_gemini_call_recorded_live_is_matched_by_its_tokens_and_time(tmp_path: Path) -> None:
    db, home = tmp_path / "s.db", tmp_path / "home"
    assert _import(db, home, LOGS / "gemini").code == 0
    with sqlite3.connect(db) as connection:  # as the proxy records them: the response's own id and model
        connection.execute("update exchanges set source = 'proxy', response_id = 'r-' || id, model = model || '-e2e'")
    copy = tmp_path / "copy"
    shutil.copytree(LOGS / "gemini", copy)
    for chat in copy.rglob("*.jsonl"):  # another import of the same calls: a session of another name
        chat.write_text(chat.read_text().replace("f4fc759a-d844", "f4fc759a-0000"))
    done = _import(db, home, copy)
    assert done.code == 0 and len(_rows(db)) == 2, done.out
    assert "of 2 calls in agent logs, 2 were recorded already" in done.out


def test_a_folder_of_no_logs_and_a_file_of_no_log_are_told_apart(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    done = _import(tmp_path / "s.db", tmp_path / "home", tmp_path / "empty")
    assert done.code == 2 and "holds no agent session logs" in done.err and len(done.err.strip().splitlines()) == 1
    stray = tmp_path / "notes.jsonl"
    stray.write_text('{"hello": 1}\n')
    refused = _import(tmp_path / "s.db", tmp_path / "home", stray)
    assert refused.code != 0 and len(refused.err.strip().splitlines()) == 1


def test_a_folder_s_other_json_lines_files_are_passed_over(tmp_path: Path) -> None:
    home = tmp_path / "home-dir"
    shutil.copytree(LOGS / "claude", home / ".claude")
    (home / ".claude" / "todos.jsonl").write_text('{"todo": 1}\n')
    (home / "work" / "chats").mkdir(parents=True)
    (home / "work" / "chats" / "notes.json").write_text("[]")
    done = _import(tmp_path / "s.db", tmp_path / "home", home)
    assert done.code == 0, done.err
    assert len(_rows(tmp_path / "s.db")) == len(RECORDED["claude"])


def _many_calls(agent: str, calls: int) -> bytes:
    """A log of `calls` calls of `agent`, each written twice (a partial line, then the final)."""
    lines = []
    if agent == "claude-code":
        for n in range(calls):
            at = f"2026-11-02T10:{n // 60:02d}:{n % 60:02d}Z"
            lines += [_claude_line(f"msg_{n}", 1, at), _claude_line(f"msg_{n}", 100 + n, at)]
    elif agent == "codex":
        lines += [_codex("session_meta", {"id": "s-7", "model_provider": "openai"})]
        lines += [_codex("turn_context", {"model": "gpt-5"})]
        for n in range(calls):
            usage = {"input_tokens": 1000, "cached_input_tokens": 0, "output_tokens": 100 + n}
            usage |= {"reasoning_output_tokens": 0, "total_tokens": 1100 + n}
            lines += [_codex("token_usage_record", {"response_id": f"resp_{n}", "usage": usage})]
    else:
        lines += [json.dumps({"sessionId": "g-2", "projectHash": "x", "startTime": "2026-11-02T10:00:00Z"})]
        for n in range(calls):
            message = {
                "id": f"m{n}",
                "timestamp": "2026-11-02T10:00:00Z",
                "type": "gemini",
                "model": "gemini-2.5-flash",
            }
            tokens = {"input": 3000, "output": 1, "cached": 0, "thoughts": 0, "tool": 0, "total": 3001}
            lines += [json.dumps(message | {"tokens": tokens})]
            lines += [json.dumps(message | {"tokens": tokens | {"output": 100 + n, "total": 3100 + n}})]
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini-cli"])
def test_a_log_of_very_many_calls_is_read_in_bounded_memory_each_call_once(
    agent: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file someone imports can hold millions of calls: a reader holds at most MAX_HELD of
    them before it hands them on (so its memory does not grow with the file), and still
    gives every call once, at its final usage."""
    import io

    from llmtap.storage.importers import agent_calls, claude_code, codex_sessions, gemini_chats

    monkeypatch.setattr(agent_calls, "MAX_HELD", 4)
    reader = {"claude-code": claude_code.read, "codex": codex_sessions.read, "gemini-cli": gemini_chats.read}[agent]
    data = _many_calls(agent, 40)
    handle = io.BytesIO(data)
    calls = reader(handle, "log.jsonl")
    first, problem = next(calls)
    assert problem is None and first is not None
    assert handle.tell() < len(data) // 2  # handed on long before the file's end
    got = [first, *(call for call, _ in calls)]
    assert sorted(call.key for call in got) == sorted({call.key for call in got}) and len(got) == 40
    name = "candidatesTokenCount" if agent == "gemini-cli" else "output_tokens"
    outputs = sorted(agent_calls.count(call.usage.get(name)) for call in got)
    assert outputs == list(range(100, 140))


def test_a_busy_store_is_not_read_whole_to_match_a_gemini_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Gemini CLI logs no response id, so its calls are matched by tokens and time: only the
    stored rows with the same input tokens are read for that, not every exchange of those
    minutes (a team store has thousands), and the match still holds among them."""
    from llmtap.storage.importers import agent_logs

    db, home = tmp_path / "s.db", tmp_path / "home"
    assert _import(db, home, LOGS / "gemini").code == 0
    with sqlite3.connect(db) as connection:
        connection.execute("update exchanges set source = 'proxy', response_id = 'r-' || id")
        columns = [row[1] for row in connection.execute("pragma table_info(exchanges)")]
        copied = ", ".join(
            f"'busy' || n || {c}"
            if c in ("id", "dedupe_key")
            else "usage_input_tokens + n"
            if c == "usage_input_tokens"
            else c
            for c in columns
        )
        connection.execute(
            f"insert into exchanges ({', '.join(columns)}) "
            f"with recursive k(n) as (select 1 union all select n + 1 from k where n < 2000) "
            f"select {copied} from exchanges, k"
        )
    read: list[int] = []
    stored = agent_logs.Fresh._stored
    monkeypatch.setattr(
        agent_logs.Fresh, "_stored", lambda self, records: read.append(len(got := stored(self, records))) or got
    )
    copy = tmp_path / "copy"
    shutil.copytree(LOGS / "gemini", copy)
    for chat in copy.rglob("*.jsonl"):
        chat.write_text(chat.read_text().replace("f4fc759a-d844", "f4fc759a-0000"))
    done = _import(db, home, copy)
    assert done.code == 0, done.err
    assert "of 2 calls in agent logs, 2 were recorded already" in done.out
    assert sum(read) <= 10, read  # of 4,002 stored rows in those minutes
