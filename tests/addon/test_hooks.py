"""The recorder's hooks: our headers never go upstream, teams are attributed first match
wins, API keys become fingerprints, and WebSocket message lists stay bounded."""

from __future__ import annotations

import base64
import json

import pytest
from mitmproxy import http, websocket
from mitmproxy.test import tflow
from wsproto.frame_protocol import Opcode

from llmtap.addon import websocket as ws_module
from llmtap.addon.recorder import Recorder
from tests.addon.conftest import LISTENER_PORT, Rig
from tests.addon.flows import request_flow, respond, start_stream

KEY = "sk-ant-api03-UNITCANARY0000000000000000wxyz"


def _basic(user: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:secret".encode()).decode()


def _finish(recorder: Recorder, flow: http.HTTPFlow) -> None:
    tee = start_stream(recorder, flow, "application/json")
    tee(b'{"id":"%s","type":"message","model":"claude-x","content":[],"stop_reason":"end_turn"}' % flow.id.encode())
    tee(b"")


@pytest.mark.parametrize(
    ("path", "method"),
    [("/v1/messages", "POST"), ("/v1/messages/count_tokens", "POST"), ("/v1/models", "GET"), ("/v1/responses", "GET")],
)
def test_our_headers_are_removed_before_forwarding(rig: Rig, path: str, method: str) -> None:
    flow = request_flow(
        path,
        method=method,
        headers=[("X-LLMTap-Team", "t"), ("Proxy-Authorization", _basic("u")), ("x-api-key", KEY), ("accept", "*/*")],
    )
    rig.recorder.request(flow)
    assert "x-llmtap-team" not in flow.request.headers
    assert "proxy-authorization" not in flow.request.headers
    assert flow.request.headers["x-api-key"] == KEY  # the provider still needs it
    assert flow.request.headers["accept"] == "*/*"


def test_team_first_match_wins(rig: Rig) -> None:
    cases = [
        ([("Proxy-Authorization", _basic("proxy-user")), ("X-LLMTap-Team", "header")], LISTENER_PORT, "proxy-user"),
        ([("X-LLMTap-Team", "header")], LISTENER_PORT, "header"),
        ([], LISTENER_PORT, "listener-team"),
        ([], 1, "unattributed"),
    ]
    ids = []
    for headers, port, _ in cases:
        flow = request_flow(headers=[*headers, ("x-api-key", KEY)], listener_port=port)
        _finish(rig.recorder, flow)
        ids.append(flow.id)
    rows = rig.rows()
    teams = {row["response_id"]: row["team"] for row in rows}
    assert [teams[i] for i in ids] == [team for _, _, team in cases]
    assert {row["key_fingerprint"] for row in rows} == {rig.fingerprint(KEY)}
    assert {row["key_last4"] for row in rows} == {"wxyz"}
    assert KEY not in json.dumps(rows, default=str)


def test_https_team_comes_from_the_connect_request(rig: Rig) -> None:
    connect = tflow.tflow(req=tflow.treq(method=b"CONNECT", path=b"", host="api.anthropic.com", port=443))
    connect.request.headers["Proxy-Authorization"] = _basic("tunnel-team")
    rig.recorder.http_connect(connect)
    assert "proxy-authorization" not in connect.request.headers

    inner = request_flow(headers=[("x-api-key", KEY)])
    inner.client_conn = connect.client_conn  # the same client connection, inside the tunnel
    _finish(rig.recorder, inner)
    (row,) = rig.rows()
    assert row["team"] == "tunnel-team"

    rig.recorder.client_disconnected(connect.client_conn)
    assert rig.recorder.attribution._connect_users == {}


def test_non_llm_traffic_is_counted_not_recorded(rig: Rig) -> None:
    for path, method in (("/v1/models", "GET"), ("/v1/messages/count_tokens", "POST"), ("/v1/messages", "GET")):
        flow = request_flow(path, method=method)
        rig.recorder.request(flow)
        respond(flow, "application/json")
        rig.recorder.responseheaders(flow)
        assert flow.response is not None and flow.response.stream is False  # left to mitmproxy
        rig.recorder.response(flow)
    assert rig.rows() == []
    assert rig.recorder.counts["other"] == 3


def test_same_path_other_api_body_is_not_recorded(rig: Rig) -> None:
    flow = request_flow(body=b'{"batch": [1, 2, 3]}')
    _finish(rig.recorder, flow)
    assert rig.rows() == []
    assert rig.writer.stats.skipped == 1


# -- WebSocket mode --------------------------------------------------------------------


def _ws_flow(headers: list[tuple[str, str]]) -> http.HTTPFlow:
    flow = tflow.twebsocketflow(messages=False)
    flow.request.path = "/v1/responses"
    for name, value in headers:
        flow.request.headers[name] = value
    flow.websocket = websocket.WebSocketData()
    return flow


def _event(kind: str, **fields: object) -> bytes:
    return json.dumps({"type": kind, **fields}).encode()


def _response_events(n_deltas: int, response_id: str) -> list[bytes]:
    completed = {
        "id": response_id, "object": "response", "model": "gpt-4o-mini", "status": "completed",
        "output": [{"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": "x" * n_deltas}]}],
        "usage": {"input_tokens": 9, "output_tokens": n_deltas, "total_tokens": 9 + n_deltas},
    }  # fmt: skip
    return [
        _event("response.created", response={"id": response_id, "model": "gpt-4o-mini", "status": "in_progress"}),
        *(_event("response.output_text.delta", delta="x", output_index=0, content_index=0) for _ in range(n_deltas)),
        _event("response.completed", response=completed),
    ]


