"""The coding agents through `llmtap simulate`, as the README's "try it without keys" section
runs them: the simulator, the proxy command it prints (its reverse ports swapped for free
ones), then each agent line of the README's code block (Claude Code, Codex) with its base
URL moved to the same free port; the agents are the pinned CLIs from npm (agents.py). Each
must finish its task, and the store must hold its generations: unattributed (the printed
command names no team), with usage, priced when the price table knows the model.

The agents get a HOME of their own and Claude Code the variables that keep it from calling
anything but its base URL (agents.QUIET_CLAUDE); nothing else is added to the README's line.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from llmtap.cli.simulate import PROXY_PORTS
from tests.e2e import harness
from tests.e2e.agents import agents
from tests.e2e.simulate_run import start_proxy, start_simulator

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[3] / "README.md"
SECTION = "## Try it without keys"
ENV_WORD = re.compile(r"[A-Z][A-Z0-9_]*=")
AGENT_PROTOCOLS = {"claude": "anthropic.messages", "codex": "openai.responses"}
AGENT_LINE = re.compile(rf"(?:{ENV_WORD.pattern}\S* )+({'|'.join(AGENT_PROTOCOLS)}) ")
ANSWER = "Here is a short answer about Hello."  # the simulator's text answer to 'Hello'


def readme_agent_lines() -> dict[str, list[str]]:
    """The agent command lines of the README's section, by CLI: `VAR=value ... cli args`."""
    text = README.read_text()
    section = text[text.index(SECTION) :]
    section = section[: section.index("\n## ", len(SECTION))]
    found: dict[str, list[str]] = {}
    for line in section.splitlines():
        match = AGENT_LINE.match(line)
        if match:
            found[match.group(1)] = shlex.split(line)
    return found


@dataclass
class Ran:
    out: dict[str, agents.Completed] = field(default_factory=dict)  # by CLI
    rows: list[dict[str, Any]] = field(default_factory=list)  # `llmtap export`, oldest first
    simulator_out: str = ""
    simulator_err: str = ""
    simulator_code: int | None = None
    proxy_code: int | None = None

    def of(self, cli: str) -> list[dict[str, Any]]:
        return [row for row in self.rows if row["protocol"] == AGENT_PROTOCOLS[cli]]


def _argv(words: list[str], ports: dict[str, int], bin_dir: Path) -> tuple[dict[str, str], list[str]]:
    """A README line's environment and command, its proxy ports swapped for the test's."""
    for name, port in PROXY_PORTS.items():
        words = [word.replace(f"127.0.0.1:{port}", f"127.0.0.1:{ports[name]}") for word in words]
    count = next(i for i, word in enumerate(words) if not ENV_WORD.match(word))
    env = dict(word.split("=", 1) for word in words[:count])
    command = words[count:]
    return env, [str(bin_dir / command[0]), *command[1:]]


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Ran:
    if not harness.LLMTAP.exists():
        pytest.skip(f"the llmtap console script is not at {harness.LLMTAP}")
    try:
        bin_dir = agents.install() / "node_modules" / ".bin"
    except agents.AgentsUnavailable as why:
        pytest.skip(f"coding-agent CLIs not installable: {why}")
    lines = readme_agent_lines()
    assert set(lines) == set(AGENT_PROTOCOLS), f"the README's agent lines: {sorted(lines)}"
    root = tmp_path_factory.mktemp("simulate-agents")
    db = f"sqlite:///{root / 'store.db'}"
    result = Ran()
    simulator, _, printed = start_simulator(root)
    try:
        proxy, ports = start_proxy(root, printed, db)
        try:
            for cli, words in lines.items():
                home = root / cli
                for folder in (home / "tmp", home / "work"):
                    folder.mkdir(parents=True, exist_ok=True)
                env, argv = _argv(words, ports, bin_dir)
                env = agents.AGENTS["claude"].base_env(home, bin_dir) | env  # the same for every agent
                if cli == "claude":
                    env |= agents.QUIET_CLAUDE
                result.out[cli] = agents._run(argv, env, home / "work", agents.CLI_TIMEOUT)
        finally:
            proxy.send_signal(signal.SIGTERM)
            try:
                result.proxy_code = proxy.wait(60)
            except subprocess.TimeoutExpired:
                proxy.kill()
                result.proxy_code = proxy.wait(5)
    finally:
        simulator.send_signal(signal.SIGTERM)
        try:
            result.simulator_out, _ = simulator.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            simulator.kill()
            result.simulator_out, _ = simulator.communicate(timeout=5)
        result.simulator_code = simulator.returncode
        result.simulator_err = (root / "simulate.err").read_text()
    env = harness.clean_env(LLMTAP_HOME=str(root / "home"))
    done = agents._run(
        [str(harness.LLMTAP), "export", "--format", "jsonl", "--db", db], env, root, agents.COMMAND_TIMEOUT
    )
    assert done.code == 0, done.err[-2000:]
    rows = [json.loads(line) for line in done.out.splitlines() if line.strip()]
    result.rows = sorted(rows, key=lambda row: (row["started_at"], row["id"]))
    return result


