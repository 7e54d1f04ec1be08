"""The real coding-agent CLIs end to end: Claude Code (direct, Bedrock-shaped, Vertex-shaped),
Codex CLI (WebSocket, and HTTP SSE when the upstream refuses the upgrade) and Gemini CLI,
each through a listener of one `llmtap proxy` to a scripted upstream, and each of the three
once more through the regular proxy (HTTPS_PROXY and mitmproxy's CA), each run doing one
shell-tool round trip. Every record is checked field by field against what the upstream
sent (SPEC §2), then the reports a user would read: no tool-call problems, no cache miss
but the ones a run was made to have (a follow-up reading nothing; a Codex follow-up after
a pause, over WebSocket and HTTP), one conversation whose turns `show --conversation`
lists in order (SPEC §5).

The runs happen once, all at once, in the `agent_session` fixture (conftest.py); a test
here only reads what a run left behind.
"""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest

from tests.e2e import harness
from tests.e2e.agents import agents, responses, scripts
from tests.e2e.agents.agents import Run, Session

pytestmark = pytest.mark.slow

NAMES = list(agents.AGENTS)
PROTOCOLS = ("anthropic.messages", "openai.responses", "gemini.generate")
USAGE = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens")


@pytest.fixture
def session(agent_session: Session) -> Session:
    assert agent_session.failure is None, (
        f"the session failed: {agent_session.failure}\n{agent_session.proxy_log[-2000:]}"
    )
    return agent_session


@pytest.fixture(params=NAMES)
def run(request: pytest.FixtureRequest, session: Session) -> Run:
    return session.runs[request.param]


def test_the_proxy_stopped_cleanly(session: Session) -> None:
    assert session.proxy_code == 0, session.proxy_log[-3000:]
    for sign in ("Traceback", "has crashed", "tee failure"):
        assert sign not in session.proxy_log, session.proxy_log[-3000:]
    assert all(not upstream.errors for upstream in session.upstreams.values())


def test_no_api_key_in_what_the_proxy_wrote(session: Session) -> None:
    homes = [run.home for run in session.runs.values()]
    written = [p for p in session.root.rglob("*") if p.is_file() and not any(p.is_relative_to(h) for h in homes)]
    keys = [run.key for run in session.runs.values() if run.key]
    assert written and keys
    for path in written:
        data = path.read_bytes()
        assert not [key for key in keys if key.encode() in data], f"an API key was written to {path}"


def generations(run: Run) -> list[dict[str, Any]]:
    return [row for row in run.rows if row["protocol"] in PROTOCOLS]


def listed(session: Session, run: Run, kind: str) -> list[dict[str, Any]]:
    """The items of `llmtap report KIND --list` that belong to this run's exchanges."""
    ids = {row["id"] for row in run.rows}
    items = session.json("report", kind, "--list", "--format", "json")
    return [item for item in items if item["exchange_id"] in ids]


# -- the run itself ------------------------------------------------------------------------------


def test_the_agent_did_its_task_through_the_proxy(run: Run) -> None:
    assert run.cli is not None
    assert run.cli.code == 0, f"{run.agent.name} exited {run.cli.code}:\n{run.cli.out[-1500:]}\n{run.cli.err[-3000:]}"
    assert scripts.FINAL_TEXT in run.cli.out, run.cli.out[-1500:]
    turns = [sent.turn for sent in run.sent if sent.turn != "other"]
    assert turns == ["tool", "answer"], [(s.index, s.turn) for s in run.sent]
    call, answer = next(s for s in run.sent if s.turn == "tool"), next(s for s in run.sent if s.turn == "answer")
    assert tool_output(call, answer) is not None, "the follow-up carries no result for the shell call"
    assert "hi" in (tool_output(call, answer) or ""), "the shell did not print hi"


def test_transport(run: Run, session: Session) -> None:
    transports = {sent.transport for sent in run.sent}
    websocket = run.agent.route == "openai" and run.agent.websocket  # Codex tries it first, and keeps it
    assert transports == ({"websocket"} if websocket else {"http"})
    if run.agent.name == "codex-sse":
        refused = [
            r for r in session.upstreams["openai"].refused if r.headers.get("authorization") == f"Bearer {run.key}"
        ]
        assert refused, "Codex did not try the WebSocket first"


# -- the records, field by field --------------------------------------------------------------------


