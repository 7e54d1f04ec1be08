"""`llmtap simulate` and the `llmtap proxy` command it prints, started as the README's "try it
without keys" path says, for the end-to-end tests that drive clients through them
(test_simulate.py: curl and the SDKs; agents/test_simulate_agent.py: the coding agents).

Not responsible for the clients or for any assertion on what was recorded.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

from tests.e2e import harness
from tests.helpers import free_port


def start_simulator(tmp_path: Path) -> tuple[subprocess.Popen[str], str, list[str]]:
    """`llmtap simulate --port 0`: the process, its URL and the proxy command it printed."""
    with (tmp_path / "simulate.err").open("w") as sink:  # the child keeps its own copy
        proc = subprocess.Popen(
            [str(harness.LLMTAP), "simulate", "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=sink,
            text=True,
            env=harness.clean_env(LLMTAP_HOME=str(tmp_path / "home")),
        )
    assert proc.stdout is not None
    printed = [proc.stdout.readline() for _ in range(4)]  # banner, blank, "Record it", the command
    url = re.search(r"http://127\.0\.0\.1:\d+", printed[0])
    assert url, printed
    return proc, url.group(0), shlex.split(printed[3])


def start_proxy(
    tmp_path: Path, printed: list[str], db: str, *extra: str
) -> tuple[subprocess.Popen[bytes], dict[str, int]]:
    """The printed proxy command with free ports for its reverse listeners (returned by
    protocol family), the test's own store and confdir, and `extra` arguments."""
    assert printed[:2] == ["llmtap", "proxy"]
    ports: dict[str, int] = {}

    def swap(word: str) -> str:  # anthropic=8081 -> anthropic=<free port>
        name, _, port = word.partition("=")
        if port.isdigit():
            ports[name] = free_port()
            return f"{name}={ports[name]}"
        return word

    command = [str(harness.LLMTAP), *(swap(word) for word in printed[1:])]
    command += ["--db", db, "--confdir", str(tmp_path / "mitm"), *extra]
    log = tmp_path / "proxy.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            command, env=harness.clean_env(LLMTAP_HOME=str(tmp_path / "home")), stdout=sink, stderr=subprocess.STDOUT
        )
    assert set(ports) == {"anthropic", "openai", "gemini"}
    for port in ports.values():
        harness.wait_for_port(port, proc, log)
    return proc, ports
