"""History as spans: `llmtap export --format otlp` sends one span per stored exchange, the
same span the live export sent or would have sent (otlp_spans.py, from export's rows).

What the live export works out as rows arrive, the backfill reads from the store's own
rules over all of it: the conversation is export's `conversation_id`
(conversation_ids.sql), the trace the thread_key's digits else that id, and the cache
verdict is the cache report's (cache_misses.sql). So a backfilled span and its live twin
share trace, span id and values, except where the live export could not see a line's
past (otlp_lines.py says when).

Spans go out as fast as the endpoint takes them: the sender's queue is kept below its
bound (never dropped for being full); a batch the endpoint refuses for `hold_s` is given
up and counted.

Not responsible for pricing rows (the caller catches stale prices up, as export does),
nor for the command's options.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from datetime import datetime
from string import Template
from typing import Any

from sqlalchemy import Engine, select

from llmtap.analytics import reports
from llmtap.storage.schema import exchanges
from llmtap.telemetry.otlp_export import ExportOptions, ExportStats, Sender
from llmtap.telemetry.otlp_spans import span_parts, trace_key

PAGE = 1000


def cache_verdicts(duck: Any, since: datetime | None, until: datetime | None) -> dict[str, dict[str, Any]]:
    """The cache report's misses (and not-cacheable would-be misses) by exchange id; `duck`:
    a DuckDB connection to the store (analytics/duck.py)."""
    query = (
        f"WITH cache_misses AS ({Template(reports.sql('cache_misses')).safe_substitute()}) "
        "SELECT exchange_id, cause FROM cache_misses"
    )
    rows = duck.execute(query, {"since": since, "until": until}).fetchall()
    return {
        str(exchange_id): {"verdict": "not_cacheable" if cause == "below_minimum" else "miss", "cause": cause}
        for exchange_id, cause in rows
    }


def verdict(row: dict[str, Any], misses: dict[str, dict[str, Any]]) -> dict[str, Any]:
    if row["id"] in misses:
        return misses[row["id"]]
    usage = row["usage"]
    if usage and usage.get("cache_read_tokens"):
        return {"verdict": "hit"}
    return {"verdict": "unknown"} if usage is None else {"verdict": "no cache read"}


def send_history(
    engine: Engine,
    rows: Iterable[dict[str, Any]],
    misses: dict[str, dict[str, Any]],
    options: ExportOptions,
    close_timeout_s: float = 30.0,
) -> ExportStats:
    """Sends export's rows as spans; returns what became of them."""
    sender = Sender(options)
    try:
        _send(engine, sender, rows, misses)
    finally:
        stats = sender.close(close_timeout_s)
    return stats


def _send(engine: Engine, sender: Sender, rows: Iterable[dict[str, Any]], misses: dict[str, dict[str, Any]]) -> None:
    room = max(sender.options.max_queue - sender.options.batch_size, 1)
    for page in _pages(rows):
        threads = _thread_keys(engine, [row["id"] for row in page])
        for row in page:
            while _backlog(sender.stats) >= room and not sender.stats.given_up:  # never overflows
                time.sleep(0.01)
            if sender.stats.given_up:  # the endpoint refused a batch for hold_s: stop here
                return
            trace = trace_key(threads.get(row["id"]), row["conversation_id"], row["id"])
            sender.send(span_parts(row, trace, verdict(row, misses)))


def _backlog(stats: ExportStats) -> int:
    return stats.queued - stats.sent - stats.given_up - stats.dropped


def _pages(rows: Iterable[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    page: list[dict[str, Any]] = []
    for row in rows:
        page.append(row)
        if len(page) == PAGE:
            yield page
            page = []
    if page:
        yield page


def _thread_keys(engine: Engine, ids: list[str]) -> dict[str, str]:
    query = select(exchanges.c.id, exchanges.c.thread_key).where(
        exchanges.c.id.in_(ids), exchanges.c.thread_key.is_not(None)
    )
    with engine.connect() as connection:
        return {str(i): str(t) for i, t in connection.execute(query)}
