"""Budgets per team (`[budgets]`): spend against limits, alerts, enforcement. Being written (issue 16)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llmtap.storage.writer import Observer
    from llmtap.telemetry.settings import Telemetry


@dataclass(frozen=True)
class BudgetSettings:
    pass


def settings_from(section: Any) -> BudgetSettings | None:
    if section is None:
        return None
    raise ValueError("[budgets] is not available yet")


def observer(telemetry: Telemetry) -> Observer:
    raise NotImplementedError


def gate_in_proxy(telemetry: Telemetry) -> tuple[Callable[[str | None, str | None], Any], Callable[[], None]]:
    raise NotImplementedError
