"""The agent session, made once: the twelve runs (Claude Code direct, direct with a cache
miss, through a Bedrock-shaped and a Vertex-shaped upstream; Codex over WebSocket and over
HTTP SSE, and both again with a pause before the follow-up; Gemini CLI; and the three CLIs
through the regular proxy) all at once through one proxy (agents.py).

The tests of this folder get a longer timeout than the rest of tests/e2e/ (their first
test waits for every run, about a minute); it is put in front of the e2e one.
"""

from __future__ import annotations

import pytest

from tests.e2e import harness
from tests.e2e.agents import agents

SUITE_TIMEOUT = 240  # seconds: the suite takes about 1.5 min; room for a loaded machine


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/agents/" in item.path.as_posix():
            item.add_marker(pytest.mark.timeout(SUITE_TIMEOUT), append=False)


@pytest.fixture(scope="session")
def agent_session(tmp_path_factory: pytest.TempPathFactory) -> agents.Session:
    if not harness.LLMTAP.exists():
        pytest.skip(f"the llmtap console script is not at {harness.LLMTAP}")
    try:
        folder = agents.install()
    except agents.AgentsUnavailable as why:
        pytest.skip(f"coding-agent CLIs not installable: {why}")
    return agents.run_session(folder / "node_modules" / ".bin", tmp_path_factory.mktemp("agents"))
