"""Many `llmtap proxy` processes, one PostgreSQL: the ingest ceiling by proxy count, and
the parts the fleet test shares (a proxy that can be killed and restarted on its port and
spool, streaming clients that note the response id of each complete answer).

    uv run python bench/fleet.py [--proxies 1,2,3] [--clients 48] [--seconds 20]

For each proxy count: one local upstream (`simulator`, Anthropic SSE), N proxies with
reverse listeners on one fresh PostgreSQL database, the same number of streaming clients
spread over them for a fixed time; then every proxy stopped (SIGTERM: it hands over what
it holds) and the stored rows counted. Prints records/s stored with the ratio against one
proxy, and completed = stored. Bounded (a few times `--seconds`); not a timed test.

Not responsible for proving exactly-once under a kill (tests/e2e/test_fleet.py does) nor
for single-proxy overhead (bench/proxy_overhead.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from llmtap.bench.faults import wait_gone
from llmtap.bench.proxy_overhead import child_pids
from llmtap.bench.scratch import scratch_postgres
from llmtap.simulator.provider import SimulatedProvider
from llmtap.simulator.upstream import Upstream

PG_ADMIN = os.environ.get("LLMTAP_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class FleetProxy:
    """One `llmtap proxy` with an Anthropic reverse listener; its port, home and spool
    stay the same across a kill and a restart."""

    folder: Path
    db_url: str
    upstream: str
    team: str
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    writers: list[int] = field(default_factory=list)  # writer processes a SIGKILL orphaned

    def start(self, timeout: float = 60.0) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        command = [
            str(LLMTAP), "proxy", "--no-regular", "--quiet", "--db", self.db_url,
            "--confdir", str(self.folder / "mitmproxy"),
            "--reverse", f"anthropic={self.port},{self.team}", "--upstream", f"anthropic={self.upstream}",
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith("LLMTAP_") and "proxy" not in k.lower()}
        env.update(LLMTAP_HOME=str(self.folder / "home"), LLMTAP_SPOOL=str(self.folder / "spool"))
        with (self.folder / "proxy.log").open("ab") as log:
            self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"proxy exited {self.process.returncode}: {self.log_tail()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"proxy port {self.port} did not open in {timeout}s: {self.log_tail()}")

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


async def stream_once(port: int, timeout: float = 30.0) -> str | None:
    """One streaming Messages request through a proxy's reverse listener (a new
    connection, read to its close). The message id when the whole stream arrived (the
    chunked body's last chunk after `message_stop`), else None."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
    try:
        writer.write(
            b"POST /v1/messages HTTP/1.1\r\nhost: fleet\r\ncontent-type: application/json\r\n"
            b"anthropic-version: 2023-06-01\r\nconnection: close\r\ncontent-length: %d\r\n\r\n" % len(REQUEST) + REQUEST
        )
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


async def run_clients(
    ports: list[int],
    clients: int,
    seconds: float,
    outcome: Outcome | None = None,
    stop: threading.Event | None = None,
) -> Outcome:
    """`clients` tasks, client n on ports[n % len(ports)], each sending one request after
    another until the time is up (or, with `stop`, until it is set, `seconds` at most).
    A refused or cut request counts as incomplete and the client goes on (after 0.1 s, so
    a dead port is not spun on). Pass `outcome` to watch it fill from another thread."""
    outcome = outcome or Outcome()
    outcome.per_port.update({port: 0 for port in ports})
    deadline = time.monotonic() + seconds

    async def client(n: int) -> None:
        port = ports[n % len(ports)]
        rng = random.Random(n)
        await asyncio.sleep(rng.random() * 0.5)  # not all 48 in the same millisecond
        while time.monotonic() < deadline and not (stop is not None and stop.is_set()):
            try:
                message_id = await stream_once(port)
            except (OSError, TimeoutError, asyncio.IncompleteReadError):
                message_id = None
            if message_id is None:
                outcome.incomplete += 1
                await asyncio.sleep(0.1)
                continue
            outcome.completed.append(message_id)
            outcome.when[message_id] = (port, time.monotonic())
            outcome.per_port[port] += 1

    await asyncio.gather(*(client(n) for n in range(clients)))
    return outcome


def stored_counts(url: str) -> dict[str, int]:
    """rows, distinct ids, distinct response ids, rows with a response id, complete rows."""
    engine = create_engine(url, poolclass=NullPool)
    with engine.connect() as connection:
        row = connection.execute(
            text(
                "SELECT count(*), count(DISTINCT id), count(DISTINCT response_id), count(response_id),"
                " sum(CASE WHEN complete THEN 1 ELSE 0 END) FROM exchanges"
            )
        ).one()
    engine.dispose()
    keys = ("rows", "ids", "response_ids", "with_response_id", "complete")
    return {key: int(value or 0) for key, value in zip(keys, row, strict=True)}


def measure(proxies: int, clients: int, seconds: float) -> dict[str, object]:
    folder = Path(tempfile.mkdtemp(prefix="llmtap-fleet-"))
    with scratch_postgres(PG_ADMIN, "llmtap_fleet") as url, Upstream(SimulatedProvider()) as upstream:
        fleet = [FleetProxy(folder / f"p{i}", url, upstream.url, f"fleet-{i}") for i in range(proxies)]
        for proxy in fleet:  # started together: the migration lock is exercised too
            proxy.folder.mkdir(parents=True)
        for proxy in fleet:
            proxy.start()
        started = time.monotonic()
        outcome = asyncio.run(run_clients([p.port for p in fleet], clients, seconds))
        elapsed = time.monotonic() - started
        exits = [proxy.stop() for proxy in fleet]
        counts = stored_counts(url)
    return {
        "proxies": proxies,
        "clients": clients,
        "seconds": round(elapsed, 1),
        "completed": len(outcome.completed),
        "stored": counts["rows"],
        "duplicates": counts["rows"] - counts["ids"] + counts["with_response_id"] - counts["response_ids"],
        "records_per_s": round(counts["rows"] / elapsed, 1),
        "exits": exits,
    }


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proxies", default="1,2,3", help="proxy counts to measure, comma-separated")
    parser.add_argument("--clients", type=int, default=48)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    try:
        counts = [int(n) for n in args.proxies.split(",")]
    except ValueError:
        print(f"fleet: --proxies must be numbers like 1,2,3, not {args.proxies!r}", file=sys.stderr)
        return 2
    if not counts or min(counts) < 1 or args.clients < 1 or args.seconds <= 0:
        print("fleet: --proxies, --clients and --seconds must be positive", file=sys.stderr)
        return 2
    print(
        f"load average before: {_load()} on {os.cpu_count()} CPUs;"
        f" {args.clients} streaming clients, {args.seconds:.0f} s each"
    )
    results = []
    for n in counts:
        results.append(measure(n, args.clients, args.seconds))
        results[-1]["load_after"] = _load()
    base = float(results[0]["records_per_s"]) or 1.0  # type: ignore[arg-type]
    print(f"{'proxies':>7} {'completed':>9} {'stored':>7} {'dupes':>5} {'records/s':>9} {'ratio':>6}  load after")
    for r in results:
        ratio = float(r["records_per_s"]) / base  # type: ignore[arg-type]
        print(
            f"{r['proxies']:>7} {r['completed']:>9} {r['stored']:>7} {r['duplicates']:>5} "
            f"{r['records_per_s']:>9} {ratio:>6.2f}  {r['load_after']}"
        )
    bad = [r for r in results if r["completed"] != r["stored"] or r["duplicates"]]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
