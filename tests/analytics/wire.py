"""Request and response bodies in each provider's wire format, written by hand for the
analytics tests, and the step that turns one into a stored record: decode it with the
real translators (`decode_exchange`) and wrap it in a `Recorded` with its timings.

Each builder takes the numbers the provider would send (Anthropic's `input_tokens`
without cache tokens, Chat's `prompt_tokens` with them, …), never canonical ones: the
tests state the canonical sums by hand, so the translators' mapping is checked too.
"""

from __future__ import annotations

import itertools
import json
from datetime import datetime, timedelta
from typing import Any

from llmtap.protocols import decode_exchange
from llmtap.protocols.headers import retry_after
from llmtap.protocols.providers import provider_of
from llmtap.storage.record import Recorded
from llmtap.storage.secrets import KeyFingerprinter

FINGERPRINTS = KeyFingerprinter(b"analytics-test-secret")

ANTHROPIC = ("anthropic.messages", "api.anthropic.com", "/v1/messages")
CHAT = ("openai.chat", "api.openai.com", "/v1/chat/completions")
RESPONSES = ("openai.responses", "api.openai.com", "/v1/responses")


def gemini(model: str, stream: bool = False) -> tuple[str, str, str]:
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return ("gemini.generate", "generativelanguage.googleapis.com", f"/v1beta/models/{model}:{method}")


# -- Anthropic Messages ------------------------------------------------------------------------

WEATHER = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
SEARCH = {
    "name": "search_docs",
    "description": "Search the docs",
    "input_schema": {
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["query"],
    },
}


def anthropic_request(
    model: str,
    messages: list[dict[str, Any]],
    *,
    system: str | None = None,
    tools: list[dict[str, Any]] | None = None,
    cache: str | None = "5m",
    stream: bool = False,
    max_tokens: int = 1024,
) -> dict[str, Any]:
    """A Messages request; `cache` puts a cache_control breakpoint on the system prompt
    (`"5m"`, `"1h"`) or nowhere (None)."""
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": messages}
    if system is not None:
        block: dict[str, Any] = {"type": "text", "text": system}
        if cache == "1h":
            block["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
        elif cache:
            block["cache_control"] = {"type": "ephemeral"}
        body["system"] = [block]
    if tools:
        body["tools"] = tools
    if stream:
        body["stream"] = True
    return body


def anthropic_usage(fresh: int, write: int, read: int, out: int, *, write_1h: bool = False) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "input_tokens": fresh,
        "cache_creation_input_tokens": write,
        "cache_read_input_tokens": read,
        "output_tokens": out,
    }
    if write:
        usage["cache_creation"] = {
            "ephemeral_5m_input_tokens": 0 if write_1h else write,
            "ephemeral_1h_input_tokens": write if write_1h else 0,
        }
    return usage


def anthropic_response(
    model: str,
    usage: dict[str, Any],
    *,
    text: str = "Done.",
    tool_uses: list[tuple[str, str, Any]] = (),
    stop_reason: str | None = None,
    msg_id: str,
) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": i, "name": n, "input": args} for i, n, args in tool_uses]
    return {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason or ("tool_use" if tool_uses else "end_turn"),
        "stop_sequence": "###" if stop_reason == "stop_sequence" else None,
        "usage": usage,
    }


def anthropic_error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def sse(events: list[tuple[str | None, dict[str, Any] | str]]) -> bytes:
    out = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
    return "".join(out).encode()


def anthropic_stream(model: str, msg_id: str, start_usage: dict[str, Any], text_parts: list[str], tail: str) -> bytes:
    """A text stream; `tail` is "stop" (message_delta + message_stop), "error" (an
    overloaded error event instead) or "cut" (the stream just ends)."""
    events: list[tuple[str | None, Any]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": start_usage,
                },
            },
        ),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
    ]
    for part in text_parts:
        events.append(
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": part}},
            )
        )
    if tail == "stop":
        events += [
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 12},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    elif tail == "error":
        events.append(("error", anthropic_error("overloaded_error", "Overloaded")))
    return sse(events)


# -- OpenAI Chat Completions ------------------------------------------------------------------


def chat_tool(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": spec["name"], "description": spec["description"], "parameters": spec["input_schema"]},
    }


def chat_request(
    model: str,
    user: str,
    *,
    tools: list[dict[str, Any]] | None = None,
    history: list[dict[str, Any]] = (),
    stream: bool = False,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": user}, *history],
    }
    if tools:
        body["tools"] = [chat_tool(t) for t in tools]
    if stream:
        body["stream"] = True
    return body


