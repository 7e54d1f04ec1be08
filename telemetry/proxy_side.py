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
    # admits a request (reserving its estimate) or refuses it in its protocol's own error
    # shape: budget_gate.ProxyGate, made by budgets.gate_in_proxy
    gate: Any = None
    closers: list[Callable[[], None]] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)  # lines to print once it is up

    def close(self) -> None:
        for close in reversed(self.closers):
            close()


def start(telemetry: Telemetry, writer: Any, pricer: Any = None) -> ProxySide:
    """`writer` is the proxy's WriterProcess (its queue depth and restarts are metrics; the
    records it settles release budget reservations); `pricer` prices the gate's estimates."""
    side = ProxySide()
    if telemetry.metrics is not None:
        serving = metrics.start_in_proxy(telemetry, writer)
        side.closers.append(serving.stop)
        side.notices += metrics.notices(serving)
    if telemetry.budgets is not None:
        gate, close = budgets.gate_in_proxy(telemetry, writer, pricer)
        side.gate = gate
        side.closers.append(close)
    return side
