"""`prune_synced` deletes only what is still below both of the lake's watermarks when it
deletes (storage/maintenance.py): an exchange, and its tool calls and their tombstones.
A tool call written after `synced_candidates` picked its exchange keeps the exchange,
as `synced_candidates` itself would have.

Not responsible for the lake's side (tests/lake/test_sync_prune.py runs `prune --synced`
against a real lake) or for `prune` by age (test_prune.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine, func, select

from llmtap.protocols.canonical import ToolCall
from llmtap.storage import schema
from llmtap.storage.maintenance import prune_synced, synced_candidates
from llmtap.storage.writer import Writer
from tests.storage.helpers import exchange_ids, make_record

LONG_AGO = timedelta(days=400)


def _with_a_tool_call(engine: Engine, spool: Path) -> str:
    record = make_record(1, started_at=datetime.now(UTC) - LONG_AGO)
    record.exchange.tool_calls = [ToolCall("c1", "lookup", {"q": "x"}, json.dumps({"q": "x"}), True)]
    writer = Writer(engine, spool_dir=spool, body_mode="metadata", max_delay=0.01)
    writer.submit(record)
    assert writer.close(), "the writer did not finish"
    return record.id


def _revisions(engine: Engine, exchange_id: str) -> tuple[int, int]:
    """(the exchange's fact revision, its newest tool call's)."""
    with engine.connect() as connection:
        exchange = connection.execute(
            select(schema.exchange_facts.c.revision).where(schema.exchange_facts.c.id == exchange_id)
        ).scalar_one()
        call = connection.execute(
            select(func.max(schema.tool_call_facts.c.revision)).where(
                schema.tool_call_facts.c.exchange_id == exchange_id
            )
        ).scalar_one()
    assert exchange is not None and call is not None
    return int(exchange), int(call)


def test_a_tool_call_above_its_watermark_keeps_its_exchange(store: Engine, spool_dir: Path) -> None:
    exchange_id = _with_a_tool_call(store, spool_dir)
    exchange_revision, call_revision = _revisions(store, exchange_id)
    before = datetime.now(UTC) - LONG_AGO / 2
    # the lake holds the exchange (its mark is past it) but not this tool call
    exchange_mark, tool_call_mark = exchange_revision + 1, call_revision
    assert synced_candidates(store, before, exchange_mark, tool_call_mark) == []
    assert prune_synced(store, [exchange_id], exchange_mark, tool_call_mark) == (0, 0)
    assert exchange_ids(store) == [exchange_id]


def test_below_both_watermarks_it_is_pruned(store: Engine, spool_dir: Path) -> None:
    exchange_id = _with_a_tool_call(store, spool_dir)
    exchange_revision, call_revision = _revisions(store, exchange_id)
    before = datetime.now(UTC) - LONG_AGO / 2
    marks = (exchange_revision + 1, call_revision + 1)
    assert synced_candidates(store, before, *marks) == [exchange_id]
    removed, _ = prune_synced(store, [exchange_id], *marks)
    assert removed == 1
    assert exchange_ids(store) == []
