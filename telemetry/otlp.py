"""OpenTelemetry spans over OTLP/HTTP (`--otlp-endpoint URL`, `[otlp]`). Being written (issue 16)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llmtap.storage.writer import Observer
    from llmtap.telemetry.settings import Telemetry


@dataclass(frozen=True)
class OtlpSettings:
    endpoint: str


def settings_from(flag: str | None, section: Any) -> OtlpSettings | None:
    if flag is None and section is None:
        return None
    raise ValueError("--otlp-endpoint is not available yet")


def observer(telemetry: Telemetry) -> Observer:
    raise NotImplementedError
