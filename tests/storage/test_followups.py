"""Background work completed by its polls (SPEC §1), through `ingest` and the real writer
into SQLite and PostgreSQL: the POST is stored at once with its state, polls still running
only move the state, the first terminal poll (or resumed stream, or cancel) completes the
one exchange and prices it once, and nothing after changes it."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from llmtap.analytics.pricing import Pricer
from llmtap.protocols.followups import FollowUpRoute
from llmtap.storage import schema
from llmtap.storage.followups import FollowUp, apply
from llmtap.storage.ingest import HttpExchange, to_follow_up, to_record
from llmtap.storage.maintenance import load_blob, reprocess
from llmtap.storage.migrate import upgrade
from llmtap.storage.record import Recorded
from llmtap.storage.secrets import KeyFingerprinter
from llmtap.storage.writer import Writer
from tests.helpers import llmtap
from tests.storage.helpers import T0, LockInThread, wait_until

pytestmark = pytest.mark.timeout(120)

KEY = "sk-proj-FOLLOWUPTESTKEY0123456789abcdef"
OTHER_KEY = "sk-proj-ANOTHERTESTKEY0123456789abcdef"
MODEL = "gpt-4o-mini"
USAGE = {
    "input_tokens": 1200,
    "input_tokens_details": {"cached_tokens": 200},
    "output_tokens": 300,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 1500,
}
TOOLS = [{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}]


def response(
    status: str, rid: str = "resp_bg1", *, usage: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {"id": rid, "object": "response", "status": status, "background": True, "model": MODEL}
    body["output"] = extra.pop("output", [])
    body["usage"] = usage
    return body | extra


def answer(text: str) -> list[dict[str, Any]]:
    return [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}]


def http(
    method: str,
    path: str,
    body: dict[str, Any] | bytes | None,
    *,
    at: int,
    request: dict[str, Any] | None = None,
    key: str = KEY,
    status: int = 200,
    content_type: str = "application/json",
    host: str = "api.openai.com",
) -> HttpExchange:
    raw = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    return HttpExchange(
        method=method,
        host=host,
        path=path,
        request_headers=[("authorization", f"Bearer {key}")],
        request_body=json.dumps(request).encode() if request is not None else None,
        status=status,
        response_headers=[("content-type", content_type)],
        response_body=raw,
        response_encoded=False,
        started_at=T0 + timedelta(seconds=at),
        first_byte_at=T0 + timedelta(seconds=at, milliseconds=100),
        ended_at=T0 + timedelta(seconds=at, milliseconds=200),
    )


CREATE = {"model": MODEL, "input": "Research this.", "background": True, "tools": TOOLS}


@pytest.fixture
def store(db_url: str, engines: Any) -> Any:
    engine = engines(db_url)
    upgrade(engine)
    return engine


class Harness:
    def __init__(self, engine: Engine, tmp_path: Path, body_mode: str = "metadata") -> None:
        self.engine = engine
        self.fingerprinter = KeyFingerprinter.from_file(tmp_path / "fingerprint.secret")
        self.pricer = Pricer()
        self.writer = Writer(engine, spool_dir=tmp_path / "spool", body_mode=body_mode, enrich=self.pricer.price_rows)

    def submit(self, *items: HttpExchange) -> None:
        for item in items:
            record: Recorded | FollowUp | None = to_record(item, fingerprinter=self.fingerprinter)
            if record is None:
                record = to_follow_up(item, fingerprinter=self.fingerprinter)
            assert record is not None, item.path
            self.writer.submit(record)
        assert self.writer.flush(30)

    def rows(self) -> list[dict[str, Any]]:
        with self.engine.connect() as connection:
            found = connection.execute(select(schema.exchanges).order_by(schema.exchanges.c.started_at))
            return [dict(row._mapping) for row in found]

    def row(self) -> dict[str, Any]:
        (only,) = self.rows()
        return only

    def calls(self, exchange_id: str) -> list[dict[str, Any]]:
        calls = schema.tool_calls
        with self.engine.connect() as connection:
            found = connection.execute(
                select(calls).where(calls.c.exchange_id == exchange_id).order_by(calls.c.position)
            )
            return [dict(row._mapping) for row in found]

    def facts(self, exchange_id: str) -> dict[str, Any]:
        facts = schema.exchange_facts
        with self.engine.connect() as connection:
            return dict(connection.execute(select(facts).where(facts.c.id == exchange_id)).one()._mapping)

    def close(self) -> None:
        assert self.writer.close()


@pytest.fixture
def rig(store: Engine, tmp_path: Path) -> Any:
    harness = Harness(store, tmp_path)
    yield harness
    harness.close()


def foreground_cost(rig: Harness, usage: dict[str, Any]) -> int:
    """What the same answer costs when it comes back on the POST itself."""
    body = response("completed", usage=usage) | {"background": False}
    rec = to_record(
        http("POST", "/v1/responses", body, at=0, request={"model": MODEL}), fingerprinter=rig.fingerprinter
    )
    assert rec is not None
    from llmtap.storage.rows import rows_for

    row = rows_for(rec).exchanges[0]
    rig.pricer.price_rows([row])
    assert row["price_status"] == "priced"
    return int(row["cost_total_pico"])


def test_polls_complete_the_exchange_once(rig: Harness) -> None:
    rig.submit(http("POST", "/v1/responses", response("queued"), at=0, request=CREATE))
    row = rig.row()
    assert row["background_state"] == "queued"
    assert row["usage_input_tokens"] is None and row["price_status"] == "usage_missing"

    rig.submit(http("GET", "/v1/responses/resp_bg1", response("in_progress"), at=5))
    row = rig.row()
    assert row["background_state"] == "in_progress"
    assert row["usage_input_tokens"] is None and row["complete"]

    rig.submit(http("GET", "/v1/responses/resp_bg1", response("completed", usage=USAGE, output=answer("Found.")), at=9))
    row = rig.row()
    assert row["background_state"] == "completed"
    assert (row["finish_reason"], row["finish_reason_raw"], row["text"]) == ("end_turn", "completed", "Found.")
    assert (row["usage_input_tokens"], row["usage_cache_read_input_tokens"], row["usage_output_tokens"]) == (
        1200,
        200,
        300,
    )
    assert row["usage_provenance"] == "reported"
    assert row["method"] == "POST" and row["path"] == "/v1/responses" and row["status"] == 200
    assert row["duration_ms"] == pytest.approx(9200.0)  # from the POST's start to the terminal poll's end
    assert row["price_status"] == "priced"
    assert row["cost_total_pico"] == foreground_cost(rig, USAGE) > 0
    facts = rig.facts(row["id"])  # the fact triggers follow the UPDATE
    assert (facts["usage_input_tokens"], facts["cost_total_pico"]) == (1200, row["cost_total_pico"])

    # a second terminal poll (other numbers, even) changes nothing: billed once
    more = dict(USAGE, input_tokens=99_999)
    rig.submit(http("GET", "/v1/responses/resp_bg1", response("completed", usage=more, output=answer("Again.")), at=20))
    assert rig.row() == row


def test_poll_in_the_same_batch_as_its_post(rig: Harness) -> None:
    # The writer applies a batch's follow-ups after its rows: a poll submitted with (even
    # before) its POST finds it.
    post = to_record(
        http("POST", "/v1/responses", response("queued"), at=0, request=CREATE), fingerprinter=rig.fingerprinter
    )
    done = http("GET", "/v1/responses/resp_bg1", response("completed", usage=USAGE, output=answer("ok")), at=1)
    poll = to_follow_up(done, fingerprinter=rig.fingerprinter)
    assert post is not None and poll is not None
    rig.writer.submit(poll)
    rig.writer.submit(post)
    assert rig.writer.flush(30)
    row = rig.row()
    assert (row["background_state"], row["usage_input_tokens"], row["text"]) == ("completed", 1200, "ok")


def test_resumed_stream_completes_it(rig: Harness) -> None:
    rig.submit(http("POST", "/v1/responses", response("queued"), at=0, request=CREATE))
    final = response("completed", usage=USAGE, output=answer("Streamed answer."))
    events = [
        {
            "type": "response.output_text.delta",
            "output_index": 0,
            "content_index": 0,
            "delta": "Streamed",
            "sequence_number": 3,
        },
        {
            "type": "response.output_text.delta",
            "output_index": 0,
            "content_index": 0,
            "delta": " answer.",
            "sequence_number": 4,
        },
        {"type": "response.completed", "response": final, "sequence_number": 5},
    ]
    stream = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    path = "/v1/responses/resp_bg1?stream=true&starting_after=2"
    rig.submit(http("GET", path, stream, at=3, content_type="text/event-stream"))
    row = rig.row()
    assert row["background_state"] == "completed" and row["text"] == "Streamed answer."
    assert row["usage_output_tokens"] == 300 and row["price_status"] == "priced"


def test_an_older_poll_never_moves_the_state_back(rig: Harness) -> None:
    rig.submit(http("POST", "/v1/responses", response("in_progress"), at=0, request=CREATE))
    rig.submit(http("GET", "/v1/responses/resp_bg1", response("queued"), at=1))
    assert rig.row()["background_state"] == "in_progress"


def test_a_cut_resumed_stream_only_moves_the_state(rig: Harness) -> None:
    rig.submit(http("POST", "/v1/responses", response("queued"), at=0, request=CREATE))
    running = {"type": "response.in_progress", "response": response("in_progress"), "sequence_number": 1}
    stream = f"event: response.in_progress\ndata: {json.dumps(running)}\n\n".encode()
    rig.submit(http("GET", "/v1/responses/resp_bg1?stream=true", stream, at=3, content_type="text/event-stream"))
    row = rig.row()
    assert row["background_state"] == "in_progress" and row["usage_input_tokens"] is None


def test_cancel_marks_it_cancelled(rig: Harness) -> None:
    rig.submit(http("POST", "/v1/responses", response("in_progress"), at=0, request=CREATE))
    rig.submit(http("POST", "/v1/responses/resp_bg1/cancel", response("cancelled"), at=2, request={}))
    row = rig.row()
    assert row["background_state"] == "cancelled" and row["finish_reason_raw"] == "cancelled"
    assert row["usage_input_tokens"] is None and row["price_status"] == "usage_missing"  # missing, never zero
    # a poll after the cancel changes nothing
    rig.submit(http("GET", "/v1/responses/resp_bg1", response("completed", usage=USAGE), at=4))
    assert rig.row()["usage_input_tokens"] is None


def test_a_cancel_without_a_body(rig: Harness) -> None:
    rig.submit(http("POST", "/v1/responses", response("in_progress"), at=0, request=CREATE))
    rig.submit(http("POST", "/v1/responses/resp_bg1/cancel", b"", at=2, request={}))
    row = rig.row()
    assert row["background_state"] == "cancelled"
    assert row["decode_error"] is None and row["usage_input_tokens"] is None  # the POST's record otherwise


def test_a_refused_cancel_changes_nothing(rig: Harness) -> None:
    rig.submit(http("POST", "/v1/responses", response("in_progress"), at=0, request=CREATE))
    error = {"error": {"type": "invalid_request_error", "message": "Cannot cancel a completed response."}}
    rig.submit(http("POST", "/v1/responses/resp_bg1/cancel", error, at=2, status=400, request={}))
    assert rig.row()["background_state"] == "in_progress"


def test_failed_background_work(rig: Harness) -> None:
    rig.submit(http("POST", "/v1/responses", response("queued"), at=0, request=CREATE))
    failed = response("failed", error={"code": "server_error", "message": "The model failed."})
    rig.submit(http("GET", "/v1/responses/resp_bg1", failed, at=2))
    row = rig.row()
    assert (row["background_state"], row["finish_reason"], row["error_code"]) == ("failed", "error", "server_error")
    assert row["usage_input_tokens"] is None


def test_polls_of_unknown_ids_are_no_rows(rig: Harness) -> None:
    rig.submit(http("GET", "/v1/responses/resp_nobody", response("completed", "resp_nobody", usage=USAGE), at=0))
    # a foreground response fetched later is not background work: its GET changes nothing
    body = response("completed", "resp_fg", usage=USAGE) | {"background": False}
    rig.submit(http("POST", "/v1/responses", body, at=1, request={"model": MODEL, "input": "hi"}))
    before = rig.row()
    assert before["background_state"] is None
    rig.submit(
        http("GET", "/v1/responses/resp_fg", response("completed", "resp_fg", usage=dict(USAGE, input_tokens=5)), at=2)
    )
    assert rig.row() == before
    assert rig.writer.stats.written == 1 and rig.writer.stats.followups == 2


def test_tool_calls_are_checked_against_the_posts_tools(rig: Harness) -> None:
    rig.submit(http("POST", "/v1/responses", response("queued"), at=0, request=CREATE))
    output = [
        {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": "{}"},
        {"type": "function_call", "call_id": "call_2", "name": "launch", "arguments": "{}"},
    ]
    rig.submit(http("GET", "/v1/responses/resp_bg1", response("completed", usage=USAGE, output=output), at=2))
    row = rig.row()
    assert row["finish_reason"] == "tool_use" and row["tool_call_count"] == 2
    calls = rig.calls(row["id"])
    assert [(c["call_id"], c["name"], c["status"]) for c in calls] == [
        ("call_1", "lookup", "valid"),
        ("call_2", "launch", "unknown_tool"),
    ]


def test_the_same_key_first(rig: Harness) -> None:
    # a gateway that hands out the same id twice: the poll completes its own key's exchange
    rig.submit(http("POST", "/v1/responses", response("queued"), at=0, request=CREATE, key=OTHER_KEY))
    rig.submit(http("POST", "/v1/responses", response("queued"), at=1, request=CREATE))
    rig.submit(http("GET", "/v1/responses/resp_bg1", response("completed", usage=USAGE), at=2, key=OTHER_KEY))
    first, second = rig.rows()
    assert first["usage_input_tokens"] == 1200 and first["background_state"] == "completed"
    assert second["usage_input_tokens"] is None and second["background_state"] == "queued"


def test_background_interaction(rig: Harness) -> None:
    create = {"model": "gemini-2.5-flash", "input": "Research this.", "background": True}
    running = {"id": "v1_int1", "status": "in_progress", "model": "gemini-2.5-flash"}
    host = "generativelanguage.googleapis.com"
    rig.submit(http("POST", "/v1beta/interactions", running, at=0, request=create, host=host))
    row = rig.row()
    assert (row["protocol"], row["background_state"], row["usage_input_tokens"]) == (
        "gemini.interactions",
        "in_progress",
        None,
    )
    usage = {"total_input_tokens": 800, "total_output_tokens": 150, "total_thought_tokens": 50, "total_tokens": 1000}
    done = running | {"status": "completed", "usage": usage, "outputs": [{"type": "text", "text": "Report."}]}
    rig.submit(http("GET", "/v1beta/interactions/v1_int1", done, at=30, host=host))
    row = rig.row()
    assert (row["background_state"], row["finish_reason"], row["text"]) == ("completed", "end_turn", "Report.")
    assert (row["usage_input_tokens"], row["usage_output_tokens"], row["usage_reasoning_output_tokens"]) == (
        800,
        200,
        50,
    )
    assert row["price_status"] == "priced" and row["cost_total_pico"] > 0


def test_full_body_mode_keeps_the_completing_body(store: Engine, tmp_path: Path) -> None:
    rig = Harness(store, tmp_path, body_mode="full")
    try:
        rig.submit(http("POST", "/v1/responses", response("queued"), at=0, request=CREATE))
        queued_ref = rig.row()["response_body_ref"]
        rig.submit(http("GET", "/v1/responses/resp_bg1", response("completed", usage=USAGE, output=answer("x")), at=2))
        row = rig.row()
        assert row["response_body_ref"] not in (None, queued_ref)
        refs = schema.body_refs.c
        with store.connect() as connection:
            used = connection.execute(select(refs.body_hash).where(refs.exchange_id == row["id"])).scalars().all()
            assert {queued_ref, row["response_body_ref"]} <= set(used)  # both answers stay the exchange's
            kept = json.loads(load_blob(connection, row["response_body_ref"]))
        assert kept["status"] == "completed" and kept["usage"]["input_tokens"] == 1200
    finally:
        rig.close()


@pytest.mark.parametrize("resumed", [False, True], ids=["poll", "resumed"])
def test_reprocess_keeps_what_completed_it(store: Engine, tmp_path: Path, resumed: bool) -> None:
    rig = Harness(store, tmp_path, body_mode="full")
    try:
        rig.submit(http("POST", "/v1/responses", response("queued"), at=0, request=CREATE))
        final = response("completed", usage=USAGE, output=answer("Kept."))
        if resumed:
            event = {"type": "response.completed", "response": final, "sequence_number": 9}
            body = f"event: response.completed\ndata: {json.dumps(event)}\n\n".encode()
            done = http("GET", "/v1/responses/resp_bg1?stream=true", body, at=2, content_type="text/event-stream")
        else:
            done = http("GET", "/v1/responses/resp_bg1", final, at=2)
        rig.submit(done)
        before = rig.row()
        assert before["usage_input_tokens"] == 1200
        reprocess(store)
        after = rig.row()
        for name in ("usage_input_tokens", "usage_output_tokens", "text", "background_state", "finish_reason"):
            assert after[name] == before[name], name
        assert after["decode_error"] is None
    finally:
        rig.close()


def test_apply_counts_outcomes(store: Engine, tmp_path: Path) -> None:
    rig = Harness(store, tmp_path)
    try:
        rig.submit(http("POST", "/v1/responses", response("queued"), at=0, request=CREATE))
        polls = [
            to_follow_up(
                http("GET", "/v1/responses/resp_bg1", response("in_progress"), at=1), fingerprinter=rig.fingerprinter
            ),
            to_follow_up(
                http("GET", "/v1/responses/resp_bg1", response("in_progress"), at=2), fingerprinter=rig.fingerprinter
            ),
            to_follow_up(
                http("GET", "/v1/responses/resp_bg1", b"<html>busy</html>", at=3, status=503),
                fingerprinter=rig.fingerprinter,
            ),
            to_follow_up(
                http("GET", "/v1/responses/resp_x", response("completed", "resp_x"), at=4),
                fingerprinter=rig.fingerprinter,
            ),
            to_follow_up(
                http("GET", "/v1/responses/resp_bg1", response("completed", usage=USAGE), at=5),
                fingerprinter=rig.fingerprinter,
            ),
            to_follow_up(
                http("GET", "/v1/responses/resp_bg1", response("completed", usage=USAGE), at=6),
                fingerprinter=rig.fingerprinter,
            ),
        ]
        assert all(isinstance(p, FollowUp) for p in polls)
        outcomes = apply(store, [p for p in polls if p is not None], rig.pricer.price_rows)
        assert outcomes == {"updated": 1, "unchanged": 2, "ignored": 1, "unmatched": 1, "completed": 1}
        assert polls[0] is not None and polls[0].route == FollowUpRoute("poll", "openai.responses", "resp_bg1")
    finally:
        rig.close()


def _entry(exchange: HttpExchange) -> dict[str, Any]:
    """One HAR entry of an exchange built by `http`."""
    request: dict[str, Any] = {
        "method": exchange.method,
        "url": f"https://{exchange.host}{exchange.path}",
        "headers": [{"name": k, "value": v} for k, v in exchange.request_headers],
    }
    if exchange.request_body is not None:
        request["postData"] = {"mimeType": "application/json", "text": exchange.request_body.decode()}
    assert exchange.response_body is not None and exchange.ended_at is not None
    return {
        "startedDateTime": exchange.started_at.isoformat(),
        "time": (exchange.ended_at - exchange.started_at).total_seconds() * 1000,
        "request": request,
        "response": {
            "status": exchange.status,
            "headers": [{"name": k, "value": v} for k, v in exchange.response_headers],
            "content": {"mimeType": "application/json", "text": exchange.response_body.decode()},
        },
    }


def test_import_a_har_twice(db_url: str, engines: Any, tmp_path: Path) -> None:
    entries = [
        http("POST", "/v1/responses", response("queued"), at=0, request=CREATE),
        http("GET", "/v1/responses/resp_bg1", response("in_progress"), at=3),
        http("GET", "/v1/responses/resp_bg1", response("completed", usage=USAGE, output=answer("Done.")), at=6),
        http("GET", "/v1/responses/resp_elsewhere", response("completed", "resp_elsewhere", usage=USAGE), at=7),
    ]
    har = tmp_path / "background.har"
    har.write_text(json.dumps({"log": {"version": "1.2", "entries": [_entry(e) for e in entries]}}))
    home = {"LLMTAP_HOME": str(tmp_path / "home")}
    first = llmtap("import", str(har), "--db", db_url, env=home, process=True)
    assert first.code == 0, first.err
    assert "imported 1 LLM exchanges" in first.out and "3 polls of background work" in first.out
    engine = engines(db_url)
    with engine.connect() as connection:
        (row,) = [dict(r._mapping) for r in connection.execute(select(schema.exchanges))]
    assert (row["background_state"], row["usage_input_tokens"], row["text"]) == ("completed", 1200, "Done.")
    assert row["price_status"] == "priced" and row["cost_total_pico"] > 0
    again = llmtap("import", str(har), "--db", db_url, env=home, process=True)
    assert again.code == 0 and "(1 already stored)" in again.out
    with engine.connect() as connection:
        assert [dict(r._mapping) for r in connection.execute(select(schema.exchanges))] == [row]


def test_a_poll_waits_while_the_store_is_locked(tmp_path: Path, engines: Any) -> None:
    url = f"sqlite:///{tmp_path / 'locked.db'}"
    upgrade(engines(url))
    engine = engines(url, busy_timeout_ms=50)
    fingerprinter = KeyFingerprinter.from_file(tmp_path / "fingerprint.secret")
    writer = Writer(engine, spool_dir=tmp_path / "spool", retry_initial=0.1, retry_max=0.2)
    try:
        post = to_record(
            http("POST", "/v1/responses", response("queued"), at=0, request=CREATE), fingerprinter=fingerprinter
        )
        writer.submit(post)
        assert writer.flush(10)
        lock = LockInThread(url, hold=1.0)
        lock.start()
        done = http("GET", "/v1/responses/resp_bg1", response("completed", usage=USAGE), at=2)
        writer.submit(to_follow_up(done, fingerprinter=fingerprinter))
        assert writer.flush(10)  # settled while it waits in memory
        assert writer.stats.db_errors >= 1, "the lock never stopped the poll"
        assert lock.released.wait(10)

        def completed() -> bool:
            with engine.connect() as connection:
                return connection.execute(select(schema.exchanges.c.usage_input_tokens)).scalar_one() == 1200

        assert wait_until(completed, timeout=10)
    finally:
        assert writer.close()


def test_latency_leaves_background_work_out(rig: Harness) -> None:
    """A background exchange's total runs to the poll that found it done (client polling,
    not the model): the latency report leaves it out; usage and cost count it."""
    from llmtap.analytics import reports

    rig.submit(http("POST", "/v1/responses", response("queued"), at=0, request=CREATE))
    rig.submit(http("GET", "/v1/responses/resp_bg1", response("completed", usage=USAGE, output=answer("Found.")), at=9))
    assert rig.facts(rig.row()["id"])["background_state"] == "completed"
    url = rig.engine.url.render_as_string(hide_password=False)
    assert reports.run(url, "latency").rows == []
    [usage] = reports.run(url, "usage").rows
    assert (usage["requests"], usage["input_tokens"]) == (1, 1200)
