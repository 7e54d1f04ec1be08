"""A simulated LLM provider for the demo: answers all five protocols in their real wire
formats (JSON and streams), counts tokens from the request's size, and keeps a prompt
cache like the real ones do — Anthropic's explicit `cache_control` breakpoints with a
5-minute TTL, and the automatic prefix caching of OpenAI and Gemini from 1,024 tokens —
so the demo's traffic hits and misses the cache for real reasons.

What it answers is steered by markers in the last user message: `[tool:NAME]` asks for a
tool call, `[malformed]` for a call with broken JSON arguments, `[error:429]` and
`[error:529]` for an error, `[midstream-error]` for a stream that fails halfway,
`[blocked]` for a content-filtered prompt. A tool result gets a final answer.

Not responsible for serving HTTP (see `llmtap.bench.upstream`).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from llmtap.bench.upstream import Reply, Seen, sse_chunks

CHUNK_DELAY = 0.012
_MARKER = re.compile(r"\[(tool:[\w-]+|malformed|error:\d+|midstream-error|blocked)\]")
_GEMINI_MODEL = re.compile(r"/models/([^/:]+):(\w+)")


def tokens(value: Any) -> int:
    """A rough, stable token count: four characters a token."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return max(1, len(text) // 4)


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class PromptCache:
    """Prefix hash -> (tokens, expiry); shared by every protocol, guarded by a lock."""

    entries: dict[str, tuple[int, float]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def read(self, key: str, now: float) -> int:
        with self.lock:
            entry = self.entries.get(key)
            if entry is None or entry[1] < now:
                return 0
            self.entries[key] = (entry[0], now + 300)  # a hit refreshes the TTL
            return entry[0]

    def write(self, key: str, size: int, now: float, ttl: float = 300) -> None:
        with self.lock:
            self.entries[key] = (size, now + ttl)


@dataclass
class Plan:
    """What to answer: text, or tool calls, or an error."""

    text: str = ""
    calls: list[tuple[str, str]] = field(default_factory=list)  # (name, raw JSON arguments)
    error: int | None = None
    midstream_error: bool = False
    blocked: bool = False


def plan_for(last_user_text: str, has_tool_result: bool) -> Plan:
    marker = _MARKER.search(last_user_text or "")
    if has_tool_result:
        return Plan(
            text="Done. The tool said what we needed; here is the summary you asked for, in two lines.\n"
            "Everything checks out and nothing else needs to change."
        )
    if marker is None:
        words = re.findall(r"[A-Za-z]+", last_user_text or "")[:12]
        topic = " ".join(words) or "that"
        return Plan(text=f"Here is a short answer about {topic}. " * 3 + "Anything else?")
    kind = marker.group(1)
    if kind.startswith("tool:"):
        name = kind.split(":", 1)[1]
        return Plan(calls=[(name, json.dumps({"path": "src/app.py", "query": "status", "limit": 5}))])
    if kind == "malformed":
        return Plan(calls=[("run_tests", '{"target": "tests/unit", "verbose": tru')])
    if kind.startswith("error:"):
        return Plan(error=int(kind.split(":", 1)[1]))
    if kind == "midstream-error":
        return Plan(text="Starting on it. First I will look at the failing test, then", midstream_error=True)
    return Plan(blocked=True)


def _words(text: str) -> list[str]:
    return re.findall(r"\S+\s*", text) or [text]


def _sse(events: list[tuple[str | None, Any]]) -> Reply:
    body = b""
    for name, payload in events:
        data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
        body += (f"event: {name}\n" if name else "").encode() + f"data: {data}\n\n".encode()
    return Reply(content_type="text/event-stream; charset=utf-8", chunks=sse_chunks(body), delay=CHUNK_DELAY)


def _json(payload: Any, status: int = 200, headers: list[tuple[str, str]] | None = None) -> Reply:
    return Reply(
        status=status,
        content_type="application/json",
        chunks=[json.dumps(payload).encode()],
        chunked=False,
        headers=headers or [],
    )


class SimulatedProvider:
    """`SimulatedProvider()(seen) -> Reply`: the router for a local `Upstream`."""

    def __init__(self) -> None:
        self.cache = PromptCache()
        self.counter = 0
        self.lock = threading.Lock()

    def __call__(self, seen: Seen) -> Reply:
        path = seen.path.split("?", 1)[0]
        try:
            body = json.loads(seen.body or b"{}")
        except ValueError:
            return _json({"error": {"type": "invalid_request_error", "message": "body is not JSON"}}, 400)
        with self.lock:
            self.counter += 1
            serial = self.counter
        if path.endswith("/v1/messages"):
            from llmtap.cli.demo import wire_anthropic

            return wire_anthropic.answer(self, body, serial)
        if path.endswith("/chat/completions"):
            from llmtap.cli.demo import wire_openai

            return wire_openai.chat(self, body, serial)
        if path.endswith("/responses"):
            from llmtap.cli.demo import wire_openai

            return wire_openai.responses(self, body, serial)
        if path.endswith("/interactions"):
            from llmtap.cli.demo import wire_gemini

            return wire_gemini.interactions(self, body, serial)
        match = _GEMINI_MODEL.search(path)
        if match:
            from llmtap.cli.demo import wire_gemini

            return wire_gemini.generate(self, body, match.group(1), match.group(2), "alt=sse" in seen.path, serial)
        return _json({"error": {"message": f"no such endpoint {path}"}}, 404)

    def automatic_cache(self, prefixes: list[Any], total: int, minimum: int = 1024) -> int:
        """OpenAI/Gemini-style: the longest earlier prefix of at least `minimum` tokens is
        read from cache, in 128-token blocks; every prefix of this prompt is written."""
        now = time.time()
        cached = 0
        keys = [_digest(prefixes[: i + 1]) for i in range(len(prefixes))]
        for key in reversed(keys):
            size = self.cache.read(key, now)
            if size >= minimum:
                cached = min(size, total) // 128 * 128
                break
        running = 0
        for key, part in zip(keys, prefixes, strict=True):
            running += tokens(part)
            self.cache.write(key, running, now)
        return cached
