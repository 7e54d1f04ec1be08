"""Background work through the real proxy with the official SDKs (SPEC §1): a
`background: true` Responses call and interaction are created (the upstream answers
`queued` / `in_progress`, no usage), then polled until done, or resumed as a stream. Each
is one exchange, billed once, with the usage of the final poll; the polls are never rows.

The scripted upstream answers each step by the `x-e2e-case` header the test sends with
that call, so "poll until done" meets `in_progress` first and `completed` next. Loops are
bounded; the session's proxy has a hard per-test timeout.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

import pytest

from llmtap.analytics.pricing import Pricer
from llmtap.simulator.upstream import Reply
from tests.e2e import harness
from tests.e2e.harness import Proxy, Wire

openai = pytest.importorskip("openai")
genai = pytest.importorskip("google.genai")

MAX_POLLS = 5
RESPONSES_MODEL = "gpt-4o-mini"
GEMINI_MODEL = "gemini-2.5-flash"


def _json(body: dict[str, Any], *, chunked: bool = True) -> Reply:
    """`chunked=False` sends a Content-Length: a small body the proxy leaves mitmproxy to
    hold whole, rather than teeing it (addon/recorder.py)."""
    return Reply(status=200, content_type="application/json", chunks=[json.dumps(body).encode()], chunked=chunked)


def _sse(events: list[dict[str, Any]], name_key: str) -> Reply:
    chunks = [f"event: {e[name_key]}\ndata: {json.dumps(e)}\n\n".encode() for e in events]
    return Reply(status=200, content_type="text/event-stream", chunks=chunks, delay=harness.DELAY)


def _steps(proxy: Proxy, *replies: Reply) -> list[dict[str, str]]:
    """One header set per scripted step, in order."""
    return [{harness.CASE_HEADER: proxy.routes.add(reply)} for reply in replies]


def _row(proxy: Proxy, key: str, done: Any, timeout: float = 30.0) -> dict[str, Any]:
    """The key's one exchange once `done(row)` holds (the writer applies polls in batches)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = proxy.rows(key)
        assert len(rows) <= 1, f"a poll was stored as an exchange of its own: {len(rows)} rows"
        if rows and done(rows[0]):
            proxy.assert_key_absent(key)
            return rows[0]
        if time.monotonic() > deadline:
            raise AssertionError(f"no finished record within {timeout}s: {rows}")
        time.sleep(0.05)


def _priced_once(row: dict[str, Any]) -> None:
    """Priced as the same usage on one foreground exchange would be."""
    alone = {**row, "price_status": None, "cost_total_pico": None, "price_reason": None}
    Pricer().price_rows([alone])
    assert row["price_status"] == "priced"
    assert row["cost_total_pico"] == alone["cost_total_pico"] > 0


# -- OpenAI Responses -----------------------------------------------------------------------

RESPONSE_USAGE = {
    "input_tokens": 2048,
    "input_tokens_details": {"cached_tokens": 1024},
    "output_tokens": 512,
    "output_tokens_details": {"reasoning_tokens": 128},
    "total_tokens": 2560,
}


