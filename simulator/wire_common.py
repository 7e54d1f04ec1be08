"""What the simulated provider's protocols share: a rough token count, a stable digest of
a prompt prefix, a text cut into streamable words, and the `Reply` framing of a JSON
answer and of a server-sent-events stream.

Not responsible for what an answer says (see `plan`), for any one protocol's shapes (see
the `wire_*` modules) or for serving HTTP (see `upstream`).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from llmtap.simulator.upstream import Reply, sse_chunks

CHUNK_DELAY = 0.012  # seconds between the chunks of a stream

SseEvent = tuple[str | None, Any]  # (event name or None, payload: JSON-able, or a raw string)


def tokens(value: Any) -> int:
    """A rough, stable token count: four characters a token."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return max(1, len(text) // 4)


def digest(value: Any) -> str:
    """A short stable hash of a JSON-able value (a prompt prefix, as a cache key)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def words(text: str) -> list[str]:
    """The text cut after each run of whitespace, as a stream's text deltas."""
    return re.findall(r"\S+\s*", text) or [text]


def sse_reply(events: list[SseEvent]) -> Reply:
    """An SSE stream, one chunk per event, `CHUNK_DELAY` apart."""
    body = b""
    for name, payload in events:
        data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
        body += (f"event: {name}\n" if name else "").encode() + f"data: {data}\n\n".encode()
    return Reply(content_type="text/event-stream; charset=utf-8", chunks=sse_chunks(body), delay=CHUNK_DELAY)


def json_reply(payload: Any, status: int = 200, headers: list[tuple[str, str]] | None = None) -> Reply:
    """A JSON body with a Content-Length, in one chunk."""
    return Reply(
        status=status,
        content_type="application/json",
        chunks=[json.dumps(payload).encode()],
        chunked=False,
        headers=headers or [],
    )
