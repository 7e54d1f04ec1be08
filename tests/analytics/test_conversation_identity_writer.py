"""The conversation identity stored at write time (storage/threads.py): the session id a
request's headers carry, the thread key a Responses follow-up takes from the response it
names (in the same batch, in the store, across keys never), `llmtap import` of a HAR file,
and `llmtap reprocess`, on SQLite and (when LLMTAP_TEST_POSTGRES_URL is set) PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from llmtap.protocols import decode_exchange
from llmtap.storage import threads
from llmtap.storage.engine import make_engine
from llmtap.storage.migrate import ensure_current
from llmtap.storage.record import Recorded
from llmtap.storage.schema import exchanges
from llmtap.storage.writer import Writer
from tests.analytics import wire as w
from tests.analytics.conftest import BACKENDS, blank_database
from tests.helpers import llmtap

T0 = datetime(2026, 11, 5, 9, tzinfo=UTC)


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Engine, Path]]:
    with blank_database(request.param, tmp_path) as url:
        engine = make_engine(url)
        ensure_current(engine)
        try:
            yield url, engine, tmp_path
        finally:
            engine.dispose()


def _responses(rid: str, at: datetime, *, previous: str | None = None, key: str = "k1", session: str | None = None):
    request: dict[str, Any] = {"model": "gpt-5", "input": [{"role": "user", "content": f"go {rid}"}]}
    if previous:
        output = {"type": "function_call_output", "call_id": f"call_{previous}", "output": "ok"}
        request = {"model": "gpt-5", "previous_response_id": previous, "input": [output]}
    response = w.responses_response("gpt-5-2025-08-07", rid, input_tokens=100, cached=0, output=5, reasoning=0)
    rec = Recorded(
        exchange=decode_exchange(
            "openai.responses",
            response=json.dumps(response).encode(),
            request=json.dumps(request).encode(),
            path="/v1/responses",
            host="api.openai.com",
            status=200,
            content_type="application/json",
        ),
        started_at=at,
        ended_at=at + timedelta(seconds=2),
        team="agents",
        key_fingerprint=w.FINGERPRINTS.fingerprint(key),
        host="api.openai.com",
        path="/v1/responses",
        request_body=json.dumps(request).encode(),
        response_body=json.dumps(response).encode(),
        response_content_type="application/json",
    )
    if session:
        rec.request_headers = [("session_id", session)]
    return rec


def _write(engine: Engine, folder: Path, *batches: list[Recorded], body_mode: str = "metadata") -> None:
    """Each list one batch: the writer is flushed between them."""
    writer = Writer(engine, spool_dir=folder / "spool", body_mode=body_mode, max_delay=0.5)
    for batch in batches:
        for record in batch:
            writer.submit(record)
        assert writer.flush(30)
    assert writer.close()


def _keys(engine: Engine) -> dict[str, tuple[str | None, str | None]]:
    with engine.connect() as connection:
        found = connection.execute(
            select(exchanges.c.response_id, exchanges.c.thread_key, exchanges.c.client_session_id)
        )
        return {rid: (key, session) for rid, key, session in found}


def test_a_follow_up_takes_the_thread_of_the_response_it_names(store) -> None:
    url, engine, folder = store
    _write(
        engine,
        folder,
        [_responses("resp_root", T0)],  # stored first, with no thread key
        [_responses("resp_f1", T0 + timedelta(seconds=10), previous="resp_root")],
        # the next two in one batch: f3 names f2, which the batch holds
        [
            _responses("resp_f2", T0 + timedelta(seconds=20), previous="resp_f1"),
            _responses("resp_f3", T0 + timedelta(seconds=30), previous="resp_f2"),
        ],
        # another key naming the same response: not the same conversation
        [_responses("resp_other", T0 + timedelta(seconds=40), previous="resp_root", key="k2")],
        # a response the store never saw: its follow-ups share the chain it names
        [_responses("resp_g1", T0 + timedelta(seconds=50), previous="resp_unseen")],
        [_responses("resp_g2", T0 + timedelta(seconds=60), previous="resp_unseen")],
    )
    keys = _keys(engine)
    chain = keys["resp_root"][0]
    who = threads.scope(w.FINGERPRINTS.fingerprint("k1"), "agents")
    assert chain == threads.chain_key(who, "resp_root")
    assert chain.startswith("r") and len(chain) == threads.KEY_LENGTH
    assert [keys[r][0] for r in ("resp_f1", "resp_f2", "resp_f3")] == [chain] * 3
    assert keys["resp_other"][0] not in (None, chain)
    assert keys["resp_g1"][0] == keys["resp_g2"][0] == threads.chain_key(who, "resp_unseen")
    report = llmtap("report", "conversations", "--format", "json", "--db", url)
    assert report.code == 0, report.err
    turns = sorted(row["turns"] for row in report.json())
    assert turns == [1, 2, 4]  # root..f3; the other key's follow-up; the unseen chain's two


def test_a_session_comes_first_and_a_follow_up_without_one_joins_it(store) -> None:
    url, engine, folder = store
    _write(
        engine,
        folder,
        [
            _responses("resp_s1", T0, session="019a-ws"),
            _responses("resp_s2", T0 + timedelta(seconds=5), previous="resp_s1"),  # no header: the root's session
            # the same session id from another key: a session of its own
            _responses("resp_s3", T0 + timedelta(seconds=9), key="k2", session="019a-ws"),
        ],
    )
    keys = _keys(engine)
    session = threads.session_key(threads.scope(w.FINGERPRINTS.fingerprint("k1"), "agents"), "019a-ws")
    chained = "c" + session[1:]  # the session's response chain: the root and its follow-up
    assert keys["resp_s1"] == (chained, "019a-ws")
    assert keys["resp_s2"] == (chained, None)
    assert keys["resp_s3"][0][1:] != session[1:] and keys["resp_s3"][1] == "019a-ws"
    assert keys["resp_s3"][0][0] == "s"  # no chain: a request of its session
    report = llmtap("report", "conversations", "--format", "json", "--db", url)
    assert sorted(row["turns"] for row in report.json()) == [1, 2]


def test_a_duplicate_batch_keeps_the_keys(store) -> None:
    """The writer's second transaction (a batch some of whose rows are stored) takes the
    same keys and sets the root's again."""
    url, engine, folder = store
    root = _responses("resp_d0", T0)
    follow = _responses("resp_d1", T0 + timedelta(seconds=5), previous="resp_d0")
    _write(engine, folder, [root])
    _write(engine, folder, [root, follow])  # root again: a duplicate, rolled back and retried
    keys = _keys(engine)
    assert keys["resp_d0"][0] is not None and keys["resp_d0"][0] == keys["resp_d1"][0]


