"""A fleet of `llmtap proxy` processes and the streaming clients that drive them, shared by
the fleet test (tests/e2e/test_fleet.py) and the fleet bench (bench/fleet.py): a proxy
that can be killed and restarted on its port and spool (`FleetProxy`), and clients that
note the response id of each complete answer (`run_clients` filling an `Outcome`).

Not responsible for the upstream, the store or counting what it holds (the test and the
bench bring their own), nor for measuring anything (bench/fleet.py does).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from llmtap.workloads.network import free_port, wait_listening
from llmtap.workloads.procfs import child_pids, wait_gone

LLMTAP = Path(sys.executable).parent / "llmtap"
REQUEST = json.dumps(
    {
        "model": "claude-sonnet-4-5-20250929",
        "max_tokens": 256,
        "stream": True,
        "messages": [{"role": "user", "content": "Hi."}],
    }
).encode()
_MESSAGE_ID = re.compile(rb'"id"\s*:\s*"(msg_[^"]+)"')


@dataclass
class FleetProxy:
    """One `llmtap proxy` with an Anthropic reverse listener; its port, home and spool
    stay the same across a kill and a restart. The fleet's proxies (folders side by side)
    share one fingerprint secret file, as a fleet on one store must (README: One
    fingerprint per store)."""

    folder: Path
    db_url: str
    upstream: str
    team: str
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    writers: list[int] = field(default_factory=list)  # writer processes a SIGKILL orphaned

    def command(self) -> list[str]:
        return [
            str(LLMTAP), "proxy", "--no-regular", "--quiet", "--db", self.db_url,
            "--confdir", str(self.folder / "mitmproxy"),
            "--reverse", f"anthropic={self.port},{self.team}", "--upstream", f"anthropic={self.upstream}",
        ]  # fmt: skip

    def start(self, timeout: float = 60.0) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        command = self.command()
        env = {k: v for k, v in os.environ.items() if not k.startswith("LLMTAP_") and "proxy" not in k.lower()}
        env.update(
            LLMTAP_HOME=str(self.folder / "home"),
            LLMTAP_SPOOL=str(self.folder / "spool"),
            LLMTAP_SECRET_FILE=str(self.folder.parent / "fingerprint.secret"),
        )
        with (self.folder / "proxy.log").open("ab") as log:
            self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        wait_listening(self.port, self.process, self.folder / "proxy.log", timeout)

    def kill(self) -> None:
        """SIGKILL: no hand-over. Its writer process outlives it and writes what it holds."""
        assert self.process is not None
        self.writers += child_pids(self.process.pid)
        self.process.kill()
        self.process.wait(30)

    def stop(self, timeout: float = 120.0) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def wait_for_orphans(self, timeout: float = 60.0) -> None:
        wait_gone(self.writers, timeout)

    def log_tail(self) -> str:
        path = self.folder / "proxy.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""


@dataclass
class Outcome:
    """What the clients saw: the response id of every complete answer, and how many
    requests got no complete answer (refused, cut by a kill, timed out)."""

    completed: list[str] = field(default_factory=list)
    incomplete: int = 0
    per_port: dict[int, int] = field(default_factory=dict)
    when: dict[str, tuple[int, float]] = field(default_factory=dict)  # id -> (port, monotonic time)


_HEAD = (
    b"POST /v1/messages HTTP/1.1\r\nhost: fleet\r\ncontent-type: application/json\r\n"
    b"anthropic-version: 2023-06-01\r\n%sContent-Length: %d\r\n\r\n"
)


async def stream_once(port: int, timeout: float = 30.0) -> str | None:
    """One streaming Messages request through a proxy's reverse listener (a new
    connection, read to its close). The message id when the whole stream arrived (the
    chunked body's last chunk after `message_stop`), else None."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
    try:
        writer.write(_HEAD % (b"connection: close\r\n", len(REQUEST)) + REQUEST)
        await writer.drain()
        response = await asyncio.wait_for(reader.read(), timeout)
    finally:
        writer.close()
    if not response.startswith(b"HTTP/1.1 200") or b"message_stop" not in response:
        return None
    if not response.endswith(b"0\r\n\r\n"):
        return None
    found = _MESSAGE_ID.search(response)
    return found.group(1).decode() if found else None


class KeptConnection:
    """One client's keep-alive connection to a proxy, opened when first needed and again
    after anything goes wrong on it."""

    def __init__(self, port: int, timeout: float = 30.0) -> None:
        self.port, self.timeout = port, timeout
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def stream(self) -> str | None:
        """As `stream_once`, on this connection: the message id of a whole stream, else
        None (the connection is then closed, and the next request opens another)."""
        try:
            return await asyncio.wait_for(self._exchange(), self.timeout)
        except (OSError, TimeoutError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            self.close()
            raise

    async def _exchange(self) -> str | None:
        if self.streams is None:
            self.streams = await asyncio.open_connection("127.0.0.1", self.port)
        reader, writer = self.streams
        writer.write(_HEAD % (b"", len(REQUEST)) + REQUEST)
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200") or b"transfer-encoding: chunked" not in head.lower():
            self.close()
            return None
        body = bytearray()
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            body += (await reader.readexactly(size + 2))[:-2]
        await reader.readuntil(b"\r\n")  # the empty trailer after the last chunk
        found = _MESSAGE_ID.search(body)
        return found.group(1).decode() if found and b"message_stop" in body else None

    def close(self) -> None:
        if self.streams is not None:
            self.streams[1].close()
            self.streams = None


async def run_clients(
    ports: list[int],
    clients: int,
    seconds: float,
    outcome: Outcome | None = None,
    stop: threading.Event | None = None,
    keep_alive: bool = False,
) -> Outcome:
    """`clients` tasks, client n on ports[n % len(ports)], each sending one request after
    another until the time is up (or, with `stop`, until it is set, `seconds` at most):
    on a new connection each, or with `keep_alive` on one connection per client.
    A refused or cut request counts as incomplete and the client goes on (after 0.1 s, so
    a dead port is not spun on). Pass `outcome` to watch it fill from another thread."""
    outcome = outcome or Outcome()
    outcome.per_port.update({port: 0 for port in ports})
    deadline = time.monotonic() + seconds

    async def client(n: int) -> None:
        port = ports[n % len(ports)]
        kept = KeptConnection(port) if keep_alive else None
        rng = random.Random(n)
        await asyncio.sleep(rng.random() * 0.5)  # not all 48 in the same millisecond
        while time.monotonic() < deadline and not (stop is not None and stop.is_set()):
            try:
                message_id = await (kept.stream() if kept is not None else stream_once(port))
            except (OSError, TimeoutError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                message_id = None
            if message_id is None:
                outcome.incomplete += 1
                await asyncio.sleep(0.1)
                continue
            outcome.completed.append(message_id)
            outcome.when[message_id] = (port, time.monotonic())
            outcome.per_port[port] += 1
        if kept is not None:
            kept.close()

    await asyncio.gather(*(client(n) for n in range(clients)))
    return outcome