def test_every_record_is_what_the_upstream_sent(run: Run) -> None:
    rows, sent = generations(run), run.sent
    assert len(rows) == len(sent), (
        f"{len(rows)} records for {len(sent)} generations: "
        f"{[(r['path'], r['model'], r['usage']) for r in rows]} vs {[(s.path, s.model, s.usage) for s in sent]}"
    )
    problems = [
        f"#{s.index} ({s.turn}) {p}" for row, s in zip(rows, sent, strict=True) for p in differences(row, s, run.agent)
    ]
    assert not problems, f"{run.agent.name}:\n" + "\n".join(problems)


def differences(row: dict[str, Any], sent: scripts.Sent, agent: agents.Agent) -> list[str]:
    """What the record says differently from the upstream's account of the reply. Through
    the regular proxy the upstream is https://localhost, no provider's host: its provider
    is not checked, its team is (the proxy-auth user name)."""
    want: dict[str, Any] = {
        "protocol": sent.protocol,
        "provider": sent.provider,
        "status": 101 if sent.transport == "websocket" else 200,  # frames have none: the upgrade's
        "streamed": sent.streamed,
        "complete": True,
        "model_requested": sent.model_requested,
        "model": sent.model,
        "finish_reason": sent.finish_reason,
        "finish_reason_raw": sent.finish_reason_raw,
        "text": sent.text,
        "decode_error": None,
        "warmup": sent.warmup,
    }
    if agent.regular:
        want.pop("provider")
        want |= {"team": agent.name, "attribution": "proxy_auth"}
    out = [
        f"{name}: {row.get(name, '<absent>')!r}, sent {value!r}"
        for name, value in want.items()
        if row.get(name, "<absent>") != value
    ]
    usage = row.get("usage") or {}
    out += [
        f"usage.{name}: {usage.get(name, '<absent>')!r}, sent {sent.usage[name]!r}"
        for name in USAGE
        if usage.get(name, "<absent>") != sent.usage[name]
    ]
    calls = row.get("tool_calls") or []
    if len(calls) != len(sent.tool_calls):
        return [*out, f"tool_calls: {len(calls)} recorded, {len(sent.tool_calls)} sent"]
    for position, (got, call) in enumerate(zip(calls, sent.tool_calls, strict=True)):
        out += [f"tool_calls[{position}].{p}" for p in call_differences(got, call)]
    out += request_differences(row, sent)
    return out


def call_differences(got: dict[str, Any], call: dict[str, Any]) -> list[str]:
    out = []
    names = {call["name"]} | ({f"{call['namespace']}.{call['name']}"} if call.get("namespace") else set())
    if got.get("name") not in names:  # a namespaced call (Codex's exec) may carry its namespace
        out.append(f"name: {got.get('name')!r}, sent {call['name']!r}")
    if got.get("id") != call["id"]:
        out.append(f"id: {got.get('id')!r}, sent {call['id']!r}")
    if got.get("kind", "<absent>") != call["kind"]:
        out.append(f"kind: {got.get('kind', '<absent>')!r}, sent {call['kind']!r}")
    if call["kind"] == "custom":  # free-form text: kept as sent, never parsed as JSON
        if got.get("arguments_raw") != call["raw"]:
            out.append(f"arguments_raw: {got.get('arguments_raw')!r}, sent {call['raw']!r}")
        if got.get("arguments") is not None:
            out.append(f"arguments: {got.get('arguments')!r} for a custom tool's text")
        return out
    if got.get("arguments") != call["arguments"]:
        out.append(f"arguments: {got.get('arguments')!r}, sent {call['arguments']!r}")
    raw = got.get("arguments_raw")
    if "raw" in call and raw != call["raw"]:  # a string on the wire: exactly that string
        out.append(f"arguments_raw: {raw!r}, sent {call['raw']!r}")
    elif raw is None or json.loads(raw) != call["arguments"]:
        out.append(f"arguments_raw: {raw!r} is not the arguments' JSON")
    if got.get("valid_json") is not True:
        out.append(f"valid_json: {got.get('valid_json')!r}")
    return out