def test_import_reads_the_session_header_of_a_har_file(store) -> None:
    url, engine, folder = store
    entries = []
    for index, session in enumerate(("sess-1", "sess-2")):
        body = w.anthropic_request("claude-sonnet-4-5-20250929", [{"role": "user", "content": "same prompt"}])
        answer = w.anthropic_response("claude-sonnet-4-5-20250929", w.anthropic_usage(10, 0, 0, 5), msg_id=f"m{index}")
        entries.append(
            {
                "startedDateTime": (T0 + timedelta(minutes=index)).isoformat(),
                "time": 900,
                "request": {
                    "method": "POST",
                    "url": "https://api.anthropic.com/v1/messages",
                    "headers": [{"name": "X-Claude-Code-Session-Id", "value": session}],
                    "postData": {"mimeType": "application/json", "text": json.dumps(body)},
                },
                "response": {
                    "status": 200,
                    "headers": [{"name": "content-type", "value": "application/json"}],
                    "content": {"mimeType": "application/json", "text": json.dumps(answer)},
                },
            }
        )
    har = folder / "claude.har"
    har.write_text(json.dumps({"log": {"version": "1.2", "entries": entries}}))
    result = llmtap("import", str(har), "--db", url)
    assert result.code == 0, result.err
    assert sorted(session for _, session in _keys(engine).values()) == ["sess-1", "sess-2"]
    report = llmtap("report", "conversations", "--format", "json", "--db", url)
    assert [row["turns"] for row in report.json()] == [1, 1]  # the same prompt a minute apart, two sessions


