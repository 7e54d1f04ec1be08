"""`report errors` counts an error that came without its status (an event in the middle of a
200 stream) as the status its type or code stands for (protocols/error_kinds.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.analytics import wire as w
from tests.analytics.conftest import blank_database, by_key, fill, report

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
SONNET = "claude-sonnet-4-5"


def anthropic_stream_error(kind: str) -> bytes:
    start = {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant"}}
    return w.sse([("message_start", start), ("error", w.anthropic_error(kind, "…"))])


def responses_failed(code: str) -> bytes:
    failed = {
        "id": "resp_1",
        "status": "failed",
        "model": "gpt-5",
        "output": [],
        "error": {"code": code, "message": "…"},
    }
    return w.sse([("response.failed", {"type": "response.failed", "response": failed})])


def gemini_stream_error(status: str) -> bytes:
    return w.sse([(None, {"error": {"code": 503, "status": status, "message": "…"}})])


def test_mid_stream_errors_count_as_their_kind(tmp_path: Path) -> None:
    request = w.anthropic_request(SONNET, [{"role": "user", "content": "go"}], cache=None, stream=True)
    exchanges = [
        ("rate", w.ANTHROPIC, request, anthropic_stream_error("rate_limit_error")),
        ("busy", w.ANTHROPIC, request, anthropic_stream_error("overloaded_error")),
        ("server", w.ANTHROPIC, request, anthropic_stream_error("api_error")),
        ("refused", w.ANTHROPIC, request, anthropic_stream_error("invalid_request_error")),
        (
            "rate",
            w.RESPONSES,
            {"model": "gpt-5", "input": "go", "stream": True},
            responses_failed("rate_limit_exceeded"),
        ),
        ("server", w.RESPONSES, {"model": "gpt-5", "input": "go", "stream": True}, responses_failed("server_error")),
        ("busy", w.gemini("gemini-2.5-pro", stream=True), {"contents": []}, gemini_stream_error("UNAVAILABLE")),
    ]
    records = [
        w.record(where, body, response, at=START + timedelta(seconds=i), team=team)
        for i, (team, where, body, response) in enumerate(exchanges)
    ]
    with blank_database("sqlite", tmp_path) as url:
        fill(url, records, tmp_path / "spool")
        rows = by_key(report(url, "errors", "--by", "team"), "team")
    counts = {team: (r["errors"], r["rate_limited"], r["server_errors"], r["overloaded"]) for team, r in rows.items()}
    assert counts == {
        "rate": (2, 2, 0, 0),
        "busy": (2, 0, 2, 2),  # overloaded is a server error, as a 529 or a 503 is
        "server": (2, 0, 2, 0),
        "refused": (1, 0, 0, 0),  # the client's own mistake: an error, of none of these kinds
    }
    assert all(r["stream_errors"] == r["errors"] for r in rows.values())
