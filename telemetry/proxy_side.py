"""What runs in the proxy's own process: the `/metrics` endpoint (metrics.start_in_proxy)
and the budget gate the addon asks before it forwards a request (budgets.gate_in_proxy).
Both answer from memory; neither touches the store on the relay path.

Not responsible for counting or exporting (the observers, in the writer's process).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from llmtap.telemetry import budgets, metrics
from llmtap.telemetry.settings import Telemetry


@dataclass
class ProxySide:
    # (team, key fingerprint, protocol, path) -> None to let the request through, or a refusal
    # (status, headers, body) in the protocol's own error shape: see budgets.gate_in_proxy
    gate: Callable[[str | None, str | None, str | None, str], Any] | None = None
    closers: list[Callable[[], None]] = field(default_factory=list)

    def close(self) -> None:
        for close in reversed(self.closers):
            close()


def start(telemetry: Telemetry, writer: Any) -> ProxySide:
    """`writer` is the proxy's WriterProcess (its queue depth and restarts are metrics)."""
    side = ProxySide()
    if telemetry.metrics is not None:
        side.closers.append(metrics.start_in_proxy(telemetry, writer))
    if telemetry.budgets is not None:
        gate, close = budgets.gate_in_proxy(telemetry)
        side.gate = gate
        side.closers.append(close)
    return side
