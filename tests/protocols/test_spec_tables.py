"""SPEC §2's tables, row by row, through `decode_exchange`: the canonical usage of each
protocol (and Interactions' rule from the Streams paragraph), and each protocol's finish
reasons, with an unknown raw value and the two overrides every protocol shares.

The usage formulas below are copied from SPEC as text and summed over raw counts chosen so
that every field is a different power of ten: a field read from the wrong place, left out
or counted twice gives a different number.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from llmtap.protocols import Exchange, decode_exchange

PATHS = {
    "anthropic.messages": "/v1/messages",
    "openai.chat": "/v1/chat/completions",
    "openai.responses": "/v1/responses",
    "gemini.generate": "/v1beta/models/gemini-2.5-flash:generateContent",
    "gemini.interactions": "/v1beta/interactions",
}
PROTOCOLS = sorted(PATHS)


def decode(protocol: str, body: Any, *, status: int = 200) -> Exchange:
    return decode_exchange(
        protocol,
        response=json.dumps(body).encode(),
        path=PATHS[protocol],
        status=status,
        content_type="application/json",
    )


def decode_sse(protocol: str, events: list[Any], *, path: str | None = None) -> Exchange:
    """A stream of `data:` events; a `(name, data)` pair also sends an `event:` line."""
    lines = []
    for event in events:
        name, data = event if isinstance(event, tuple) else ("", event)
        lines.append((f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n")
    return decode_exchange(
        protocol,
        response="".join(lines).encode(),
        path=path or PATHS[protocol],
        status=200,
        content_type="text/event-stream",
    )


# -- the minimal non-streamed response of each protocol -----------------------------------


def anthropic(usage: Any = None, *, stop: Any = "end_turn", content: list[Any] | None = None) -> dict[str, Any]:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Hi."}] if content is None else content,
        "stop_reason": stop,
    }
    return body | ({"usage": usage} if usage is not None else {})


def chat(usage: Any = None, *, finish: Any = "stop", message: dict[str, Any] | None = None) -> dict[str, Any]:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4.1",
        "choices": [
            {"index": 0, "message": message or {"role": "assistant", "content": "Hi."}, "finish_reason": finish}
        ],
    }
    return body | ({"usage": usage} if usage is not None else {})


def responses(usage: Any = None, *, status: Any = "completed", output: list[Any] | None = None, **more: Any) -> Any:
    text = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hi."}]}
    body = {"id": "resp_1", "object": "response", "status": status, "model": "gpt-5", "output": output or [text]}
    return body | more | ({"usage": usage} if usage is not None else {})


def gemini(usage: Any = None, *, finish: Any = "STOP", parts: list[Any] | None = None) -> dict[str, Any]:
    candidate = {"index": 0, "content": {"role": "model", "parts": parts or [{"text": "Hi."}]}, "finishReason": finish}
    body = {"candidates": [candidate], "modelVersion": "gemini-2.5-flash", "responseId": "r1"}
    return body | ({"usageMetadata": usage} if usage is not None else {})


def interactions(usage: Any = None, *, status: Any = "completed", outputs: list[Any] | None = None) -> dict[str, Any]:
    body = {
        "id": "int_1",
        "status": status,
        "model": "gemini-3-pro-preview",
        "outputs": outputs or [{"type": "text", "text": "Hi."}],
    }
    return body | ({"usage": usage} if usage is not None else {})


BODY: dict[str, Callable[..., dict[str, Any]]] = {
    "anthropic.messages": anthropic,
    "openai.chat": chat,
    "openai.responses": responses,
    "gemini.generate": gemini,
    "gemini.interactions": interactions,
}


# -- canonical usage ------------------------------------------------------------------------

# Every raw count of each protocol's usage object (dotted paths into it), each a different
# power of ten.
RAW: dict[str, dict[str, int]] = {
    "anthropic.messages": {
        "input_tokens": 1,
        "cache_creation_input_tokens": 10,
        "cache_read_input_tokens": 100,
        "output_tokens": 1000,
        "output_tokens_details.thinking_tokens": 10000,
    },
    "openai.chat": {
        "prompt_tokens": 1,
        "prompt_tokens_details.cached_tokens": 10,
        "prompt_tokens_details.cache_write_tokens": 100,
        "completion_tokens": 1000,
        "completion_tokens_details.reasoning_tokens": 10000,
    },
    "openai.responses": {
        "input_tokens": 1,
        "input_tokens_details.cached_tokens": 10,
        "input_tokens_details.cache_write_tokens": 100,
        "output_tokens": 1000,
        "output_tokens_details.reasoning_tokens": 10000,
    },
    "gemini.generate": {
        "promptTokenCount": 1,
        "toolUsePromptTokenCount": 10,
        "cachedContentTokenCount": 100,
        "candidatesTokenCount": 1000,
        "thoughtsTokenCount": 10000,
    },
    "gemini.interactions": {
        "total_input_tokens": 1,
        "total_tool_use_tokens": 10,
        "total_cached_tokens": 100,
        "total_output_tokens": 1000,
        "total_thought_tokens": 10000,
    },
}

# SPEC §2 "Canonical usage", one row per canonical field; Interactions from "Streams:".
# "0" is a constant; "X, else 0" is X when reported (the else-branch is tested apart).
USAGE_TABLE: dict[str, dict[str, str]] = {
    "input_tokens": {
        "anthropic.messages": "input_tokens + cache_creation_input_tokens + cache_read_input_tokens",
        "openai.chat": "prompt_tokens",
        "openai.responses": "input_tokens",
        "gemini.generate": "promptTokenCount + toolUsePromptTokenCount",
        "gemini.interactions": "total_input_tokens + total_tool_use_tokens",
    },
    "cache_read_tokens": {
        "anthropic.messages": "cache_read_input_tokens",
        "openai.chat": "prompt_tokens_details.cached_tokens",
        "openai.responses": "input_tokens_details.cached_tokens",
        "gemini.generate": "cachedContentTokenCount",
        "gemini.interactions": "total_cached_tokens",
    },
    "cache_write_tokens": {
        "anthropic.messages": "cache_creation_input_tokens",
        "openai.chat": "prompt_tokens_details.cache_write_tokens, else 0",
        "openai.responses": "input_tokens_details.cache_write_tokens, else 0",
        "gemini.generate": "0",
        "gemini.interactions": "0",
    },
    "output_tokens": {
        "anthropic.messages": "output_tokens",
        "openai.chat": "completion_tokens",
        "openai.responses": "output_tokens",
        "gemini.generate": "candidatesTokenCount + thoughtsTokenCount",
        "gemini.interactions": "total_output_tokens + total_thought_tokens",
    },
    "reasoning_tokens": {
        "anthropic.messages": "output_tokens_details.thinking_tokens",
        "openai.chat": "completion_tokens_details.reasoning_tokens",
        "openai.responses": "output_tokens_details.reasoning_tokens",
        "gemini.generate": "thoughtsTokenCount",
        "gemini.interactions": "total_thought_tokens",
    },
}
USAGE_ROWS = [(field, protocol) for field, row in USAGE_TABLE.items() for protocol in PROTOCOLS]


def nested(flat: dict[str, int]) -> dict[str, Any]:
    """`{"a.b": 1}` as `{"a": {"b": 1}}`."""
    out: dict[str, Any] = {}
    for path, value in flat.items():
        *parents, leaf = path.split(".")
        node = out
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return out


def formula(protocol: str, text: str) -> int:
    """A SPEC formula over `RAW[protocol]`; every name in it must be one of the raw fields."""
    text = text.removesuffix(", else 0")
    if text == "0":
        return 0
    return sum(RAW[protocol][name] for name in text.split(" + "))


def test_the_usage_table_covers_every_canonical_field_and_raw_count() -> None:
    for protocol in PROTOCOLS:
        named = {n for row in USAGE_TABLE.values() for n in row[protocol].removesuffix(", else 0").split(" + ")}
        assert named - {"0"} == set(RAW[protocol]), protocol
    assert set(USAGE_TABLE) == {
        "input_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "output_tokens",
        "reasoning_tokens",
    }


@pytest.mark.parametrize(("field", "protocol"), USAGE_ROWS)
def test_canonical_usage_row(field: str, protocol: str) -> None:
    ex = decode(protocol, BODY[protocol](nested(RAW[protocol])))
    assert ex.usage is not None, ex.decode_error
    assert getattr(ex.usage, field) == formula(protocol, USAGE_TABLE[field][protocol])
    assert ex.usage_raw == nested(RAW[protocol])  # the provider's own object is kept too


@pytest.mark.parametrize("protocol", ["openai.chat", "openai.responses"])
def test_cache_write_else_zero(protocol: str) -> None:
    raw = {k: v for k, v in RAW[protocol].items() if not k.endswith("cache_write_tokens")}
    ex = decode(protocol, BODY[protocol](nested(raw)))
    assert ex.usage is not None
    assert ex.usage.cache_write_tokens == 0
    assert ex.usage.input_tokens == formula(protocol, USAGE_TABLE["input_tokens"][protocol])


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_reasoning_is_null_when_not_reported(protocol: str) -> None:
    unreported = formula_names(protocol, "reasoning_tokens")
    raw = {k: v for k, v in RAW[protocol].items() if k not in unreported}
    ex = decode(protocol, BODY[protocol](nested(raw)))
    assert ex.usage is not None
    assert ex.usage.reasoning_tokens is None
    # Gemini's output adds thoughts: with none reported, output is the rest of its sum.
    expected = sum(raw.get(name, 0) for name in USAGE_TABLE["output_tokens"][protocol].split(" + "))
    assert ex.usage.output_tokens == expected


def formula_names(protocol: str, field: str) -> set[str]:
    return set(USAGE_TABLE[field][protocol].removesuffix(", else 0").split(" + "))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_missing_counts_are_zero_inside_a_usage_object(protocol: str) -> None:
    only_output = {k: v for k, v in RAW[protocol].items() if k in formula_names(protocol, "output_tokens")}
    ex = decode(protocol, BODY[protocol](nested(only_output)))
    assert ex.usage is not None
    assert (ex.usage.input_tokens, ex.usage.cache_read_tokens, ex.usage.cache_write_tokens) == (0, 0, 0)
    assert ex.usage.output_tokens == sum(only_output.values())


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("usage", [None, {}, {"trafficType": "ON_DEMAND"}], ids=["absent", "empty", "no-counts"])
def test_usage_without_counts_is_null(protocol: str, usage: Any) -> None:
    ex = decode(protocol, BODY[protocol](usage))  # None: no usage object at all
    assert ex.decode_error is None
    assert ex.usage is None
    assert ex.usage_provenance == "missing"


# The Streams paragraph: where each stream's usage is, and which report wins.


def test_anthropic_stream_usage_message_delta_is_final_for_what_it_carries() -> None:
    start = {"input_tokens": 1, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 10, "output_tokens": 2}
    events = [
        ("message_start", {"type": "message_start", "message": {"id": "m", "model": "claude", "usage": start}}),
        (
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1000}},
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    ex = decode_sse("anthropic.messages", events)
    assert ex.usage is not None
    assert (ex.usage.input_tokens, ex.usage.cache_read_tokens, ex.usage.output_tokens) == (111, 100, 1000)


def test_chat_stream_usage_rides_the_final_chunk() -> None:
    usage = nested(RAW["openai.chat"])
    events = [
        {"id": "c", "model": "gpt-4.1", "choices": [{"index": 0, "delta": {"content": "Hi."}}]},
        {"id": "c", "model": "gpt-4.1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"id": "c", "model": "gpt-4.1", "choices": [], "usage": usage},
    ]
    ex = decode_sse("openai.chat", events)
    assert ex.usage is not None
    assert (ex.usage.input_tokens, ex.usage.output_tokens) == (1, 1000)


def test_gemini_stream_takes_the_last_cumulative_usage() -> None:
    path = PATHS["gemini.generate"].replace(":generateContent", ":streamGenerateContent?alt=sse")
    first = {"promptTokenCount": 1, "candidatesTokenCount": 10}
    last = {"promptTokenCount": 1, "candidatesTokenCount": 1000, "thoughtsTokenCount": 10000}
    events = [
        {"candidates": [{"content": {"parts": [{"text": "H"}]}}], "usageMetadata": first},
        {"candidates": [{"content": {"parts": [{"text": "i."}]}, "finishReason": "STOP"}], "usageMetadata": last},
    ]
    ex = decode_sse("gemini.generate", events, path=path)
    assert ex.usage is not None
    assert (ex.usage.output_tokens, ex.usage.reasoning_tokens) == (11000, 10000)


# -- canonical finish reasons ---------------------------------------------------------------

UNKNOWN = "a_value_no_spec_lists"

# SPEC §2's Gemini line, one value a line.
GEMINI_FINISH: list[tuple[str, str | None]] = [
    ("STOP", "end_turn"),
    ("MAX_TOKENS", "max_tokens"),
    ("SAFETY", "content_filter"),
    ("RECITATION", "content_filter"),
    ("BLOCKLIST", "content_filter"),
    ("PROHIBITED_CONTENT", "content_filter"),
    ("SPII", "content_filter"),
    ("IMAGE_SAFETY", "content_filter"),
    ("IMAGE_PROHIBITED_CONTENT", "content_filter"),
    ("IMAGE_RECITATION", "content_filter"),
    ("MODEL_ARMOR", "content_filter"),
    ("MALFORMED_FUNCTION_CALL", "error"),
    ("UNEXPECTED_TOOL_CALL", "error"),
    ("TOO_MANY_TOOL_CALLS", "error"),
    ("MISSING_THOUGHT_SIGNATURE", "error"),
    ("MALFORMED_RESPONSE", "error"),
    ("LANGUAGE", "error"),
    ("NO_IMAGE", "error"),
    ("OTHER", None),
    ("IMAGE_OTHER", None),
    ("FINISH_REASON_UNSPECIFIED", None),
    (UNKNOWN, None),
]
# "a `promptFeedback.blockReason` → `content_filter`", whichever reason.
GEMINI_BLOCK_REASONS = [
    "SAFETY",
    "OTHER",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "IMAGE_SAFETY",
    "MODEL_ARMOR",
    "JAILBREAK",
    UNKNOWN,
]

# SPEC §2 "Canonical finish reasons": (protocol, raw value, the body carrying it, canonical).
FINISH_ROWS: list[tuple[str, str, dict[str, Any], str | None]] = [
    *[
        ("anthropic.messages", raw, anthropic(stop=raw), canonical)
        for raw, canonical in [
            ("end_turn", "end_turn"),
            ("max_tokens", "max_tokens"),
            ("tool_use", "tool_use"),
            ("stop_sequence", "stop_sequence"),
            ("refusal", "refusal"),
            ("pause_turn", "pause_turn"),
            ("model_context_window_exceeded", "context_window"),
            ("compaction", "pause_turn"),
            (UNKNOWN, None),
        ]
    ],
    *[
        ("openai.chat", raw, chat(finish=raw), canonical)
        for raw, canonical in [
            ("stop", "end_turn"),
            ("length", "max_tokens"),
            ("tool_calls", "tool_use"),
            ("function_call", "tool_use"),
            ("content_filter", "content_filter"),
            (UNKNOWN, None),
        ]
    ],
    (
        "openai.chat",
        "stop",
        chat(message={"role": "assistant", "content": None, "refusal": "I can't help with that."}),
        "refusal",
    ),
    ("openai.responses", "completed", responses(), "end_turn"),
    (
        "openai.responses",
        "incomplete",
        responses(status="incomplete", incomplete_details={"reason": "max_output_tokens"}),
        "max_tokens",
    ),
    (
        "openai.responses",
        "incomplete",
        responses(status="incomplete", incomplete_details={"reason": "content_filter"}),
        "content_filter",
    ),
    ("openai.responses", "incomplete", responses(status="incomplete", incomplete_details={"reason": UNKNOWN}), None),
    (
        "openai.responses",
        "completed",
        responses(output=[{"type": "message", "content": [{"type": "refusal", "refusal": "I can't help."}]}]),
        "refusal",
    ),
    ("openai.responses", "failed", responses(status="failed"), "error"),
    ("openai.responses", UNKNOWN, responses(status=UNKNOWN), None),
    *[("gemini.generate", raw, gemini(finish=raw), canonical) for raw, canonical in GEMINI_FINISH],
    *[
        ("gemini.generate", raw, {"promptFeedback": {"blockReason": raw}, "modelVersion": "g"}, "content_filter")
        for raw in GEMINI_BLOCK_REASONS
    ],
    *[
        ("gemini.interactions", raw, interactions(status=raw), canonical)
        for raw, canonical in [
            ("completed", "end_turn"),
            ("requires_action", "tool_use"),
            ("incomplete", "max_tokens"),
            ("failed", "error"),
            (UNKNOWN, None),
        ]
    ],
]


@pytest.mark.parametrize(
    ("protocol", "raw", "body", "canonical"),
    FINISH_ROWS,
    ids=[f"{p}:{r}->{c}" for p, r, _, c in FINISH_ROWS],
)
def test_finish_reason_row(protocol: str, raw: str, body: dict[str, Any], canonical: str | None) -> None:
    ex = decode(protocol, body)
    assert ex.decode_error is None
    assert ex.complete
    assert (ex.finish_reason_raw, ex.finish_reason) == (raw, canonical)


# SPEC §1: "Vertex may send enums as their numbers (`"finishReason": 1`): they are read by
# the API's own numbering." Vertex AI's numbering, copied from its reference as text
# (google.cloud.aiplatform.v1 Candidate.FinishReason, PromptFeedback.BlockedReason,
# Modality, UsageMetadata.TrafficType); the raw value stays the number as it came.
VERTEX_PATH = "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent"
VERTEX_FINISH_NUMBERS = {
    0: "FINISH_REASON_UNSPECIFIED",
    1: "STOP",
    2: "MAX_TOKENS",
    3: "SAFETY",
    4: "RECITATION",
    5: "OTHER",
    6: "BLOCKLIST",
    7: "PROHIBITED_CONTENT",
    8: "SPII",
    9: "MALFORMED_FUNCTION_CALL",
    10: "MODEL_ARMOR",
    11: "IMAGE_SAFETY",
    12: "IMAGE_PROHIBITED_CONTENT",
    13: "IMAGE_RECITATION",
    14: "IMAGE_OTHER",
    15: "UNEXPECTED_TOOL_CALL",
    16: "NO_IMAGE",
}


def decode_vertex(body: Any, path: str = VERTEX_PATH) -> Exchange:
    return decode_exchange(
        "gemini.generate", response=json.dumps(body).encode(), path=path, status=200, content_type="application/json"
    )


@pytest.mark.parametrize(("number", "name"), VERTEX_FINISH_NUMBERS.items(), ids=VERTEX_FINISH_NUMBERS.values())
def test_vertex_numeric_finish_reason(number: int, name: str) -> None:
    ex = decode_vertex(gemini(finish=number))
    assert ex.decode_error is None and ex.complete
    assert (ex.finish_reason_raw, ex.finish_reason) == (str(number), dict(GEMINI_FINISH)[name])


def test_a_number_outside_vertex_numbering_is_kept_unread() -> None:
    ex = decode_vertex(gemini(finish=999))
    assert (ex.finish_reason_raw, ex.finish_reason) == ("999", None)


def test_numbers_on_a_google_ai_path_are_kept_unread() -> None:
    """The Gemini API numbers its enums its own way (its LANGUAGE is not Vertex's BLOCKLIST):
    no number is read by Vertex's numbering there."""
    ex = decode_vertex(gemini(finish=6), path=PATHS["gemini.generate"])
    assert (ex.finish_reason_raw, ex.finish_reason) == ("6", None)


@pytest.mark.parametrize("value", [True, 1.0, None, [], {}])
def test_a_finish_reason_that_is_no_name_or_number_is_not_read(value: Any) -> None:
    ex = decode_vertex(gemini(finish=value))
    assert (ex.finish_reason_raw, ex.finish_reason) == (None, None)


@pytest.mark.parametrize("number", [1, 2, 3, 4, 5, 6])  # SAFETY … JAILBREAK
def test_vertex_numeric_block_reason(number: int) -> None:
    ex = decode_vertex({"promptFeedback": {"blockReason": number}, "usageMetadata": {"trafficType": 1}})
    assert (ex.finish_reason_raw, ex.finish_reason, ex.complete) == (str(number), "content_filter", True)


def test_vertex_block_reason_zero_is_no_block() -> None:
    """0 is BLOCKED_REASON_UNSPECIFIED, the proto's unset value: nothing was blocked."""
    ex = decode_vertex(gemini(finish=1) | {"promptFeedback": {"blockReason": 0}})
    assert (ex.finish_reason_raw, ex.finish_reason) == ("1", "end_turn")


def test_vertex_numeric_modalities_and_traffic_type() -> None:
    usage = {
        "promptTokenCount": 300,
        "candidatesTokenCount": 40,
        "promptTokensDetails": [{"modality": 1, "tokenCount": 42}, {"modality": 2, "tokenCount": 258}],
        "cacheTokensDetails": [{"modality": 3, "tokenCount": 7}],
        "candidatesTokensDetails": [{"modality": 4, "tokenCount": 40}],
        "trafficType": 3,
    }
    ex = decode_vertex(gemini(usage, finish=1))
    assert ex.usage is not None
    assert ex.usage.modalities == {"input_image_tokens": 258, "cache_video_read_tokens": 7, "output_audio_tokens": 40}
    assert ex.service_tier == "priority"
    assert ex.usage_raw == usage  # the provider's own object, numbers and all


@pytest.mark.parametrize(("number", "tier"), [(0, None), (1, "standard"), (2, None), (3, "priority"), (4, "flex")])
def test_vertex_numeric_traffic_type(number: int, tier: str | None) -> None:
    ex = decode_vertex(gemini({"promptTokenCount": 1, "trafficType": number}, finish=1))
    assert ex.service_tier == tier


def test_vertex_numeric_enums_in_a_stream() -> None:
    path = VERTEX_PATH.replace(":generateContent", ":streamGenerateContent?alt=sse")
    events = [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hi"}]}}]},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "."}]}, "finishReason": 2}]},
    ]
    ex = decode_sse("gemini.generate", events, path=path)
    assert (ex.complete, ex.finish_reason_raw, ex.finish_reason, ex.text) == (True, "2", "max_tokens", "Hi.")


# "In every protocol: a natural stop whose output holds tool calls is `tool_use`."
NATURAL_STOP_WITH_CALLS = {
    "anthropic.messages": anthropic(
        stop="end_turn", content=[{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}}]
    ),
    "openai.chat": chat(
        finish="stop",
        message={
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}],
        },
    ),
    "openai.responses": responses(
        output=[{"type": "function_call", "call_id": "call_1", "name": "f", "arguments": '{"a":1}'}]
    ),
    "gemini.generate": gemini(finish="STOP", parts=[{"functionCall": {"name": "f", "args": {"a": 1}}}]),
    "gemini.interactions": interactions(
        status="completed", outputs=[{"type": "function_call", "id": "c1", "name": "f", "arguments": {"a": 1}}]
    ),
}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_natural_stop_with_tool_calls_is_tool_use(protocol: str) -> None:
    ex = decode(protocol, NATURAL_STOP_WITH_CALLS[protocol])
    assert [c.arguments for c in ex.tool_calls] == [{"a": 1}]
    assert ex.finish_reason == "tool_use"
    assert ex.finish_reason_raw in ("end_turn", "stop", "completed", "STOP")


