"""A local OpenAI Responses WebSocket-mode server, made with the `websockets` package:
on each `response.create` it answers with a recorded Responses stream's events, one text
frame each, a little apart (or with the frames `frames(create)` picks for that message).
Keeps what it received and when it sent each frame.

Not responsible for anything but playing events back.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from llmtap.protocols.sse import SSEDecoder


def sse_events(body: bytes) -> list[str]:
    """The `data` of each event of an SSE body (what a WebSocket frame carries instead)."""
    decoder = SSEDecoder()
    events = [*decoder.decode(body), *decoder.flush()]
    return [event.data for event in events if event.data.strip()]


@dataclass
class WsUpstream:
    frames: list[str] | Callable[[dict[str, Any]], list[str]]  # what to send for a response.create
    delay: float = 0.05
    received: list[Any] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)  # each connection's request headers
    sent: list[tuple[float, str]] = field(default_factory=list)
    port: int = 0

    def __enter__(self) -> WsUpstream:
        from websockets.sync.server import serve

        self._server = serve(self._handle, "127.0.0.1", 0)
        self.port = self._server.socket.getsockname()[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="e2e-ws-upstream", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._thread.join(5)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _handle(self, connection: Any) -> None:
        from websockets.exceptions import ConnectionClosed

        self.headers.append({k.lower(): v for k, v in connection.request.headers.raw_items()})
        try:
            for message in connection:
                event = json.loads(message)
                self.received.append(event)
                if event.get("type") != "response.create":
                    continue
                frames = self.frames(event) if callable(self.frames) else self.frames
                for index, frame in enumerate(frames):
                    if index:
                        time.sleep(self.delay)
                    connection.send(frame)
                    self.sent.append((time.time(), frame))
        except ConnectionClosed:
            pass