def request_differences(row: dict[str, Any], sent: scripts.Sent) -> list[str]:
    """The request side where the agents' shapes matter: every declared tool is counted
    (Codex declares its tools inside an `additional_tools` input item, in namespaces), the
    shell tool among them; the system size counts every instruction (Codex: `developer`
    messages); Anthropic cache breakpoints, Responses' prompt_cache_key and
    previous_response_id as the request said them."""
    request, body = row.get("request") or {}, sent.request
    out = []
    recorded = len(request.get("tools") or []) + len(request.get("server_tools") or [])
    if recorded != declared_tools(sent):
        out.append(f"request.tools: {recorded} recorded, {declared_tools(sent)} declared")
    if sent.turn == "tool":
        names = {str(t.get("name")).rsplit(".", 1)[-1] for t in request.get("tools") or []}
        shell = sent.tool_calls[0]["name"]
        if shell not in names:
            out.append(f"request.tools: {shell!r} is not among the {len(names)} declared")
        if not request.get("system_chars"):
            out.append(f"request.system_chars: {request.get('system_chars')!r} for a request with instructions")
    if sent.protocol == "anthropic.messages":
        instructions = instruction_chars(body)
        if request.get("system_chars") != instructions:
            out.append(
                f"request.system_chars: {request.get('system_chars')!r}, the request's system and system turns "
                f"hold {instructions}"
            )
        marks = keys_named("cache_control", body)
        if request.get("cache_breakpoints") != marks:
            out.append(f"request.cache_breakpoints: {request.get('cache_breakpoints')!r}, the request has {marks}")
    if sent.protocol == "openai.responses":
        for name in ("prompt_cache_key", "previous_response_id"):
            if request.get(name) != body.get(name):
                out.append(f"request.{name}: {request.get(name)!r}, the request has {body.get(name)!r}")
    return out


