"""What the scripted upstream answers each coding agent, and its own account of it; here
the shared parts and Claude Code's answers (responses.py: Codex's, gemini.py: Gemini CLI's).

Every conversation turn is answered the same way: a first turn that declares the agent's
shell tool gets one call of it (`echo hi`), the follow-up that carries the tool's result
gets text, any other request (a classifier, a title) gets text too, and a warm-up that
asks for no generation gets none. Usage
numbers come from the request's index in the run, so every turn's are distinct and a
record can be matched to the reply it came from. Each answer is noted as a `Sent`: the
canonical facts (SPEC §2) that a correct record of it must carry.

Not responsible for serving (upstream.py) nor for AWS framing (eventstream.py).
"""

from __future__ import annotations

import json
import re
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from tests.e2e.agents import eventstream
from tests.e2e.agents.upstream import Answer, Request

COMMAND = "echo hi"
FINAL_TEXT = "The command printed hi."


@dataclass
class Sent:
    """One answered generation, as the upstream sent it, in canonical terms."""

    index: int  # 1-based, in the order the upstream answered
    protocol: str
    provider: str
    transport: str  # http | websocket
    path: str
    streamed: bool
    model_requested: str
    model: str
    finish_reason_raw: str
    finish_reason: str
    usage: dict[str, int | None]
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # id, name, arguments, kind
    text: str = ""
    warmup: bool = False
    turn: str = "other"  # tool | answer | other
    request: Any = None  # the request body (or WebSocket message) as JSON


class Ledger:
    """The run's account of what was sent, shared by a script's threads."""

    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self._lock = threading.Lock()
        self._count = 0

    def next_index(self) -> int:
        with self._lock:
            self._count += 1
            return self._count

    def note(self, sent: Sent) -> None:
        with self._lock:
            self.sent.append(sent)
            self.sent.sort(key=lambda s: s.index)


def sse(events: list[tuple[str | None, dict[str, Any]]], crlf: bool = False) -> list[bytes]:
    end = "\r\n" if crlf else "\n"
    parts = []
    for name, data in events:
        head = f"event: {name}{end}" if name else ""
        parts.append(f"{head}data: {json.dumps(data)}{end}{end}".encode())
    return parts


