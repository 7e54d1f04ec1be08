"""Prometheus metrics (`--metrics HOST:PORT`, `[metrics]`). Being written (issue 16)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llmtap.storage.writer import Observer
    from llmtap.telemetry.settings import Telemetry


@dataclass(frozen=True)
class MetricsSettings:
    host: str
    port: int


def settings_from(flag: str | None, section: Any) -> MetricsSettings | None:
    if flag is None and section is None:
        return None
    raise ValueError("--metrics is not available yet")


def observer(telemetry: Telemetry) -> Observer:
    raise NotImplementedError


def start_in_proxy(telemetry: Telemetry, writer: Any) -> Callable[[], None]:
    raise NotImplementedError
