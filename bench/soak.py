"""A bounded soak on 127.0.0.1: many concurrent streaming clients of three teams through
`llmtap proxy` for a few minutes, into SQLite or PostgreSQL. Reports requests completed,
records stored, records lost (must be 0), the latency the proxy adds (p50/p99 of time to
first byte and of total time, against direct requests to the same upstream in the same
run) and the proxy's peak memory.

    uv run python bench/soak.py [--seconds 180] [--clients 48] [--db sqlite|postgres] [--quick]

Not a test: it prints figures (RELIABILITY.md keeps them). Loops are bounded by time and
count; every socket is on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import create_engine, text

from llmtap.simulator.provider import SimulatedProvider
from llmtap.simulator.upstream import Upstream
from llmtap.workloads.proxy import Proxy
from llmtap.workloads.scratch import scratch_postgres

TEAMS = ("alpha", "beta", "gamma")
PG_ADMIN = os.environ.get("LLMTAP_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


@dataclass
class Sample:
    ttfb: float
    total: float


@dataclass
class Tally:
    completed: int = 0
    failed: int = 0
    samples: list[Sample] = field(default_factory=list)
    by_team: dict[str, int] = field(default_factory=dict)


def _requests() -> list[tuple[str, str, bytes]]:
    """(provider, path, body) of the streaming requests the clients cycle through."""
    system = "You are a concise assistant. " * 60
    anthropic = {
        "model": "claude-sonnet-4-5-20250929",
        "max_tokens": 256,
        "stream": True,
        "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "Summarise the release notes in three lines."}],
    }
    chat = {
        "model": "gpt-4o-mini",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": "List three risks."}],
    }
    responses = {"model": "gpt-4.1", "stream": True, "instructions": system, "input": "Name two follow-ups."}
    gemini = {"contents": [{"role": "user", "parts": [{"text": system + "Explain the outage briefly."}]}]}
    return [
        ("anthropic", "/v1/messages", json.dumps(anthropic).encode()),
        ("openai", "/v1/chat/completions", json.dumps(chat).encode()),
        ("openai", "/v1/responses", json.dumps(responses).encode()),
        ("gemini", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", json.dumps(gemini).encode()),
    ]


async def _one(port: int, path: str, body: bytes, team: str | None) -> Sample:
    """One streamed request over a fresh HTTP/1.1 connection, read to the end."""
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    headers = [
        f"POST {path} HTTP/1.1",
        f"host: 127.0.0.1:{port}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "x-api-key: sk-ant-api03-soak-key-0000000000000000000000000",
        "connection: close",
    ]
    if team:
        headers.append(f"x-llmtap-team: {team}")
    writer.write(("\r\n".join(headers) + "\r\n\r\n").encode() + body)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    first = time.perf_counter()
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(head.split(b"\r\n", 1)[0].decode())
    rest = await reader.read()  # to the end (connection: close)
    writer.close()
    if not rest.endswith(b"0\r\n\r\n"):
        raise RuntimeError("the stream was cut")
    return Sample(first - started, time.perf_counter() - started)


async def _load(ports: dict[str, int] | int, seconds: float, clients: int) -> Tally:
    """`ports`: the proxy's listener per provider, or one port for the upstream directly."""
    tally = Tally()
    deadline = time.monotonic() + seconds
    catalogue = _requests()

    async def worker(number: int) -> None:
        rng = random.Random(number)
        while time.monotonic() < deadline:
            provider, path, body = rng.choice(catalogue)
            team = TEAMS[number % len(TEAMS)]
            port = ports if isinstance(ports, int) else ports[provider]
            try:
                sample = await asyncio.wait_for(_one(port, path, body, None if isinstance(ports, int) else team), 30)
            except (TimeoutError, OSError, RuntimeError, asyncio.IncompleteReadError):
                tally.failed += 1
                continue
            tally.completed += 1
            tally.samples.append(sample)
            tally.by_team[team] = tally.by_team.get(team, 0) + 1

    await asyncio.gather(*(worker(n) for n in range(clients)))
    return tally


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run(seconds: float, clients: int, kind: str) -> dict[str, object]:
    folder = Path(tempfile.mkdtemp(prefix="llmtap-soak-"))
    with contextlib.ExitStack() as stack:
        if kind == "sqlite":
            url = f"sqlite:///{folder / 'soak.db'}"
        else:
            url = stack.enter_context(scratch_postgres(PG_ADMIN, "llmtap_soak"))
        with Upstream(SimulatedProvider()) as upstream:
            baseline = asyncio.run(_load(upstream.port, min(seconds / 6, 20), clients))
            proxy = Proxy(folder, url, upstream.url)
            try:
                loaded = asyncio.run(_load(proxy.ports, seconds, clients))
                peak = _peak_rss_mb(proxy.process.pid)
            finally:
                status = proxy.stop(timeout=120)
        engine = create_engine(url)
        with engine.connect() as connection:
            stored = connection.execute(text("SELECT count(*) FROM exchanges")).scalar_one()
            by_team: dict[str, int] = dict(
                connection.execute(text("SELECT team, count(*) FROM exchanges GROUP BY team")).all()
            )
            complete = connection.execute(text("SELECT count(*) FROM exchanges WHERE complete")).scalar_one()
        engine.dispose()
    direct_ttfb = [s.ttfb for s in baseline.samples]
    direct_total = [s.total for s in baseline.samples]
    proxied_ttfb = [s.ttfb for s in loaded.samples]
    proxied_total = [s.total for s in loaded.samples]
    return {
        "database": kind,
        "seconds": seconds,
        "clients": clients,
        "requests_completed": loaded.completed,
        "requests_failed": loaded.failed,
        "records_stored": stored,
        "records_complete": complete,
        "records_lost": loaded.completed - stored,
        "completed_by_team": loaded.by_team,
        "stored_by_team": by_team,
        "direct_ttfb_p50_ms": round(_pct(direct_ttfb, 0.5), 2),
        "proxied_ttfb_p50_ms": round(_pct(proxied_ttfb, 0.5), 2),
        "added_ttfb_p50_ms": round(_pct(proxied_ttfb, 0.5) - _pct(direct_ttfb, 0.5), 2),
        "added_ttfb_p99_ms": round(_pct(proxied_ttfb, 0.99) - _pct(direct_ttfb, 0.99), 2),
        "added_total_p50_ms": round(_pct(proxied_total, 0.5) - _pct(direct_total, 0.5), 2),
        "added_total_p99_ms": round(_pct(proxied_total, 0.99) - _pct(direct_total, 0.99), 2),
        "direct_total_median_ms": round(statistics.median(direct_total) * 1000, 1) if direct_total else None,
        "proxy_peak_rss_mb": round(peak, 1),
        "proxy_exit_status": status,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=180)
    parser.add_argument("--clients", type=int, default=48)
    parser.add_argument("--db", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--quick", action="store_true", help="20 s, 16 clients")
    args = parser.parse_args()
    seconds, clients = (20.0, 16) if args.quick else (args.seconds, args.clients)
    kinds = ("sqlite", "postgres") if args.db == "both" else (args.db,)
    for kind in kinds:
        result = run(seconds, clients, kind)
        print(json.dumps(result, indent=2))
        if result["records_lost"] != 0:
            raise SystemExit(f"{kind}: {result['records_lost']} records lost")


if __name__ == "__main__":
    main()