def chat_usage(prompt: int, completion: int, cached: int = 0, reasoning: int = 0) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": reasoning, "audio_tokens": 0},
    }


def chat_response(
    model: str,
    usage: dict[str, Any] | None,
    *,
    text: str | None = "OK.",
    tool_calls: list[tuple[str, str, str]] = (),
    finish: str = "stop",
    cid: str,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
    if tool_calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in tool_calls
        ]
    body: dict[str, Any] = {
        "id": cid,
        "object": "chat.completion",
        "created": 1793610000,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def chat_stream_without_usage(model: str, cid: str, parts: list[str]) -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        return {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": 1793610000,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    events: list[tuple[str | None, Any]] = [(None, chunk({"role": "assistant", "content": ""}, None))]
    events += [(None, chunk({"content": p}, None)) for p in parts]
    events += [(None, chunk({}, "stop")), (None, "[DONE]")]
    return sse(events)


def openai_error(message: str, kind: str, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


# -- OpenAI Responses -------------------------------------------------------------------------


def responses_request(model: str, user: str) -> dict[str, Any]:
    return {
        "model": model,
        "instructions": "Be brief.",
        "input": [{"role": "user", "content": user}],
        "reasoning": {"effort": "medium"},
    }


def responses_response(
    model: str, rid: str, *, input_tokens: int, cached: int, output: int, reasoning: int, text: str = "Answer."
) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "response",
        "created_at": 1793610000,
        "status": "completed",
        "model": model,
        "output": [
            {"type": "reasoning", "id": "rs_" + rid, "summary": []},
            {
                "type": "message",
                "id": "msg_" + rid,
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            },
        ],
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": output,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": input_tokens + output,
        },
    }


# -- Gemini generateContent -------------------------------------------------------------------


def gemini_request(user: str) -> dict[str, Any]:
    return {
        "contents": [{"role": "user", "parts": [{"text": user}]}],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
    }


_GEMINI_IDS = itertools.count(1)


def gemini_response(
    model: str,
    *,
    prompt: int,
    candidates: int,
    cached: int | None = None,
    thoughts: int | None = None,
    finish: str = "STOP",
    text: str = "Sure.",
) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": candidates,
        "totalTokenCount": prompt + candidates + (thoughts or 0),
    }
    if cached is not None:
        usage["cachedContentTokenCount"] = cached
    if thoughts is not None:
        usage["thoughtsTokenCount"] = thoughts
    return {
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": finish, "index": 0}],
        "usageMetadata": usage,
        "modelVersion": model,
        "responseId": f"gem-{next(_GEMINI_IDS)}",
    }


def gemini_error(code: int, status: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": status}}


# -- one stored record --------------------------------------------------------------------------


def record(
    where: tuple[str, str, str],
    request: dict[str, Any] | None,
    response: dict[str, Any] | bytes,
    *,
    at: datetime,
    team: str,
    status: int = 200,
    key: str | None = None,
    ttfb_ms: float = 300.0,
    ttft_ms: float | None = 400.0,
    duration_ms: float = 2000.0,
    headers: dict[str, str] | None = None,
    interrupted: str | None = None,
) -> Recorded:
    """Decode one exchange with the real translators and give it who and when."""
    protocol, host, path = where
    body = response if isinstance(response, bytes) else json.dumps(response).encode()
    streamed = isinstance(response, bytes)
    exchange = decode_exchange(
        protocol,
        response=body,
        request=json.dumps(request).encode() if request is not None else None,
        path=path,
        host=host,
        status=status,
        content_type="text/event-stream" if streamed else "application/json",
        provider=provider_of(protocol, host, path),  # as the proxy names it
    )
    if interrupted:
        exchange.interrupted = interrupted
    headers = {k.lower(): v for k, v in (headers or {}).items()}
    return Recorded(
        exchange=exchange,
        started_at=at,
        first_byte_at=at + timedelta(milliseconds=ttfb_ms),
        first_token_at=at + timedelta(milliseconds=ttft_ms) if ttft_ms is not None else None,
        ended_at=at + timedelta(milliseconds=duration_ms),
        team=team,
        key_fingerprint=FINGERPRINTS.fingerprint(key) if key else None,
        key_last4=FINGERPRINTS.last4(key) if key else None,
        source="test",
        host=host,
        path=path,
        retry_after_s=retry_after(headers.get("retry-after"), headers.get("retry-after-ms")),
        request_body=json.dumps(request).encode() if request is not None else None,
        response_body=body,
        response_content_type="text/event-stream" if streamed else "application/json",
    )
