"""Every span llmtap makes against the GenAI semantic conventions (genai_conventions.py):
each attribute key is one the conventions define (or `llmtap.*`), with the conventions'
type; enum values are the well-known ones; no retired name is sent; the installed
semconv package agrees wherever it is current. The spans are made from every recorded
case of the corpora (tests/corpus, tests/corpus_next) through the real ingest path, and
from requests that set every setting a translator keeps, so a key renamed on either side
fails here.

Also the values the conventions ask for where llmtap knows them: token counts with
llmtap's canonical meaning (input includes cache reads and writes, output includes
reasoning), `error` for a generation that ended without a finish reason, the request's
settings, stream flag and time to first chunk, and a conversation id only for a
conversation the wire named. Hostile settings (wrong types, huge numbers, endless stop
lists) are left out.

Not responsible for spans on the wire (test_otlp_export.py) or against export's rows
(test_otlp_history.py).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes, openai_attributes

from llmtap.storage.ingest import HttpExchange, to_record
from llmtap.storage.rows import rows_for
from llmtap.storage.secrets import KeyFingerprinter
from llmtap.telemetry.otlp_spans import SpanParts, from_table_row, span_parts, trace_key
from tests.corpus_tools import CORPUS, CORPUS_NEXT, case_folders, read_case
from tests.telemetry import genai_conventions as semconv

AT = datetime(2026, 11, 4, 9, 0, tzinfo=UTC)
FINGERPRINTER = KeyFingerprinter(b"otlp-conventions-test-secret-000")


def exported_span(exchange: HttpExchange) -> tuple[dict[str, Any], SpanParts]:
    """An exchange's export row and the span the live export makes of it (its
    conversation: its own id)."""
    rows = rows_for(to_record(exchange, fingerprinter=FINGERPRINTER))
    row = rows.exchanges[0]
    exported = from_table_row(row, rows.tool_calls)
    exported["conversation_id"] = row["id"]
    return exported, span_parts(exported, trace_key(row["thread_key"], row["id"], row["id"]))


def span_of(exchange: HttpExchange) -> SpanParts:
    return exported_span(exchange)[1]


def exchange(
    host: str,
    path: str,
    request: dict[str, Any] | bytes | None,
    response: bytes,
    status: int = 200,
    content_type: str = "application/json",
    headers: tuple[tuple[str, str], ...] = (),
) -> HttpExchange:
    body = request if isinstance(request, bytes | None) else json.dumps(request).encode()
    return HttpExchange(
        method="POST",
        host=host,
        path=path,
        request_headers=[("content-type", "application/json"), *headers],
        request_body=body,
        status=status,
        response_headers=[("content-type", content_type)],
        response_body=response,
        response_encoded=False,
        started_at=AT,
        first_byte_at=AT + timedelta(milliseconds=250),
        ended_at=AT + timedelta(seconds=2),
    )


def corpus_cases() -> list[Path]:
    return case_folders(CORPUS) + case_folders(CORPUS_NEXT)


def from_case(folder: Path, cut: bool = False) -> HttpExchange:
    case, body, request = read_case(folder)
    return exchange(
        case["host"],
        case["path"],
        request,
        body[: len(body) // 2] if cut else body,
        case["status"],
        case["content_type"],
    )


ANTHROPIC_REPLY = json.dumps(
    {
        "id": "msg_01conventions",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": "Done."}],
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 10,
            "cache_creation_input_tokens": 200,
            "cache_read_input_tokens": 3000,
            "output_tokens": 40,
        },
    }
).encode()
CHAT_REPLY = json.dumps(
    {
        "id": "chatcmpl-conventions",
        "object": "chat.completion",
        "model": "gpt-5-2025-08-07",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "{}"}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": 1200,
            "completion_tokens": 300,
            "prompt_tokens_details": {"cached_tokens": 1024},
            "completion_tokens_details": {"reasoning_tokens": 256},
        },
    }
).encode()
GEMINI_REPLY = json.dumps(
    {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "{}"}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 90, "candidatesTokenCount": 10, "thoughtsTokenCount": 30},
        "modelVersion": "gemini-3-pro-preview",
        "responseId": "gem-conventions",
    }
).encode()

# requests that set every setting a translator keeps (the providers' request references)
FULL = [
    exchange(
        "api.anthropic.com",
        "/v1/messages",
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "temperature": 0.2,
            "top_p": 0.9,
            "top_k": 40,
            "stop_sequences": ["</answer>"],
            "messages": [{"role": "user", "content": "Hi"}],
        },
        ANTHROPIC_REPLY,
        headers=(("x-claude-code-session-id", "session-conventions-1"),),
    ),
    exchange(
        "api.openai.com",
        "/v1/chat/completions",
        {
            "model": "gpt-5",
            "messages": [{"role": "user", "content": "Hi"}],
            "max_completion_tokens": 500,
            "temperature": 1,
            "top_p": 0.5,
            "stop": "END",
            "n": 2,
            "seed": 7,
            "service_tier": "flex",
            "reasoning_effort": "minimal",
            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}},
        },
        CHAT_REPLY,
    ),
    exchange(
        "api.openai.com",
        "/v1/responses",
        {
            "model": "gpt-5",
            "input": "Hi",
            "previous_response_id": "resp_0123456789abcdef",
            "reasoning": {"effort": "high"},
            "text": {"format": {"type": "json_object"}},
            "service_tier": "auto",
        },
        json.dumps(
            {
                "id": "resp_conventions",
                "object": "response",
                "status": "completed",
                "model": "gpt-5-2025-08-07",
                "output": [],
                "usage": {
                    "input_tokens": 50,
                    "output_tokens": 20,
                    "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens_details": {"reasoning_tokens": 12},
                },
            }
        ).encode(),
    ),
    exchange(
        "generativelanguage.googleapis.com",
        "/v1beta/models/gemini-3-pro-preview:generateContent",
        {
            "contents": [{"role": "user", "parts": [{"text": "Hi"}]}],
            "generationConfig": {
                "temperature": 0.4,
                "topP": 0.95,
                "topK": 64.0,
                "candidateCount": 1,
                "stopSequences": ["x", "y"],
                "responseMimeType": "application/json",
                "thinkingConfig": {"thinkingLevel": "low"},
            },
        },
        GEMINI_REPLY,
    ),
]


def spans() -> list[SpanParts]:
    made = [span_of(from_case(folder)) for folder in corpus_cases()]
    made += [span_of(from_case(folder, cut=True)) for folder in corpus_cases()]
    return made + [span_of(e) for e in FULL]


@pytest.fixture(scope="module")
def every_span() -> list[SpanParts]:
    return spans()


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    assert isinstance(value, list) and value, value
    return f"{_kind(value[0])}[]"


def test_every_key_is_the_conventions_or_ours_with_its_type(every_span: list[SpanParts]) -> None:
    seen: set[str] = set()
    for span in every_span:
        for key, value in span.attributes.items():
            seen.add(key)
            if key.startswith("llmtap."):
                continue
            kind = semconv.known(key)
            assert kind is not None, f"{key} is no key of the GenAI conventions ({semconv.SCHEMA_URL})"
            assert kind in ("any", _kind(value)), (key, value)
        assert not set(span.attributes) & set(semconv.RETIRED), span.attributes
    # the spans say what llmtap knows, under the current names
    assert seen >= {
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.usage.cache_write.input_tokens",
        "gen_ai.usage.reasoning.output_tokens",
        "gen_ai.request.stream",
        "gen_ai.response.time_to_first_chunk",
        "gen_ai.request.reasoning.level",
        "gen_ai.request.previous_response.id",
        "gen_ai.output.type",
        "gen_ai.conversation.id",
        "openai.api.type",
        "error.type",
    }


def test_enum_values_are_the_well_known_ones(every_span: list[SpanParts]) -> None:
    providers = set()
    for span in every_span:
        a = span.attributes
        assert a["gen_ai.operation.name"] in semconv.OPERATIONS
        providers.add(a["gen_ai.provider.name"])
        assert a.get("gen_ai.output.type", "text") in semconv.OUTPUT_TYPES
        assert a.get("openai.api.type", "responses") in semconv.OPENAI_API_TYPES
        model = a.get("gen_ai.request.model") or a.get("gen_ai.response.model")
        assert span.name == (f"{a['gen_ai.operation.name']} {model}" if model else a["gen_ai.operation.name"])
    assert providers <= semconv.PROVIDERS
    assert providers >= {"anthropic", "openai", "gcp.gemini", "gcp.vertex_ai", "aws.bedrock", "azure.ai.openai"}


def test_the_installed_package_agrees_where_it_is_current(every_span: list[SpanParts]) -> None:
    package = {
        value
        for module in (gen_ai_attributes, openai_attributes)
        for value in vars(module).values()
        if isinstance(value, str)
    }
    emitted = {key for span in every_span for key in span.attributes if key.startswith(("gen_ai.", "openai."))}
    assert emitted - package == emitted & semconv.LAGGING
    assert not semconv.LAGGING & package, "the package caught up: drop these from LAGGING"
    assert "gen_ai.usage.cache_creation.input_tokens" in package  # the name it still has


def test_token_counts_keep_llmtaps_meaning() -> None:
    anthropic, chat, responses, gemini = (span_of(e).attributes for e in FULL)
    # Anthropic's input_tokens leaves the cache out; the conventions' (and llmtap's) count it
    assert anthropic["gen_ai.usage.input_tokens"] == 10 + 200 + 3000
    assert anthropic["gen_ai.usage.cache_read.input_tokens"] == 3000
    assert anthropic["gen_ai.usage.cache_write.input_tokens"] == 200
    assert "gen_ai.usage.reasoning.output_tokens" not in anthropic  # not reported: missing, not 0
    assert (chat["gen_ai.usage.input_tokens"], chat["gen_ai.usage.cache_read.input_tokens"]) == (1200, 1024)
    assert (chat["gen_ai.usage.output_tokens"], chat["gen_ai.usage.reasoning.output_tokens"]) == (300, 256)
    assert responses["gen_ai.usage.reasoning.output_tokens"] == 12
    # Gemini's candidates leave thoughts out; output includes reasoning
    assert (gemini["gen_ai.usage.output_tokens"], gemini["gen_ai.usage.reasoning.output_tokens"]) == (40, 30)


def test_request_settings_become_request_attributes() -> None:
    anthropic, chat, responses, gemini = (span_of(e).attributes for e in FULL)
    assert (anthropic["gen_ai.request.temperature"], anthropic["gen_ai.request.top_k"]) == (0.2, 40)
    assert anthropic["gen_ai.request.stop_sequences"] == ["</answer>"]
    assert "openai.api.type" not in anthropic
    assert chat["gen_ai.request.temperature"] == 1.0 and isinstance(chat["gen_ai.request.temperature"], float)
    assert chat["gen_ai.request.stop_sequences"] == ["END"]
    assert (chat["gen_ai.request.choice.count"], chat["gen_ai.request.seed"]) == (2, 7)
    assert (chat["gen_ai.output.type"], chat["gen_ai.request.reasoning.level"]) == ("json", "minimal")
    assert (chat["openai.api.type"], chat["openai.request.service_tier"]) == ("chat_completions", "flex")
    assert chat["gen_ai.request.max_tokens"] == 500
    assert responses["gen_ai.request.previous_response.id"] == "resp_0123456789abcdef"
    assert (responses["gen_ai.output.type"], responses["gen_ai.request.reasoning.level"]) == ("json", "high")
    assert responses["openai.api.type"] == "responses"
    assert "openai.request.service_tier" not in responses  # `auto` is left out, as the refinement says
    assert (gemini["gen_ai.request.top_k"], gemini["gen_ai.request.top_p"]) == (64, 0.95)
    assert "gen_ai.request.choice.count" not in gemini  # 1 is the default: not set
    assert (gemini["gen_ai.output.type"], gemini["gen_ai.request.reasoning.level"]) == ("json", "low")
    assert gemini["gen_ai.provider.name"] == "gcp.gemini"
    for attributes in (anthropic, chat, responses, gemini):
        assert "gen_ai.request.stream" not in attributes  # set only when the request streams
        assert "gen_ai.response.time_to_first_chunk" not in attributes


def test_streams_say_so_with_their_time_to_first_chunk() -> None:
    streamed = [s.attributes for s in map(span_of, map(from_case, corpus_cases())) if s.attributes["llmtap.streamed"]]
    assert len(streamed) >= 20
    for attributes in streamed:
        assert attributes["gen_ai.request.stream"] is True
        assert attributes["gen_ai.response.time_to_first_chunk"] == 0.25


def test_a_generation_without_a_finish_reason_reports_error() -> None:
    unfinished = 0
    for folder in corpus_cases():
        row, span = exported_span(from_case(folder, cut=True))
        reason = row["finish_reason_raw"] or row["finish_reason"]
        if reason is None:
            unfinished += 1
        assert span.attributes["gen_ai.response.finish_reasons"] == [reason or "error"], folder.name
    assert unfinished >= 20
    # a background response's first answer is queued, not failed: no reason yet
    queued = exchange(
        "api.openai.com",
        "/v1/responses",
        {"model": "gpt-5", "input": "Hi", "background": True},
        json.dumps(
            {"id": "resp_bg", "object": "response", "status": "queued", "model": "gpt-5", "output": []}
        ).encode(),
    )
    assert "gen_ai.response.finish_reasons" not in span_of(queued).attributes


def test_only_a_conversation_the_wire_named_is_a_gen_ai_conversation() -> None:
    session, chat = span_of(FULL[0]).attributes, span_of(FULL[1]).attributes
    assert session["gen_ai.conversation.id"] == session["llmtap.conversation.id"]
    # the prefix rule's conversation is llmtap's own grouping, not an id the client gave
    assert "gen_ai.conversation.id" not in chat
    assert chat["llmtap.conversation.id"] == chat["llmtap.exchange.id"]


@pytest.mark.parametrize(
    "settings",
    [
        {"temperature": True, "top_p": "0.5", "seed": 1 << 70, "n": 1.5, "stop": ["a"] * 17},
        {"top_p": 10**400, "top_k": 1 << 63, "seed": -(1 << 63) - 1, "stop": ["x" * 257]},
        {"temperature": None, "stop": [1, 2], "reasoning_effort": "x" * 65, "service_tier": ""},
        {"stop": [], "response_format": {"type": ["json_schema"]}, "reasoning_effort": {"effort": "high"}},
    ],
)
def test_hostile_settings_are_left_out(settings: dict[str, Any]) -> None:
    body = json.dumps({"model": "gpt-5", "messages": [{"role": "user", "content": "Hi"}], **settings})
    attributes = span_of(exchange("api.openai.com", "/v1/chat/completions", body.encode(), CHAT_REPLY)).attributes
    for key in (
        "gen_ai.request.temperature",
        "gen_ai.request.top_p",
        "gen_ai.request.seed",
        "gen_ai.request.choice.count",
        "gen_ai.request.stop_sequences",
        "gen_ai.request.reasoning.level",
        "gen_ai.output.type",
        "openai.request.service_tier",
    ):
        assert key not in attributes, (key, attributes.get(key))
    assert attributes["gen_ai.request.model"] == "gpt-5"
