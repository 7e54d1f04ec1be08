"""The resource fuzzing at length: many more hostile exchanges, and larger, than the bounded
run in the test suite (tests/protocols/test_resource_bounds.py), each judged by
bench/resource_oracle.py, with the figures the issue asks for per translator and family.

    uv run python -m llmtap.bench.fuzz [--examples N] [--scale BYTES] [--only PROTOCOL] [--keep DIR]

For each translator and each family of bench/fuzz_bodies.py, hypothesis draws `--examples`
exchanges of up to `--scale` bytes (not derandomized unless `--seed` is given: a long run
should wander). Printed: bodies tried and their megabytes, the worst CPU time and the
worst peak memory per megabyte of body (over bodies of at least 16 KB, where a fixed cost
no longer dominates), the worst share of the bound used, and how many overran it. An
exchange over its bound is written to `--keep` as a case folder (`case.json`,
`request.json`, `response.body`) that `llmtap decode` replays.

Not a timed test: it prints figures and exits 0, or 1 when an exchange overran its bound.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from llmtap.workloads.fuzz_bodies import PROTOCOLS, Wire, amplified, framed, load_seeds
from llmtap.workloads.fuzz_checks import checked, conversations
from llmtap.workloads.resource_oracle import Verdict, judge

MB = 1024 * 1024
PER_MB_FROM = 16 * 1024  # bytes: smaller bodies are all fixed cost


@dataclass
class Figures:
    tried: int = 0
    bytes: int = 0
    worst_cpu_per_mb: float = 0.0
    worst_peak_per_mb: float = 0.0
    worst_share: float = 0.0
    worst_cpu_s: float = 0.0
    over: list[Verdict] = field(default_factory=list)

    def add(self, verdict: Verdict) -> None:
        size = verdict.wire.size
        self.tried += 1
        self.bytes += size
        self.worst_cpu_s = max(self.worst_cpu_s, verdict.cost.cpu_s)
        if size >= PER_MB_FROM:
            self.worst_cpu_per_mb = max(self.worst_cpu_per_mb, verdict.cost.cpu_s / (size / MB))
            self.worst_peak_per_mb = max(self.worst_peak_per_mb, verdict.cost.peak_bytes / size)
        share = max(verdict.cost.cpu_s / verdict.cpu_allowed, verdict.cost.peak_bytes / verdict.memory_allowed)
        self.worst_share = max(self.worst_share, share)
        if not verdict.within:
            self.over.append(verdict)


def _keep(folder: Path, n: int, wire: Wire) -> Path:
    case = folder / f"{wire.protocol}_{wire.family}_{n}"
    case.mkdir(parents=True, exist_ok=True)
    meta = {"protocol": wire.protocol, "host": wire.host, "path": wire.path, "status": wire.status,
            "content_type": wire.content_type}  # fmt: skip
    (case / "case.json").write_text(json.dumps(meta, indent=2) + "\n")
    (case / "response.body").write_bytes(wire.response)
    if wire.request is not None:
        (case / "request.json").write_bytes(wire.request)
    return case


def run(protocol: str, family: str, strategy: st.SearchStrategy[Wire], args: argparse.Namespace) -> Figures:
    figures = Figures()

    @settings(
        max_examples=args.examples,
        derandomize=args.seed is not None,
        database=None,
        deadline=None,
        phases=[Phase.generate],  # every draw counts: no shrinking of a slow one
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def one(wire: Wire) -> None:
        figures.add(judge(wire, args.give_up))

    one()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=200, help="exchanges per translator and family")
    parser.add_argument("--scale", type=int, default=256 * 1024, help="largest body drawn, bytes")
    parser.add_argument("--only", choices=PROTOCOLS, action="append", help="this translator only (repeats)")
    parser.add_argument("--give-up", type=float, default=30.0, help="seconds before one decode is given up")
    parser.add_argument("--keep", type=Path, default=Path("fuzz-over-bound"), help="where overrunning cases go")
    parser.add_argument("--seed", type=int, help="derandomize (the same exchanges every run)")
    args = parser.parse_args(argv)
    seeds = load_seeds()
    over = 0
    started = time.monotonic()
    print(f"{'translator':<20} {'family':<10} {'bodies':>7} {'MB':>7} {'cpu ms/MB':>10} {'peak/body':>10}"
          f" {'worst s':>8} {'bound':>6} {'over':>5}")  # fmt: skip
    for protocol in args.only or PROTOCOLS:
        families = {
            "checked": checked(protocol, args.scale),
            "conversations": conversations(protocol, args.scale),
            "framed": framed(protocol, args.scale),
        }
        if seeds[protocol]:
            families = {"amplified": amplified(protocol, seeds, args.scale), **families}
        for family, strategy in families.items():
            figures = run(protocol, family, strategy, args)
            for n, verdict in enumerate(figures.over):
                case = _keep(args.keep, n, verdict.wire)
                print(f"  over its bound ({case}): {verdict.explain()[:400]}", file=sys.stderr)
            over += len(figures.over)
            print(
                f"{protocol:<20} {family:<10} {figures.tried:>7} {figures.bytes / MB:>7.1f}"
                f" {figures.worst_cpu_per_mb * 1000:>10.0f} {figures.worst_peak_per_mb:>10.1f}"
                f" {figures.worst_cpu_s:>8.2f} {figures.worst_share:>6.0%} {len(figures.over):>5}",
                flush=True,
            )
    print(f"{over} over their bound; {time.monotonic() - started:.0f} s")
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