def _response(rid: str, status: str, **extra: Any) -> dict[str, Any]:
    body = {
        "id": rid,
        "object": "response",
        "created_at": 1764576000,
        "status": status,
        "background": True,
        "model": RESPONSES_MODEL,
        "output": [],
        "usage": None,
        "error": None,
        "incomplete_details": None,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    return body | extra


def _answer(text: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "message",
            "id": "msg_bg",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
    ]


def _openai(proxy: Proxy, wire: Wire, key: str) -> Any:
    return openai.OpenAI(api_key=key, base_url=proxy.base("openai") + "/v1", http_client=wire.client(), max_retries=0)


def test_background_response_polled_until_done(proxy: Proxy, wire: Wire) -> None:
    rid = "resp_bg_poll_" + secrets.token_hex(4)
    final = _response(rid, "completed", output=_answer("The report."), usage=RESPONSE_USAGE)
    create, *polls = _steps(proxy, _json(_response(rid, "queued")), _json(_response(rid, "in_progress")), _json(final))
    key = proxy.key(harness.OPENAI_KEY)
    client = _openai(proxy, wire, key)

    made = client.responses.create(
        model=RESPONSES_MODEL, input="Write the report.", background=True, extra_headers=create
    )
    assert made.status == "queued" and made.usage is None
    queued = _row(proxy, key, lambda r: r["background_state"] == "queued")
    assert queued["usage_input_tokens"] is None and queued["price_status"] == "usage_missing"

    seen = []
    for headers in polls[:MAX_POLLS]:
        got = client.responses.retrieve(made.id, extra_headers=headers | {"X-LLMTap-Team": "research"})
        seen.append(got.status)
        if got.status in ("completed", "failed", "incomplete", "cancelled"):
            break
    assert seen == ["in_progress", "completed"] and got.output_text == "The report."

    row = _row(proxy, key, lambda r: r["background_state"] == "completed")
    assert (row["method"], row["path"], row["response_id"]) == ("POST", "/v1/responses", rid)
    assert (row["finish_reason"], row["text"], row["complete"]) == ("end_turn", "The report.", True)
    assert (
        row["usage_input_tokens"],
        row["usage_cache_read_input_tokens"],
        row["usage_output_tokens"],
        row["usage_reasoning_output_tokens"],
    ) == (2048, 1024, 512, 128)
    assert row["ended_at"] > queued["ended_at"]  # the work ended when its terminal poll said so
    _priced_once(row)
    polled = proxy.routes.done(polls[0][harness.CASE_HEADER]) + proxy.routes.done(polls[1][harness.CASE_HEADER])
    assert len(polled) == 2, polled
    for request in polled:
        assert (request.method, request.path) == ("GET", f"/v1/responses/{rid}")
        assert "x-llmtap-team" not in request.headers  # our own header never goes upstream


def test_background_response_resumed_as_a_stream(proxy: Proxy, wire: Wire) -> None:
    rid = "resp_bg_stream_" + secrets.token_hex(4)
    final = _response(rid, "completed", output=_answer("Resumed answer."), usage=RESPONSE_USAGE)
    events = [
        {"type": "response.in_progress", "response": _response(rid, "in_progress"), "sequence_number": 2},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "message", "id": "msg_bg", "status": "in_progress", "role": "assistant", "content": []},
            "sequence_number": 3,
        },
        {
            "type": "response.output_text.delta",
            "item_id": "msg_bg",
            "output_index": 0,
            "content_index": 0,
            "delta": "Resumed",
            "logprobs": [],
            "sequence_number": 4,
        },
        {
            "type": "response.output_text.delta",
            "item_id": "msg_bg",
            "output_index": 0,
            "content_index": 0,
            "delta": " answer.",
            "logprobs": [],
            "sequence_number": 5,
        },
        {"type": "response.completed", "response": final, "sequence_number": 6},
    ]
    create, resume = _steps(proxy, _json(_response(rid, "queued")), _sse(events, "type"))
    key = proxy.key(harness.OPENAI_KEY)
    client = _openai(proxy, wire, key)

    made = client.responses.create(model=RESPONSES_MODEL, input="Answer.", background=True, extra_headers=create)
    _row(proxy, key, lambda r: r["background_state"] == "queued")
    stream = client.responses.retrieve(made.id, stream=True, starting_after=1, extra_headers=resume)
    got = [event.type for event in stream]
    assert got[-1] == "response.completed" and "response.output_text.delta" in got
    (request,) = proxy.routes.done(resume[harness.CASE_HEADER])
    assert request.path.startswith(f"/v1/responses/{rid}?") and "starting_after=1" in request.path

    row = _row(proxy, key, lambda r: r["background_state"] == "completed")
    assert (row["text"], row["usage_input_tokens"], row["usage_output_tokens"]) == ("Resumed answer.", 2048, 512)
    _priced_once(row)


def test_background_response_cancelled(proxy: Proxy, wire: Wire) -> None:
    rid = "resp_bg_cancel_" + secrets.token_hex(4)
    create, cancel = _steps(proxy, _json(_response(rid, "queued")), _json(_response(rid, "cancelled")))
    key = proxy.key(harness.OPENAI_KEY)
    client = _openai(proxy, wire, key)
    made = client.responses.create(model=RESPONSES_MODEL, input="Never mind.", background=True, extra_headers=create)
    assert client.responses.cancel(made.id, extra_headers=cancel).status == "cancelled"
    row = _row(proxy, key, lambda r: r["background_state"] == "cancelled")
    assert row["usage_input_tokens"] is None and row["price_status"] == "usage_missing"


