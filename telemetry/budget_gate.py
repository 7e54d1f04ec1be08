"""The budget gate in the proxy's process: a request passes only if its estimate fits every
limit it falls under, counting the spend committed so far and the estimates of the
requests still in flight (SPEC §6); the estimate is then reserved until the request's real
cost is committed.

A request falls under its team's limits and the limits of every credential it carries
(the key its destination reads and any other: protocols/api_keys.py), so an extra header
takes nothing out from under a budget. For each, in that order:

- committed + in flight >= limit: refused (over, or held by work in flight);
- committed + in flight + estimate > limit: refused, its estimate does not fit;
- else it passes, and its estimate is reserved against all of them.

So a limit's spend stays within the limit as long as every exchange costs at most its
estimate (budget_estimate.py says what it counts); an exchange that costs more can take
the limit over by the difference, and only while no later request has been let through.

Everything the gate asks is in memory (the committed spend `StateReader` keeps, the
`Ledger`'s reservations, the estimate's prices): no I/O on the event loop. Its own thread,
every `state_poll_s`, reads the writer's progress (which records are settled), the
committed spend the writer's process wrote (budget_state.py), and releases what both say
is counted. A writer in another process is no different from one in this process.

Not responsible for answering the flow (addon/budget_gate.py), the estimate
(budget_estimate.py) or the spend (budget_spend.py, in the writer's process).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from llmtap.telemetry import budget_refusal
from llmtap.telemetry.budget_config import BudgetSettings, Limit, bounds
from llmtap.telemetry.budget_estimate import Estimator
from llmtap.telemetry.budget_ledger import Ledger
from llmtap.telemetry.budget_state import StateReader

log = logging.getLogger("llmtap.budgets")
PICO = Decimal(10) ** 12


@dataclass(frozen=True, slots=True)
class _Short:
    """Why a request does not fit one limit."""

    limit: Limit
    text: str
    retry_s: int | None  # None: at the period's end
    end: datetime


class ProxyGate:
    """`writer` is the proxy's writer (WriterProcess or Writer): its `stats.submitted` and
    `backlog` say which records are settled, in the order they were handed over."""

    def __init__(
        self,
        settings: BudgetSettings,
        state_path: Path,
        estimator: Estimator,
        writer: Any,
        clock: Callable[[], datetime] | None = None,
        ledger: Ledger | None = None,
    ) -> None:
        self.settings = settings
        self.zone = settings.zone  # the periods' calendar: a refusal's retry-after runs to its end
        self.clock = clock or (lambda: datetime.now(UTC))
        self.reader = StateReader(state_path, settings.limits, self.clock)
        self.ledger = ledger or Ledger()
        self.estimator = estimator
        self.writer = writer
        self._teams: dict[str, list[Limit]] = {}
        self._keys: dict[str, list[Limit]] = {}
        self._tags: dict[str, list[Limit]] = {}  # "NAME=VALUE"
        indexes = {"team": self._teams, "key": self._keys, "tag": self._tags}
        for limit in settings.limits:
            indexes[limit.scope].setdefault(limit.name, []).append(limit)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="llmtap-budget-gate", daemon=True)

    def start(self) -> ProxyGate:
        self.step()
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)

    # -- the event loop ------------------------------------------------------------------

    def admit(
        self,
        *,
        team: str | None,
        fingerprints: Sequence[str],
        protocol: str,
        path: str,
        host: str | None,
        body: bytes | None,
        provider: str | None = None,
        price_reason: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> tuple[budget_refusal.Refusal | None, int | None]:
        """(a refusal in the protocol's shape, None) or (None, the reservation's token;
        None when no limit applies)."""
        asked = {"protocol": protocol, "path": path, "host": host, "body": body, "provider": provider}
        short, token = self._admit(team, fingerprints, tags, price_reason=price_reason, **asked)
        return (self._refusal(protocol, path, short), None) if short is not None else (None, token)

    def admit_message(
        self, *, team: str | None, fingerprints: Sequence[str], protocol: str, path: str, host: str | None,
        body: bytes, provider: str | None = None, price_reason: str | None = None, stream_id: Any = None,
        tags: Mapping[str, str] | None = None,
    ) -> tuple[bytes | None, int | None]:  # fmt: skip
        """`admit` for a WebSocket `response.create`: a refusal is the `error` event."""
        asked = {"protocol": protocol, "path": path, "host": host, "body": body, "provider": provider}
        short, token = self._admit(team, fingerprints, tags, price_reason=price_reason, **asked)
        if short is None:
            return None, token
        retry = short.retry_s if short.retry_s is not None else budget_refusal.retry_after(short.end, self.clock())
        return budget_refusal.websocket_refusal(short.text, retry, stream_id), None

    def _admit(
        self, team: str | None, fingerprints: Sequence[str], tags: Mapping[str, str] | None, **asked: Any
    ) -> tuple[_Short | None, int | None]:
        limits = self._limits(team, fingerprints, tags)
        if not limits:
            return None, None
        estimate = self.estimator.estimate(**asked)
        short = self._short(limits, estimate.pico)
        if short is not None:
            return short, None
        return None, self.ledger.reserve(((limit.scope, limit.name) for limit in limits), estimate.pico)

    def over(
        self, *, team: str | None, fingerprints: Sequence[str], protocol: str, path: str,
        tags: Mapping[str, str] | None = None,
    ) -> budget_refusal.Refusal | None:  # fmt: skip
        """A refusal when a limit is reached already (nothing fits): for a WebSocket
        upgrade, whose messages are each admitted on their own."""
        limits = self._limits(team, fingerprints, tags)
        short = self._short(limits, 0) if limits else None
        return self._refusal(protocol, path, short) if short is not None else None

    def ended(self, token: int) -> None:
        """The reservation's record was handed to the writer."""
        self.ledger.ended(token)

    def _limits(
        self, team: str | None, fingerprints: Sequence[str], tags: Mapping[str, str] | None = None
    ) -> list[Limit]:
        found = list(self._teams.get(team, ())) if team else []
        named = [
            *(self._keys.get(fingerprint, ()) for fingerprint in fingerprints),
            *(self._tags.get(f"{name}={value}", ()) for name, value in (tags or {}).items()),
        ]
        for limits in named:
            for limit in limits:
                if limit not in found:
                    found.append(limit)
        return found

    def _short(self, limits: Sequence[Limit], estimate: int) -> _Short | None:
        now = self.clock()
        for limit in limits:
            spent = self.reader.spent(limit, now)
            held = self.ledger.held((limit.scope, limit.name))
            if spent + held + estimate <= limit.pico and spent + held < limit.pico:
                continue
            end = bounds(limit.period, now, self.zone)[1]
            if spent >= limit.pico:
                return _Short(limit, budget_refusal.message(limit, end), None, end)
            text = budget_refusal.short_message(
                limit, Decimal(limit.pico - spent - held) / PICO, Decimal(held) / PICO, Decimal(estimate) / PICO
            )
            # if it could fit once the work in flight is settled, it may pass in seconds
            fits_later = spent + estimate <= limit.pico
            return _Short(limit, text, budget_refusal.IN_FLIGHT_RETRY if fits_later else None, end)
        return None

    def _refusal(self, protocol: str | None, path: str, short: _Short) -> budget_refusal.Refusal:
        return budget_refusal.refusal(protocol, path, short.limit, short.end, self.clock(), short.text, short.retry_s)

    # -- the gate's thread ---------------------------------------------------------------

    def step(self) -> None:
        """Settle what the writer has settled, read the committed spend, release."""
        submitted = self.writer.stats.submitted  # first: see Ledger.settle
        backlog = self.writer.backlog
        self.ledger.settle(submitted, backlog)
        self.reader.refresh()
        self.ledger.release(self.reader.stamp)

    def _run(self) -> None:
        while not self._stop.wait(self.settings.state_poll_s):
            try:
                self.step()
            except Exception:  # noqa: BLE001 - the gate's thread outlives any bug; reservations expire
                log.exception("llmtap budgets: the gate's step failed")
