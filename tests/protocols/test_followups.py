"""Follow-up routes of background work (SPEC §1), and the state a background object states."""

from __future__ import annotations

import json

import pytest

from llmtap.protocols import route
from llmtap.protocols.exchange import decode_exchange
from llmtap.protocols.followups import CONTINUES, FollowUpRoute, follow_up, is_terminal

RESP, INTER = "openai.responses", "gemini.interactions"


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("GET", "/v1/responses/resp_123", FollowUpRoute("poll", RESP, "resp_123")),
        ("get", "/v1/responses/resp_123/", FollowUpRoute("poll", RESP, "resp_123")),
        ("GET", "/v1/responses/resp_123?stream=true", FollowUpRoute("resume", RESP, "resp_123")),
        ("GET", "/v1/responses/resp_1?stream=true&starting_after=7", FollowUpRoute("resume", RESP, "resp_1")),
        ("GET", "/v1/responses/resp_1?starting_after=7&stream=True", FollowUpRoute("resume", RESP, "resp_1")),
        ("GET", "/v1/responses/resp_1?stream=false", FollowUpRoute("poll", RESP, "resp_1")),
        ("GET", "/v1/responses/resp_1?include[]=x", FollowUpRoute("poll", RESP, "resp_1")),
        ("POST", "/v1/responses/resp_123/cancel", FollowUpRoute("cancel", RESP, "resp_123")),
        ("GET", "/openai/v1/responses/resp_9?api-version=preview", FollowUpRoute("poll", RESP, "resp_9")),
        ("GET", "/gateway/v1/responses/resp%2Fx", FollowUpRoute("poll", RESP, "resp/x")),
        ("GET", "/v1beta/interactions/v1_abc", FollowUpRoute("poll", INTER, "v1_abc")),
        ("GET", "/v1/interactions/v1_abc", FollowUpRoute("poll", INTER, "v1_abc")),
        ("GET", "/v1alpha/interactions/v1_abc", FollowUpRoute("poll", INTER, "v1_abc")),
        ("GET", "/v1beta/interactions/v1_abc?stream=true", FollowUpRoute("resume", INTER, "v1_abc")),
        (
            "GET",
            "/v1beta/interactions/v1_abc?stream=true&last_event_id=ev_3",
            FollowUpRoute("resume", INTER, "v1_abc"),
        ),
        ("POST", "/v1beta/interactions/v1_abc/cancel", FollowUpRoute("cancel", INTER, "v1_abc")),
    ],
)
def test_follow_up_routes(method: str, path: str, expected: FollowUpRoute) -> None:
    assert follow_up(method, path) == expected
    assert route(method, path) is None  # never a generation


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/responses"),  # a generation
        ("GET", "/v1/responses"),  # WebSocket mode's upgrade
        ("POST", "/v1/responses/compact"),  # standalone compaction: a generation of its own
        ("POST", "/v1/responses/input_tokens"),  # token counting: never billed
        ("GET", "/v1/responses/compact"),
        ("POST", "/v1/responses/resp_123"),  # not a documented route
        ("GET", "/v1/responses/resp_123/cancel"),  # a cancel is a POST
        ("DELETE", "/v1/responses/resp_123"),
        ("GET", "/v1/responses/resp_123/input_items"),  # a sub-resource, not the response
        ("GET", "/v1/chat/completions/chatcmpl_1"),  # stored chat completions: not background work
        ("GET", "/v1beta/interactions"),
        ("DELETE", "/v1beta/interactions/v1_abc"),
        ("GET", "/v2/interactions/v1_abc"),
        ("GET", "/v1beta/models/gemini-2.5-flash"),
        ("GET", "/v1/responses/" + "x" * 300),  # longer than any stored id
    ],
)
def test_not_follow_ups(method: str, path: str) -> None:
    assert follow_up(method, path) is None


def test_terminal_states() -> None:
    for state in ("completed", "failed", "incomplete", "cancelled"):
        assert is_terminal(state)
    for state in ("queued", "in_progress", None, "whatever"):
        assert not is_terminal(state)


def _response(status: str, background: bool = True, **extra: object) -> bytes:
    body = {"id": "resp_1", "object": "response", "status": status, "model": "gpt-5", "output": [], **extra}
    if background:
        body["background"] = True
    return json.dumps(body).encode()


@pytest.mark.parametrize("status", ["queued", "in_progress", "completed", "cancelled"])
def test_responses_background_state_is_the_objects_status(status: str) -> None:
    ex = decode_exchange(
        RESP, response=_response(status), request={"model": "gpt-5", "input": "hi", "background": True}
    )
    assert ex.background_state == status
    assert ex.to_dict()["background_state"] == status


def test_foreground_work_has_no_background_state() -> None:
    ex = decode_exchange(RESP, response=_response("completed", background=False), request={"model": "gpt-5"})
    assert ex.background_state is None
    body = {"id": "v1_1", "status": "completed", "model": "gemini-2.5-flash"}
    ex = decode_exchange(
        INTER, response=json.dumps(body).encode(), request={"model": "gemini-2.5-flash", "input": "hi"}
    )
    assert ex.background_state is None


def test_interaction_background_state_comes_from_the_request() -> None:
    # An Interaction object does not echo `background`: the create request says it, and a
    # follow-up is decoded with CONTINUES in its place.
    body = json.dumps({"id": "v1_1", "status": "in_progress", "model": "gemini-2.5-flash"}).encode()
    create = {"model": "gemini-2.5-flash", "input": "hi", "background": True}
    assert decode_exchange(INTER, response=body, request=create).background_state == "in_progress"
    assert decode_exchange(INTER, response=body, request=CONTINUES).background_state == "in_progress"


def test_a_resumed_responses_stream_states_the_terminal_status() -> None:
    usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    final = json.loads(_response("completed", usage=usage))
    events = [
        {
            "type": "response.output_text.delta",
            "output_index": 0,
            "content_index": 0,
            "delta": "Hi",
            "sequence_number": 4,
        },
        {"type": "response.completed", "response": final, "sequence_number": 5},
    ]
    stream = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    ex = decode_exchange(
        RESP,
        response=stream,
        request=CONTINUES,
        path="/v1/responses/resp_1?stream=true",
        content_type="text/event-stream",
    )
    assert ex.background_state == "completed" and ex.complete
    assert ex.usage is not None and ex.usage.input_tokens == 10


def test_a_poll_whose_object_does_not_echo_background() -> None:
    # A server (a gateway) that leaves `background` out of the object: the poll is decoded
    # as the background work it continues all the same.
    body = _response("in_progress", background=False)
    assert decode_exchange(RESP, response=body, request=CONTINUES).background_state == "in_progress"
    assert decode_exchange(RESP, response=body, request={"model": "gpt-5"}).background_state is None
