"""Fault injection under load, with counts: for each fault, the requests clients completed
against the exchanges the store holds afterwards.

    uv run python bench/faults.py [--quick] [--only NAME]

Faults: the database away (PostgreSQL behind a TCP forwarder that is stopped, then
restarted), the spool's disk full at the same time (a tiny tmpfs, when this machine lets
root mount one), the upstream resetting connections mid-stream, clients hanging up
mid-stream, SIGTERM of the proxy under load, SIGKILL of the proxy under load, a record
that stalls the writer (its build past the deadline, set to 1 s), a record that takes the
writer down (its build swelling past a low-memory machine's OOM killer, played by
`MemoryCeiling`). All on 127.0.0.1, bounded in time. Not a test: it prints figures that
RELIABILITY.md keeps.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import random
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import create_engine, text

from llmtap.bench.soak import PG_ADMIN, _requests
from llmtap.simulator.provider import SimulatedProvider
from llmtap.simulator.upstream import Reply, Seen, Upstream
from llmtap.workloads.costly_requests import bloating_request, slow_request
from llmtap.workloads.network import Forwarder
from llmtap.workloads.procfs import MemoryCeiling, child_pids, wait_gone
from llmtap.workloads.proxy import Proxy
from llmtap.workloads.scratch import scratch_postgres


@dataclass
class Counts:
    completed: int = 0
    failed: int = 0


async def _stream(port: int, path: str, body: bytes, hang_up: bool) -> bool:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        (
            f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {len(body)}"
            "\r\nx-llmtap-team: faults\r\nconnection: close\r\n\r\n"
        ).encode()
        + body
    )
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        writer.close()
        return False
    if hang_up:
        await reader.read(200)
        writer.transport.abort()
        return True
    rest = await reader.read()
    writer.close()
    return rest.endswith(b"0\r\n\r\n")  # the chunked body's end: the stream was not cut


async def load(
    ports: dict[str, int],
    seconds: float,
    clients: int,
    hang_up_share: float = 0.0,
    stop_event: threading.Event | None = None,
) -> Counts:
    counts = Counts()
    deadline = time.monotonic() + seconds
    catalogue = _requests()

    async def worker(n: int) -> None:
        rng = random.Random(n)
        while time.monotonic() < deadline and not (stop_event and stop_event.is_set()):
            provider, path, body = rng.choice(catalogue)
            try:
                ok = await asyncio.wait_for(_stream(ports[provider], path, body, rng.random() < hang_up_share), 30)
            except (TimeoutError, OSError, asyncio.IncompleteReadError):
                ok = False
            if ok:
                counts.completed += 1
            else:
                counts.failed += 1

    await asyncio.gather(*(worker(n) for n in range(clients)))
    return counts


def _stored(url: str, where: str = "true") -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return connection.execute(text(f"SELECT count(*) FROM exchanges WHERE {where}")).scalar_one()
    finally:
        engine.dispose()


def _mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    return result.returncode == 0


def database_away(seconds: float, away: float, clients: int, disk_full: bool) -> dict[str, object]:
    """PostgreSQL unreachable for `away` seconds in the middle of the load (and, with
    `disk_full`, the spool's disk full too)."""
    folder = Path(tempfile.mkdtemp(prefix="llmtap-fault-"))
    with scratch_postgres(PG_ADMIN, "llmtap_fault") as url:
        return _database_away(folder, url, seconds, away, clients, disk_full)


def _database_away(folder: Path, url: str, seconds: float, away: float, clients: int, disk_full: bool) -> dict:
    pg_host, pg_port = "127.0.0.1", 5432
    forwarder = Forwarder((pg_host, pg_port))
    proxied = url.replace("127.0.0.1:5432", f"127.0.0.1:{forwarder.port}")
    spool = folder / "spool"
    mounted = disk_full and _mount_tmpfs(spool, "64k")
    try:
        with Upstream(SimulatedProvider()) as upstream:
            _stored_schema(url)
            proxy = Proxy(folder, proxied, upstream.url, spool=spool)

            def outage() -> None:
                time.sleep((seconds - away) / 2)
                forwarder.stop()
                time.sleep(away)
                forwarder.start()

            threading.Thread(target=outage, daemon=True).start()
            counts = asyncio.run(load(proxy.ports, seconds, clients))
            status = proxy.stop()
        stored = _stored(url)
    finally:
        forwarder.stop()
        if mounted:
            subprocess.run(["umount", str(spool)], capture_output=True)
    return {
        "fault": "database away" + (" + spool disk full" if disk_full else ""),
        "away_s": away,
        "spool_on_tiny_tmpfs": bool(mounted),
        "completed": counts.completed,
        "failed": counts.failed,
        "stored": stored,
        "lost": counts.completed - stored,
        "proxy_exit": status,
    }


def _stored_schema(url: str) -> None:
    from llmtap.storage.engine import make_engine
    from llmtap.storage.migrate import ensure_current

    engine = make_engine(url)
    ensure_current(engine)
    engine.dispose()


def upstream_resets(seconds: float, clients: int) -> dict[str, object]:
    folder = Path(tempfile.mkdtemp(prefix="llmtap-fault-"))
    provider = SimulatedProvider()

    def router(seen: Seen) -> Reply:
        reply = provider(seen)
        if random.random() < 0.3 and len(reply.chunks) > 3:
            reply.reset_after = len(reply.chunks) // 2
        return reply

    url = f"sqlite:///{folder / 'store.db'}"
    with Upstream(router) as upstream:
        proxy = Proxy(folder, url, upstream.url)
        counts = asyncio.run(load(proxy.ports, seconds, clients))
        status = proxy.stop()
    stored = _stored(url)
    cut = _stored(url, "NOT complete AND interrupted IS NOT NULL")
    return {
        "fault": "upstream resets 30% of streams mid-way",
        "requests": counts.completed + counts.failed,
        "client_errors": counts.failed,
        "stored": stored,
        "stored_cut": cut,
        "lost": counts.completed + counts.failed - stored,
        "proxy_exit": status,
    }


def client_hang_ups(seconds: float, clients: int) -> dict[str, object]:
    folder = Path(tempfile.mkdtemp(prefix="llmtap-fault-"))
    url = f"sqlite:///{folder / 'store.db'}"
    with Upstream(SimulatedProvider()) as upstream:
        proxy = Proxy(folder, url, upstream.url)
        counts = asyncio.run(load(proxy.ports, seconds, clients, hang_up_share=0.3))
        status = proxy.stop()
    stored = _stored(url)
    return {
        "fault": "clients hang up on 30% of streams",
        "requests": counts.completed,
        "stored": stored,
        "stored_cut": _stored(url, "NOT complete"),
        "lost": counts.completed - stored,
        "proxy_exit": status,
    }


def proxy_signal(seconds: float, clients: int, sig: int) -> dict[str, object]:
    """Signal the proxy halfway through the load; count what clients completed before."""
    folder = Path(tempfile.mkdtemp(prefix="llmtap-fault-"))
    url = f"sqlite:///{folder / 'store.db'}"
    stop = threading.Event()
    with Upstream(SimulatedProvider()) as upstream:
        proxy = Proxy(folder, url, upstream.url)

        writers: list[int] = []

        def kill() -> None:
            time.sleep(seconds / 2)
            writers.extend(child_pids(proxy.process.pid))  # the writer process outlives a SIGKILL
            proxy.process.send_signal(sig)
            stop.set()

        threading.Thread(target=kill, daemon=True).start()
        counts = asyncio.run(load(proxy.ports, seconds, clients, stop_event=stop))
        status = proxy.stop(sig)
        wait_gone(writers, timeout=60)  # it writes what it held, then exits
        if sig == signal.SIGKILL:  # what a restart finds in the spool is written then
            from llmtap.storage.engine import make_engine
            from llmtap.storage.writer import Writer

            engine = make_engine(url)
            Writer(engine, spool_dir=folder / "home" / "spool").close()
            engine.dispose()
    stored = _stored(url)
    return {
        "fault": f"{signal.Signals(sig).name} of the proxy under load",
        "completed_before": counts.completed,
        "failed_or_in_flight": counts.failed,
        "stored": stored,
        "missing": max(counts.completed - stored, 0),
        "proxy_exit": status,
    }


BAD_ANSWER = (
    b'{"id": "msg_bad", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",'
    b' "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",'
    b' "usage": {"input_tokens": 12, "output_tokens": 3}}'
)
BAD_RECORDS = {  # fault: (what it is, the request, the proxy's environment, a memory ceiling in MB)
    "stall": ("a record that stalls the writer (build past its 1 s deadline)", lambda: slow_request(100_000),
              {"LLMTAP_RECORD_DEADLINE": "1"}, None),
    "crash": ("a record that takes the writer down (build past a 400 MB OOM ceiling)", lambda: bloating_request(25),
              {}, 400),
}  # fmt: skip


def bad_records(seconds: float, clients: int, kind: str, count: int) -> dict[str, object]:
    """`count` records the writer cannot build within its bounds, sent among the load (team
    `bad`, answered by a small fixed reply): every completed request stored, the bad ones
    quarantined, the proxy up."""
    what, request, env, ceiling_mb = BAD_RECORDS[kind]
    folder = Path(tempfile.mkdtemp(prefix="llmtap-fault-"))
    url = f"sqlite:///{folder / 'store.db'}"
    provider = SimulatedProvider()

    def router(seen: Seen) -> Reply:
        if seen.headers.get("x-llmtap-team") == "bad":
            return Reply(chunks=[BAD_ANSWER], chunked=False)
        return provider(seen)

    sent = [0]
    with Upstream(router) as upstream:
        proxy = Proxy(folder, url, upstream.url, env=env)
        watch = MemoryCeiling(proxy.process.pid, ceiling_mb) if ceiling_mb else contextlib.nullcontext()
        with watch:
            body = request()

            def inject() -> None:
                for _ in range(count):
                    time.sleep(seconds / (count + 1))
                    sent[0] += _post(proxy.ports["anthropic"], body, "bad")

            injector = threading.Thread(target=inject, daemon=True)
            injector.start()
            counts = asyncio.run(load(proxy.ports, seconds, clients))
            injector.join(60)
            proxy_alive = proxy.process.poll() is None
            status = proxy.stop()  # the ceiling still watching: the last records are built now
    log = proxy.path.read_text(errors="replace")
    completed = counts.completed + sent[0]
    stored = _stored(url)
    return {
        "fault": what,
        "completed": completed,
        "failed": counts.failed,
        "stored": stored,
        "lost": completed - stored,
        "bad_sent": sent[0],
        "bad_quarantined": _stored(url, "team = 'bad' AND decode_error LIKE '%(quarantined)%'"),
        "writer_restarts": log.count("restarted it"),
        "killed_by_ceiling": len(watch.killed) if isinstance(watch, MemoryCeiling) else 0,
        "proxy_up_to_the_end": proxy_alive,
        "proxy_exit": status,
    }


def _post(port: int, body: bytes, team: str) -> int:
    """One request to the Anthropic listener: 1 if it completed."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        headers = {"content-type": "application/json", "x-llmtap-team": team}
        connection.request("POST", "/v1/messages", body=body, headers=headers)
        response = connection.getresponse()
        response.read()
        return int(response.status == 200)
    except OSError:
        return 0
    finally:
        connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", help="database, disk, resets, hangups, sigterm, sigkill, stall, crash")
    args = parser.parse_args()
    seconds, away, clients = (20.0, 8.0, 12) if args.quick else (120.0, 60.0, 24)
    runs = {
        "database": lambda: database_away(seconds, away, clients, disk_full=False),
        "disk": lambda: database_away(seconds, away, clients, disk_full=True),
        "resets": lambda: upstream_resets(seconds / 2, clients),
        "hangups": lambda: client_hang_ups(seconds / 2, clients),
        "sigterm": lambda: proxy_signal(seconds / 2, clients, signal.SIGTERM),
        "sigkill": lambda: proxy_signal(seconds / 2, clients, signal.SIGKILL),
        "stall": lambda: bad_records(seconds / 2, clients, "stall", 3 if args.quick else 10),
        "crash": lambda: bad_records(seconds / 2, clients, "crash", 3 if args.quick else 10),
    }
    for name, run in runs.items():
        if args.only and name not in args.only.split(","):
            continue
        print(json.dumps(run()), flush=True)


if __name__ == "__main__":
    main()
