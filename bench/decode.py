"""Decode throughput and memory: the corpus streams through `ExchangeDecoder`, next to the
bare minimum any SSE consumer does over the same bytes, and the peak memory of one huge
synthetic stream.

    uv run python -m llmtap.bench.decode [--quick] [--mb MB] [--big-mb MB] [--corpus DIR]
    uv run python bench/decode.py [--quick] ...

Throughput: every streamed case of the shared corpus (SSE), repeated until there are
`--mb` megabytes, each repetition a fresh exchange, cut into 1-4 KB chunks as a socket
would deliver them (seeded, so every run cuts the same). llmtap pays for everything an
exchange costs: content decoding, SSE framing, JSON parsing, the protocol's fold, and
`finish()` with its body decode. The baseline splits the same chunks into lines and
`json.loads` each `data:` payload, nothing else. Best of a few interleaved rounds of each.
Goal: llmtap takes at most 2x the baseline's time.

Memory: a child process decodes one Anthropic stream of `--big-mb` megabytes of text
deltas, generated chunk by chunk and never held whole, and reports its resident size as
it goes. The kept text stops at `MAX_KEPT_CHARS`, so the size must stay flat.

Not a timed test: it prints numbers and ratios, and exits 0 either way. No network.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from llmtap.protocols import ExchangeDecoder
from llmtap.protocols.common import MAX_KEPT_CHARS

MB = 1024 * 1024
# The project's copy of the corpus (the benchmarks run from a checkout).
CORPUS = Path(os.environ.get("LLMTAP_CORPUS", Path(__file__).resolve().parents[1] / "tests" / "corpus"))


@dataclass(frozen=True)
class Stream:
    protocol: str
    path: str
    content_type: str | None
    chunks: list[bytes]


def load_streams(root: Path, target: int, seed: int = 7) -> list[Stream]:
    """The corpus's SSE streams, repeated up to `target` bytes, each cut in 1-4 KB chunks."""
    cases = []
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        meta_file = folder / "case.json"
        if not meta_file.exists():
            continue
        meta = json.loads(meta_file.read_text())
        body = (folder / "response.body").read_bytes()
        if meta["streamed"] and b"data:" in body:
            cases.append((meta, body))
    if not cases:
        sys.exit(f"no streamed cases under {root} (set --corpus or LLMTAP_CORPUS)")
    rng = random.Random(seed)
    streams, size = [], 0
    while size < target:
        for meta, body in cases:
            cuts = [0]
            while cuts[-1] < len(body):
                cuts.append(min(len(body), cuts[-1] + rng.randint(1024, 4096)))
            chunks = [body[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]
            streams.append(Stream(meta["protocol"], meta["path"], meta.get("content_type"), chunks))
            size += len(body)
    return streams


def run_llmtap(streams: list[Stream]) -> int:
    events = 0
    for stream in streams:
        decoder = ExchangeDecoder(stream.protocol, path=stream.path, status=200, content_type=stream.content_type)
        for chunk in stream.chunks:
            decoder.feed(chunk)
        record = decoder.finish()
        events += record.events
    return events


def bare(chunks: Iterable[bytes]) -> int:
    """Split lines, `json.loads` each `data:` payload: what any SSE consumer must do."""
    loads = json.loads
    events = 0
    tail = b""
    for chunk in chunks:
        lines = (tail + chunk).split(b"\n")
        tail = lines.pop()
        for line in lines:
            if line.startswith(b"data:"):
                payload = line[5:].strip()
                if payload != b"[DONE]":
                    loads(payload)
                events += 1
    if tail.startswith(b"data:"):
        loads(tail[5:])
        events += 1
    return events


def run_bare(streams: list[Stream]) -> int:
    return sum(bare(stream.chunks) for stream in streams)


def best_of(rounds: int, runs: dict[str, Callable[[], int]]) -> dict[str, tuple[float, int]]:
    """Each run's best time over `rounds`, interleaved so drift hits them alike."""
    best: dict[str, tuple[float, int]] = {}
    for _ in range(rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            events = run()
            elapsed = time.perf_counter() - start
            if name not in best or elapsed < best[name][0]:
                best[name] = (elapsed, events)
    return best


# -- the big stream, in a child process --------------------------------------------------


def anthropic_stream(total: int, seed: int = 11) -> Iterator[bytes]:
    """An Anthropic SSE stream of about `total` bytes of text deltas, in 1-4 KB chunks,
    built from one repeated block so nothing of its size is ever held."""

    def event(name: str, data: dict) -> bytes:
        return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()

    head = event(
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_bench",
                "type": "message",
                "role": "assistant",
                "model": "claude-bench",
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": 12, "output_tokens": 1},
            },
        },
    ) + event(
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    )
    words = ["Hello", " world", ", this", " is a", " long", " answer", " that", " keeps", " going", "."]
    block = b"".join(
        event(
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}},
        )
        for w in words * 50
    )
    tail = (
        event("content_block_stop", {"type": "content_block_stop", "index": 0})
        + event(
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 99}},
        )
        + event("message_stop", {"type": "message_stop"})
    )
    rng = random.Random(seed)
    repeats = max(1, (total - len(head) - len(tail)) // len(block))
    pending = head
    for _ in range(repeats):
        pending += block
        while len(pending) >= 4096:
            size = rng.randint(1024, 4096)
            yield pending[:size]
            pending = pending[size:]
    pending += tail
    while pending:
        size = rng.randint(1024, 4096)
        yield pending[:size]
        pending = pending[size:]


def rss_mb() -> float:
    """Resident size now (Linux /proc), else the peak so far."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MB
    except OSError:
        return peak_rss_mb()


def peak_rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / MB if sys.platform == "darwin" else peak / 1024


def child(total: int, mode: str) -> None:
    """Run in the child: decode the big stream with llmtap or the bare minimum; print a
    JSON report of time and resident size."""
    start_rss = rss_mb()
    decoder = ExchangeDecoder("anthropic.messages", path="/v1/messages", status=200, content_type="text/event-stream")
    samples: list[float] = []
    fed = 0

    def sampled() -> Iterator[bytes]:
        nonlocal fed
        next_sample = total // 8
        for chunk in anthropic_stream(total):
            yield chunk
            fed += len(chunk)
            if fed >= next_sample:
                samples.append(round(rss_mb(), 1))
                next_sample += total // 8

    start = time.perf_counter()
    if mode == "bare":
        events, record = bare(sampled()), None
    else:
        for chunk in sampled():
            decoder.feed(chunk)
        record = decoder.finish()
        events = record.events
    elapsed = time.perf_counter() - start
    samples.append(round(rss_mb(), 1))
    report = {
        "bytes": fed,
        "seconds": elapsed,
        "events": events,
        "start_rss": start_rss,
        "samples": samples[-8:],
        "peak_rss": peak_rss_mb(),
    }
    if record is not None:
        report |= {
            "complete": record.complete,
            "finish_reason": record.finish_reason,
            "text_chars": len(record.text),
            "text_truncated": record.text_truncated,
            "decode_error": record.decode_error,
        }
    print(json.dumps(report))


def measure_child(total: int, mode: str) -> dict:
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", mode, "--big-mb", str(total / MB)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- report ------------------------------------------------------------------------------


def table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True)))
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def throughput(args: argparse.Namespace) -> None:
    streams = load_streams(Path(args.corpus), int(args.mb * MB))
    size = sum(len(c) for s in streams for c in s.chunks)
    chunks = sum(len(s.chunks) for s in streams)
    print(
        f"throughput: {len(streams)} exchanges, {size / MB:.1f} MB in {chunks} chunks of 1-4 KB, best of {args.rounds}"
    )
    best = best_of(args.rounds, {"bare": lambda: run_bare(streams), "llmtap": lambda: run_llmtap(streams)})
    rows = [["decoder", "seconds", "MB/s", "events/s", "events"]]
    for name in ("bare", "llmtap"):
        seconds, events = best[name]
        rows.append([name, f"{seconds:.3f}", f"{size / MB / seconds:.1f}", f"{events / seconds:,.0f}", f"{events:,}"])
    print(table(rows))
    ratio = best["llmtap"][0] / best["bare"][0]
    verdict = "within" if ratio <= 2 else "ABOVE"
    print(f"ratio llmtap/bare time: {ratio:.2f}x ({verdict} the 2x goal)\n")


def memory(args: argparse.Namespace) -> None:
    total = int(args.big_mb * MB)
    print(
        f"memory: one Anthropic stream of {total / MB:.0f} MB of one-word text deltas, generated "
        "and fed in 1-4 KB chunks, each decoder in a child process (RSS in MB)"
    )
    base = measure_child(total, "bare")
    run = measure_child(total, "llmtap")
    rows = [["decoder", "MB", "seconds", "MB/s", "events/s", "RSS start", "RSS at 1/8 .. 8/8", "peak RSS"]]
    for name, rep in (("bare", base), ("llmtap", run)):
        rows.append(
            [
                name,
                f"{rep['bytes'] / MB:.0f}",
                f"{rep['seconds']:.1f}",
                f"{rep['bytes'] / MB / rep['seconds']:.1f}",
                f"{rep['events'] / rep['seconds']:,.0f}",
                f"{rep['start_rss']:.1f}",
                " ".join(f"{s:.0f}" for s in rep["samples"]),
                f"{rep['peak_rss']:.1f}",
            ]
        )
    print(table(rows))
    print(
        f"record: {run['events']:,} events, complete={run['complete']}, finish_reason={run['finish_reason']}, "
        f"text kept {run['text_chars']:,} chars (cap {MAX_KEPT_CHARS:,}), truncated={run['text_truncated']}, "
        f"decode_error={run['decode_error']}"
    )
    growth = run["samples"][-1] - run["samples"][0]
    print(
        f"ratio llmtap/bare time: {run['seconds'] / base['seconds']:.2f}x; llmtap RSS from 1/8 to the end: "
        f"{growth:+.1f} MB, peak {run['peak_rss'] - base['peak_rss']:+.1f} MB over the bare decoder's"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one round: a smoke run of a few seconds")
    parser.add_argument("--mb", type=float, default=None, help="megabytes of corpus streams to decode (default 8)")
    parser.add_argument("--big-mb", type=float, default=None, help="size of the synthetic stream (default 300)")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds, best kept (default 3)")
    parser.add_argument("--corpus", default=str(CORPUS), help="the shared corpus folder")
    parser.add_argument("--child", choices=["llmtap", "bare"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    quick = args.quick
    args.mb = args.mb or (1.0 if quick else 8.0)
    args.big_mb = args.big_mb or (24.0 if quick else 300.0)
    args.rounds = args.rounds or (1 if quick else 3)
    if args.child:
        child(int(args.big_mb * MB), args.child)
        return
    throughput(args)
    memory(args)


if __name__ == "__main__":
    main()