def test_the_simulator_and_the_proxy_stop_cleanly(ran: Ran) -> None:
    assert ran.proxy_code == 0
    assert ran.simulator_code == 0, ran.simulator_err
    assert "Traceback" not in ran.simulator_err
    assert "stopped after" in ran.simulator_out


@pytest.mark.parametrize("cli", sorted(AGENT_PROTOCOLS))
def test_the_agent_finishes_its_task(ran: Ran, cli: str) -> None:
    done = ran.out[cli]
    assert done.code == 0, f"{cli} exited {done.code}:\n{done.out[-2000:]}\n{done.err[-3000:]}"
    # the answer is about what the user typed, not about the agent's own <system-reminder>s
    assert ANSWER in done.out, done.out[-2000:]


@pytest.mark.parametrize("cli", sorted(AGENT_PROTOCOLS))
def test_the_store_holds_its_generations(ran: Ran, cli: str) -> None:
    rows = ran.of(cli)
    assert rows, f"no {AGENT_PROTOCOLS[cli]} exchange recorded: {[row['protocol'] for row in ran.rows]}"
    for row in rows:
        assert (row["status"], row["complete"], row["streamed"]) == (200, True, True)
        assert (row["team"], row["attribution"]) == ("unattributed", "none")  # the printed command names no team
        assert row["provider"] == ("anthropic" if cli == "claude" else "openai")
        assert row["usage_provenance"] == "reported"
        assert row["usage"]["input_tokens"] > 0 and row["usage"]["output_tokens"] > 0
        assert row["finish_reason"] == "end_turn"
        assert ANSWER in row["text"]
        assert row["price_status"] in ("priced", "unpriced")
        assert (row["cost_usd"] is not None) == (row["price_status"] == "priced")
        assert (row["error"], row["decode_error"], row["tool_calls"]) == (None, None, [])
        assert not row["interrupted"]


def test_claude_codes_default_model_is_priced(ran: Ran) -> None:
    """The README sends people to `llmtap report cost`: Claude Code's model has a price."""
    assert {row["price_status"] for row in ran.of("claude")} == {"priced"}
    assert all(row["cost_usd"] > 0 for row in ran.of("claude"))


def test_codex_falls_back_to_http_at_the_first_refusal(ran: Ran) -> None:
    """The simulator speaks HTTP only: Codex's WebSocket upgrade gets a 426, once, and the
    turn goes over HTTP SSE (a 200 to the upgrade made Codex retry it five times first)."""
    lines = ran.simulator_out.splitlines()
    assert sum(line.endswith("GET /v1/responses -> 426") for line in lines) == 1, lines
    assert any(line.endswith("POST /v1/responses -> 200 (stream)") for line in lines), lines
