"""What one exchange costs to decode and check, against what its size allows (SPEC §6:
"time linear in its size, memory a small multiple of it, whatever it contains").

`cost(wire)` decodes a `Wire` as the writer would (`ExchangeDecoder`: content, framing,
fold, body decode, tool checks, fed in socket-sized chunks) twice: once for the CPU time
of this thread alone (`time.thread_time`: what the other core or a loaded machine does
adds nothing to it), once under `tracemalloc` for the peak of what it allocates.

`baseline(wire)` is the least any consumer of the same bytes does: every JSON document in
them parsed and held at once (the events of a stream, or the one body). The bound is a
ratio to it in the same run, as the benches measure speed, plus a fixed allowance for a
small body:

    cpu  <= CPU_FLOOR_S + max(CPU_RATIO * baseline cpu, CPU_S_PER_MIB * body MiB)
    peak <= MEMORY_FLOOR + MEMORY_RATIO * max(baseline peak, body bytes)

`CPU_S_PER_MIB` is what the decoders promise per MiB (the checks' clock of
protocols/budget.py, 2 s per MiB, and decoding's own ~0.5 s) with room for a slow machine.
The ratios are wide on purpose: they are not a speed test, they catch the shapes that cost
more than linear time or a multiple of the body (a backtracking pattern, a quadratic check,
arrays padded to a far index), which overshoot them by orders of magnitude.

Not responsible for making the exchanges (workloads/fuzz_bodies.py) or for what the record says.
"""

from __future__ import annotations

import gc
import json
import signal
import threading
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llmtap.protocols import ExchangeDecoder
from llmtap.protocols.canonical import Exchange
from llmtap.workloads.fuzz_bodies import EVENTSTREAM, Wire

CPU_FLOOR_S = 0.25
CPU_RATIO = 60.0
CPU_S_PER_MIB = 4.0
MEMORY_FLOOR = 4 * 1024 * 1024
MEMORY_RATIO = 12.0
CHUNK = 4096


@dataclass(frozen=True)
class Cost:
    cpu_s: float
    peak_bytes: int


@dataclass(frozen=True)
class Verdict:
    wire: Wire
    cost: Cost
    baseline: Cost
    exchange: Exchange

    @property
    def cpu_allowed(self) -> float:
        linear = max(CPU_RATIO * self.baseline.cpu_s, CPU_S_PER_MIB * self.wire.size / (1024 * 1024))
        return CPU_FLOOR_S + linear

    @property
    def memory_allowed(self) -> int:
        return int(MEMORY_FLOOR + MEMORY_RATIO * max(self.baseline.peak_bytes, self.wire.size))

    @property
    def within(self) -> bool:
        return self.cost.cpu_s <= self.cpu_allowed and self.cost.peak_bytes <= self.memory_allowed

    def explain(self) -> str:
        return (
            f"{self.wire!r}: cpu {self.cost.cpu_s * 1000:.1f} ms (allowed {self.cpu_allowed * 1000:.1f}, "
            f"baseline {self.baseline.cpu_s * 1000:.2f}); peak {self.cost.peak_bytes / 1e6:.2f} MB "
            f"(allowed {self.memory_allowed / 1e6:.2f}, baseline {self.baseline.peak_bytes / 1e6:.2f}); "
            f"decode_error {self.exchange.decode_error!r}"
        )


def decode(wire: Wire) -> Exchange:
    decoder = ExchangeDecoder(
        wire.protocol,
        request=wire.request,
        path=wire.path,
        host=wire.host,
        status=wire.status,
        content_type=wire.content_type,
    )
    body = wire.response
    for start in range(0, len(body), CHUNK):
        decoder.feed(body[start : start + CHUNK])
    return decoder.finish()


def _documents(wire: Wire) -> list[Any]:
    """Every JSON document in the bytes, parsed: the least any reader of them does."""
    found: list[Any] = []
    for raw in (wire.request or b"", wire.response):
        for piece in _pieces(wire, raw):
            try:
                found.append(json.loads(piece))
            except (ValueError, RecursionError):
                found.append(piece)
    return found


def _pieces(wire: Wire, raw: bytes) -> list[bytes]:
    if raw is wire.response and EVENTSTREAM in wire.content_type:
        return [raw]  # binary frames: the bytes themselves
    if raw is wire.response and b"data:" in raw[:64]:
        return [line[5:] for line in raw.splitlines() if line.startswith(b"data:")]
    return [raw]


def measure(run: Callable[[], Any]) -> tuple[Cost, Any]:
    """The objects already alive are frozen out of the collector meanwhile: in a test process
    that has run a thousand other tests, a full collection falling inside a decode charged it
    a tenth of a second of someone else's garbage (and `gc.collect()` around each run took
    half a second)."""
    gc.freeze()
    try:
        start = time.thread_time()
        result = run()
        cpu = time.thread_time() - start
        del result
        tracemalloc.start()
        try:
            result = run()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    finally:
        gc.unfreeze()
    return Cost(cpu, peak), result


class _Overran(BaseException):
    """Not an Exception: a decoder's `except Exception` must not swallow it."""


def _alarm(signum: int, frame: Any) -> None:
    raise _Overran


def judge(wire: Wire, give_up_s: float = 30.0) -> Verdict:
    """The cost of `wire` and its bound. A decode still running after `give_up_s` of wall
    time (on the main thread, where a timer signal can stop it: Python's `re` and
    everything else checks for signals) is judged at that cost, far over any bound."""
    baseline, _ = measure(lambda: _documents(wire))
    if threading.current_thread() is not threading.main_thread():
        cost, exchange = measure(lambda: decode(wire))
        return Verdict(wire, cost, baseline, exchange)
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, give_up_s, 0.5)  # again and again if swallowed
    try:
        cost, exchange = measure(lambda: decode(wire))
    except _Overran:
        cost, exchange = Cost(float("inf"), 0), Exchange(protocol=wire.protocol, provider=None)
        exchange.decode_error = f"still decoding after {give_up_s:g} s: given up"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return Verdict(wire, cost, baseline, exchange)
