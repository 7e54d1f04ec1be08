"""The scripted upstream's answers to Codex CLI (OpenAI Responses, over a WebSocket or HTTP
SSE): one call of the shell tool it declares, then text; a warm-up (`generate: false`)
gets an empty completed response. See scripts.py for the shared rules.

Not responsible for serving (upstream.py).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

from tests.e2e.agents import scripts
from tests.e2e.agents.upstream import Answer, Request

SHELL_FUNCTIONS = ("shell", "exec_command", "local_shell", "shell_command")
# Codex 0.171's `exec` tool takes JavaScript that calls its nested tools (its description
# declares `tools.exec_command({cmd})`); the script prints what the command printed.
EXEC_SOURCE = f'const r = await tools.exec_command({{ cmd: "{scripts.COMMAND}" }});\ntext(r.output);\n'


def codex_tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every tool the request declares: `tools`, those inside input items
    (`additional_tools`), and those inside `namespace` entries, flattened (each of these
    with a `namespace` key naming its namespace)."""
    found: list[dict[str, Any]] = []

    def walk(tools: Any, namespace: str | None) -> None:
        for tool in tools or []:
            if isinstance(tool, dict) and tool.get("type") == "namespace":
                walk(tool.get("tools"), tool.get("name"))
            elif isinstance(tool, dict):
                found.append(tool | ({"namespace": namespace} if namespace else {}))

    walk(body.get("tools"), None)
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            walk(item.get("tools"), None)
    return found


