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
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import create_engine, text

from llmtap.bench.proxy_overhead import child_pids
from llmtap.bench.scratch import scratch_postgres
from llmtap.bench.soak import PG_ADMIN, _requests
from llmtap.simulator.provider import SimulatedProvider
from llmtap.simulator.upstream import Reply, Seen, Upstream


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Forwarder:
    """A TCP forwarder to PostgreSQL that can refuse and cut connections on demand."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self.up = True
        self._conns: list[socket.socket] = []
        self._server = socket.create_server(("127.0.0.1", self.port))
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            if not self.up:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.close()
                except OSError:
                    pass

    def stop(self) -> None:
        self.up = False
        with self._lock:
            for conn in self._conns:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._conns.clear()

    def start(self) -> None:
        self.up = True


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


class Proxy:
    def __init__(
        self,
        folder: Path,
        db_url: str,
        upstream: str,
        spool: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.ports = {name: free_port() for name in ("anthropic", "openai", "gemini")}
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
        ]
        for name, port in self.ports.items():
            command += ["--reverse", f"{name}={port}", "--upstream", f"{name}={upstream}"]
        environment = dict(os.environ, LLMTAP_HOME=str(folder / "home"), **(env or {}))
        if spool is not None:
            environment["LLMTAP_SPOOL"] = str(spool)
        self.path = folder / f"proxy-{time.time_ns()}.log"
        self.log = open(self.path, "wb")  # noqa: SIM115
        self.process = subprocess.Popen(command, env=environment, stdout=self.log, stderr=subprocess.STDOUT)
        for port in self.ports.values():
            for _ in range(300):
                try:
                    socket.create_connection(("127.0.0.1", port), 0.2).close()
                    break
                except OSError:
                    time.sleep(0.1)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 180) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        status = self.process.wait(timeout=timeout)
        self.log.close()
        return status


# -- records that are costly to build, legitimately: the writer's bounds (SPEC §6) meet them --


def slow_request(messages: int) -> bytes:
    """An Anthropic request of many tiny messages: cheap on the wire (~70 bytes each), a
    few tens of microseconds each to decode (100,000: about 7 MB and seconds of CPU)."""
    turns = [
        {"role": ("user", "assistant")[n % 2], "content": [{"type": "text", "text": f"x{n}"}]} for n in range(messages)
    ]
    return json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": turns}).encode()


def bloating_request(megabytes: int, messages: int = 20_000) -> bytes:
    """An Anthropic request with an extra field of empty objects: 3 bytes each on the wire,
    a Python dict of 64 bytes each once parsed (15 MB: about 400 MB while it is built), and
    enough messages that its build holds that memory for a second or more."""
    empties = b",".join([b"{}"] * (megabytes * 1_000_000 // 3))
    head = slow_request(messages)[:-1]  # without its closing brace
    return head + b', "padding": [' + empties + b"]}"


class MemoryCeiling:
    """A stand-in for the kernel's OOM killer on a machine with little memory: SIGKILLs any
    process of a tree (a proxy and its writer process) whose resident memory passes
    `ceiling_mb`, and notes which. Linux /proc; polls every 20 ms."""

    def __init__(self, root: int, ceiling_mb: int) -> None:
        self.root = root
        self.ceiling_kb = ceiling_mb * 1024
        self.killed: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="memory-ceiling", daemon=True)

    def __enter__(self) -> MemoryCeiling:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _watch(self) -> None:
        while not self._stop.wait(0.02):
            for pid in [self.root, *child_pids(self.root)]:
                if rss_kb(pid) > self.ceiling_kb:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        continue
                    self.killed.add(pid)


def rss_kb(pid: int, field: str = "VmRSS") -> int:
    """A process's resident memory (`VmRSS`) or its peak (`VmHWM`) in kB; 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


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


def wait_gone(pids: list[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                break
            if state == "Z":
                break
            time.sleep(0.05)


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
