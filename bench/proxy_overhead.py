"""Proxy overhead: what mitmproxy costs, and what the llmtap addon adds on top of it.

    uv run python bench/proxy_overhead.py [--quick] [--rounds N]

One run on 127.0.0.1 starts a local upstream (`llmtap.simulator.upstream.Upstream`, in a process of
its own so the load client does not share its GIL) and these targets in front of it:

    direct        the upstream itself
    mitmdump      `mitmdump -q --mode reverse:…` (the venv's), no addon: it buffers bodies
    mitmdump+st   the same with `--set stream_large_bodies=1`: streams every body, as the tee does
    addon         `mitmdump -q -s cli/mitmdump_script.py --set llmtap_db=sqlite:///…` recording to SQLite
    llmtap proxy  `llmtap proxy --reverse anthropic=PORT` recording to SQLite
  with --telemetry (issue 16), the same proxy twice more:
    proxy+metrics `--metrics 127.0.0.1:PORT`, scraped every second while it runs
    proxy+m+otlp  that and `--otlp-endpoint` to a local sink that takes OTLP/HTTP posts and
                  discards them (the sink and the scraper share a process of their own)

Workloads, each with a raw asyncio HTTP/1.1 client over keep-alive connections, and
Anthropic Messages traffic so the addon records every request:
  * small JSON (about 330 B up, 280 B down with Content-Length): p50/p99 latency at
    concurrency 1, and requests/s at concurrency 16;
  * SSE streams (10 events, 20 ms apart): time to first byte, and per chunk the delay
    from the upstream's write to the client's read, against the same on a direct path.
Targets run interleaved, round by round; each figure is the median over rounds. Ratios
are against bare mitmdump (and the streaming one for streams: bare mitmdump buffers SSE).
Goal: the addon within 10% of bare mitmdump on p50 and on requests/s, and under 0.5 ms
added per stream chunk. At the end the recording targets are stopped (SIGINT/SIGTERM)
and their rows counted: every request must be in the store (and, with metrics on, in
`llmtap_requests_total`, scraped once more just before the stop).

Not a timed test: it prints numbers and ratios, and exits 0 either way.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import multiprocessing
import os
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmtap.workloads.network import wait_listening
from llmtap.workloads.procfs import child_pids

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
EVENTS, EVENT_GAP = 10, 0.02
REQUEST = json.dumps(
    {
        "model": "claude-sonnet-4-5",
        "max_tokens": 256,
        "system": "You are a terse assistant that answers benchmark questions.",
        "messages": [{"role": "user", "content": "Reply with one short sentence about the weather in Paris today."}],
        "temperature": 0.2,
    }
).encode()
STREAM_REQUEST = REQUEST[:-1] + b', "stream": true}'
KEY = "sk-ant-api03-BENCHKEY000000000000000000000000000000"
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


# -- the upstream, in its own process ---------------------------------------------------------


def _json_reply(number: int) -> bytes:
    return json.dumps(
        {
            "id": f"msg_bench_{number:08d}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [{"type": "text", "text": "It is mild and partly cloudy in Paris today."}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 41, "output_tokens": 13},
        }
    ).encode()


def _sse_events(number: int) -> list[bytes]:
    def event(name: str, data: dict[str, Any]) -> bytes:
        return b"event: %s\ndata: %s\n\n" % (name.encode(), json.dumps(data).encode())

    start = {"id": f"msg_stream_{number:08d}", "type": "message", "role": "assistant", "content": [],
             "model": "claude-sonnet-4-5-20250929", "usage": {"input_tokens": 41, "output_tokens": 1}}  # fmt: skip
    words = ["It ", "is ", "mild ", "and ", "partly ", "cloudy."]
    return [
        event("message_start", {"type": "message_start", "message": start}),
        event(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        *(
            event(
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}},
            )
            for w in words
        ),  # fmt: skip
        event(
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}},
        ),
        event("message_stop", {"type": "message_stop"}),
    ][:EVENTS]


def _upstream_child(conn: Any) -> None:
    sys.path.insert(0, str(ROOT))
    from llmtap.simulator.upstream import Reply, Seen, Upstream

    counter = itertools.count()

    def router(seen: Seen) -> Reply:
        number = next(counter)
        if b'"stream": true' in seen.body:
            return Reply(content_type="text/event-stream", chunks=_sse_events(number), delay=EVENT_GAP)
        return Reply(chunks=[_json_reply(number)], chunked=False)

    with Upstream(router) as upstream:
        conn.send(upstream.port)
        while True:
            command, arg = conn.recv()
            if command == "stop":
                return
            if command == "sent":  # send times of body chunks from index `arg` on
                conn.send([at for at, _ in upstream.sent[arg:]])
            elif command == "count":
                conn.send(len(upstream.sent))


class UpstreamProcess:
    def __enter__(self) -> UpstreamProcess:
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.proc = context.Process(target=_upstream_child, args=(child,), daemon=True)
        self.proc.start()
        self.port: int = self.conn.recv()
        return self

    def ask(self, command: str, arg: int = 0) -> Any:
        self.conn.send((command, arg))
        return self.conn.recv()

    def __exit__(self, *exc: object) -> None:
        self.conn.send(("stop", 0))
        self.proc.join(5)


# -- the OTLP sink and the metrics scraper, in a process of their own ------------------------

SCRAPE_EVERY = 1.0  # seconds; Prometheus' default is 15 s, so this is 15 times the usual load


def _sink_child(conn: Any) -> None:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    counts = {"posts": 0, "scrapes": 0, "failed": 0, "slowest_ms": 0.0}

    class Discard(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server's name
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", "0")
            self.end_headers()
            counts["posts"] += 1

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Discard)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    conn.send(server.server_address[1])
    urls: list[str] = conn.recv()

    def scrape() -> None:
        while True:
            time.sleep(SCRAPE_EVERY)
            for url in urls:
                began = time.perf_counter()
                try:
                    scrape = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
                    with urllib.request.urlopen(scrape, timeout=5) as response:
                        response.read()
                    counts["scrapes"] += 1
                except OSError:
                    counts["failed"] += 1
                counts["slowest_ms"] = max(counts["slowest_ms"], (time.perf_counter() - began) * 1000)

    threading.Thread(target=scrape, daemon=True).start()
    while conn.recv() != "stop":
        conn.send(dict(counts))


class SinkProcess:
    """`port`: where OTLP/HTTP posts go; `scrape(urls)` starts scraping those every second."""

    def __enter__(self) -> SinkProcess:
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.proc = context.Process(target=_sink_child, args=(child,), daemon=True)
        self.proc.start()
        self.port: int = self.conn.recv()
        return self

    def scrape(self, urls: list[str]) -> None:
        self.conn.send(urls)

    def counts(self) -> dict[str, float]:
        self.conn.send("counts")
        return dict(self.conn.recv())

    def __exit__(self, *exc: object) -> None:
        self.conn.send("stop")
        self.proc.join(5)


TOKEN = "bench-scrape-token"  # the store is 0600: /metrics asks for a token (LLMTAP_METRICS_TOKEN)


def requests_counted(port: int) -> float:
    """`llmtap_requests_total` summed over its labels, as the endpoint says it now."""
    from prometheus_client.parser import text_string_to_metric_families

    scrape = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(scrape, timeout=10) as response:
        text = response.read().decode()
    families = text_string_to_metric_families(text)
    return sum(s.value for f in families if f.name == "llmtap_requests" for s in f.samples)


# -- targets ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Target:
    name: str
    port: int
    argv: list[str] | None = None  # None: the upstream itself
    env: dict[str, str] = field(default_factory=dict)
    db: Path | None = None
    stop_signal: int = signal.SIGINT
    proc: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    metrics_port: int | None = None  # `--metrics` on: where /metrics answers

    def start(self) -> None:
        if self.argv is None:
            return
        assert self.log is not None
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(self.argv, env={**os.environ, **self.env}, stdout=log, stderr=log, cwd=ROOT)
        wait_listening(self.port, self.proc, self.log, 30)

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        self.proc.send_signal(self.stop_signal)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(5)

    def cpu(self) -> tuple[float, float, float]:
        """CPU seconds used so far: (the process's main thread, its other threads, its
        child processes: llmtap's writer process). A child's figure is what it used while
        alive; the writer process lives as long as the proxy, so differences are exact."""
        pid = self.proc.pid if self.proc is not None else None
        if pid is None:
            return (0.0, 0.0, 0.0)
        main, other = _threads_cpu(pid)
        children = 0.0
        for child in child_pids(pid):
            children += sum(_threads_cpu(child))
        return main, other, children

    def rows(self) -> int | None:
        if self.db is None or not self.db.exists():
            return None
        with sqlite3.connect(self.db) as conn:
            return conn.execute("select count(*) from exchanges").fetchone()[0]


def _threads_cpu(pid: int) -> tuple[float, float]:
    """CPU seconds of a process: (its main thread, its other threads)."""
    main = other = 0.0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return (0.0, 0.0)
    for task in tasks:
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        seconds = (int(fields[11]) + int(fields[12])) / TICKS
        if task.name == str(pid):
            main += seconds
        else:
            other += seconds
    return main, other


def targets(upstream_port: int, tmp: Path, compare: Path | None = None, sink: int | None = None) -> list[Target]:
    up = f"http://127.0.0.1:{upstream_port}"
    mitmdump = str(BIN / "mitmdump")
    confdir = f"confdir={tmp / 'mitmproxy'}"
    out = [Target("direct", upstream_port)]
    port = free_port()
    out.append(Target("mitmdump", port, [mitmdump, "-q", "--mode", f"reverse:{up}@127.0.0.1:{port}", "--set", confdir]))
    port = free_port()
    out.append(Target("mitmdump+st", port, [mitmdump, "-q", "--mode", f"reverse:{up}@127.0.0.1:{port}",
                                             "--set", confdir, "--set", "stream_large_bodies=1"]))  # fmt: skip
    port, db = free_port(), tmp / "addon.db"
    out.append(Target("addon", port, [
        mitmdump, "-q", "-s", str(ROOT / "cli" / "mitmdump_script.py"), "--mode", f"reverse:{up}@127.0.0.1:{port}",
        "--set", confdir, "--set", f"llmtap_db=sqlite:///{db}", "--set", f"llmtap_home={tmp / 'home-addon'}",
    ], db=db))  # fmt: skip
    if compare is not None:  # the same addon from another tree (a `llmtap/` folder on PYTHONPATH)
        port, db = free_port(), tmp / "addon-compare.db"
        script = compare / "llmtap" / "cli" / "mitmdump_script.py"
        if not script.exists():  # a tree from before the script moved out of addon/
            script = compare / "llmtap" / "addon" / "script.py"
        out.append(Target("addon@compare", port, [
            mitmdump, "-q", "-s", str(script),
            "--mode", f"reverse:{up}@127.0.0.1:{port}", "--set", confdir,
            "--set", f"llmtap_db=sqlite:///{db}", "--set", f"llmtap_home={tmp / 'home-compare'}",
        ], env={"PYTHONPATH": str(compare)}, db=db))  # fmt: skip
    port, db = free_port(), tmp / "proxy.db"
    out.append(Target("llmtap proxy", port, [
        str(BIN / "llmtap"), "proxy", "--quiet", "--no-regular", "--reverse", f"anthropic={port}",
        "--upstream", f"anthropic={up}", "--db", f"sqlite:///{db}", "--confdir", str(tmp / "mitmproxy"),
    ], env={"LLMTAP_HOME": str(tmp / "home-proxy")}, db=db, stop_signal=signal.SIGTERM))  # fmt: skip
    if sink is not None:
        out += _telemetry_targets(up, tmp, sink)
    for target in out:
        target.log = tmp / f"{target.name.replace(' ', '-')}.log"
    return out


def _telemetry_targets(up: str, tmp: Path, sink: int) -> list[Target]:
    out = []
    otlp = ["--otlp-endpoint", f"http://127.0.0.1:{sink}/v1/traces"]
    for name, extra in (("proxy+metrics", []), ("proxy+m+otlp", otlp)):
        port, metrics, db = free_port(), free_port(), tmp / f"{name}.db"
        home = tmp / f"home-{name}"
        out.append(Target(name, port, [
            str(BIN / "llmtap"), "proxy", "--quiet", "--no-regular", "--reverse", f"anthropic={port}",
            "--upstream", f"anthropic={up}", "--db", f"sqlite:///{db}", "--confdir", str(tmp / "mitmproxy"),
            "--metrics", f"127.0.0.1:{metrics}", *extra,
        ], env={"LLMTAP_HOME": str(home), "LLMTAP_METRICS_TOKEN": TOKEN}, db=db, stop_signal=signal.SIGTERM,
            metrics_port=metrics))  # fmt: skip
    return out


# -- the load client ---------------------------------------------------------------------------


class Client:
    """One keep-alive HTTP/1.1 connection; `post` returns when the response has ended,
    with the times each body chunk arrived."""

    def __init__(self, port: int) -> None:
        self.port = port

    async def __aenter__(self) -> Client:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.writer.close()
        await self.writer.wait_closed()

    async def post(self, body: bytes) -> tuple[float, list[float]]:
        head = (
            f"POST /v1/messages HTTP/1.1\r\nhost: 127.0.0.1:{self.port}\r\ncontent-type: application/json\r\n"
            f"x-api-key: {KEY}\r\nanthropic-version: 2023-06-01\r\ncontent-length: {len(body)}\r\n\r\n"
        ).encode()
        started = time.perf_counter()
        self.writer.write(head + body)
        raw = await self.reader.readuntil(b"\r\n\r\n")
        headers = raw.decode("latin-1").lower()
        arrivals: list[float] = []
        if "transfer-encoding: chunked" in headers:
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                await self.reader.readexactly(size + 2)
                if size == 0:
                    break
                arrivals.append(time.perf_counter())
        else:
            length = int(headers.split("content-length:", 1)[1].split("\r\n", 1)[0])
            await self.reader.readexactly(length)
            arrivals.append(time.perf_counter())
        return started, arrivals


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def json_c1(port: int, n: int) -> dict[str, float]:
    latencies = []
    async with Client(port) as client:
        for _ in range(20):  # warm-up
            await client.post(REQUEST)
        began = time.perf_counter()
        for _ in range(n):
            started, arrivals = await client.post(REQUEST)
            latencies.append((arrivals[-1] - started) * 1000)
        elapsed = time.perf_counter() - began
    return {"p50": _pct(latencies, 0.5), "p99": _pct(latencies, 0.99), "c1_rps": n / elapsed}


async def json_c16(port: int, n: int, concurrency: int = 16) -> dict[str, float]:
    latencies: list[float] = []

    async def worker(count: int) -> None:
        async with Client(port) as client:
            for _ in range(count):
                started, arrivals = await client.post(REQUEST)
                latencies.append((arrivals[-1] - started) * 1000)

    await asyncio.gather(*(worker(5) for _ in range(concurrency)))  # warm-up, connections open
    latencies.clear()
    began = time.perf_counter()
    await asyncio.gather(*(worker(n // concurrency) for _ in range(concurrency)))
    elapsed = time.perf_counter() - began
    return {"rps": len(latencies) / elapsed, "c16_p50": _pct(latencies, 0.5), "c16_p99": _pct(latencies, 0.99)}


async def sse(port: int, n: int, upstream: UpstreamProcess) -> dict[str, float]:
    ttfb, delays = [], []
    offset = _clock_offset()
    async with Client(port) as client:
        for _ in range(n):
            before = upstream.ask("count")
            started, arrivals = await client.post(STREAM_REQUEST)
            sent = upstream.ask("sent", before)
            if len(sent) != len(arrivals):  # not one read per write: not comparable, skip
                continue
            ttfb.append((arrivals[0] - started) * 1000)
            delays += [(arrived + offset - at) * 1000 for at, arrived in zip(sent, arrivals, strict=True)]
    return {"ttfb": statistics.median(ttfb) if ttfb else float("nan"),
            "chunk": statistics.median(delays) if delays else float("nan"),
            "chunk_p90": _pct(delays, 0.9) if delays else float("nan")}  # fmt: skip


def _clock_offset() -> float:
    """perf_counter → time.time (the upstream stamps its writes with the wall clock)."""
    return time.time() - time.perf_counter()


# -- the run ---------------------------------------------------------------------------------


@dataclass
class Sizes:
    c1: int
    c16: int
    streams: int
    rounds: int


def run_round(target: Target, sizes: Sizes, upstream: UpstreamProcess) -> dict[str, float]:
    """One pass of every workload. CPU time is the proxy process's (and its writer process's), over the c=16 run
    (the writer is given a moment to catch up): it does not depend on what else the
    machine is doing, which wall-clock figures on a shared box do."""
    out: dict[str, float] = {}
    out |= asyncio.run(json_c1(target.port, sizes.c1))
    before = target.cpu()
    out |= asyncio.run(json_c16(target.port, sizes.c16))
    time.sleep(0.5 if target.db else 0.0)  # the writer's batch interval is 0.2 s
    after = target.cpu()
    requests = sizes.c16 // 16 * 16 + 16 * 5
    out["cpu_main"] = (after[0] - before[0]) * 1000 / requests
    out["cpu_other"] = (after[1] - before[1]) * 1000 / requests
    out["cpu_child"] = (after[2] - before[2]) * 1000 / requests
    out |= asyncio.run(sse(target.port, sizes.streams, upstream))
    return out


def report(results: dict[str, list[dict[str, float]]]) -> None:
    med = {name: {k: statistics.median(r[k] for r in rounds) for k in rounds[0]} for name, rounds in results.items()}
    columns: list[tuple[str, str, Callable[[float], str]]] = [
        ("p50", "c1 p50 ms", "{:.3f}".format), ("p99", "c1 p99 ms", "{:.3f}".format),
        ("rps", "c16 req/s", "{:.0f}".format), ("c16_p50", "c16 p50 ms", "{:.2f}".format),
        ("ttfb", "sse ttfb ms", "{:.2f}".format), ("chunk", "chunk ms", "{:.3f}".format),
        ("chunk_p90", "chunk p90", "{:.3f}".format),
        ("cpu_main", "cpu/req loop", "{:.3f}".format), ("cpu_other", "cpu/req thr", "{:.3f}".format),
        ("cpu_child", "cpu/req proc", "{:.3f}".format),
    ]  # fmt: skip
    print(f"\n{'target':<14}" + "".join(f"{title:>13}" for _, title, _ in columns))
    for name, values in med.items():
        cells = [fmt(values[key]) if values[key] == values[key] else "buffered" for key, _, fmt in columns]
        print(f"{name:<14}" + "".join(f"{cell:>13}" for cell in cells))
    base, streaming, direct = med.get("mitmdump"), med.get("mitmdump+st"), med.get("direct")
    if not base or not direct:
        return
    print("\nagainst bare mitmdump (p50 and req/s) and per stream chunk against direct / streaming mitmdump:")
    for name in ("addon@compare", "addon", "llmtap proxy", "proxy+metrics", "proxy+m+otlp"):
        if name not in med:
            continue
        m = med[name]
        p50, rps = m["p50"] / base["p50"], m["rps"] / base["rps"]
        cpu = (m["cpu_main"] + m["cpu_other"]) / (base["cpu_main"] + base["cpu_other"])
        total = (m["cpu_main"] + m["cpu_other"] + m["cpu_child"]) / (base["cpu_main"] + base["cpu_other"])
        vs_direct = m["chunk"] - direct["chunk"]
        vs_stream = m["chunk"] - streaming["chunk"] if streaming else float("nan")
        verdict = "ok" if p50 <= 1.10 and rps >= 0.90 and vs_direct < 0.5 else "MISSES the goal"
        print(f"  {name:<13} p50 x{p50:.3f}  req/s x{rps:.3f}  CPU/request x{cpu:.3f} (x{total:.3f} with the"
              f" writer process)  chunk +{vs_direct:.3f} ms"
              f" vs direct, {vs_stream:+.3f} ms vs mitmdump+st   {verdict}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small loops, one round (about a minute)")
    parser.add_argument("--rounds", type=int, help="rounds over all targets (default 3, quick 1)")
    parser.add_argument("--only", help="comma-separated target names")
    parser.add_argument(
        "--telemetry",
        action="store_true",
        help="also run the proxy with --metrics (scraped every second), and with --metrics and --otlp-endpoint",
    )
    parser.add_argument(
        "--compare",
        type=Path,
        metavar="DIR",
        help="also run the addon from another tree: DIR holds a `llmtap/` package folder (before/after figures)",
    )
    args = parser.parse_args(argv)
    sizes = Sizes(400, 1600, 8, 1) if args.quick else Sizes(2000, 6400, 30, 3)
    if args.rounds:
        sizes.rounds = args.rounds
    if shutil.which(str(BIN / "mitmdump")) is None:
        print(f"mitmdump is not at {BIN / 'mitmdump'}", file=sys.stderr)
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="llmtap-bench-"))
    print(f"{os.cpu_count()} CPUs; {sizes.c1} requests at c=1, {sizes.c16} at c=16, {sizes.streams} streams of"
          f" {EVENTS} events {EVENT_GAP * 1000:.0f} ms apart; {sizes.rounds} round(s); logs in {tmp}")  # fmt: skip
    results: dict[str, list[dict[str, float]]] = {}
    with UpstreamProcess() as upstream, SinkProcess() as sink:
        chosen = targets(upstream.port, tmp, args.compare, sink.port if args.telemetry else None)
        if args.only:
            names = {n.strip() for n in args.only.split(",")} | {"direct", "mitmdump"}
            chosen = [t for t in chosen if t.name in names]
        counted: dict[str, float] = {}
        sunk: dict[str, float] = {}
        try:
            for target in chosen:
                target.start()
            sink.scrape([f"http://127.0.0.1:{t.metrics_port}/metrics" for t in chosen if t.metrics_port])
            for number in range(sizes.rounds):
                for target in chosen:
                    results.setdefault(target.name, []).append(run_round(target, sizes, upstream))
                print(f"round {number + 1} done", flush=True)
            time.sleep(1.0)  # the writers' last batches
            counted = {t.name: requests_counted(t.metrics_port) for t in chosen if t.metrics_port}
            sunk = sink.counts()  # before the stop: scrapes of a stopped proxy fail
        finally:
            codes = {t.name: t.stop() for t in chosen}
        report(results)
        sent = 20 + sizes.c1 + 16 * 5 + (sizes.c16 // 16) * 16 + sizes.streams
        for target in chosen:
            rows = target.rows()
            if rows is not None:
                metric = f", {counted[target.name]:.0f} in llmtap_requests_total" if target.name in counted else ""
                print(
                    f"  {target.name}: exit {codes[target.name]}, {rows} rows stored of {sent * sizes.rounds} requests"
                    + metric
                )
        if args.telemetry and sunk:
            c = sunk
            print(f"  scrapes: {c['scrapes']:.0f} ({c['failed']:.0f} failed, slowest {c['slowest_ms']:.1f} ms);"
                  f" OTLP posts taken by the sink: {c['posts']:.0f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
