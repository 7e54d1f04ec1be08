"""Many `llmtap proxy` processes, one PostgreSQL: the ingest ceiling by proxy count. The
proxies and clients are the fleet test's too (workloads/fleet.py).

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
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from llmtap.simulator.provider import SimulatedProvider
from llmtap.simulator.upstream import Seen, Upstream
from llmtap.workloads.fleet import LLMTAP, REQUEST, FleetProxy, run_clients
from llmtap.workloads.procfs import child_pids
from llmtap.workloads.scratch import scratch_postgres

PG_ADMIN = os.environ.get("LLMTAP_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


class BareMitmdump(FleetProxy):
    """mitmdump alone in the same place (reverse to the upstream, every body streamed as
    the addon's tee streams it), recording nothing: what mitmproxy itself costs."""

    def command(self) -> list[str]:
        return [
            str(LLMTAP.parent / "mitmdump"), "-q", "--mode", f"reverse:{self.upstream}@127.0.0.1:{self.port}",
            "--set", "stream_large_bodies=1", "--set", f"confdir={self.folder / 'mitmproxy'}",
        ]  # fmt: skip


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