def test_reprocess_keeps_the_identity(store) -> None:
    """Re-decoding from kept bodies: the session again from the kept headers, a follow-up's
    chain again from its previous_response_id, and a root's chain key, which its own bodies
    cannot say, kept."""
    url, engine, folder = store
    _write(
        engine,
        folder,
        [_responses("resp_r0", T0), _responses("resp_t0", T0, key="k3", session="sess-r")],
        [
            _responses("resp_r1", T0 + timedelta(seconds=5), previous="resp_r0"),
            _responses("resp_t1", T0 + timedelta(seconds=5), key="k3", previous="resp_t0", session="sess-r"),
        ],
        body_mode="full",
    )
    before = _keys(engine)
    with engine.begin() as connection:  # as a store written before these columns were
        connection.execute(exchanges.update().values(client_session_id=None))
        connection.execute(exchanges.update().where(exchanges.c.response_id != "resp_r0").values(thread_key=None))
    result = llmtap("reprocess", "--db", url)
    assert result.code == 0, result.err
    assert _keys(engine) == before
    assert before["resp_t0"][1] == "sess-r" and before["resp_r0"][0] == before["resp_r1"][0] is not None
    assert before["resp_t0"][0] == before["resp_t1"][0] and before["resp_t0"][0].startswith("c")


def _codex(rid: str, at: datetime, items: list[dict[str, Any]], previous: str | None = None) -> Recorded:
    """A Codex-shaped request (tools in an additional_tools item, developer messages)."""
    rec = _responses(rid, at)
    request: dict[str, Any] = {"model": "gpt-5", "input": items}
    if previous:
        request["previous_response_id"] = previous
    rec.request_body = json.dumps(request).encode()
    rec.exchange = decode_exchange(
        "openai.responses",
        response=rec.response_body or b"",
        request=rec.request_body,
        path="/v1/responses",
        host="api.openai.com",
        status=200,
        content_type="application/json",
    )
    return rec


def _prefixes(engine: Engine) -> dict[str, tuple[Any, ...]]:
    columns = (exchanges.c.id, exchanges.c.tools_hash, exchanges.c.system_hash, exchanges.c.request_prefix)
    with engine.connect() as connection:
        found = connection.execute(select(exchanges.c.response_id, exchanges.c.previous_exchange_id, *columns))
        return {row[0]: tuple(row[1:]) for row in found}


def test_a_follow_up_stands_on_the_prefix_of_the_response_it_names(store) -> None:
    """Its turn before it and its tools and system hashes, as the writer stores them (the
    duplicate path too: taken twice, the same values) and as `reprocess` makes them again."""
    url, engine, folder = store
    tools = {"type": "additional_tools", "tools": [{"type": "custom", "name": "exec"}]}
    developer = {"type": "message", "role": "developer", "content": "You are Codex."}
    output = {"type": "custom_tool_call_output", "call_id": "call_1", "output": "hi"}
    root = _codex("resp_p0", T0, [tools, developer, {"role": "user", "content": "go"}])
    follow = _codex("resp_p1", T0 + timedelta(seconds=5), [output], previous="resp_p0")
    again = _codex("resp_p2", T0 + timedelta(seconds=9), [developer, output], previous="resp_p1")
    _write(engine, folder, [root], [root, follow], [again], body_mode="full")
    found = _prefixes(engine)
    named, root_id, root_tools, root_system, root_prefix = found["resp_p0"]
    assert named is None and set(root_prefix) == {"own"}
    assert found["resp_p1"][:4] == (root_id, follow.id, root_tools, root_system)
    assert found["resp_p1"][4]["effective"] == root_prefix["own"]
    # a developer message more: its system is no longer the chain's, its tools still are
    assert found["resp_p2"][0] == follow.id
    assert found["resp_p2"][2] == root_tools and found["resp_p2"][3] != root_system
    with engine.begin() as connection:  # as a store written before these columns were
        connection.execute(exchanges.update().values(previous_exchange_id=None, request_prefix=None))
        connection.execute(exchanges.update().where(exchanges.c.id != root.id).values(tools_hash="x", system_hash="y"))
    result = llmtap("reprocess", "--db", url)
    assert result.code == 0, result.err
    assert _prefixes(engine) == found
