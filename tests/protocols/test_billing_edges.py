"""Edge cases of what the decoders report for billing, beyond the fixtures: Anthropic
`usage.iterations` with odd lists, server-tool counts that are zero or missing, the
requested tier standing in when the response names none, Gemini's grounding rule by model
generation, Vertex's `trafficType`, Interactions' own counts, and the same facts through
streams. Each case is a small wire body decoded by the real decoder.

Not responsible for whole realistic exchanges: test_billing_fixtures.py has those.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmtap.protocols import decode_exchange


def anthropic(usage: dict[str, Any], request: dict[str, Any] | None = None, model: str = "claude-sonnet-4-6") -> Any:
    body = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "usage": usage,
    }
    return decode_exchange(
        "anthropic.messages",
        response=json.dumps(body).encode(),
        request=json.dumps(request or {"model": model, "max_tokens": 10, "messages": []}).encode(),
        path="/v1/messages",
        host="api.anthropic.com",
        status=200,
    )


def iteration(kind: str, inp: int, out: int, read: int = 0, write: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "type": kind,
        "input_tokens": inp,
        "output_tokens": out,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write,
    } | extra


TOP = {"input_tokens": 100, "cache_read_input_tokens": 40, "cache_creation_input_tokens": 10, "output_tokens": 20}


def totals(ex: Any) -> tuple[int, int, int, int]:
    u = ex.usage
    return u.input_tokens, u.cache_read_tokens, u.cache_write_tokens, u.output_tokens


# -- Anthropic usage.iterations ------------------------------------------------------------


def test_executor_iterations_are_summed_and_cache_stays_the_top_levels():
    ex = anthropic(TOP | {"iterations": [iteration("compaction", 5000, 300, read=7), iteration("message", 100, 20)]})
    assert totals(ex) == (5000 + 100 + 40 + 10, 40, 10, 320)
    assert ex.usage.sub_usages == []


def test_only_an_advisor_iteration_leaves_the_top_level_and_adds_a_sub_usage():
    advisor = iteration("advisor_message", 300, 50, read=200, write=25, model="claude-opus-4-6")
    ex = anthropic(TOP | {"iterations": [advisor]})
    assert totals(ex) == (150, 40, 10, 20)
    assert ex.usage.sub_usages == [
        {
            "kind": "advisor",
            "model": "claude-opus-4-6",
            "input_tokens": 525,
            "cache_read_tokens": 200,
            "cache_write_tokens": 25,
            "output_tokens": 50,
        }
    ]


def test_empty_iterations_leave_the_top_level():
    assert totals(anthropic(TOP | {"iterations": []})) == (150, 40, 10, 20)


def test_unknown_iteration_types_and_non_objects_are_ignored():
    listed = [iteration("message", 100, 20), iteration("speculative_draft", 9999, 9999), "junk", None, 7]
    ex = anthropic(TOP | {"iterations": listed})
    assert totals(ex) == (150, 40, 10, 20)
    assert ex.usage.sub_usages == []


def test_missing_counts_in_iterations_are_zero():
    listed = [{"type": "compaction", "output_tokens": 30}, {"type": "message", "input_tokens": 100}]
    listed.append({"type": "advisor_message"})
    ex = anthropic(TOP | {"iterations": listed})
    assert totals(ex) == (150, 40, 10, 30)
    assert ex.usage.sub_usages == [
        {
            "kind": "advisor",
            "model": None,
            "input_tokens": 0,
            "cache_read_tokens": 0,
            "cache_write_tokens": 0,
            "output_tokens": 0,
        }
    ]


def test_a_fallback_keeps_the_top_level_and_names_the_model_that_served():
    listed = [iteration("message", 412, 0), iteration("fallback_message", 100, 20, model="claude-opus-4-8")]
    ex = anthropic(TOP | {"iterations": listed}, model="claude-fable-5")
    assert ex.model == "claude-opus-4-8"
    assert ex.model_requested == "claude-fable-5"
    assert totals(ex) == (150, 40, 10, 20)


def test_streamed_iterations_are_those_of_the_final_message_delta():
    start = {"input_tokens": 682, "output_tokens": 1}
    final = {"input_tokens": 682, "output_tokens": 50, "iterations": [iteration("compaction", 900, 5)]}
    final["iterations"].append(iteration("message", 682, 50))
    events = [
        {"type": "message_start", "message": {"id": "m", "model": "claude-opus-4-6", "content": [], "usage": start}},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": final},
        {"type": "message_stop"},
    ]
    body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    ex = decode_exchange("anthropic.messages", response=body, path="/v1/messages", content_type="text/event-stream")
    assert (ex.usage.input_tokens, ex.usage.output_tokens) == (1582, 55)


# -- Anthropic server tools, geo, speed, tier ----------------------------------------------


def test_server_tool_use_all_zero_is_empty():
    ex = anthropic(TOP | {"server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0}})
    assert ex.server_tool_uses == {}


@pytest.mark.parametrize(
    ("counts", "want"),
    [
        ({"web_fetch_requests": 3}, {"web_fetch": 3}),
        ({"web_search_requests": 2, "web_fetch_requests": 1}, {"web_search": 2, "web_fetch": 1}),
        ({"web_search_requests": "2", "web_fetch_requests": -1}, {}),
        ({}, {}),
    ],
)
def test_server_tool_use_counts(counts: dict[str, Any], want: dict[str, int]):
    assert anthropic(TOP | {"server_tool_use": counts}).server_tool_uses == want


def test_geo_speed_and_tier_come_from_the_usage():
    ex = anthropic(TOP | {"service_tier": "priority", "inference_geo": "us", "speed": "fast"})
    assert (ex.service_tier, ex.inference_geo, ex.speed) == ("priority", "us", "fast")
    plain = anthropic(TOP)
    assert (plain.service_tier, plain.inference_geo, plain.speed) == (None, None, None)


@pytest.mark.parametrize(
    ("requested", "served", "want"),
    [
        ("auto", None, None),
        ("standard_only", None, "standard"),
        ("auto", "priority", "priority"),
        ("standard_only", "standard", "standard"),
    ],
)
def test_anthropic_requested_tier_stands_in(requested: str, served: str | None, want: str | None):
    usage = TOP | ({"service_tier": served} if served else {})
    request = {"model": "claude-sonnet-4-6", "max_tokens": 10, "messages": [], "service_tier": requested}
    assert anthropic(usage, request).service_tier == want


# -- OpenAI --------------------------------------------------------------------------------


def responses(body: dict[str, Any], request: dict[str, Any] | None = None) -> Any:
    full = {"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-5.5"} | body
    return decode_exchange(
        "openai.responses",
        response=json.dumps(full).encode(),
        request=json.dumps(request or {"model": "gpt-5.5", "input": "hi"}).encode(),
        path="/v1/responses",
        host="api.openai.com",
    )


@pytest.mark.parametrize(
    ("requested", "served", "want"),
    [
        ("flex", None, "flex"),
        ("auto", None, None),
        ("auto", "auto", None),  # still running: the object echoes the request, no tier yet
        ("auto", "default", "default"),
        ("auto", "scale", "scale"),
        ("priority", "default", "default"),
        (None, None, None),
        ("FLEX", None, "flex"),
    ],
)
def test_responses_tier_served_else_requested(requested: str | None, served: str | None, want: str | None):
    request = {"model": "gpt-5.5", "input": "hi"} | ({"service_tier": requested} if requested else {})
    body = {"service_tier": served} if served else {}
    assert responses(body, request).service_tier == want


def test_responses_counts_billed_tool_items():
    output = [
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        {"type": "web_search_call", "id": "ws_2", "status": "completed"},
        {"type": "file_search_call", "id": "fs_1", "status": "completed", "queries": ["a"]},
        {"type": "code_interpreter_call", "id": "ci_1", "status": "completed"},
        {"type": "image_generation_call", "id": "ig_1", "status": "completed"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
    ]
    assert responses({"output": output}).server_tool_uses == {"web_search": 2, "file_search": 1, "code_execution": 1}


def test_responses_modalities_from_usage_details():
    usage = {
        "input_tokens": 500,
        "input_tokens_details": {"cached_tokens": 0, "audio_tokens": 300, "image_tokens": 0},
        "output_tokens": 200,
        "output_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 150},
        "total_tokens": 700,
    }
    assert responses({"usage": usage}).usage.modalities == {"input_audio_tokens": 300, "output_audio_tokens": 150}


@pytest.mark.parametrize(
    ("requested", "served", "want"),
    [
        ("auto", "default", "default"),
        ("auto", "priority", "priority"),
        ("auto", None, None),
        ("auto", "auto", None),
        ("flex", None, "flex"),
    ],
)
def test_chat_tier_served_else_requested(requested: str, served: str | None, want: str | None):
    body = {"id": "c", "model": "gpt-5.5", "choices": []} | ({"service_tier": served} if served else {})
    request = {"model": "gpt-5.5", "messages": [], "service_tier": requested}
    ex = decode_exchange(
        "openai.chat",
        response=json.dumps(body).encode(),
        request=json.dumps(request).encode(),
        path="/v1/chat/completions",
    )
    assert ex.service_tier == want


def test_chat_stream_keeps_tier_and_modalities():
    chunks = [
        {"id": "c", "model": "gpt-4o-audio-preview", "service_tier": "default", "choices": [{"index": 0, "delta": {}}]},
        {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {
            "id": "c",
            "choices": [],
            "usage": {
                "prompt_tokens": 40,
                "completion_tokens": 90,
                "total_tokens": 130,
                "prompt_tokens_details": {"audio_tokens": 30, "cached_tokens_details": {"audio_tokens": 10}},
                "completion_tokens_details": {"audio_tokens": 70, "image_tokens": 0},
            },
        },
    ]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    ex = decode_exchange("openai.chat", response=body.encode(), path="/v1/chat/completions")
    assert ex.service_tier == "default"
    assert ex.usage.modalities == {
        "input_audio_tokens": 30,
        "cache_audio_read_tokens": 10,
        "output_audio_tokens": 70,
    }


def test_chat_without_details_has_no_modalities():
    body = {"id": "c", "model": "m", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}}
    ex = decode_exchange("openai.chat", response=json.dumps(body).encode(), path="/v1/chat/completions")
    assert ex.usage.modalities == {}
    assert ex.service_tier is None


# -- Gemini --------------------------------------------------------------------------------


def gemini(candidate: dict[str, Any], model: str, usage: dict[str, Any] | None = None, request: Any = None) -> Any:
    body = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"} | candidate],
        "usageMetadata": usage or {"promptTokenCount": 5, "candidatesTokenCount": 2, "totalTokenCount": 7},
        "modelVersion": model,
    }
    return decode_exchange(
        "gemini.generate",
        response=json.dumps(body).encode(),
        request=json.dumps(request or {"contents": []}).encode(),
        path=f"/v1beta/models/{model}:generateContent",
    )


QUERIES = ["a", "b", "", "b", "  ", "c"]


@pytest.mark.parametrize(
    ("model", "queries", "want"),
    [
        ("gemini-2.5-flash", QUERIES, {"web_search": 1}),
        ("gemini-2.0-flash", ["a"], {"web_search": 1}),
        ("gemini-3-pro-preview", QUERIES, {"web_search": 3}),
        ("gemini-3.1-flash-lite", ["x"], {"web_search": 1}),
        ("gemini-10-ultra", ["x", "y"], {"web_search": 2}),
        ("gemini-flash-latest", QUERIES, {"web_search": 1}),
        ("gemini-3-flash-preview", ["", " "], {}),
        ("gemini-3-flash-preview", [], {}),
    ],
)
def test_gemini_grounding_by_generation(model: str, queries: list[str], want: dict[str, int]):
    ex = gemini({"groundingMetadata": {"webSearchQueries": queries}}, model)
    assert ex.server_tool_uses == want


def test_gemini_without_grounding_has_no_uses():
    assert gemini({}, "gemini-3-flash-preview").server_tool_uses == {}


@pytest.mark.parametrize(
    ("traffic", "requested", "want"),
    [
        ("ON_DEMAND_FLEX", None, "flex"),
        ("ON_DEMAND_PRIORITY", "priority", "priority"),
        ("ON_DEMAND", "priority", "standard"),
        ("PROVISIONED_THROUGHPUT", None, None),
        (None, "flex", "flex"),
        (None, None, None),
    ],
)
def test_gemini_tier_from_traffic_type_else_request(traffic: str | None, requested: str | None, want: str | None):
    usage: dict[str, Any] = {"promptTokenCount": 5, "candidatesTokenCount": 2}
    if traffic:
        usage["trafficType"] = traffic
    request: dict[str, Any] = {"contents": []} | ({"service_tier": requested} if requested else {})
    assert gemini({}, "gemini-3-flash-preview", usage, request).service_tier == want


def test_gemini_modalities_leave_text_and_documents_out():
    usage = {
        "promptTokenCount": 1000,
        "candidatesTokenCount": 300,
        "cachedContentTokenCount": 400,
        "toolUsePromptTokenCount": 50,
        "promptTokensDetails": [
            {"modality": "TEXT", "tokenCount": 100},
            {"modality": "DOCUMENT", "tokenCount": 200},
            {"modality": "IMAGE", "tokenCount": 258},
            {"modality": "VIDEO", "tokenCount": 442},
        ],
        "toolUsePromptTokensDetails": [{"modality": "IMAGE", "tokenCount": 50}],
        "cacheTokensDetails": [{"modality": "VIDEO", "tokenCount": 400}],
        "candidatesTokensDetails": [{"modality": "IMAGE", "tokenCount": 290}, {"modality": "TEXT", "tokenCount": 10}],
    }
    ex = gemini({}, "gemini-2.5-flash-image", usage)
    assert ex.usage.modalities == {
        "input_image_tokens": 308,
        "input_video_tokens": 442,
        "cache_video_read_tokens": 400,
        "output_image_tokens": 290,
    }


# -- Gemini Interactions -------------------------------------------------------------------


def interaction(body: dict[str, Any], request: dict[str, Any] | None = None) -> Any:
    full = {"id": "int_1", "status": "completed", "model": "gemini-3-flash-preview"} | body
    return decode_exchange(
        "gemini.interactions",
        response=json.dumps(full).encode(),
        request=json.dumps(request or {"model": "gemini-3-flash-preview", "input": "hi"}).encode(),
        path="/v1beta/interactions",
    )


def test_interactions_take_the_usages_grounding_count():
    usage = {
        "total_input_tokens": 10,
        "total_output_tokens": 5,
        "grounding_tool_count": [{"type": "google_search", "count": 4}, {"type": "google_maps", "count": 2}],
    }
    steps = [{"type": "google_search_call", "id": "s1", "arguments": {"queries": ["only one"]}}]
    assert interaction({"usage": usage, "steps": steps}).server_tool_uses == {"web_search": 4}


def test_interactions_count_search_steps_without_a_usage_count():
    steps = [
        {"type": "google_search_call", "id": "s1", "arguments": {"queries": ["a", "b"]}},
        {"type": "google_search_call", "id": "s2", "arguments": {"queries": ["b", ""]}},
        {"type": "model_output", "content": [{"type": "text", "text": "ok"}]},
    ]
    usage = {"total_input_tokens": 10, "total_output_tokens": 5}
    assert interaction({"usage": usage, "steps": steps}).server_tool_uses == {"web_search": 2}
    older = interaction({"usage": usage, "steps": steps, "model": "gemini-2.5-flash"})
    assert older.server_tool_uses == {"web_search": 1}


def test_interactions_tier_and_modalities():
    usage = {
        "total_input_tokens": 900,
        "total_output_tokens": 100,
        "input_tokens_by_modality": [{"modality": "text", "tokens": 100}, {"modality": "audio", "tokens": 800}],
        "output_tokens_by_modality": [{"modality": "image", "tokens": 100}],
    }
    ex = interaction({"usage": usage, "service_tier": "flex"}, {"model": "gemini-3-flash-preview", "input": "hi"})
    assert ex.service_tier == "flex"
    assert ex.usage.modalities == {"input_audio_tokens": 800, "output_image_tokens": 100}
    asked = interaction(
        {"usage": usage}, {"model": "gemini-3-flash-preview", "input": "hi", "service_tier": "priority"}
    )
    assert asked.service_tier == "priority"


# -- the printed record --------------------------------------------------------------------


def test_the_record_prints_every_billing_field():
    record = anthropic(TOP | {"iterations": [iteration("advisor_message", 1, 1, model="m")]}).to_dict()
    for key in ("service_tier", "inference_geo", "speed", "server_tool_uses"):
        assert key in record
    assert {"modalities", "sub_usages"} <= set(record["usage"])
    json.dumps(record)  # plain JSON all the way down


@pytest.mark.parametrize(
    ("word", "want"),
    [
        ("US", "us"),
        (" not_available ", "not_available"),
        ("x" * 17, None),
        ("pri ority", None),
        ("<b>fast</b>", None),
        (17, None),
        ("", None),
    ],
)
def test_served_words_are_short_plain_words(word: Any, want: str | None):
    ex = anthropic(TOP | {"inference_geo": word, "speed": word, "service_tier": word})
    assert (ex.inference_geo, ex.speed, ex.service_tier) == (want, want, want)


def test_gemini_stream_keeps_queries_listed_before_the_last_chunk():
    def chunk(text: str, grounding: dict[str, Any], final: bool = False) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}
        candidate["groundingMetadata"] = grounding
        if final:
            candidate["finishReason"] = "STOP"
        usage = {"promptTokenCount": 5, "candidatesTokenCount": 2}
        return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": "gemini-3-flash-preview"}

    chunks = [
        chunk("a", {"webSearchQueries": ["q1", "q2"]}),
        chunk("b", {"webSearchQueries": ["q2", "q3"]}),
        chunk("c", {"groundingSupports": [{"segment": {"startIndex": 0, "endIndex": 3}}]}, final=True),
    ]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode()
    path = "/v1beta/models/gemini-3-flash-preview:streamGenerateContent?alt=sse"
    ex = decode_exchange("gemini.generate", response=body, path=path, content_type="text/event-stream")
    assert ex.complete
    assert ex.server_tool_uses == {"web_search": 3}


def test_a_decoder_pickled_before_requested_tiers_still_finishes():
    import pickle

    from llmtap.protocols import ExchangeDecoder

    body = json.dumps({"id": "r", "status": "completed", "model": "gpt-5.5", "output": []}).encode()
    decoder = ExchangeDecoder("openai.responses", path="/v1/responses")  # no request body kept
    decoder.feed(body)
    decoder.end_response()
    state = decoder.__getstate__()
    del state["_requested_tier"]  # as a spool written by the previous version holds it
    old = ExchangeDecoder.__new__(ExchangeDecoder)
    old.__setstate__(state)
    record = old.finish()
    assert record.decode_error is None and record.service_tier is None

    request = json.dumps({"model": "gpt-5.5", "input": "hi", "service_tier": "flex"}).encode()
    asked = ExchangeDecoder("openai.responses", request=request, path="/v1/responses")
    asked.feed(body)
    asked.end_response()
    assert pickle.loads(pickle.dumps(asked)).finish().service_tier == "flex"


def test_a_hostile_gemini_version_is_a_grounded_prompt_not_a_crash():
    ex = gemini({"groundingMetadata": {"webSearchQueries": ["a", "b"]}}, "gemini-" + "9" * 5000)
    assert ex.decode_error is None
    assert ex.server_tool_uses == {"web_search": 1}


# -- counts that are no counts ----------------------------------------------------------------


def _decoded(protocol: str, path: str, host: str, body: dict[str, Any]) -> Any:
    return decode_exchange(
        protocol,
        response=json.dumps(body).encode(),
        request=json.dumps({"model": "m", "messages": []}).encode(),
        path=path,
        host=host,
        status=200,
    )


NEGATIVE_USAGE = [
    pytest.param(
        "anthropic.messages",
        "/v1/messages",
        "api.anthropic.com",
        {
            "id": "msg_01",
            "type": "message",
            "model": "claude-sonnet-4-6",
            "content": [],
            "stop_reason": "end_turn",
            "usage": {
                "input_tokens": -1_000_000,
                "cache_read_input_tokens": -5,
                "cache_creation_input_tokens": 7,
                "output_tokens": 3,
            },
        },
        id="anthropic",
    ),
    pytest.param(
        "openai.chat",
        "/v1/chat/completions",
        "api.openai.com",
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-4o",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
            "usage": {
                "prompt_tokens": 10,
                "completion_tokens": -1_000_000,
                "prompt_tokens_details": {"cached_tokens": -4},
            },
        },
        id="openai-chat",
    ),
    pytest.param(
        "openai.responses",
        "/v1/responses",
        "api.openai.com",
        {
            "id": "resp_1",
            "object": "response",
            "status": "completed",
            "model": "gpt-4o",
            "output": [],
            "usage": {
                "input_tokens": -10,
                "output_tokens": 4,
                "output_tokens_details": {"reasoning_tokens": -2},
            },
        },
        id="openai-responses",
    ),
    pytest.param(
        "gemini.generate",
        "/v1beta/models/gemini-2.5-flash:generateContent",
        "generativelanguage.googleapis.com",
        {
            "candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}],
            "modelVersion": "gemini-2.5-flash",
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "thoughtsTokenCount": -1_000_000},
        },
        id="gemini",
    ),
]


@pytest.mark.parametrize(("protocol", "path", "host", "body"), NEGATIVE_USAGE)
def test_a_negative_count_is_no_count(protocol: str, path: str, host: str, body: dict[str, Any]) -> None:
    """An upstream (or a forged import) that reports a negative count must not lower a
    bill: the count is missing, and no canonical count comes out below zero."""
    ex = _decoded(protocol, path, host, body)
    assert ex.decode_error is None
    assert ex.usage is not None
    counts = {
        name: getattr(ex.usage, name)
        for name in (
            "input_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "output_tokens",
            "reasoning_tokens",
        )
    }
    assert all(value is None or value >= 0 for value in counts.values()), counts
