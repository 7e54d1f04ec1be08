"""The simulated provider's Anthropic Messages answers, JSON or SSE, with the explicit
`cache_control` prompt cache (reads at the longest cached breakpoint, writes every
breakpoint's prefix from 1,024 tokens).

Not responsible for deciding what to answer (see `plan`), for routing requests here (see
`provider`, which this module never imports) or for serving HTTP (see `upstream`).
"""

from __future__ import annotations

import json
import time
from typing import Any

from llmtap.simulator.plan import Plan, plan_for
from llmtap.simulator.prompt_cache import PromptCache
from llmtap.simulator.upstream import Reply
from llmtap.simulator.wire_common import SseEvent, digest, json_reply, sse_reply, tokens, words

MINIMUM = 1024


def _blocks(body: dict[str, Any]) -> list[Any]:
    """The prompt in cache order: tools, then system, then every message's blocks."""
    blocks: list[Any] = list(body.get("tools") or [])
    system = body.get("system") or []
    blocks += [{"type": "text", "text": system}] if isinstance(system, str) else list(system)
    for message in body.get("messages") or []:
        content = message.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        blocks += [{"role": message.get("role"), **part} for part in parts]
    return blocks


def _plain(block: Any) -> Any:
    return {k: v for k, v in block.items() if k != "cache_control"} if isinstance(block, dict) else block


def usage(cache: PromptCache, body: dict[str, Any]) -> dict[str, Any]:
    """The `usage` object of a Messages answer to this request, reading and writing the cache."""
    blocks = _blocks(body)
    total = tokens([_plain(b) for b in blocks])
    breakpoints = [i for i, b in enumerate(blocks) if isinstance(b, dict) and b.get("cache_control")]
    now = time.time()
    read = 0
    for index in reversed(breakpoints):
        size = cache.read(digest([_plain(b) for b in blocks[: index + 1]]), now)
        if size:
            read = size
            break
    written = 0
    for index in breakpoints:  # every breakpoint's prefix is cached, as Anthropic does
        prefix = [_plain(b) for b in blocks[: index + 1]]
        size = tokens(prefix)
        if size >= MINIMUM and size > read and not cache.read(digest(prefix), now):
            cache.write(digest(prefix), size, now)
            written = max(written, size - read)
    return {
        "input_tokens": max(total - read - written, 1),
        "cache_creation_input_tokens": written,
        "cache_read_input_tokens": read,
        "cache_creation": {"ephemeral_5m_input_tokens": written, "ephemeral_1h_input_tokens": 0},
    }


def _last_user(messages: list[Any]) -> tuple[str, bool]:
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content, False
        texts = [b.get("text", "") for b in content or [] if b.get("type") == "text"]
        results = any(b.get("type") == "tool_result" for b in content or [])
        return " ".join(texts), results
    return "", False


def answer(cache: PromptCache, body: dict[str, Any], serial: int) -> Reply:
    text, has_result = _last_user(body.get("messages") or [])
    plan = plan_for(text, has_result)
    if plan.error == 429:
        return json_reply(
            {
                "type": "error",
                "error": {
                    "type": "rate_limit_error",
                    "message": "Number of request tokens has exceeded your per-minute rate limit",
                },
            },
            429,
            [("retry-after", "3")],
        )
    if plan.error:
        return json_reply({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, plan.error)
    counts = usage(cache, body)
    model = body.get("model") or "claude-sonnet-4-5-20250929"
    message_id = f"msg_demo{serial:06d}"
    if body.get("stream"):
        return _stream(plan, counts, model, message_id, serial)
    content, stop = _content(plan, serial)
    output = tokens(json.dumps(content))
    return json_reply(
        {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {**counts, "output_tokens": output},
        }
    )


def _content(plan: Plan, serial: int) -> tuple[list[dict[str, Any]], str]:
    if plan.blocked:
        return [{"type": "text", "text": "I can't help with that."}], "refusal"
    content: list[dict[str, Any]] = [{"type": "text", "text": plan.text}] if plan.text else []
    for index, (name, raw) in enumerate(plan.calls):
        try:
            arguments = json.loads(raw)
        except ValueError:
            arguments = {}
        content.append({"type": "tool_use", "id": f"toolu_demo{serial:05d}{index}", "name": name, "input": arguments})
    return content, "tool_use" if plan.calls else "end_turn"


def _stream(plan: Plan, counts: dict[str, Any], model: str, message_id: str, serial: int) -> Reply:
    start: dict[str, Any] = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**counts, "output_tokens": 1},
    }
    events: list[SseEvent] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    index = 0
    output = 0
    if plan.text or plan.blocked:
        text = "I can't help with that." if plan.blocked else plan.text
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            )
        )
        for word in words(text):
            events.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": word}},
                )
            )
        output += tokens(text)
        if plan.midstream_error:
            events.append(("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))
            return sse_reply(events)
        events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
        index = 1
    for offset, (name, raw) in enumerate(plan.calls):
        block = {"type": "tool_use", "id": f"toolu_demo{serial:05d}{offset}", "name": name, "input": {}}
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": block}))
        for piece in (raw[i : i + 12] for i in range(0, len(raw), 12)):
            events.append(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    },
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        output += tokens(raw)
        index += 1
    stop = "refusal" if plan.blocked else ("tool_use" if plan.calls else "end_turn")
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": output},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return sse_reply(events)
