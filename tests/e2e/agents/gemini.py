"""The scripted upstream's answers to Gemini CLI (generateContent, streamed as SSE, and its
router's non-streamed classifier call). See scripts.py for the shared rules.

Not responsible for serving (upstream.py).
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

from tests.e2e.agents import scripts
from tests.e2e.agents.upstream import Answer, Request

GEMINI = re.compile(r"/models/(?P<model>[^/:]+):(?P<op>generateContent|streamGenerateContent|countTokens)$")


class GeminiScript:
    """Gemini CLI's upstream: `run_shell_command` `echo hi` (a call with no id, as the
    Gemini API sends it), then text; its non-streamed classifier call gets a JSON verdict."""

    def __init__(self) -> None:
        self.ledger = scripts.Ledger()

    def websocket(self, request: Request, message: Any) -> Iterator[str]:
        raise AssertionError("Gemini CLI does not speak WebSocket")

    def http(self, request: Request) -> Answer:
        path = request.path.split("?", 1)[0]
        found = GEMINI.search(path)
        body = request.json()
        if request.method != "POST" or found is None or not isinstance(body, dict):
            return Answer(404, parts=[b'{"error": {"code": 404, "status": "NOT_FOUND", "message": "no route"}}'])
        if found["op"] == "countTokens":
            return Answer(parts=[b'{"totalTokens": 42}'])
        return self._answer(request, body, unquote(found["model"]), found["op"] == "streamGenerateContent")

    def _answer(self, request: Request, body: dict[str, Any], model: str, streamed: bool) -> Answer:
        n = self.ledger.next_index()
        contents = [c for c in body.get("contents") or [] if isinstance(c, dict)]
        last_parts = contents[-1].get("parts") or [] if contents else []
        answering = any(isinstance(p, dict) and "functionResponse" in p for p in last_parts)
        declared = {
            d.get("name")
            for tool in body.get("tools") or []
            for d in (tool.get("functionDeclarations") or [] if isinstance(tool, dict) else [])
        }
        turn = "answer" if answering else "tool" if "run_shell_command" in declared else "other"
        cached = 0 if turn != "answer" else 2048 + n
        meta = {
            "promptTokenCount": 7000 + 10 * n + cached,
            "candidatesTokenCount": 30 + n,
            "thoughtsTokenCount": 10 + n,
            "cachedContentTokenCount": cached,
        }
        meta["totalTokenCount"] = meta["promptTokenCount"] + meta["candidatesTokenCount"] + meta["thoughtsTokenCount"]
        version = f"{model}-e2e"
        calls = []
        if turn == "tool":
            arguments = {"command": scripts.COMMAND, "description": "Print hi"}
            parts: list[dict[str, Any]] = [{"text": "Running it."}, {"functionCall": {"name": "run_shell_command",
                                                                                    "args": arguments}}]  # fmt: skip
            calls.append({"id": None, "name": "run_shell_command", "arguments": arguments, "kind": "function"})
            text = "Running it."
        elif turn == "answer":
            text = scripts.FINAL_TEXT
            parts = [{"text": text}]
        else:
            # Gemini CLI's router asks for a complexity verdict in this JSON shape.
            text = json.dumps({"complexity_reasoning": "One shell command.", "complexity_score": 5})
            parts = [{"text": text}]
        self.ledger.note(
            scripts.Sent(
                index=n, protocol="gemini.generate", provider="google", transport="http", path=request.path,
                streamed=streamed, model_requested=model, model=version, finish_reason_raw="STOP",
                finish_reason="tool_use" if calls else "end_turn",
                usage={
                    "input_tokens": meta["promptTokenCount"], "cache_read_tokens": cached, "cache_write_tokens": 0,
                    "output_tokens": meta["candidatesTokenCount"] + meta["thoughtsTokenCount"],
                    "reasoning_tokens": meta["thoughtsTokenCount"],
                },
                tool_calls=calls, text=text, turn=turn, request=body,
            )
        )  # fmt: skip
        response_id = secrets.token_hex(10)
        final: dict[str, Any] = {
            "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": meta,
            "modelVersion": version,
            "responseId": response_id,
        }
        if not streamed:
            return Answer(parts=[json.dumps(final).encode()])
        first = {
            "candidates": [{"content": {"role": "model", "parts": parts[:1]}, "index": 0}],
            "usageMetadata": {
                "promptTokenCount": meta["promptTokenCount"],
                "totalTokenCount": meta["promptTokenCount"],
            },
            "modelVersion": version,
            "responseId": response_id,
        }
        rest = final | {"candidates": [final["candidates"][0] | {"content": {"role": "model", "parts": parts[1:]}}]}
        chunks = [first, rest] if len(parts) > 1 else [final]
        return Answer(content_type="text/event-stream", parts=scripts.sse([(None, c) for c in chunks], crlf=True))
