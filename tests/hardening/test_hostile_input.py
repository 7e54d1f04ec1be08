"""Hostile and broken input through the real proxy: each gives a clear decode error on the
record (or a clean refusal), the client still gets every byte the upstream sent, the proxy
keeps serving, and its memory stays bounded."""

from __future__ import annotations

import json
import socket
import time
import zlib
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from llmtap.simulator.upstream import Reply, Seen, Upstream
from llmtap.workloads.proxy import Proxy

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
RSS_BOUND_MB = 600  # the proxy's peak resident memory across this whole module


def _chat_chunk(i: int) -> bytes:
    chunk = {"id": "c1", "model": "gpt-4o-mini", "choices": [{"index": 0, "delta": {"content": f"w{i} "}}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def _bomb() -> list[bytes]:
    """~1 GB of zeros as gzip, streamed: a small body that expands enormously."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    first = compressor.compress(b"\0" * (1 << 20)) + compressor.flush(zlib.Z_FULL_FLUSH)  # with the gzip header
    block = compressor.compress(b"\0" * (1 << 20)) + compressor.flush(zlib.Z_FULL_FLUSH)  # each next MB: same bytes
    return [first] + [block] * 1023 + [compressor.flush()]


def _big_stream(megabytes: int) -> list[bytes]:
    event = _chat_chunk(7) * 200  # ~20 KB per chunk
    return [event] * (megabytes * 1024 * 1024 // len(event))


def _many_tool_calls(count: int) -> bytes:
    calls = [
        {"id": f"call_{i}", "type": "function", "function": {"name": "t", "arguments": "{}"}} for i in range(count)
    ]
    return json.dumps(
        {
            "id": "x",
            "model": "gpt-4o-mini",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": None, "tool_calls": calls},
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 9000},
        }
    ).encode()


CASES = {
    # marker in the request -> (reply, what the record must say)
    "invalid-json": (Reply(chunks=[b'{"id": "x", "choices": [ oops'], chunked=False), "invalid JSON"),
    "invalid-utf8": (
        Reply(content_type="text/event-stream", chunks=[b'data: {"a": "\xff\xfe"}\n\n', b"data: [DONE]\n\n"]),
        None,
    ),
    "truncated": (Reply(content_type="text/event-stream", chunks=[_chat_chunk(1), b'data: {"id": "c1", "choi']), "cut"),
    "interleaved": (
        Reply(
            content_type="text/event-stream",
            chunks=[_chat_chunk(1), b'data: {"type":"message_st', _chat_chunk(2), b'art"}\n\n', b"data: [DONE]\n\n"],
        ),
        "invalid JSON",
    ),
    "unknown-events": (
        Reply(
            content_type="text/event-stream",
            chunks=[b'event: mystery\ndata: {"x": 1}\n\n', _chat_chunk(1), b": comment\n\n", b"data: [DONE]\n\n"],
        ),
        None,
    ),
    "bomb": (
        Reply(content_type="text/event-stream", encoding=None, headers=[("content-encoding", "gzip")], chunks=_bomb()),
        "compression bomb",
    ),
    "nested": (
        Reply(chunks=[b'{"id": "x", "usage": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"], chunked=False),
        "nested too deeply",
    ),
    "tools": (Reply(chunks=[_many_tool_calls(10_000)], chunked=False), None),
    "big": (Reply(content_type="text/event-stream", chunks=_big_stream(200)), None),
}


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("hostile")
    sent: dict[str, bytes] = {}

    def router(seen: Seen) -> Reply:
        marker = json.loads(seen.body).get("user", "")
        if marker in CASES:
            return CASES[marker][0]
        return Reply(
            chunks=[
                json.dumps(
                    {
                        "id": "ok",
                        "model": "gpt-4o-mini",
                        "choices": [
                            {"index": 0, "message": {"role": "assistant", "content": "fine"}, "finish_reason": "stop"}
                        ],
                    }
                ).encode()
            ],
            chunked=False,
        )

    with Upstream(router) as upstream:
        url = f"sqlite:///{folder / 'store.db'}"
        running = Proxy(folder, url, upstream.url)
        yield running, url, sent
        status = running.stop()
        assert status == 0


def _post(port: int, marker: str, team: str = "") -> bytes:
    body = json.dumps({"model": "gpt-4o-mini", "user": marker, "messages": [{"role": "user", "content": "hi"}]})
    team_header = f"x-llmtap-team: {team}\r\n" if team else ""
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        sock.sendall(
            (
                f"POST {CHAT} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n{team_header}"
                f"content-length: {len(body)}\r\nconnection: close\r\n\r\n{body}"
            ).encode()
        )
        chunks = []
        while data := sock.recv(1 << 20):
            chunks.append(data)
    return b"".join(chunks)


def _body_of(raw: bytes) -> bytes:
    head, _, rest = raw.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" not in head.lower():
        return rest
    out, view = [], memoryview(rest)
    while True:
        line_end = bytes(view[:20]).find(b"\r\n")
        size = int(bytes(view[:line_end]).split(b";")[0], 16)
        if size == 0:
            return b"".join(out)
        out.append(bytes(view[line_end + 2 : line_end + 2 + size]))
        view = view[line_end + 4 + size :]


@pytest.mark.parametrize("marker", list(CASES))
def test_hostile_response_is_recorded_and_passed_through(proxy, marker):
    running, url, _ = proxy
    raw = _post(running.ports["openai"], marker)
    reply, expected = CASES[marker]
    assert raw.startswith(b"HTTP/1.1 200"), raw[:200]
    assert _body_of(raw) == b"".join(reply.chunks)  # every byte, unchanged
    # the proxy keeps serving
    assert b'"fine"' in _post(running.ports["openai"], "normal")


def test_records_say_what_went_wrong(proxy):
    running, url, _ = proxy
    engine = create_engine(url)
    with engine.connect() as connection:
        rows = (
            connection.execute(
                text(
                    "SELECT decode_error, complete, interrupted, tool_call_count, text_truncated FROM exchanges "
                    "ORDER BY started_at"
                )
            )
            .mappings()
            .all()
        )
    engine.dispose()
    errors = " | ".join(r["decode_error"] or "" for r in rows)
    # the bomb is stopped by whichever bound it reaches first: decoded size or one SSE event
    for phrase in ("invalid JSON", "exceeds", "nested too deeply"):
        assert phrase in errors
    assert any(r["tool_call_count"] == 10_000 for r in rows)
    assert any(r["interrupted"] == "stream ended inside an event" for r in rows)


def test_memory_stays_bounded(proxy):
    running, _, _ = proxy
    for line in Path(f"/proc/{running.process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            peak_mb = int(line.split()[1]) / 1024
            assert peak_mb < RSS_BOUND_MB, f"peak RSS {peak_mb:.0f} MB"
            return
    pytest.skip("no /proc on this system")


def test_header_injection_is_refused_cleanly(proxy):
    running, url, _ = proxy
    with socket.create_connection(("127.0.0.1", running.ports["openai"]), timeout=30) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nx-llmtap-team: a\rX-Evil: 1\r\n"
            b"content-length: 2\r\n\r\n{}"
        )
        reply = sock.recv(4096)
    # mitmproxy may refuse the request or pass it on; either way no control character
    # reaches a stored team name, and the proxy keeps serving.
    assert reply.startswith((b"HTTP/1.1 200", b"HTTP/1.1 4")) or reply == b""
    assert b'"fine"' in _post(running.ports["openai"], "normal", team="after-injection")
    teams = _teams_once_stored(url, "after-injection")
    assert "after-injection" in teams and all(team.isprintable() for team in teams), teams


def _teams_once_stored(url: str, last: str, timeout: float = 30) -> list[str]:
    """The stored teams once team `last`'s record is stored: the proxy writes its records
    in the order their responses end, so any record before it is stored too."""
    engine = create_engine(url)
    deadline = time.monotonic() + timeout
    try:
        while True:
            with engine.connect() as connection:
                teams = list(connection.execute(text("SELECT DISTINCT team FROM exchanges")).scalars())
            if last in teams or time.monotonic() > deadline:
                return teams
            time.sleep(0.1)
    finally:
        engine.dispose()
