"""What `llmtap proxy` was asked to tell: the `--metrics` and `--otlp-endpoint` flags and the
config file's `[metrics]`, `[otlp]` and `[budgets]` tables, checked and made into plain,
picklable values (they travel to the writer's process inside its WriterSpec).

Each part's own module reads its table (`metrics.settings_from`, `otlp.settings_from`,
`budgets.settings_from`) and raises ValueError with a one-line message for a bad value;
the CLI turns that into a usage error.

Not responsible for acting on the settings (observers.py, proxy_side.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmtap.telemetry import budgets, metrics, otlp


@dataclass(frozen=True)
class Telemetry:
    db_url: str  # the store, for what an observer must read back (budgets: spend so far)
    spool_dir: Path  # a folder of the proxy's own (e.g. for state the proxy's side reads)
    metrics: metrics.MetricsSettings | None = None
    otlp: otlp.OtlpSettings | None = None
    budgets: budgets.BudgetSettings | None = None

    @property
    def any(self) -> bool:
        return self.metrics is not None or self.otlp is not None or self.budgets is not None


def from_config(
    *,
    db_url: str,
    spool_dir: Path,
    config: dict[str, Any],
    metrics_flag: str | None = None,
    otlp_flag: str | None = None,
) -> Telemetry:
    """Raises ValueError naming the bad value."""
    return Telemetry(
        db_url=db_url,
        spool_dir=spool_dir,
        metrics=metrics.settings_from(metrics_flag, config.get("metrics")),
        otlp=otlp.settings_from(otlp_flag, config.get("otlp")),
        budgets=budgets.settings_from(config.get("budgets")),
    )
