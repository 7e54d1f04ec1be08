"""The observers the writer's process runs (storage.writer.Observer): one per part that is
switched on. `build` is what WriterSpec.observers_factory calls, in that process.

Not responsible for the proxy's side (proxy_side.py) or for what each observer does.
"""

from __future__ import annotations

from llmtap.storage.writer import Observer
from llmtap.telemetry import budgets, metrics, otlp
from llmtap.telemetry.settings import Telemetry


def build(telemetry: Telemetry) -> list[Observer]:
    found: list[Observer] = []
    if telemetry.metrics is not None:
        found.append(metrics.observer(telemetry))
    if telemetry.otlp is not None:
        found.append(otlp.observer(telemetry))
    if telemetry.budgets is not None:
        found.append(budgets.observer(telemetry))
    return found
