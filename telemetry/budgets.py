"""Budgets per team or key (`[budgets]`): spend against limits, alerts, enforcement.

In the writer's process, `BudgetObserver` (a storage.writer.Observer) keeps each limit's
spend in its current period (calendar periods in `[budgets] tz`, UTC by default): read
from the store at start, then each committed row's cost added as the writer tells of it,
and re-read from the store every `refresh_s` (15 s) so other proxies' spend and reprices
count. After each change a thread of its own rewrites the state file (budget_state.py)
and checks the thresholds (alerts: budget_alerts.py). Spend is fresh within a commit (the
writer batches for up to 0.2 s) plus that thread's wake-up; the gate sees it within
another `state_poll_s` (0.25 s).

A re-read runs on the writer's thread when rows are flowing (so no commit of this writer
falls between the query and its rows being added), else on the budget thread once the
writer has been idle for a second. Its cost grows with the period's rows of the limited
teams and keys (SQLite, 300k rows in the month, a loaded 2-core machine: 1.5-3.5 s), so
the next re-read waits at least 20 times as long as the last one took: the writer spends
at most 5 % of its time on them.

The writer's state file carries every limit's committed spend and when it was read
(budget_state.py), rewritten at each step of that thread (at least once a second), so
the proxy's gate can release the estimates it reserved once their records are counted.

In the proxy's process, `gate_in_proxy` gives the gate the budget addon asks
(budget_gate.py): from memory, admit a request and reserve its estimate, or refuse it in
the protocol's shape (budget_refusal.py). With `enforce = false` there is no gate.

Not responsible for parsing the table (budget_config.py), the SQL (budget_spend.py),
answering the flow (addon/budget_gate.py) or the report (cli/report_budgets.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import SQLAlchemyError

from llmtap.telemetry import budget_alerts, budget_state
from llmtap.telemetry.budget_config import BudgetSettings, parse
from llmtap.telemetry.budget_estimate import Estimator
from llmtap.telemetry.budget_gate import ProxyGate
from llmtap.telemetry.budget_spend import Standing, Tracker

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from llmtap.storage.rows import RowSet
    from llmtap.storage.writer import Observer
    from llmtap.telemetry.settings import Telemetry

log = logging.getLogger("llmtap.budgets")

IDLE_S = 1.0  # the writer counts as idle after this long without a commit
LOAD_SHARE = 20  # re-read no sooner than 20x the last re-read took: at most 5 % of the writer's time
__all__ = ["BudgetObserver", "BudgetSettings", "ProxyGate", "gate_in_proxy", "observer", "settings_from"]


def settings_from(section: Any) -> BudgetSettings | None:
    """None without a `[budgets]` table; ValueError naming the bad key."""
    return None if section is None else parse(section)


def _now() -> datetime:
    return datetime.now(UTC)


class BudgetObserver:
    def __init__(
        self, settings: BudgetSettings, engine: Engine, state_path: Any, clock: Callable[[], datetime] = _now
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.state_path = state_path
        self.clock = clock
        self.zone = settings.zone
        self.tracker = Tracker(settings.limits, clock(), self.zone)
        self.webhook = budget_alerts.Webhook(settings.webhook) if settings.webhook else None
        self._lock = threading.Lock()
        self._loaded = False
        self._failing = False
        self._next_load = 0.0  # monotonic
        self._last_commit = 0.0  # monotonic
        self._fired: dict[tuple[int, datetime], set[int]] = {}  # (standing index, period start) -> thresholds
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="llmtap-budgets", daemon=True)
        self._thread.start()

    # -- the writer's thread ----------------------------------------------------------

    def observe(self, rows: RowSet) -> None:
        with self._lock:
            self._last_commit = time.monotonic()
            self.tracker.roll(self.clock())
            self.tracker.add(rows.exchanges)
            if time.monotonic() >= self._next_load:
                self._load()  # here, between this writer's commits: no row is counted twice
        self._wake.set()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(10)
        if self.webhook is not None:
            self.webhook.close()
        self.engine.dispose()

    # -- the budget thread ------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._step()
            except Exception as exc:  # noqa: BLE001 - the store may be away; the next step tries again
                self._failed(exc)
            self._wake.wait(min(self.settings.refresh_s, 1.0))
            self._wake.clear()

    def _step(self) -> None:
        now = self.clock()
        with self._lock:
            rolled = self.tracker.roll(now)
            idle = time.monotonic() - self._last_commit >= IDLE_S
            if (rolled or not self._loaded or time.monotonic() >= self._next_load) and idle:
                self._load()
            if not self._loaded:  # no alert and no state from a part of the spend
                return
            snapshot = [Standing(s.limit, s.start, s.end, s.spent_pico) for s in self.tracker.standings]
            stamp = time.monotonic()  # every commit observed so far is in the snapshot
        # Each step, changed or not: a newer stamp is what releases the reservations of
        # records settled since (a record without cost changes no spend). First, before
        # the alerts' own store I/O.
        budget_state.write(self.state_path, budget_state.encode(snapshot, now, stamp))
        self._alert(snapshot, now)

    def _load(self) -> None:
        """Re-read the spend (the caller holds the lock); a store that is away is tried
        again after `refresh_s`, and the spend counted so far stands."""
        began = time.monotonic()
        try:
            self.tracker.load(self.engine)
        except SQLAlchemyError as exc:
            self._next_load = time.monotonic() + self.settings.refresh_s
            self._failed(exc)
            return
        self._loaded = True
        took = time.monotonic() - began
        self._next_load = time.monotonic() + max(self.settings.refresh_s, LOAD_SHARE * took)
        if self._failing:
            self._failing = False
            log.info("llmtap budgets: reading spend from the store again")

    def _failed(self, exc: Exception) -> None:
        """One line when the store goes away, not one per try (a bug keeps its traceback)."""
        if not self._failing:
            self._failing = True
            bug = not isinstance(exc, (SQLAlchemyError, OSError))
            log.warning("llmtap budgets: cannot use the store (%s); retrying", type(exc).__name__, exc_info=bug)

    def _alert(self, snapshot: list[Standing], now: datetime) -> None:
        sent: list[tuple[Standing, int]] = []
        try:
            for index, standing in enumerate(snapshot):
                crossed = standing.crossed()
                if not crossed:
                    continue
                period = (index, standing.start)
                if period not in self._fired:
                    self._fired = {k: v for k, v in self._fired.items() if k[0] != index}  # the old period's
                    self._fired[period] = budget_alerts.fired(self.engine, standing.limit, standing.start)
                done = self._fired[period]
                for threshold in crossed:
                    if threshold in done:
                        continue
                    if budget_alerts.claim(self.engine, standing, threshold, now):  # raises: tried again next step
                        log.warning("%s", budget_alerts.line(standing, threshold, self.zone))
                        sent.append((standing, threshold))
                    done.add(threshold)
        finally:  # what was claimed goes out, even when the store fails part way
            if self.webhook is not None:
                for body in budget_alerts.bodies(sent, now, self.zone, self.settings.webhook_format):
                    self.webhook.send(body)


def observer(telemetry: Telemetry) -> Observer:
    from llmtap.storage.engine import make_engine

    assert telemetry.budgets is not None
    return BudgetObserver(telemetry.budgets, make_engine(telemetry.db_url), budget_state.path_in(telemetry.spool_dir))


def gate_in_proxy(telemetry: Telemetry, writer: Any, pricer: Any = None) -> tuple[ProxyGate | None, Callable[[], None]]:
    """The gate (None unless `enforce = true`) and what closes it. `writer`: the proxy's
    (its settled records release reservations); `pricer`: what estimates are priced with
    (analytics.pricing.Pricer; genai-prices alone when None)."""
    settings = telemetry.budgets
    assert settings is not None
    if not settings.enforce:
        return None, lambda: None
    if pricer is None:
        from llmtap.analytics.pricing import Pricer

        pricer = Pricer()
    _ = pricer.snapshot  # genai-prices' data, loaded now rather than on the first request
    estimator = Estimator(pricer, settings.default_output_tokens)
    gate = ProxyGate(settings, budget_state.path_in(telemetry.spool_dir), estimator, writer).start()
    return gate, gate.close