def instruction_chars(body: dict[str, Any]) -> int:
    """The characters of an Anthropic request's instructions: its `system` and every
    `role: "system"` turn in `messages` (Claude Code sends one), text blocks or strings."""

    def text(content: Any) -> int:
        if isinstance(content, str):
            return len(content)
        blocks = content if isinstance(content, list) else []
        return sum(len(b.get("text") or "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")

    turns = [m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "system"]
    return text(body.get("system")) + sum(text(m.get("content")) for m in turns)


def keys_named(name: str, value: Any) -> int:
    """How many objects inside `value` carry the key `name` (text that mentions it aside)."""
    if isinstance(value, dict):
        return (name in value) + sum(keys_named(name, v) for v in value.values())
    if isinstance(value, list):
        return sum(keys_named(name, v) for v in value)
    return 0


def declared_tools(sent: scripts.Sent) -> int:
    """How many tools the request declares, wherever its protocol lets it declare them."""
    body = sent.request
    if sent.protocol == "openai.responses":
        return len(responses.codex_tools(body))
    if sent.protocol == "gemini.generate":
        entries = [t for t in body.get("tools") or [] if isinstance(t, dict)]
        return sum(len(t["functionDeclarations"]) if "functionDeclarations" in t else 1 for t in entries)
    return len(body.get("tools") or [])


def tool_output(call: scripts.Sent, answer: scripts.Sent) -> str | None:
    """The text of the result the follow-up request carries for the call `call` made."""
    body = answer.request
    if call.protocol == "anthropic.messages":
        call_id = call.tool_calls[0]["id"]
        for block in body["messages"][-1]["content"]:
            if block.get("type") == "tool_result" and block.get("tool_use_id") == call_id:
                return json.dumps(block.get("content"))
    elif call.protocol == "openai.responses":
        call_id = call.tool_calls[0]["id"]
        for item in body.get("input") or []:
            if item.get("type") in ("custom_tool_call_output", "function_call_output") and item["call_id"] == call_id:
                return json.dumps(item.get("output"))
    else:
        for part in body["contents"][-1]["parts"]:
            if "functionResponse" in part and part["functionResponse"]["name"] == "run_shell_command":
                return json.dumps(part["functionResponse"].get("response"))
    return None


def test_the_follow_up_records_the_result_it_carries(run: Run) -> None:
    """The follow-up's result ids as its request names them: the call's id where the wire
    gave it one; Gemini's call came without one, and Gemini CLI names the result (and its
    own copy of the call) with an id of its own."""
    rows, sent = generations(run), run.sent
    assert len(rows) == len(sent)
    call = next(s for s in sent if s.turn == "tool")
    answer = next(s for s in sent if s.turn == "answer")
    ids = (rows[answer.index - 1].get("request") or {}).get("tool_result_ids")
    if run.agent.route == "gemini":
        parts = answer.request["contents"][-1]["parts"]
        carried = [p["functionResponse"]["id"] for p in parts if "id" in p.get("functionResponse", {})]
        assert carried and ids == carried, (ids, carried)
    else:
        assert ids == [call.tool_calls[0]["id"]], ids


# -- the reports ------------------------------------------------------------------------------------


def test_no_tool_call_problems(run: Run, session: Session) -> None:
    assert generations(run)
    assert listed(session, run, "tools") == []


CACHE_CAUSES = ("tools_changed", "system_changed", "message_edited", "ttl_expired", "no_breakpoint", "below_minimum")


def test_cache_misses_are_the_traffic(run: Run, session: Session) -> None:
    """Every first turn wrote the cache and every follow-up read it: nothing to list (a
    first turn is never a miss; Codex's warm-up, which asks for no generation, does not
    make the task's first turn a follow-up). Where the follow-up read nothing
    (`claude-cache-miss`), that follow-up is the one miss listed."""
    rows = generations(run)
    assert rows
    items = listed(session, run, "cache")
    if run.agent.pause:
        return  # test_a_codex_follow_up_made_a_miss_by_a_pause_is_ttl_expired
    if run.agent.name != "claude-cache-miss":
        assert items == []
        return
    answer = next(s for s in run.sent if s.turn == "answer")
    assert [item["exchange_id"] for item in items] == [rows[answer.index - 1]["id"]], items
    assert items[0]["missed_tokens"] > 0, items
    # Nothing in this traffic explains the miss: same tools and system, no message edited,
    # seconds apart, breakpoints present, a prefix of thousands of tokens. None of SPEC §5's
    # six causes may be named (the SPEC has no seventh; the store says "unexplained").
    assert items[0]["cause"] not in CACHE_CAUSES, items


@pytest.mark.parametrize("name", [name for name, agent in agents.AGENTS.items() if agent.pause])
def test_a_codex_follow_up_made_a_miss_by_a_pause_is_ttl_expired(session: Session, name: str) -> None:
    """The follow-up answering the shell call, 10 minutes after the turn before it (the
    store's clock moved back, agents.py `_pause`) and reading nothing: one miss, caused by
    the TTL. Over WebSocket Codex chains it with previous_response_id and sends only the
    tool's output (its tools in the chain's `additional_tools` item, its system prompt in the
    chain's developer messages): neither tools_changed nor system_changed, nor message_edited.
    Over HTTP it sends the whole history, compared as any other request."""
    run = session.runs[name]
    rows, sent = generations(run), run.sent
    assert len(rows) == len(sent)
    call, answer = next(s for s in sent if s.turn == "tool"), next(s for s in sent if s.turn == "answer")
    follow, before = rows[answer.index - 1], rows[call.index - 1]
    body = answer.request
    if run.agent.websocket:
        assert body.get("previous_response_id") and follow["request"]["previous_response_id"]
        assert not [i for i in body["input"] if i.get("type") == "additional_tools" or i.get("role") == "developer"]
        assert not body.get("tools") and not body.get("instructions")
    else:
        assert not body.get("previous_response_id")
    items = listed(session, run, "cache")
    assert [(i["exchange_id"], i["cause"], i["message_index"]) for i in items] == [(follow["id"], "ttl_expired", None)]
    assert items[0]["previous_exchange_id"] == before["id"] and items[0]["gap_s"] > 300
    assert items[0]["missed_tokens"] == min(before["usage"]["input_tokens"], follow["usage"]["input_tokens"])


def expected_conversations(run: Run) -> list[list[int]]:
    """The generations (ledger indexes) each conversation should hold. Claude Code and
    Codex name their session on every request: one conversation. Gemini CLI sends no
    session id; its router's classifier call goes to another model, so by the prefix rule
    (one key and model, SPEC §5) it stands alone, and the two turns of the task are one."""
    if run.agent.route == "gemini":
        return [[s.index for s in run.sent if s.turn == "other"], [s.index for s in run.sent if s.turn != "other"]]
    return [[s.index for s in run.sent]]


def test_one_conversation_per_session(run: Run) -> None:
    rows, sent = generations(run), run.sent
    assert len(rows) == len(sent)
    by_index = {s.index: row for s, row in zip(sent, rows, strict=True)}
    groups = expected_conversations(run)
    for group in groups:
        ids = {by_index[i]["conversation_id"] for i in group}
        assert len(ids) == 1 and None not in ids, f"generations {group} fell into conversations {ids}"
    assert len({row["conversation_id"] for row in rows}) == len(groups)


def test_separate_runs_never_share_a_conversation(session: Session) -> None:
    """Twelve runs with the same task prompt, four of them Claude Code's: each its own."""
    owners: dict[str, str] = {}
    for run in session.runs.values():
        for row in generations(run):
            assert owners.setdefault(row["conversation_id"], run.agent.name) == run.agent.name, row["conversation_id"]
    assert set(owners.values()) == set(session.runs)


def test_show_conversation_lists_the_turns_in_order(run: Run) -> None:
    rows, sent = generations(run), run.sent
    assert len(rows) == len(sent)
    tool_turn = [s.turn for s in sent].index("tool")
    assert rows[tool_turn]["tool_calls"], "the tool turn's record holds no tool call"
    assert run.shown is not None and run.shown.code == 0, run.shown
    shown = json.loads(run.shown.out)
    assert shown["exchange_id"] == rows[tool_turn]["id"]
    group = next(g for g in expected_conversations(run) if sent[tool_turn].index in g)
    want = [rows[i - 1] for i in group]
    assert [turn["id"] for turn in shown["turns"]] == [row["id"] for row in want]
    assert [turn["finish_reason"] for turn in shown["turns"]] == [sent[i - 1].finish_reason for i in group]
    names = [[c.rsplit(".", 1)[-1] for c in turn["tool_calls"]] for turn in shown["turns"]]
    assert names == [[c["name"] for c in sent[i - 1].tool_calls] for i in group]


# -- the agents' own logs ------------------------------------------------------------------------


def in_the_agents_log(row: dict[str, Any]) -> bool:
    """Whether the agent's own session log tells of this exchange: not Codex's warm-up (it
    asks for no generation), nor Gemini CLI's non-streamed classifier call."""
    return not row["warmup"] and not (row["protocol"] == "gemini.generate" and not row["streamed"])


def _imported(session: Session, *args: str, home: Any) -> Any:
    env = harness.clean_env(LLMTAP_HOME=str(home))
    return agents._run([str(harness.LLMTAP), *args], env, session.root, agents.COMMAND_TIMEOUT)


def test_the_agents_own_log_imports_as_the_proxy_recorded_it(run: Run, session: Session, tmp_path: Any) -> None:
    """SPEC §3: the CLI's session log of this very run, imported into a store of its own,
    holds the calls the proxy recorded, token for token and, where the proxy could price
    them, cent for cent; imported into a copy of the live store, it adds nothing."""
    live = [row for row in generations(run) if in_the_agents_log(row)]
    assert live
    own = f"sqlite:///{tmp_path / 'own.db'}"
    done = _imported(session, "import", str(run.home), "--team", run.agent.name, "--db", own, home=tmp_path / "h")
    assert done.code == 0, done.err
    exported = _imported(session, "export", "--format", "jsonl", "--db", own, home=tmp_path / "h")
    assert exported.code == 0, exported.err
    rows = [json.loads(line) for line in exported.out.splitlines()]
    names = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens")

    def tokens(of: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return sorted(tuple((row.get("usage") or {}).get(name) for name in names) for row in of)

    assert tokens(rows) == tokens(live)
    assert {(row["team"], row["attribution"]) for row in rows} == {(run.agent.name, "import")}
    if all(row["price_status"] == "priced" for row in live):  # a provider's route (not https://localhost)
        assert sum(row["cost_usd"] for row in rows) == pytest.approx(sum(row["cost_usd"] for row in live), abs=1e-9)
    if run.agent.route != "gemini":  # the log keeps the provider's id
        assert sorted(row["response_id"] for row in rows) == sorted(row["response_id"] for row in live)
    # after the live recording: a copy of the live store and its secret
    shutil.copy(session.root / "llmtap.db", tmp_path / "live.db")
    shutil.copytree(session.llmtap_home, tmp_path / "live-home")
    live_db = f"sqlite:///{tmp_path / 'live.db'}"
    again = _imported(session, "import", str(run.home), "--db", live_db, home=tmp_path / "live-home")
    assert again.code == 0, again.err
    assert "imported 0 LLM exchanges" in again.out, again.out
    assert f"of {len(live)} calls in agent logs, {len(live)} were recorded already" in again.out, again.out
