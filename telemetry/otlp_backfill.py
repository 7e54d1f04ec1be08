"""History as spans: `llmtap export --format otlp` sends one span per stored exchange, the
same span the live export sent or would have sent (otlp_spans.py, from export's rows).

Each page of export's rows is given its stored verdicts (otlp_spans.STORED: conversation
and prompt-cache verdict, storage/verdicts.py) and thread_key from the store, the same
columns the live export read off the committed rows. So a backfilled span and its live
twin share trace, span id and values, except where the store's verdicts of an exchange
changed after its live span went (otlp.py says when).

Spans go out as fast as the endpoint takes them: the sender's queue is kept below its
bound (never dropped for being full); a batch the endpoint refuses for `hold_s` is given
up and counted.

Not responsible for deciding any verdict (the writer stored them), for pricing rows (the
caller catches stale prices up, as export does), nor for the command's options.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

from sqlalchemy import Engine, select

from llmtap.storage.schema import exchanges
from llmtap.telemetry.otlp_export import ExportOptions, ExportStats, Sender
from llmtap.telemetry.otlp_spans import STORED, span_parts, trace_key

PAGE = 1000


def send_history(
    engine: Engine,
    rows: Iterable[dict[str, Any]],
    options: ExportOptions,
    close_timeout_s: float = 30.0,
) -> ExportStats:
    """Sends export's rows as spans; returns what became of them."""
    sender = Sender(options)
    try:
        _send(engine, sender, rows)
    finally:
        stats = sender.close(close_timeout_s)
    return stats


def _send(engine: Engine, sender: Sender, rows: Iterable[dict[str, Any]]) -> None:
    room = max(sender.options.max_queue - sender.options.batch_size, 1)
    for page in _pages(rows):
        found = _stored(engine, [row["id"] for row in page])
        for row in page:
            while _backlog(sender.stats) >= room and not sender.stats.given_up:  # never overflows
                time.sleep(0.01)
            if sender.stats.given_up:  # the endpoint refused a batch for hold_s: stop here
                return
            # an exchange deleted since export read it (`llmtap prune`) keeps export's values
            stored = found.get(row["id"]) or {"thread_key": None, **{name: row.get(name) for name in STORED}}
            exported = row | {name: stored[name] for name in STORED}
            sender.send(span_parts(exported, trace_key(stored["thread_key"], stored["conversation_id"], row["id"])))


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


def _stored(engine: Engine, ids: list[str]) -> dict[str, dict[str, Any]]:
    """The thread_key and stored verdicts of these exchanges, by id."""
    columns = [exchanges.c[name] for name in ("id", "thread_key", *STORED)]
    with engine.connect() as connection:
        found = connection.execute(select(*columns).where(exchanges.c.id.in_(ids))).mappings()
        return {str(r["id"]): dict(r) for r in found}
