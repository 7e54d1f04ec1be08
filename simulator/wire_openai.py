"""The simulated provider's OpenAI answers: Chat Completions and Responses, JSON or SSE,
with automatic prefix caching from 1,024 tokens and reasoning tokens for reasoning
models.

Not responsible for deciding what to answer (see `plan`), for routing requests here (see
`provider`, which this module never imports) or for serving HTTP (see `upstream`).
"""

from __future__ import annotations

from typing import Any

from llmtap.simulator.plan import Plan, plan_for
from llmtap.simulator.prompt_cache import PromptCache
from llmtap.simulator.upstream import Reply
from llmtap.simulator.wire_common import SseEvent, json_reply, sse_reply, tokens, words

_REASONING = ("o1", "o3", "o4", "gpt-5")


def _reasoning_tokens(model: str, output: int) -> int:
    return output * 3 if model.startswith(_REASONING) else 0


def _rate_limited() -> Reply:
    error = {"message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}
    return json_reply({"error": error}, 429, [("retry-after-ms", "1500")])


def _last_user_chat(messages: list[Any]) -> tuple[str, bool]:
    if messages and messages[-1].get("role") == "tool":
        return "", True
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(p.get("text", "") for p in content if isinstance(p, dict)), False
            return str(content or ""), False
    return "", False


def chat(cache: PromptCache, body: dict[str, Any], serial: int) -> Reply:
    messages = body.get("messages") or []
    plan = plan_for(*_last_user_chat(messages))
    if plan.error:
        return _rate_limited()
    model = body.get("model") or "gpt-4o-mini"
    prompt = tokens([body.get("tools") or [], messages])
    cached = cache.automatic([body.get("tools") or [], *messages], prompt)
    calls: list[dict[str, Any]] = [
        {"id": f"call_demo{serial:05d}{i}", "type": "function", "function": {"name": n, "arguments": a}}
        for i, (n, a) in enumerate(plan.calls)
    ]
    text = plan.text
    output = tokens(text + "".join(a for _, a in plan.calls))
    reasoning = _reasoning_tokens(model, output)
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": output + reasoning,
        "total_tokens": prompt + output + reasoning,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": reasoning, "audio_tokens": 0},
    }
    finish = "tool_calls" if calls else ("content_filter" if plan.blocked else "stop")
    head = {"id": f"chatcmpl-demo{serial:06d}", "created": 1764460800, "model": model}
    if not body.get("stream"):
        message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
        if calls:
            message["tool_calls"] = calls
        return json_reply(
            {
                **head,
                "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }
        )
    chunk = {**head, "object": "chat.completion.chunk"}
    events: list[SseEvent] = [
        (
            None,
            {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]},
        )
    ]
    for word in words(text) if text else []:
        events.append((None, {**chunk, "choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}]}))
    for index, call in enumerate(calls):
        raw = call["function"]["arguments"]
        first = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        events.append(
            (None, {**chunk, "choices": [{"index": 0, "delta": {"tool_calls": [first]}, "finish_reason": None}]})
        )
        for piece in (raw[i : i + 10] for i in range(0, len(raw), 10)):
            delta = {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
            events.append((None, {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}))
    events.append((None, {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}))
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append((None, {**chunk, "choices": [], "usage": usage}))
    events.append((None, "[DONE]"))
    return sse_reply(events)


def _last_user_responses(entries: Any) -> tuple[str, bool]:
    if isinstance(entries, str):
        return entries, False
    entries = entries or []
    if entries and entries[-1].get("type") == "function_call_output":
        return "", True
    for entry in reversed(entries):
        if entry.get("role") == "user":
            content = entry.get("content")
            if isinstance(content, list):
                return " ".join(p.get("text", "") for p in content if isinstance(p, dict)), False
            return str(content or ""), False
    return "", False


def responses(cache: PromptCache, body: dict[str, Any], serial: int) -> Reply:
    entries = body.get("input")
    plan = plan_for(*_last_user_responses(entries))
    if plan.error:
        return _rate_limited()
    model = body.get("model") or "gpt-4.1"
    listed = [entries] if isinstance(entries, str) else list(entries or [])
    prompt = tokens([body.get("instructions") or "", body.get("tools") or [], listed])
    cached = cache.automatic([body.get("instructions") or "", body.get("tools") or [], *listed], prompt)
    output = tokens(plan.text + "".join(a for _, a in plan.calls))
    reasoning = _reasoning_tokens(model, output)
    items = _items(plan, serial, reasoning)
    response = {
        "id": f"resp_demo{serial:06d}",
        "object": "response",
        "created_at": 1764460800,
        "model": model,
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "output": items,
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": output + reasoning,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": prompt + output + reasoning,
        },
    }
    if not body.get("stream"):
        return json_reply(response)
    return sse_reply(_response_events(response, items))


def _items(plan: Plan, serial: int, reasoning: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reasoning:
        items.append({"id": f"rs_demo{serial:06d}", "type": "reasoning", "summary": []})
    if plan.text:
        items.append(
            {
                "id": f"msg_demo{serial:06d}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": plan.text, "annotations": []}],
            }
        )
    for index, (name, raw) in enumerate(plan.calls):
        items.append(
            {
                "id": f"fc_demo{serial:05d}{index}",
                "type": "function_call",
                "status": "completed",
                "call_id": f"call_demo{serial:05d}{index}",
                "name": name,
                "arguments": raw,
            }
        )
    return items


def _response_events(response: dict[str, Any], items: list[dict[str, Any]]) -> list[SseEvent]:
    running = {**response, "status": "in_progress", "output": [], "usage": None}
    events: list[SseEvent] = [("response.created", {"type": "response.created", "response": running})]
    for index, item in enumerate(items):
        empty = {**item, "content": []} if item["type"] == "message" else {**item, "arguments": ""}
        if item["type"] == "reasoning":
            empty = item
        events.append(
            ("response.output_item.added", {"type": "response.output_item.added", "output_index": index, "item": empty})
        )
        if item["type"] == "message":
            text = item["content"][0]["text"]
            part = {"type": "output_text", "text": "", "annotations": []}
            events.append(
                (
                    "response.content_part.added",
                    {
                        "type": "response.content_part.added",
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "part": part,
                    },
                )
            )
            for word in words(text):
                events.append(
                    (
                        "response.output_text.delta",
                        {
                            "type": "response.output_text.delta",
                            "item_id": item["id"],
                            "output_index": index,
                            "content_index": 0,
                            "delta": word,
                        },
                    )
                )
            events.append(
                (
                    "response.output_text.done",
                    {
                        "type": "response.output_text.done",
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "text": text,
                    },
                )
            )
            events.append(
                (
                    "response.content_part.done",
                    {
                        "type": "response.content_part.done",
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "part": item["content"][0],
                    },
                )
            )
        elif item["type"] == "function_call":
            raw = item["arguments"]
            for piece in (raw[i : i + 10] for i in range(0, len(raw), 10)):
                events.append(
                    (
                        "response.function_call_arguments.delta",
                        {
                            "type": "response.function_call_arguments.delta",
                            "item_id": item["id"],
                            "output_index": index,
                            "delta": piece,
                        },
                    )
                )
            events.append(
                (
                    "response.function_call_arguments.done",
                    {
                        "type": "response.function_call_arguments.done",
                        "item_id": item["id"],
                        "output_index": index,
                        "arguments": raw,
                    },
                )
            )
        events.append(
            ("response.output_item.done", {"type": "response.output_item.done", "output_index": index, "item": item})
        )
    events.append(("response.completed", {"type": "response.completed", "response": response}))
    return [(name, {**payload, "sequence_number": n}) for n, (name, payload) in enumerate(events)]
