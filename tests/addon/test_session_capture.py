"""The live proxy keeps a client's session id (Claude Code's `X-Claude-Code-Session-Id`,
Codex's `session_id`) with each exchange, in every body mode and over WebSocket, and a
Codex follow-up over the socket joins the response it names (storage/threads.py)."""

from __future__ import annotations

import json

import pytest

from tests.addon.conftest import Rig
from tests.addon.flows import request_flow
from tests.addon.test_hooks import KEY, _event, _finish, _response_events, _say, _ws_flow


@pytest.mark.parametrize("rig", ["metadata", "full", "none"], indirect=True)
def test_the_session_header_is_kept_in_every_body_mode(rig: Rig) -> None:
    for session in ("0199-aaaa", "0199-bbbb", None):
        headers = [("x-api-key", KEY), ("content-type", "application/json")]
        if session:
            headers.append(("X-Claude-Code-Session-Id", session))
        _finish(rig.recorder, request_flow(headers=headers))
    rows = sorted(rig.rows(), key=lambda r: r["started_at"])
    assert [row["client_session_id"] for row in rows] == ["0199-aaaa", "0199-bbbb", None]
    keys = [row["thread_key"] for row in rows]
    assert keys[0] and keys[1] and keys[0] != keys[1] and keys[2] is None
    assert KEY not in json.dumps(rows, default=str)


@pytest.mark.parametrize("session", ["019a-codex", None])
def test_a_websocket_follow_up_with_only_tool_output_joins_its_response(rig: Rig, session: str | None) -> None:
    headers = [("Authorization", f"Bearer {KEY}")] + ([("session_id", session)] if session else [])
    flow = _ws_flow(headers)
    rig.recorder.request(flow)
    rig.recorder.websocket_start(flow)
    _say(rig.recorder, flow, _event("response.create", model="gpt-4o-mini", input="list files"), True)
    for frame in _response_events(3, "resp_ws0"):
        _say(rig.recorder, flow, frame, False)
    output = {"type": "function_call_output", "call_id": "call_1", "output": "README.md"}
    follow = _event("response.create", model="gpt-4o-mini", previous_response_id="resp_ws0", input=[output])
    _say(rig.recorder, flow, follow, True)
    for frame in _response_events(3, "resp_ws1"):
        _say(rig.recorder, flow, frame, False)
    rig.recorder.websocket_end(flow)
    rows = {row["response_id"]: row for row in rig.rows()}
    assert rows["resp_ws0"]["client_session_id"] == rows["resp_ws1"]["client_session_id"] == session
    key = rows["resp_ws0"]["thread_key"]
    # a response chain: inside the session (`c`), else of its own (`r`)
    assert key == rows["resp_ws1"]["thread_key"] and key[0] == ("c" if session else "r")
