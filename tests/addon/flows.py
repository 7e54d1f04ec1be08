"""Flows for the addon tests, built with mitmproxy's own `tflow` and `tutils`."""

from __future__ import annotations

import time

from mitmproxy import http
from mitmproxy.test import tflow, tutils

from llmtap.addon.recorder import Recorder
from llmtap.addon.tee import StreamTee

ANTHROPIC_BODY = (
    b'{"model": "claude-x", "max_tokens": 50, "stream": true, "messages": [{"role": "user", "content": "hi"}]}'
)


def request_flow(
    path: str = "/v1/messages",
    body: bytes = ANTHROPIC_BODY,
    headers: list[tuple[str, str]] | None = None,
    method: str = "POST",
    listener_port: int = 0,
) -> http.HTTPFlow:
    now = time.time()
    raw_headers = [(k.encode(), v.encode()) for k, v in (headers or [("content-type", "application/json")])]
    request = tutils.treq(
        host="api.anthropic.com",
        port=443,
        scheme=b"https",
        method=method.encode(),
        path=path.encode(),
        headers=http.Headers(raw_headers),
        content=body,
        timestamp_start=now,
        timestamp_end=now,
    )
    flow = tflow.tflow(req=request)
    flow.client_conn.sockname = ("127.0.0.1", listener_port)
    return flow


def respond(flow: http.HTTPFlow, content_type: str, encoding: str | None = None, status: int = 200) -> None:
    """The response as it stands at `responseheaders`: head only, the body still to come."""
    headers = [(b"content-type", content_type.encode())]
    if encoding:
        headers.append((b"content-encoding", encoding.encode()))
    flow.response = tutils.tresp(
        status_code=status, headers=http.Headers(headers), content=None, timestamp_start=time.time(), timestamp_end=None
    )


def start_stream(recorder: Recorder, flow: http.HTTPFlow, content_type: str, encoding: str | None = None) -> StreamTee:
    """Run the hooks up to the point where mitmproxy starts calling the tee."""
    recorder.request(flow)
    respond(flow, content_type, encoding)
    recorder.responseheaders(flow)
    assert flow.response is not None
    tee = flow.response.stream
    assert isinstance(tee, StreamTee)
    return tee
