"""The simulated provider's Gemini answers: generateContent (JSON), streamGenerateContent
(SSE with `alt=sse`, else a streamed JSON array) and Interactions (JSON or SSE, steps
shape), with implicit prefix caching from 1,024 tokens and thinking tokens billed as
output. A generateContent request that asks for a `service_tier` is told the tier it was
served in the `x-gemini-service-tier` header: the one asked for, or `standard` when the
last user message holds `[tier-fallback]` (Priority and Flex falling back, as they do).

Not responsible for deciding what to answer (see `plan`), for routing requests here (see
`provider`, which this module never imports) or for serving HTTP (see `upstream`).
"""

from __future__ import annotations

import json
from typing import Any

from llmtap.simulator.plan import Plan, plan_for
from llmtap.simulator.prompt_cache import PromptCache
from llmtap.simulator.upstream import Reply, sse_chunks
from llmtap.simulator.wire_common import CHUNK_DELAY, SseEvent, json_reply, sse_reply, tokens, words

SERVED_TIER_HEADER = "x-gemini-service-tier"
TIER_FALLBACK = "[tier-fallback]"  # in the last user message: a requested tier is served as standard


def _last_user(contents: list[Any]) -> tuple[str, bool]:
    for content in reversed(contents):
        parts = content.get("parts") or []
        if any("functionResponse" in p for p in parts):
            return "", True
        if content.get("role", "user") == "user":
            return " ".join(p.get("text", "") for p in parts if isinstance(p, dict)), False
    return "", False


def _served_tier(body: dict[str, Any], last_user: str) -> list[tuple[str, str]]:
    """The served-tier header for a request that asked for a tier; none otherwise."""
    asked = body.get("service_tier", body.get("serviceTier"))
    if not isinstance(asked, str) or not asked:
        return []
    return [(SERVED_TIER_HEADER, "standard" if TIER_FALLBACK in last_user else asked.lower())]


def generate(cache: PromptCache, body: dict[str, Any], model: str, method: str, sse: bool, serial: int) -> Reply:
    contents = body.get("contents") or []
    last_user, tool_result = _last_user(contents)
    plan = plan_for(last_user, tool_result)
    tier_headers = _served_tier(body, last_user)
    if plan.error:
        return json_reply(
            {
                "error": {
                    "code": 429,
                    "message": "Resource has been exhausted (e.g. check quota).",
                    "status": "RESOURCE_EXHAUSTED",
                }
            },
            429,
        )
    system = body.get("systemInstruction") or {}
    prompt = tokens([system, body.get("tools") or [], contents])
    cached = cache.automatic([system, body.get("tools") or [], *contents], prompt)
    thinking = bool(((body.get("generationConfig") or {}).get("thinkingConfig") or {}).get("includeThoughts"))
    output = tokens(plan.text + "".join(a for _, a in plan.calls))
    thoughts = output * 2
    usage = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": output,
        "thoughtsTokenCount": thoughts,
        "totalTokenCount": prompt + output + thoughts,
    }
    if cached:
        usage["cachedContentTokenCount"] = cached
    if plan.blocked:
        blocked = {
            "promptFeedback": {"blockReason": "SAFETY"},
            "usageMetadata": {"promptTokenCount": prompt, "totalTokenCount": prompt},
            "modelVersion": model,
            "responseId": f"demo-{serial}",
        }
        return json_reply(blocked)
    chunks = _chunks(plan, thinking)
    final_parts = [part for chunk in chunks for part in chunk]
    head = {"modelVersion": model, "responseId": f"demo-gem-{serial:06d}"}
    if method == "generateContent":
        whole = {"content": {"role": "model", "parts": final_parts}, "finishReason": "STOP", "index": 0}
        return json_reply({"candidates": [whole], "usageMetadata": usage, **head}, headers=tier_headers)
    pieces = []
    for index, parts in enumerate(chunks):
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        piece: dict[str, Any] = {"candidates": [candidate], **head}
        if index == len(chunks) - 1:
            candidate["finishReason"] = "STOP"
            piece["usageMetadata"] = usage
        else:
            piece["usageMetadata"] = {"promptTokenCount": prompt}
        pieces.append(piece)
    if sse:
        body_bytes = b"".join(b"data: " + json.dumps(p).encode() + b"\r\n\r\n" for p in pieces)
        return Reply(
            content_type="text/event-stream", chunks=sse_chunks(body_bytes), delay=CHUNK_DELAY, headers=tier_headers
        )
    array = [("[" if i == 0 else ",\r\n") + json.dumps(p) for i, p in enumerate(pieces)]
    array[-1] += "]"
    return Reply(
        content_type="application/json; charset=UTF-8",
        chunks=[a.encode() for a in array],
        delay=CHUNK_DELAY,
        headers=tier_headers,
    )


def _chunks(plan: Plan, thinking: bool) -> list[list[dict[str, Any]]]:
    chunks: list[list[dict[str, Any]]] = []
    if thinking:
        chunks.append([{"text": "**Planning** I should read the question and answer briefly.", "thought": True}])
    pieces = words(plan.text) if plan.text else []
    for start in range(0, len(pieces), 4):
        chunks.append([{"text": "".join(pieces[start : start + 4])}])
    for name, raw in plan.calls:
        try:
            arguments = json.loads(raw)
        except ValueError:
            arguments = {"raw": raw}
        chunks.append([{"functionCall": {"name": name, "args": arguments}}])
    return chunks or [[{"text": ""}]]


def interactions(cache: PromptCache, body: dict[str, Any], serial: int) -> Reply:
    entries = body.get("input")
    text = entries if isinstance(entries, str) else json.dumps(entries)
    plan = plan_for(text, False)
    prompt = tokens([body.get("system_instruction") or "", entries])
    output = tokens(plan.text)
    thoughts = output
    interaction_id = f"v1_demo{serial:06d}"
    usage = {
        "total_tokens": prompt + output + thoughts,
        "total_input_tokens": prompt,
        "total_cached_tokens": 0,
        "total_output_tokens": output,
        "total_tool_use_tokens": 0,
        "total_thought_tokens": thoughts,
    }
    model = body.get("model") or "gemini-2.5-flash"
    steps = [
        {"type": "thought", "signature": "ZGVtbw=="},
        {"type": "model_output", "content": [{"type": "text", "text": plan.text}]},
    ]
    done = {"id": interaction_id, "status": "completed", "usage": usage, "object": "interaction", "model": model}
    if not body.get("stream"):
        return json_reply({**done, "steps": steps})
    events: list[SseEvent] = [
        (
            None,
            {
                "interaction": {"id": interaction_id, "status": "in_progress", "object": "interaction", "model": model},
                "event_type": "interaction.created",
            },
        ),
        (None, {"index": 0, "step": {"type": "thought"}, "event_type": "step.start"}),
        (
            None,
            {"index": 0, "delta": {"signature": "ZGVtbw==", "type": "thought_signature"}, "event_type": "step.delta"},
        ),
        (None, {"index": 0, "event_type": "step.stop"}),
        (None, {"index": 1, "step": {"type": "model_output"}, "event_type": "step.start"}),
    ]
    for word in words(plan.text):
        events.append((None, {"index": 1, "delta": {"text": word, "type": "text"}, "event_type": "step.delta"}))
    events.append((None, {"index": 1, "event_type": "step.stop"}))
    events.append((None, {"interaction": done, "event_type": "interaction.completed"}))
    return sse_reply(events)
