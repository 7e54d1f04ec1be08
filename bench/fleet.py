"""Many `llmtap proxy` processes, one PostgreSQL: the ingest ceiling by proxy count, and
the parts the fleet test shares (a proxy that can be killed and restarted on its port and
spool, streaming clients that note the response id of each complete answer).

    uv run python bench/fleet.py [--proxies 1,2,3] [--clients 48] [--seconds 20] [--new-connections]

For each proxy count: one local upstream (`simulator`, Anthropic SSE: 29 chunks 12 ms
apart), in a process of its own so that it and the clients do not share a GIL; N proxies
with reverse listeners on one fresh PostgreSQL database; the same number of streaming
clients spread over them for a fixed time, each on one keep-alive connection as the SDKs
do (`--new-connections`: a connection per request, as the fleet test's clients); then
every proxy stopped (SIGTERM: it hands over what it holds) and the stored rows counted.

Prints records/s stored with the ratio against one proxy, completed = stored, and what
bounds the rate: CPU milliseconds per record of each part (the clients, the upstream,
the proxies, their writer processes, the PostgreSQL backends of the bench's database),
how many CPUs they kept busy, and the load average (other work on the machine takes its
share). `workload bound` is the most the clients can ask for (clients / one stream's
length); `cpu bound` is what this machine's CPUs would give at the measured cost per
record if nothing else ran. Bounded (a few times `--seconds`); not a timed test.

Not responsible for proving exactly-once under a kill (tests/e2e/test_fleet.py does) nor
for single-proxy overhead (bench/proxy_overhead.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from llmtap.bench.faults import wait_gone
from llmtap.bench.proxy_overhead import child_pids
from llmtap.bench.scratch import scratch_postgres
from llmtap.simulator.provider import SimulatedProvider
from llmtap.simulator.upstream import Seen, Upstream

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


class BareMitmdump(FleetProxy):
    """mitmdump alone in the same place (reverse to the upstream, every body streamed as
    the addon's tee streams it), recording nothing: what mitmproxy itself costs."""

    def command(self) -> list[str]:
        return [
            str(LLMTAP.parent / "mitmdump"), "-q", "--mode", f"reverse:{self.upstream}@127.0.0.1:{self.port}",
            "--set", "stream_large_bodies=1", "--set", f"confdir={self.folder / 'mitmproxy'}",
        ]  # fmt: skip


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


def _serve_simulator(conn: Connection) -> None:
    """The upstream's process: a simulated provider until the parent says stop."""
    with Upstream(SimulatedProvider()) as upstream:
        conn.send(upstream.port)
        conn.recv()


@contextmanager
def simulator_process() -> Iterator[tuple[str, int]]:
    """A local upstream (the simulated provider) in a process of its own: its URL and pid."""
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    process = context.Process(target=_serve_simulator, args=(theirs,), daemon=True)
    process.start()
    try:
        if not ours.poll(60):
            raise RuntimeError("the simulated upstream did not start in 60 s")
        yield f"http://127.0.0.1:{ours.recv()}", int(process.pid or 0)
    finally:
        if process.is_alive():
            ours.send("stop")
            process.join(10)
        if process.is_alive():
            process.kill()


def stream_seconds() -> float:
    """How long one answer to REQUEST streams from the simulator: its chunks' spacing."""
    reply = SimulatedProvider()(Seen("POST", "/v1/messages", {}, REQUEST, 0.0))
    return (len(reply.chunks) - 1) * reply.delay


TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """CPU seconds a live process has used, all its threads (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def postgres_backends(database: str) -> list[int]:
    """The PostgreSQL server processes serving connections to `database` (same machine)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                words = (entry / "cmdline").read_bytes().split()
            except OSError:
                continue
            if words[:1] == [b"postgres:"] and database.encode() in words:
                found.append(int(entry.name))
    return found


ROLES = ("clients", "upstream", "proxies", "writers", "postgres")


def cpu_by_role(fleet: list[FleetProxy], upstream_pid: int, database: str) -> dict[str, dict[int, float]]:
    """CPU seconds so far of every process of the run, by the part it plays."""
    proxies = [p.process.pid for p in fleet if p.process is not None]
    pids = {
        "clients": [os.getpid()],
        "upstream": [upstream_pid],
        "proxies": proxies,
        "writers": [child for pid in proxies for child in child_pids(pid)],
        "postgres": postgres_backends(database),
    }
    return {role: {pid: cpu_seconds(pid) for pid in pids[role]} for role in ROLES}


def _used(before: dict[str, dict[int, float]], after: dict[str, dict[int, float]]) -> dict[str, float]:
    """CPU seconds each role used between two readings (a process born between them from 0;
    one gone by the second reading is not counted: its time is lost)."""
    return {role: sum(seconds - before[role].get(pid, 0.0) for pid, seconds in after[role].items()) for role in ROLES}


def measure(
    proxies: int, clients: int, seconds: float, keep_alive: bool = True, bare: bool = False
) -> dict[str, object]:
    """One run; `bare`: mitmdump alone instead of `llmtap proxy` (records counted as the
    clients' completed requests, nothing is stored)."""
    folder = Path(tempfile.mkdtemp(prefix="llmtap-fleet-"))
    with scratch_postgres(PG_ADMIN, "llmtap_fleet") as url, simulator_process() as (upstream, upstream_pid):
        database = url.rsplit("/", 1)[-1]
        kind = BareMitmdump if bare else FleetProxy
        fleet = [kind(folder / f"p{i}", url, upstream, f"fleet-{i}") for i in range(proxies)]
        for proxy in fleet:  # one after another: the migration lock is the fleet test's business
            proxy.start()
        before, load_before = cpu_by_role(fleet, upstream_pid, database), _load()
        started = time.monotonic()
        outcome = asyncio.run(run_clients([p.port for p in fleet], clients, seconds, keep_alive=keep_alive))
        elapsed = time.monotonic() - started
        used = _used(before, cpu_by_role(fleet, upstream_pid, database))
        load_after = _load()
        exits = [proxy.stop() for proxy in fleet]
        done = len(outcome.completed)
        counts = (
            stored_counts(url) if not bare else {"rows": done, "ids": done, "response_ids": 0, "with_response_id": 0}
        )
    records = max(counts["rows"], 1)
    per_record = sum(used.values()) / records
    return {
        "proxies": f"{proxies} bare" if bare else proxies,
        "clients": clients,
        "seconds": round(elapsed, 1),
        "completed": len(outcome.completed),
        "stored": counts["rows"],
        "duplicates": counts["rows"] - counts["ids"] + counts["with_response_id"] - counts["response_ids"],
        "records_per_s": round(counts["rows"] / elapsed, 1),
        "cpu_ms_per_record": {role: round(1000 * used[role] / records, 2) for role in ROLES},
        "cpus_busy": round(sum(used.values()) / elapsed, 2),
        "cpu_bound": round((os.cpu_count() or 1) / per_record, 0) if per_record else None,
        "load": f"{load_before} -> {load_after}",
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
    parser.add_argument(
        "--new-connections", action="store_true", help="a new connection per request (default: keep-alive)"
    )
    parser.add_argument("--bare", action="store_true", help="and one mitmdump alone, without llmtap, to compare")
    args = parser.parse_args()
    try:
        counts = [int(n) for n in args.proxies.split(",")]
    except ValueError:
        print(f"fleet: --proxies must be numbers like 1,2,3, not {args.proxies!r}", file=sys.stderr)
        return 2
    if not counts or min(counts) < 1 or args.clients < 1 or args.seconds <= 0:
        print("fleet: --proxies, --clients and --seconds must be positive", file=sys.stderr)
        return 2
    length = stream_seconds()
    print(
        f"load average before: {_load()} on {os.cpu_count()} CPUs; {args.clients} streaming clients,"
        f" {'a connection per request' if args.new_connections else 'keep-alive'}, {args.seconds:.0f} s each;"
        f" workload bound {args.clients / length:.0f} records/s (one stream: {length * 1000:.0f} ms)"
    )
    results = []
    for n in counts:
        results.append(measure(n, args.clients, args.seconds, keep_alive=not args.new_connections))
    if args.bare:
        results.append(measure(1, args.clients, args.seconds, keep_alive=not args.new_connections, bare=True))
    base = float(results[0]["records_per_s"]) or 1.0  # type: ignore[arg-type]
    print(
        f"{'proxies':>7} {'completed':>9} {'stored':>7} {'dupes':>5} {'records/s':>9} {'ratio':>6}"
        f"  CPU ms per record ({', '.join(ROLES)})  CPUs busy  cpu bound  load average"
    )
    for r in results:
        ratio = float(r["records_per_s"]) / base  # type: ignore[arg-type]
        per_record = " ".join(f"{v:.1f}" for v in r["cpu_ms_per_record"].values())  # type: ignore[attr-defined]
        print(
            f"{r['proxies']:>7} {r['completed']:>9} {r['stored']:>7} {r['duplicates']:>5} "
            f"{r['records_per_s']:>9} {ratio:>6.2f}  {per_record:<44} {r['cpus_busy']:>9} {r['cpu_bound']:>10}"
            f"  {r['load']}"
        )
    bad = [r for r in results if r["completed"] != r["stored"] or r["duplicates"]]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