def pieces(text: str, n: int = 3) -> list[str]:
    size = max(1, -(-len(text) // n))
    return [text[i : i + size] for i in range(0, len(text), size)]


# -- Anthropic Messages: direct, Bedrock (event-stream) and Vertex (SSE) --------------------------

BEDROCK = re.compile(r"^/model/(?P<model>[^/]+)/(?P<op>invoke|invoke-with-response-stream)$")
VERTEX = re.compile(r"/publishers/anthropic/models/(?P<model>[^/:]+):(?P<op>rawPredict|streamRawPredict)$")


class AnthropicScript:
    """Claude Code's upstream: `Bash` `echo hi`, then text. `shape` picks the route it
    serves: `anthropic` (/v1/messages), `bedrock` or `vertex`; `cache_hits=False` makes
    the follow-up read nothing from the cache its first turn wrote (a miss to report)."""

    def __init__(self, shape: str = "anthropic", cache_hits: bool = True) -> None:
        self.shape = shape
        self.cache_hits = cache_hits
        self.ledger = Ledger()
        self.provider = {"anthropic": "anthropic", "bedrock": "aws", "vertex": "google"}[shape]

    def websocket(self, request: Request, message: Any) -> Iterator[str]:
        raise AssertionError("Claude Code does not speak WebSocket")

    def http(self, request: Request) -> Answer:
        path = request.path.split("?", 1)[0]
        if request.method in ("HEAD", "GET"):
            return Answer(200, parts=[b"{}"] if request.method == "GET" else [])
        if path.endswith("/count_tokens") or path.endswith(":countTokens"):
            return Answer(parts=[b'{"input_tokens": 42}'])
        body = request.json()
        route = self._route(path)
        if route is None or not isinstance(body, dict):
            return Answer(404, parts=[b'{"type":"error","error":{"type":"not_found_error","message":"no route"}}'])
        model, streamed = route
        if self.shape == "anthropic":
            model, streamed = str(body.get("model")), bool(body.get("stream"))
        return self._answer(request, body, model, streamed)

    def _route(self, path: str) -> tuple[str, bool] | None:
        if self.shape == "anthropic":
            return ("", False) if path.endswith("/v1/messages") else None
        found = (BEDROCK if self.shape == "bedrock" else VERTEX).search(path)
        if found is None:
            return None
        return unquote(found["model"]), found["op"] in ("invoke-with-response-stream", "streamRawPredict")

    def _answer(self, request: Request, body: dict[str, Any], model: str, streamed: bool) -> Answer:
        n = self.ledger.next_index()
        messages = body.get("messages") or [{}]
        content = messages[-1].get("content")
        answering = isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content
        )
        tools = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
        turn = "answer" if answering else "tool" if "Bash" in tools else "other"
        # A first turn writes the cache; a follow-up reads what it wrote: no miss anywhere
        # (unless told to miss: then the follow-up writes it all again).
        hit = turn == "answer" and self.cache_hits
        usage = {
            "input_tokens": 10 + n,
            "cache_creation_input_tokens": 300 + n if hit else 5000 + 10 * n,
            "cache_read_input_tokens": 5000 + 10 * (n - 1) if hit else 0,
            "output_tokens": 40 + n,
        }
        blocks: list[dict[str, Any]] = [{"type": "text", "text": "Running it." if turn == "tool" else FINAL_TEXT}]
        calls = []
        if turn == "tool":
            arguments = {"command": COMMAND, "description": "Print hi"}
            call = {"type": "tool_use", "id": f"toolu_{secrets.token_hex(8)}", "name": "Bash", "input": arguments}
            blocks.append(call)
            calls.append({"id": call["id"], "name": "Bash", "arguments": arguments, "kind": "function"})
            if streamed:  # the input_json_delta pieces join to exactly this string
                calls[-1]["raw"] = json.dumps(arguments)
        stop = "tool_use" if calls else "end_turn"
        message = {"id": f"msg_{secrets.token_hex(8)}", "type": "message", "role": "assistant", "model": model}
        self.ledger.note(
            Sent(
                index=n, protocol="anthropic.messages", provider=self.provider, transport="http",
                path=request.path, streamed=streamed, model_requested=model, model=model,
                finish_reason_raw=stop, finish_reason=stop,
                usage={
                    "input_tokens": sum(v for k, v in usage.items() if k != "output_tokens"),
                    "cache_read_tokens": usage["cache_read_input_tokens"],
                    "cache_write_tokens": usage["cache_creation_input_tokens"],
                    "output_tokens": usage["output_tokens"],
                    "reasoning_tokens": None,
                },
                tool_calls=calls, text=str(blocks[0]["text"]), turn=turn, request=body,
            )
        )  # fmt: skip
        if not streamed:
            whole = message | {"content": blocks, "stop_reason": stop, "stop_sequence": None, "usage": usage}
            return Answer(parts=[json.dumps(whole).encode()])
        events = _anthropic_events(message, blocks, stop, usage)
        if self.shape == "bedrock":
            metrics = {
                "inputTokenCount": usage["input_tokens"],
                "outputTokenCount": usage["output_tokens"],
                "invocationLatency": 812,
                "firstByteLatency": 301,
                "cacheReadInputTokenCount": usage["cache_read_input_tokens"],
                "cacheWriteInputTokenCount": usage["cache_creation_input_tokens"],
            }
            events[-1]["amazon-bedrock-invocationMetrics"] = metrics
            frames = [eventstream.chunk(event) for event in events]
            return Answer(content_type="application/vnd.amazon.eventstream", parts=frames)
        return Answer(content_type="text/event-stream", parts=sse([(e["type"], e) for e in events]))


def _anthropic_events(
    message: dict[str, Any], blocks: list[dict[str, Any]], stop: str, usage: dict[str, int]
) -> list[dict[str, Any]]:
    start_usage = usage | {"output_tokens": 1}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": message | {"content": [], "stop_reason": None, "usage": start_usage}},
        {"type": "ping"},
    ]
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            events.append(
                {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}
            )
            for piece in pieces(block["text"]):
                delta = {"type": "text_delta", "text": piece}
                events.append({"type": "content_block_delta", "index": index, "delta": delta})
        else:
            opened = block | {"input": {}}
            events.append({"type": "content_block_start", "index": index, "content_block": opened})
            for piece in pieces(json.dumps(block["input"])):
                delta = {"type": "input_json_delta", "partial_json": piece}
                events.append({"type": "content_block_delta", "index": index, "delta": delta})
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": usage})
    events.append({"type": "message_stop"})
    return events
