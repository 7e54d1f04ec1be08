"""The recorder's side of background work (SPEC §1): a poll, resumed stream or cancel is
teed or held like an exchange, handed to the writer as a follow-up, never counted as
`other` nor stored as a row; it finishes in another process as well as in this one."""

from __future__ import annotations

import json
import pickle
import time

import pytest
from mitmproxy import http
from mitmproxy.test import tutils

from llmtap.addon.followups import PendingFollowUp
from llmtap.addon.tee import StreamTee
from llmtap.protocols.followups import FollowUpRoute
from llmtap.storage.followups import FollowUp
from tests.addon.conftest import Rig
from tests.addon.flows import request_flow, respond

KEY = "sk-proj-UNITCANARYBACKGROUND000000000wxyz"
USAGE = {"input_tokens": 40, "output_tokens": 8, "total_tokens": 48}


def _response(status: str, **extra: object) -> bytes:
    body = {"id": "resp_unit", "object": "response", "status": status, "background": True, "model": "gpt-4o-mini"}
    return json.dumps(body | {"output": [], **extra}).encode()


def _post(rig: Rig) -> None:
    create = json.dumps({"model": "gpt-4o-mini", "input": "hi", "background": True}).encode()
    flow = request_flow("/v1/responses", body=create, headers=[("authorization", f"Bearer {KEY}")])
    rig.recorder.request(flow)
    respond(flow, "application/json")
    rig.recorder.responseheaders(flow)
    assert flow.response is not None and isinstance(flow.response.stream, StreamTee)
    flow.response.stream(_response("queued"))
    flow.response.stream(b"")
    rig.recorder.response(flow)


def _poll(rig: Rig, body: bytes, path: str = "/v1/responses/resp_unit") -> http.HTTPFlow:
    """A GET whose small answer comes with a Content-Length: mitmproxy holds it whole."""
    flow = request_flow(path, body=b"", method="GET", headers=[("authorization", f"Bearer {KEY}")])
    rig.recorder.request(flow)
    headers = http.Headers([(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())])
    flow.response = tutils.tresp(
        status_code=200, headers=headers, content=body, timestamp_start=time.time(), timestamp_end=None
    )
    rig.recorder.responseheaders(flow)
    assert flow.response.stream is False  # left to mitmproxy, as a small JSON answer is
    rig.recorder.response(flow)
    return flow


def test_a_held_poll_completes_the_exchange(rig: Rig) -> None:
    _post(rig)
    (queued,) = rig.rows()
    assert queued["background_state"] == "queued" and queued["usage_input_tokens"] is None
    _poll(rig, _response("in_progress"))
    _poll(rig, _response("completed", usage=USAGE))
    (row,) = rig.rows()
    assert (row["id"], row["background_state"], row["usage_input_tokens"]) == (queued["id"], "completed", 40)
    assert row["key_fingerprint"] == rig.fingerprint(KEY)
    assert rig.recorder.counts == {"recorded": 1, "other": 0, "interrupted": 0, "follow_ups": 2}


def test_a_poll_cut_at_shutdown_is_no_row(rig: Rig) -> None:
    _post(rig)
    flow = request_flow("/v1/responses/resp_unit?stream=true", body=b"", method="GET")
    rig.recorder.request(flow)
    respond(flow, "text/event-stream")
    rig.recorder.responseheaders(flow)
    assert flow.response is not None and isinstance(flow.response.stream, StreamTee)
    rig.recorder.done()  # the proxy stops with the resumed stream still open
    (row,) = rig.rows()
    assert row["background_state"] == "queued"


def test_a_pending_follow_up_finishes_in_another_process(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[object] = []
    monkeypatch.setattr(rig.writer, "submit", sent.append)
    _poll(rig, _response("completed", usage=USAGE))
    (pending,) = sent
    assert isinstance(pending, PendingFollowUp)
    built = pickle.loads(pickle.dumps(pending)).build()  # as the writer process gets it
    assert isinstance(built, FollowUp)
    assert built.route == FollowUpRoute("poll", "openai.responses", "resp_unit")
    assert built.state == "completed" and built.record.exchange.usage is not None
    assert built.record.key_fingerprint == rig.fingerprint(KEY)
    assert KEY not in repr(built)