def _say(recorder: Recorder, flow: http.HTTPFlow, content: bytes, from_client: bool) -> None:
    assert flow.websocket is not None
    flow.websocket.messages.append(websocket.WebSocketMessage(Opcode.TEXT, from_client, content))
    recorder.websocket_message(flow)
    assert len(flow.websocket.messages) <= ws_module.KEEP_MESSAGES


def test_websocket_messages_stay_bounded_and_each_response_is_recorded(rig: Rig) -> None:
    flow = _ws_flow([("Authorization", f"Bearer {KEY}"), ("X-LLMTap-Team", "socket-team")])
    rig.recorder.request(flow)  # the upgrade request: attribution is read here, headers stripped
    assert "x-llmtap-team" not in flow.request.headers
    rig.recorder.websocket_start(flow)
    for number in range(2):
        _say(rig.recorder, flow, _event("response.create", model="gpt-4o-mini", input="hi"), True)
        for frame in _response_events(300, f"resp_{number}"):
            _say(rig.recorder, flow, frame, False)
    _say(rig.recorder, flow, b"\x00 not json", False)  # junk between responses: ignored
    rig.recorder.websocket_end(flow)

    rows = rig.rows()
    assert [row["response_id"] for row in rows] == ["resp_0", "resp_1"]
    for row in rows:
        assert (row["source"], row["method"], row["team"], row["complete"]) == ("websocket", "WS", "socket-team", True)
        assert row["text"] == "x" * 300 and row["usage_output_tokens"] == 300
        assert row["key_fingerprint"] == rig.fingerprint(KEY)


def test_websocket_closed_mid_response_is_partial(rig: Rig) -> None:
    flow = _ws_flow([("Authorization", f"Bearer {KEY}")])
    flow.client_conn.sockname = ("127.0.0.1", LISTENER_PORT)
    rig.recorder.request(flow)
    rig.recorder.websocket_start(flow)
    _say(rig.recorder, flow, _event("response.create", model="gpt-4o-mini", input="hi"), True)
    for frame in _response_events(5, "resp_cut")[:3]:
        _say(rig.recorder, flow, frame, False)
    rig.recorder.websocket_end(flow)
    (row,) = rig.rows()
    assert row["complete"] is False and row["interrupted"] and row["team"] == "listener-team"
