"""The observers the writer's process runs (storage.writer.Observer): one per part that is
switched on. `build` is what WriterSpec.observers_factory calls, in that process.

Not responsible for the proxy's side (proxy_side.py) or for what each observer does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from llmtap.storage.writer import Observer
from llmtap.telemetry import budgets, metrics, otlp
from llmtap.telemetry.settings import Telemetry

log = logging.getLogger("llmtap.telemetry")


def build(telemetry: Telemetry) -> list[Observer]:
    """Each part that is on and starts. One that fails to start is logged and left out:
    recording goes on without it (a writer that could not start would record nothing)."""
    parts: list[tuple[str, Callable[[Telemetry], Observer]]] = []
    if telemetry.metrics is not None:
        parts.append(("metrics", metrics.observer))
    if telemetry.otlp is not None:
        parts.append(("OTLP export", otlp.observer))
    if telemetry.budgets is not None:
        parts.append(("budgets", budgets.observer))
    found: list[Observer] = []
    for name, make in parts:
        try:
            found.append(make(telemetry))
        except Exception:  # noqa: BLE001 - any failure: record without this part, and say so
            log.exception("llmtap: %s could not start in the writer's process; recording goes on without it", name)
    return found
