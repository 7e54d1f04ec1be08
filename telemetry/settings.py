"""What `llmtap proxy` was asked to tell: the `--metrics` and `--otlp-endpoint` flags and the
config file's `[metrics]`, `[otlp]` and `[budgets]` tables, made into plain, picklable
values (they travel to the writer's process inside its WriterSpec).

Each table's model lives in its part's module (`metrics.MetricsSection`,
`otlp_config.OtlpSection`, `budget_config.BudgetsSection`), checked with the rest of the
config file (cli/config_schema.py); each part's `settings_from` combines its table with
its flag and raises ValueError with a one-line message for what only the two together
can say (no `listen` and no `--metrics`); the CLI turns that into a usage error.

Not responsible for acting on the settings (observers.py, proxy_side.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from llmtap.telemetry import budget_config, budgets, metrics, otlp_config


@dataclass(frozen=True)
class Telemetry:
    db_url: str  # the store, for what an observer must read back (budgets: spend so far)
    spool_dir: Path  # a folder of the proxy's own (e.g. for state the proxy's side reads)
    metrics: metrics.MetricsSettings | None = None
    otlp: otlp_config.OtlpSettings | None = None
    budgets: budgets.BudgetSettings | None = None

    @property
    def any(self) -> bool:
        return self.metrics is not None or self.otlp is not None or self.budgets is not None


def from_config(
    *,
    db_url: str,
    spool_dir: Path,
    metrics_table: metrics.MetricsSection | None = None,
    otlp_table: otlp_config.OtlpSection | None = None,
    budgets_table: budget_config.BudgetsSection | None = None,
    metrics_flag: str | None = None,
    otlp_flag: str | None = None,
    providers: tuple[str, ...] = (),
) -> Telemetry:
    """Raises ValueError naming the bad value. `providers`: the config's `[[providers]]`
    names (metric labels beside genai-prices' provider ids)."""
    return Telemetry(
        db_url=db_url,
        spool_dir=spool_dir,
        metrics=metrics.settings_from(metrics_flag, metrics_table, providers),
        otlp=otlp_config.settings_from(otlp_flag, otlp_table),
        budgets=budgets.settings_from(budgets_table),
    )
