"""The simulated LLM provider: the router a local `Upstream` calls for every request. It
answers all five protocols in their real wire formats (JSON and streams), counts tokens
from the request's size, and keeps one prompt cache like the real ones do (Anthropic's
explicit `cache_control` breakpoints with a 5-minute TTL, and the automatic prefix caching
of OpenAI and Gemini from 1,024 tokens), so traffic hits and misses the cache for real
reasons. What it answers is steered by markers in the last user message (see `plan`).

Routing is a table from path suffix to a `wire_*` function; the wire modules never import
this one. It speaks HTTP only: a WebSocket upgrade is refused with a 426. Not responsible
for serving HTTP (see `upstream`), for what an answer says (see `plan`) or for any
protocol's shapes (see the `wire_*` modules).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from typing import Any

from llmtap.simulator import wire_anthropic, wire_gemini, wire_openai
from llmtap.simulator.prompt_cache import PromptCache
from llmtap.simulator.upstream import Reply, Seen
from llmtap.simulator.wire_common import json_reply

Handler = Callable[[PromptCache, dict[str, Any], int], Reply]  # (cache, JSON body, serial)

ROUTES: tuple[tuple[str, Handler], ...] = (  # path suffix -> handler, first match wins
    ("/v1/messages", wire_anthropic.answer),
    ("/chat/completions", wire_openai.chat),
    ("/responses", wire_openai.responses),
    ("/interactions", wire_gemini.interactions),
)
_GEMINI_MODEL = re.compile(r"/models/([^/:]+):(\w+)")  # /v1beta/models/MODEL:METHOD


class SimulatedProvider:
    """`SimulatedProvider()(seen) -> Reply`: the router for a local `Upstream`."""

    def __init__(self) -> None:
        self.cache = PromptCache()
        self.counter = 0
        self.lock = threading.Lock()

    def __call__(self, seen: Seen) -> Reply:
        path = seen.path.split("?", 1)[0]
        if seen.headers.get("upgrade", "").lower() == "websocket":
            # HTTP only: Codex tries a WebSocket to /v1/responses first and, refused with
            # 426, falls back to HTTP SSE at once (a 200 made it retry five times first).
            return json_reply({"error": {"type": "invalid_request_error", "message": "WebSocket not supported"}}, 426)
        try:
            body = json.loads(seen.body or b"{}")
        except ValueError:
            return json_reply({"error": {"type": "invalid_request_error", "message": "body is not JSON"}}, 400)
        with self.lock:
            self.counter += 1
            serial = self.counter
        for suffix, handler in ROUTES:
            if path.endswith(suffix):
                return handler(self.cache, body, serial)
        match = _GEMINI_MODEL.search(path)
        if match:
            model, method = match.group(1), match.group(2)
            return wire_gemini.generate(self.cache, body, model, method, "alt=sse" in seen.path, serial)
        return json_reply({"error": {"message": f"no such endpoint {path}"}}, 404)