# -- Gemini Interactions ----------------------------------------------------------------------

INTERACTION_USAGE = {
    "total_tokens": 1400,
    "total_input_tokens": 900,
    "total_cached_tokens": 0,
    "total_output_tokens": 300,
    "total_tool_use_tokens": 0,
    "total_thought_tokens": 200,
}


def _interaction(iid: str, status: str, **extra: Any) -> dict[str, Any]:
    return {"id": iid, "object": "interaction", "status": status, "model": GEMINI_MODEL} | extra


def _genai(proxy: Proxy, wire: Wire, key: str) -> Any:
    options = genai.types.HttpOptions(base_url=proxy.base("gemini"), httpx_client=wire.client())
    return genai.Client(api_key=key, http_options=options)


def test_background_interaction_polled_until_done(proxy: Proxy, wire: Wire) -> None:
    iid = "v1_bgpoll" + secrets.token_hex(4)
    steps = [{"type": "model_output", "content": [{"type": "text", "text": "Deep report."}]}]
    final = _interaction(iid, "completed", usage=INTERACTION_USAGE, steps=steps)
    create, *polls = _steps(
        proxy,
        _json(_interaction(iid, "in_progress")),
        _json(_interaction(iid, "in_progress"), chunked=False),
        _json(final, chunked=False),
    )
    key = proxy.key(harness.GOOGLE_KEY)
    client = _genai(proxy, wire, key)

    made = client.interactions.create(model=GEMINI_MODEL, input="Research.", background=True, extra_headers=create)
    assert made.status == "in_progress"
    _row(proxy, key, lambda r: r["background_state"] == "in_progress")

    seen = []
    for headers in polls[:MAX_POLLS]:
        got = client.interactions.get(made.id, extra_headers=headers)
        seen.append(got.status)
        if got.status in ("completed", "failed", "incomplete", "cancelled"):
            break
    assert seen == ["in_progress", "completed"]

    row = _row(proxy, key, lambda r: r["background_state"] == "completed")
    assert (row["protocol"], row["method"], row["response_id"]) == ("gemini.interactions", "POST", iid)
    assert (row["finish_reason"], row["text"]) == ("end_turn", "Deep report.")
    assert (row["usage_input_tokens"], row["usage_output_tokens"], row["usage_reasoning_output_tokens"]) == (
        900,
        500,
        200,
    )
    _priced_once(row)


def test_background_interaction_resumed_as_a_stream(proxy: Proxy, wire: Wire) -> None:
    iid = "v1_bgstream" + secrets.token_hex(4)
    events = [
        {"event_type": "interaction.status_update", "interaction_id": iid, "status": "in_progress", "event_id": "e2"},
        {"event_type": "step.start", "index": 0, "step": {"type": "model_output"}, "event_id": "e3"},
        {
            "event_type": "step.delta",
            "index": 0,
            "delta": {"type": "text", "text": "Streamed report."},
            "event_id": "e4",
        },
        {"event_type": "step.stop", "index": 0, "event_id": "e5"},
        {
            "event_type": "interaction.completed",
            "interaction": _interaction(iid, "completed", usage=INTERACTION_USAGE),
            "event_id": "e6",
        },
    ]
    create, resume = _steps(proxy, _json(_interaction(iid, "in_progress")), _sse(events, "event_type"))
    key = proxy.key(harness.GOOGLE_KEY)
    client = _genai(proxy, wire, key)

    made = client.interactions.create(model=GEMINI_MODEL, input="Research.", background=True, extra_headers=create)
    _row(proxy, key, lambda r: r["background_state"] == "in_progress")
    stream = client.interactions.get(made.id, stream=True, last_event_id="e1", extra_headers=resume)
    got = [getattr(event, "event_type", None) for event in stream]
    assert got[-1] == "interaction.completed"

    row = _row(proxy, key, lambda r: r["background_state"] == "completed")
    assert (row["text"], row["usage_input_tokens"], row["usage_output_tokens"]) == ("Streamed report.", 900, 500)
    _priced_once(row)