# "... an error body or a mid-stream error event is `error`." The error bodies arrive with
# status 200 here, so the rule, not the HTTP status, must make them `error`.
ERROR_BODIES = {
    "anthropic.messages": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    "openai.chat": {"error": {"type": "server_error", "code": "boom", "message": "Upstream failed"}},
    "openai.responses": {"error": {"type": "server_error", "code": "boom", "message": "Upstream failed"}},
    "gemini.generate": {"error": {"code": 500, "status": "INTERNAL", "message": "Internal error"}},
    "gemini.interactions": {"error": {"code": 500, "status": "INTERNAL", "message": "Internal error"}},
}


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("status", [200, 500])
def test_an_error_body_is_error(protocol: str, status: int) -> None:
    ex = decode(protocol, ERROR_BODIES[protocol], status=status)
    assert ex.error is not None and ex.error.message is not None
    assert ex.finish_reason == "error"


# A stream that reached a natural stop with a tool call, then an error event: the error wins.
MIDSTREAM_ERRORS: dict[str, list[Any]] = {
    "anthropic.messages": [
        ("message_start", {"type": "message_start", "message": {"id": "m", "model": "claude", "usage": {}}}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "f"}},
        ),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}}),
        ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ("message_stop", {"type": "message_stop"}),
    ],
    "openai.chat": [
        {
            "id": "c",
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "f", "arguments": "{}"}}]
                    },
                }
            ],
        },
        {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"error": {"type": "server_error", "message": "Upstream failed"}},
    ],
    "openai.responses": [
        {"type": "response.created", "response": {"id": "r", "status": "in_progress", "output": []}},
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
        },
        {"type": "error", "code": "server_error", "message": "Upstream failed", "sequence_number": 3},
        {"type": "response.completed", "response": {"id": "r", "status": "completed"}},
    ],
    "gemini.generate": [
        {"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": {}}}]}, "finishReason": "STOP"}]},
        {"error": {"code": 500, "status": "INTERNAL", "message": "Internal error"}},
    ],
    "gemini.interactions": [
        {"event_type": "interaction.start", "interaction": {"id": "i", "status": "in_progress"}},
        {"event_type": "step.start", "index": 0, "step": {"type": "function_call", "id": "c1", "name": "f"}},
        {"event_type": "step.delta", "index": 0, "delta": {"type": "arguments_delta", "arguments": "{}"}},
        {"event_type": "error", "error": {"code": 500, "status": "INTERNAL", "message": "Internal error"}},
        {"event_type": "interaction.completed", "interaction": {"id": "i", "status": "completed"}},
    ],
}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_midstream_error_event_is_error(protocol: str) -> None:
    path = PATHS[protocol].replace(":generateContent", ":streamGenerateContent?alt=sse")
    ex = decode_sse(protocol, MIDSTREAM_ERRORS[protocol], path=path)
    assert ex.streamed and ex.decode_error is None
    assert len(ex.tool_calls) == 1
    assert ex.error is not None and ex.error.message is not None
    assert ex.finish_reason == "error"
