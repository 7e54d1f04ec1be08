"""OpenTelemetry spans over OTLP/HTTP (`--otlp-endpoint URL`, `[otlp]`): the writer's
observer that sends one span per exchange the store took. The settings (`settings_from`,
the `[otlp]` table) are otlp_config.py's, re-exported here.

The observer runs in the writer's process: after each commit it hands the rows to a thread
of its own, which makes each exchange's span parts (otlp_spans.py) and gives them to the
SDK's batch processor (otlp_export.py); nothing the writer does waits on it or on the
endpoint. Each row comes with its verdicts as the commit stored them (its conversation and
cache verdict, storage/verdicts.py): a span says them as they were then. A later write
that lands before an exchange already sent (an import, another proxy's late commit) may
change the stored verdicts of that one; its span is not sent again, `llmtap export
--format otlp` sends the stored ones.

Not responsible for deciding any verdict (the writer did), for the backfill
(`llmtap export --format otlp`, otlp_backfill.py, which shares the same parts), nor for
what the spans say or how they travel.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from llmtap.storage.rows import RowSet
from llmtap.telemetry.otlp_config import OtlpSection, OtlpSettings, endpoint_url, headers_from, settings_from
from llmtap.telemetry.otlp_export import ExportOptions, Sender
from llmtap.telemetry.otlp_spans import from_table_row, span_parts, trace_key

if TYPE_CHECKING:
    from llmtap.storage.writer import Observer
    from llmtap.telemetry.settings import Telemetry

__all__ = ["OtlpSection", "OtlpSettings", "SpanObserver", "endpoint_url", "headers_from", "observer", "settings_from"]
log = logging.getLogger("llmtap.telemetry")
CLOSE_TIMEOUT_S = 10.0  # at shutdown, what is queued gets this long to go out


class SpanObserver:
    """storage.writer.Observer: one span per exchange each commit added. `observe` only
    hands the rows to a thread of its own (at most `max_queue` rows wait there; more are
    dropped and counted), which works out each span and gives it to the SDK: the writer's
    thread never spends the mapping's or the SDK's time."""

    def __init__(self, options: ExportOptions) -> None:
        self.sender = Sender(options)
        self.skipped = 0  # rows dropped at the hand-over: the thread could not keep up
        self._limit = options.max_queue
        self._waiting = 0
        self._count = threading.Lock()
        self._batches: queue.SimpleQueue[RowSet | None] = queue.SimpleQueue()
        self._failed = False
        self._thread = threading.Thread(target=self._run, name="llmtap-otlp", daemon=True)
        self._thread.start()

    def observe(self, rows: RowSet) -> None:
        with self._count:
            if self._waiting + len(rows.exchanges) > self._limit:
                self.skipped += len(rows.exchanges)
                return
            self._waiting += len(rows.exchanges)
        self._batches.put(rows)

    def close(self) -> None:
        self._batches.put(None)
        self._thread.join(CLOSE_TIMEOUT_S)
        stats = self.sender.close(CLOSE_TIMEOUT_S)
        dropped = stats.dropped + self.skipped
        log.log(
            logging.WARNING if dropped or stats.given_up else logging.INFO,
            "llmtap otlp: %d spans sent to %s, %d not (%d dropped while it was away, %d unsent at the end)",
            stats.sent,
            self.sender.options.shown,
            dropped + stats.given_up,
            dropped,
            stats.given_up,
        )

    def _run(self) -> None:
        while (rows := self._batches.get()) is not None:
            try:
                self._spans(rows)
            finally:
                with self._count:
                    self._waiting -= len(rows.exchanges)

    def _spans(self, rows: RowSet) -> None:
        calls: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for call in rows.tool_calls:
            calls[call["exchange_id"]].append(call)
        for row in rows.exchanges:
            try:
                exported = from_table_row(row, calls.get(row["id"], []))
                trace = trace_key(row["thread_key"], row["conversation_id"], row["id"])
                self.sender.send(span_parts(exported, trace))
            except Exception:  # noqa: BLE001 - one exchange's span never stops the others
                if not self._failed:  # once: a bug here would otherwise log per exchange
                    log.exception("llmtap otlp: an exchange could not become a span (the first such; no more logged)")
                self._failed = True


def observer(telemetry: Telemetry) -> Observer:
    assert telemetry.otlp is not None
    return SpanObserver(telemetry.otlp.options)
