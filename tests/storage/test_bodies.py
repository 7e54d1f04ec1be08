"""Content-addressed bodies (body mode `full`): a conversation's repeated prefix is stored
once, and every request is rebuilt from its manifest as the JSON that was sent."""

from __future__ import annotations

import json
from datetime import timedelta

from sqlalchemy import select

from llmtap.storage import bodies as blobs
from llmtap.storage import schema
from llmtap.storage.maintenance import load_blob
from llmtap.storage.writer import Writer
from tests.storage.helpers import T0, count, make_record

SYSTEM = "You are a terse assistant. " * 20
TOOLS = [{"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]


def conversation(turns: int) -> list[dict]:
    """The request bodies of an agent run: each repeats every earlier message."""
    requests, messages = [], []
    for turn in range(turns):
        messages.append({"role": "user", "content": [{"type": "text", "text": f"question {turn}: é ✓ {'x' * turn}"}]})
        requests.append(
            {"model": "claude-test", "max_tokens": 512, "system": SYSTEM, "tools": TOOLS, "messages": list(messages)}
        )
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"answer {turn}"}]})
    return requests


def test_a_conversation_stores_each_message_once_and_rebuilds_every_request(store, spool_dir):
    requests = conversation(5)
    writer = Writer(store, spool_dir=spool_dir, body_mode="full", max_delay=0.01)
    seen_after: list[int] = []
    ids = []
    try:
        for turn, body in enumerate(requests):
            record = make_record(turn, started_at=T0 + timedelta(minutes=turn))
            record.request_body = json.dumps(body, indent=1).encode()  # spacing differs from canonical
            record.response_body = json.dumps({"id": f"msg_{turn}", "content": [{"text": f"answer {turn}"}]}).encode()
            record.request_headers = [("content-type", "application/json"), ("x-api-key", "[REDACTED]")]
            writer.submit(record)
            assert writer.flush(timeout=10)
            ids.append(record.id)
            seen_after.append(count(store, schema.bodies))
    finally:
        assert writer.close()

    with store.connect() as connection:
        rows = {
            row.id: row
            for row in connection.execute(
                select(schema.exchanges.c.id, schema.exchanges.c.request_body_ref, schema.exchanges.c.response_body_ref)
            )
        }
        message_blobs: list[set[str]] = []
        for turn, exchange_id in enumerate(ids):
            manifest = load_blob(connection, rows[exchange_id].request_body_ref)
            rebuilt, headers = blobs.join_request(manifest, lambda h: load_blob(connection, h))
            assert json.loads(rebuilt) == requests[turn]
            assert ("x-api-key", "[REDACTED]") in headers
            message_blobs.append(set(json.loads(manifest)["body"]["messages"]["$blobs"]))
            refs = set(
                connection.execute(
                    select(schema.body_refs.c.body_hash).where(schema.body_refs.c.exchange_id == exchange_id)
                ).scalars()
            )
            assert rows[exchange_id].request_body_ref in refs and rows[exchange_id].response_body_ref in refs
            assert message_blobs[-1] <= refs

    # turn k sends 2k+1 messages: the 2k of turn k-1 plus one answer and one question
    for turn in range(1, 5):
        assert message_blobs[turn - 1] < message_blobs[turn]
        assert len(message_blobs[turn] - message_blobs[turn - 1]) == 2
    # blobs: system + tools once, then per turn a manifest, a response and the new messages
    new_messages = [1, 2, 2, 2, 2]
    expected, total = [], 2
    for turn in range(5):
        total += 1 + 1 + new_messages[turn]
        expected.append(total)
    assert seen_after == expected
    assert count(store, schema.bodies) == 2 + 5 * 2 + 9


def test_blobs_are_compressed_and_named_by_their_content(store, spool_dir):
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "y" * 5000}]}).encode()
    writer = Writer(store, spool_dir=spool_dir, body_mode="full", max_delay=0.01)
    record = make_record(1)
    record.request_body = body
    writer.submit(record)
    assert writer.close()
    with store.connect() as connection:
        rows = connection.execute(select(schema.bodies)).all()
        assert any(row.size > 1000 for row in rows), [row.size for row in rows]
        for row in rows:
            data = blobs.decompress(row.data, row.encoding)
            assert len(data) == row.size
            assert blobs.blob(data).hash == row.hash
            if row.size > 1000:
                assert len(row.data) < row.size / 10
