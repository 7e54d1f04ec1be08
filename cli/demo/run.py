"""Orchestrates the demo: simulated provider, real proxy process, SDK traffic, reports,
dashboard. Leaves nothing running: the proxy is stopped with SIGTERM (which flushes its
writer) and killed only if it does not stop, the provider's thread ends with it.

Not responsible for what the traffic or the provider say.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from llmtap.cli.demo import traffic
from llmtap.cli.errors import UsageError
from llmtap.simulator.provider import SimulatedProvider
from llmtap.simulator.upstream import Upstream
from llmtap.storage.private import open_private, private_dir

PROVIDERS = ("anthropic", "openai", "gemini")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(port: int, process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise UsageError(f"the proxy exited during start-up (status {process.returncode})")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise UsageError(f"the proxy did not listen on 127.0.0.1:{port} within {timeout:.0f} s")


def start_proxy(folder: Path, upstream_url: str, ports: dict[str, int], db_url: str) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-m",
        "llmtap.cli.main",
        "proxy",
        "--no-regular",
        "--quiet",
        "--db",
        db_url,
        "--confdir",
        str(folder / "mitmproxy"),
        "--bodies",
        "full",
    ]
    for name in PROVIDERS:
        command += ["--reverse", f"{name}={ports[name]}", "--upstream", f"{name}={upstream_url}"]
    env = dict(os.environ, LLMTAP_HOME=str(folder / "home"))
    env.pop("LLMTAP_CONFIG", None)
    log = open_private(folder / "proxy.log", "wb")  # handed to the child
    return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)


def stop(process: subprocess.Popen[bytes]) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    return process.returncode


def drive(ports: dict[str, int], console: Console) -> list[str]:
    """Run the three teams at once; returns what went wrong (nothing, normally)."""
    base = {
        "agents": f"http://127.0.0.1:{ports['anthropic']}",
        "search": f"http://127.0.0.1:{ports['openai']}",
        "support": f"http://127.0.0.1:{ports['gemini']}",
    }
    problems: list[str] = []
    lock = threading.Lock()
    columns = (TextColumn("{task.description:<9}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        tasks = {team: progress.add_task(team, total=traffic.STEPS[team]) for team in traffic.TEAMS}

        def one(team: str) -> None:
            def tick() -> None:
                with lock:
                    progress.advance(tasks[team])

            try:
                traffic.TEAMS[team](base[team], tick)
            except Exception as exc:  # noqa: BLE001 - reported, and the demo goes on
                problems.append(f"{team}: {exc.__class__.__name__}: {exc}")

        with ThreadPoolExecutor(max_workers=len(traffic.TEAMS)) as pool:
            list(pool.map(one, traffic.TEAMS))
    return problems


def run(folder: Path, console: Console) -> tuple[str, list[str]]:
    """Everything up to a flushed store; returns its URL and the traffic's problems."""
    private_dir(folder)
    database = folder / "llmtap.db"
    for stale in folder.glob("llmtap.db*"):
        stale.unlink()
    db_url = f"sqlite:///{database}"
    ports = {name: free_port() for name in PROVIDERS}
    with Upstream(SimulatedProvider()) as upstream:
        proxy = start_proxy(folder, upstream.url, ports, db_url)
        try:
            for port in ports.values():
                wait_for(port, proxy)
            console.print(
                f"proxy up: reverse listeners on {', '.join(f'{n} :{p}' for n, p in ports.items())}; "
                f"simulated provider on {upstream.url}"
            )
            problems = drive(ports, console)
        finally:
            status = stop(proxy)
    if status != 0:
        problems.append(f"the proxy exited with status {status} (see {folder / 'proxy.log'})")
    return db_url, problems