def codex_shell_tool(tools: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The tool Codex runs commands with, as this request declares it: its free-form
    (`custom`) `exec` tool, else a function tool that takes a command."""
    for tool in tools:
        if tool.get("type") == "custom" and tool.get("name") == "exec":
            return tool
    for tool in tools:
        if tool.get("type") == "function" and tool.get("name") in SHELL_FUNCTIONS:
            return tool
    return None


def codex_call_input(tool: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """The call's input as the wire carries it (text for a custom tool, JSON for a
    function), and the parsed arguments a record should hold (None for custom)."""
    if tool.get("type") == "custom":
        return EXEC_SOURCE, None
    params = (tool.get("parameters") or {}).get("properties") or {}
    arguments: dict[str, Any]
    if "cmd" in params:
        arguments = {"cmd": scripts.COMMAND}
    elif params.get("command", {}).get("type") == "array":
        arguments = {"command": ["bash", "-lc", scripts.COMMAND]}
    else:
        arguments = {"command": scripts.COMMAND}
    return json.dumps(arguments), arguments


class ResponsesScript:
    """Codex's upstream: one call of its shell tool, then text; `generate: false` (a
    warm-up) gets an empty completed response. The follow-up that answers the call reads
    the prefix from cache, reported over the whole chain as OpenAI does; `cache_hits=False`
    makes it read nothing, as after the cache's TTL."""

    def __init__(self, cache_hits: bool = True) -> None:
        self.ledger = scripts.Ledger()
        self.cache_hits = cache_hits

    def http(self, request: Request) -> Answer:
        path = request.path.split("?", 1)[0]
        if request.method == "GET" and path.endswith("/models"):
            return Answer(parts=[b'{"object": "list", "data": []}'])
        body = request.json()
        if request.method != "POST" or not path.endswith("/responses") or not isinstance(body, dict):
            return Answer(404, parts=[b'{"error": {"type": "not_found", "message": "no route"}}'])
        events = self._events(request, body, streamed=bool(body.get("stream")))
        if not body.get("stream"):
            return Answer(parts=[json.dumps(events[-1]["response"]).encode()])
        return Answer(content_type="text/event-stream", parts=scripts.sse([(e["type"], e) for e in events]))

    def websocket(self, request: Request, message: Any) -> Iterator[str]:
        if not isinstance(message, dict) or message.get("type") != "response.create":
            return
        body: dict[str, Any] = message["response"] if isinstance(message.get("response"), dict) else message
        for event in self._events(request, body, streamed=True):
            yield json.dumps(event)

    def _events(self, request: Request, body: dict[str, Any], streamed: bool) -> list[dict[str, Any]]:
        n = self.ledger.next_index()
        model = str(body.get("model"))
        items = [i for i in body.get("input") or [] if isinstance(i, dict)]
        answering = any(i.get("type") in ("function_call_output", "custom_tool_call_output") for i in items)
        warmup = body.get("generate") is False
        tool = None if answering or warmup else codex_shell_tool(codex_tools(body))
        turn = "answer" if answering else "tool" if tool else "other"
        cached = 4096 + n if turn == "answer" and self.cache_hits else 0
        usage: dict[str, Any] = {
            "input_tokens": n if warmup else 6000 + 10 * n + cached,  # a warm-up's input is empty
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": 0 if warmup else 60 + n,
            "output_tokens_details": {"reasoning_tokens": 0 if warmup else 20 + n},
        }
        usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
        output: list[dict[str, Any]] = []
        calls = []
        text = ""
        if tool is not None:
            wire_input, arguments = codex_call_input(tool)
            call_id = f"call_{secrets.token_hex(8)}"
            if tool["type"] == "custom":
                item = {"type": "custom_tool_call", "id": f"ctc_{secrets.token_hex(8)}", "call_id": call_id,
                        "name": tool["name"], "input": wire_input, "status": "completed"}  # fmt: skip
            else:
                item = {"type": "function_call", "id": f"fc_{secrets.token_hex(8)}", "call_id": call_id,
                        "name": tool["name"], "arguments": wire_input, "status": "completed"}  # fmt: skip
            if tool.get("namespace"):
                item["namespace"] = tool["namespace"]
            output.append(item)
            calls.append({"id": call_id, "name": tool["name"], "arguments": arguments, "raw": wire_input,
                          "kind": "custom" if tool["type"] == "custom" else "function",
                          "namespace": tool.get("namespace")})  # fmt: skip
        elif not warmup:
            text = scripts.FINAL_TEXT
            part = {"type": "output_text", "text": text, "annotations": []}
            output.append({"type": "message", "id": f"msg_{secrets.token_hex(8)}", "role": "assistant",
                           "status": "completed", "content": [part]})  # fmt: skip
        response = {"id": f"resp_{secrets.token_hex(12)}", "object": "response", "created_at": 1764576000,
                    "model": model, "status": "completed", "output": output, "usage": usage}  # fmt: skip
        self.ledger.note(
            scripts.Sent(
                index=n, protocol="openai.responses", provider="openai", transport=request.transport,
                path=request.path, streamed=streamed, model_requested=model, model=model,
                finish_reason_raw="completed", finish_reason="tool_use" if calls else "end_turn",
                usage={
                    "input_tokens": usage["input_tokens"], "cache_read_tokens": cached, "cache_write_tokens": 0,
                    "output_tokens": usage["output_tokens"],
                    "reasoning_tokens": usage["output_tokens_details"]["reasoning_tokens"],
                },
                tool_calls=calls, text=text, warmup=warmup, turn=turn, request=body,
            )
        )  # fmt: skip
        return _responses_events(response)


def _responses_events(response: dict[str, Any]) -> list[dict[str, Any]]:
    opened = response | {"status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": opened},
        {"type": "response.in_progress", "response": opened},
    ]
    for index, item in enumerate(response["output"]):
        at = {"output_index": index, "item_id": item["id"]}
        if item["type"] == "message":
            events.append({"type": "response.output_item.added", "output_index": index, "item": item | {"content": []}})
            part = item["content"][0]
            events.append(
                {"type": "response.content_part.added", **at, "content_index": 0, "part": part | {"text": ""}}
            )
            for piece in scripts.pieces(part["text"]):
                events.append({"type": "response.output_text.delta", **at, "content_index": 0, "delta": piece})
            events.append({"type": "response.output_text.done", **at, "content_index": 0, "text": part["text"]})
            events.append({"type": "response.content_part.done", **at, "content_index": 0, "part": part})
        else:
            field_name = "input" if item["type"] == "custom_tool_call" else "arguments"
            kind = "custom_tool_call_input" if item["type"] == "custom_tool_call" else "function_call_arguments"
            events.append(
                {"type": "response.output_item.added", "output_index": index, "item": item | {field_name: ""}}
            )
            for piece in scripts.pieces(item[field_name]):
                events.append({"type": f"response.{kind}.delta", **at, "delta": piece})
            events.append({"type": f"response.{kind}.done", **at, field_name: item[field_name]})
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": response})
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return events
