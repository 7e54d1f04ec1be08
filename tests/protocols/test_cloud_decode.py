"""Cloud exchanges decoded through the real decoder: the recorded Bedrock and Azure cases
(corpus-next) to their `expect`, whole and split anywhere; the Vertex AI Claude fixtures
(tests/fixtures/cloud, built from the providers' docs); Bedrock Converse's request facts,
streamed tool calls, reasoning, guardrails and errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llmtap.protocols import ExchangeDecoder, decode_exchange, route
from llmtap.protocols.bedrock_converse import decode_request
from llmtap.protocols.providers import provider_of
from tests.protocols.corpus import Case, differences, load_cases
from tests.protocols.test_eventstream import frame

ROOT = Path(__file__).resolve().parents[2]
NEXT = ROOT / "tests" / "corpus_next"  # the project's copy of ../shared/corpus-next
FIXTURES = ROOT / "tests" / "fixtures" / "cloud"
CLOUD_CASES = [c for c in load_cases(NEXT) if c.case.get("provider") in ("aws", "azure")]
VERTEX_CASES = load_cases(FIXTURES)


def _decode(case: Case, pieces: int = 0) -> dict[str, Any]:
    meta = case.case
    protocol = route("POST", meta["path"], case.request)
    assert protocol == meta["protocol"]
    decoder = ExchangeDecoder(
        protocol,
        request=case.request,
        path=meta["path"],
        host=meta["host"],
        status=meta["status"],
        content_type=meta.get("content_type"),
        provider=provider_of(protocol, meta["host"], meta["path"]),  # as it is stored
    )
    body = case.response
    for start in range(0, len(body), pieces or len(body) or 1):
        decoder.feed(body[start : start + (pieces or len(body))])
    return decoder.finish().to_dict()


def test_corpus_next_cloud_cases_are_here():
    assert {c.case["provider"] for c in CLOUD_CASES} == {"aws", "azure"}
    assert len([c for c in CLOUD_CASES if c.case["provider"] == "aws"]) >= 6


# JSON bodies whole; streams whole, byte by byte, and in 13-byte pieces
SPLITS = [(c, n) for c in CLOUD_CASES for n in ((0, 1, 13) if c.case.get("streamed") else (0,))]


@pytest.mark.parametrize(("case", "pieces"), SPLITS, ids=[f"{c.id}-{n}" for c, n in SPLITS])
def test_recorded_cloud_case_decodes_to_its_expect(case: Case, pieces: int):
    got = _decode(case, pieces)
    assert differences(case.expect, got) == []
    assert got["decode_error"] is None
    assert got["provider"] == case.case["provider"]
    assert got["streamed"] == case.case["streamed"]
    assert got["complete"] is case.case["notes"].get("complete", True)
    assert got["finish_reason_raw"] == case.case["notes"]["finish_reason_raw"]
    if "model_requested" in case.case["notes"]:
        assert got["model_requested"] == case.case["notes"]["model_requested"]


@pytest.mark.parametrize("case", VERTEX_CASES, ids=[c.id for c in VERTEX_CASES])
@pytest.mark.parametrize("pieces", [0, 1])
def test_vertex_claude_fixture_decodes(case: Case, pieces: int):
    assert case.case["doc"].startswith("https://")
    got = _decode(case, pieces)
    assert differences(case.expect, got) == []
    assert got["decode_error"] is None
    assert got["provider"] == "google"
    assert got["model_requested"] == case.expect["model_requested"]
    assert got["complete"] is True


def test_vertex_request_facts_come_through_the_anthropic_translator():
    case = next(c for c in VERTEX_CASES if c.id == "vertex_claude_json")
    got = _decode(case)
    request = got["request"]
    assert request["max_tokens"] == 512
    assert [t["name"] for t in request["tools"]] == ["get_weather"]
    assert request["cache_breakpoints"] == 1
    assert request["messages_by_role"] == {"user": 1}


def test_vertex_error_body_names_its_status():
    ex = decode_exchange(
        "anthropic.messages",
        response=b'{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED"}}',
        path="/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-3-7-sonnet@20250219:rawPredict",
        host="us-east5-aiplatform.googleapis.com",
        status=429,
    )
    assert ex.error is not None
    assert (ex.error.type, ex.error.code) == ("RESOURCE_EXHAUSTED", "429")
    assert ex.finish_reason == "error"


def test_bedrock_error_body_keeps_its_message():
    ex = decode_exchange(
        "anthropic.messages",
        response=b'{"message":"Malformed input request: #: required key [messages] not found"}',
        path="/model/anthropic.claude-3-haiku-20240307-v1%3A0/invoke",
        host="bedrock-runtime.us-east-1.amazonaws.com",
        status=400,
    )
    assert ex.error is not None and ex.error.message.startswith("Malformed input request")
    assert ex.model == ex.model_requested == "anthropic.claude-3-haiku-20240307-v1:0"


# -- Converse --------------------------------------------------------------------------------

CONVERSE_PATH = "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream"
CONVERSE_REQUEST = {
    "system": [{"text": "You are terse."}, {"cachePoint": {"type": "default"}}],
    "messages": [
        {
            "role": "user",
            "content": [{"text": "Weather in Oslo?"}, {"image": {"format": "png", "source": {"bytes": ""}}}],
        },
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "tooluse_a", "name": "weather", "input": {}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "tooluse_a", "content": [{"text": "5C"}]}}]},
        {"role": "user", "content": [{"text": "And tomorrow?"}, {"cachePoint": {"type": "default", "ttl": "1h"}}]},
    ],
    "inferenceConfig": {"maxTokens": 800, "temperature": 0.2},
    "toolConfig": {
        "tools": [
            {"toolSpec": {"name": "weather", "inputSchema": {"json": {"type": "object", "required": ["city"]}}}},
            {"cachePoint": {"type": "default"}},
        ],
        "toolChoice": {"auto": {}},
    },
    "additionalModelRequestFields": {"thinking": {"type": "enabled", "budget_tokens": 1024}},
}


def test_converse_request_facts():
    facts = decode_request(CONVERSE_REQUEST, CONVERSE_PATH)
    assert facts.stream is True
    assert facts.max_tokens == 800
    assert [(t.name, t.schema) for t in facts.tools] == [("weather", {"type": "object", "required": ["city"]})]
    assert facts.tool_choice == {"auto": {}}
    assert facts.messages_by_role == {"user": 3, "assistant": 1}
    assert facts.system_chars == len("You are terse.")
    assert facts.cache_breakpoints == 3
    assert facts.cache_ttl == "1h"
    assert facts.images == 1
    assert facts.tool_call_ids == ["tooluse_a"] and facts.tool_result_ids == ["tooluse_a"]
    assert facts.thinking == {"thinking": {"type": "enabled", "budget_tokens": 1024}}
    assert facts.params == {"temperature": 0.2}
    # moving a cache point does not change the prefix hashes
    moved = json.loads(json.dumps(CONVERSE_REQUEST))
    moved["messages"][3]["content"].pop()
    moved["system"].pop()
    again = decode_request(moved, CONVERSE_PATH)
    assert again.message_hashes == facts.message_hashes
    assert again.system_hash == facts.system_hash


def _event(name: str, payload: dict[str, Any]) -> bytes:
    return frame(json.dumps({**payload, "p": "abc"}).encode(), event_type=name, message_type="event")


CONVERSE_STREAM = b"".join(
    [
        _event("messageStart", {"role": "assistant"}),
        _event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "Oslo…"}}}),
        _event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "sig"}}}),
        _event("contentBlockStop", {"contentBlockIndex": 0}),
        _event("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": "Checking."}}),
        _event("contentBlockStop", {"contentBlockIndex": 1}),
        _event(
            "contentBlockStart",
            {"contentBlockIndex": 2, "start": {"toolUse": {"toolUseId": "tooluse_b", "name": "weather"}}},
        ),
        _event("contentBlockDelta", {"contentBlockIndex": 2, "delta": {"toolUse": {"input": '{"ci'}}}),
        _event("contentBlockDelta", {"contentBlockIndex": 2, "delta": {"toolUse": {"input": 'ty": "Oslo"}'}}}),
        _event("contentBlockStop", {"contentBlockIndex": 2}),
        _event("messageStop", {"stopReason": "tool_use"}),
        _event(
            "metadata",
            {
                "usage": {"inputTokens": 40, "outputTokens": 30, "totalTokens": 2070, "cacheReadInputTokens": 2000},
                "metrics": {"latencyMs": 900},
            },
        ),
    ]
)


@pytest.mark.parametrize("pieces", [0, 1, 9])
def test_converse_stream_folds_tools_reasoning_and_usage(pieces: int):
    decoder = ExchangeDecoder(
        "bedrock.converse",
        request=json.dumps(CONVERSE_REQUEST).encode(),
        path=CONVERSE_PATH,
        host="bedrock-runtime.us-west-2.amazonaws.com",
        status=200,
        content_type="application/vnd.amazon.eventstream",
    )
    for start in range(0, len(CONVERSE_STREAM), pieces or len(CONVERSE_STREAM)):
        decoder.feed(CONVERSE_STREAM[start : start + (pieces or len(CONVERSE_STREAM))])
    ex = decoder.finish()
    assert ex.decode_error is None
    assert ex.provider == "aws" and ex.model == "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    assert ex.streamed and ex.complete
    assert ex.text == "Checking."
    assert ex.reasoning_blocks == 1
    assert [(c.id, c.name, c.arguments, c.arguments_raw) for c in ex.tool_calls] == [
        ("tooluse_b", "weather", {"city": "Oslo"}, '{"city": "Oslo"}')
    ]
    assert ex.tool_calls[0].status == "valid"
    assert ex.finish_reason == "tool_use"
    assert ex.usage is not None
    assert (ex.usage.input_tokens, ex.usage.cache_read_tokens, ex.usage.output_tokens) == (2040, 2000, 30)
    assert ex.usage.reasoning_tokens is None
    assert ex.usage_check == []  # 40 + 2000 + 30 = totalTokens


def test_converse_stream_cut_inside_metadata_is_cut_and_its_usage_missing_not_zero():
    ex = decode_exchange(
        "bedrock.converse",
        response=CONVERSE_STREAM[:-20],  # inside the last (metadata) frame
        path=CONVERSE_PATH,
        content_type="application/vnd.amazon.eventstream",
        status=200,
    )
    assert ex.decode_error is None
    assert ex.complete is False and ex.finish_reason is None
    assert ex.finish_reason_raw == "tool_use"
    assert ex.usage is None and ex.usage_provenance == "missing"


@pytest.mark.parametrize(
    ("raw", "finish"),
    [
        ("guardrail_intervened", "content_filter"),
        ("content_filtered", "content_filter"),
        ("max_tokens", "max_tokens"),
        ("stop_sequence", "stop_sequence"),
        ("end_turn", "end_turn"),
        ("something_new", None),
    ],
)
def test_converse_stop_reasons(raw: str, finish: str | None):
    body = {
        "output": {"message": {"role": "assistant", "content": [{"text": "x"}]}},
        "stopReason": raw,
        "usage": {"inputTokens": 3, "outputTokens": 1, "totalTokens": 4},
    }
    ex = decode_exchange("bedrock.converse", response=json.dumps(body).encode(), path=CONVERSE_PATH[:-7], status=200)
    assert ex.finish_reason == finish
    assert ex.finish_reason_raw == raw


def test_converse_error_body_and_exception_frame():
    ex = decode_exchange(
        "bedrock.converse",
        response=b'{"message":"The provided model identifier is invalid."}',
        path="/model/nope/converse",
        status=400,
        content_type="application/json",
    )
    assert ex.error is not None and ex.error.message == "The provided model identifier is invalid."
    assert ex.finish_reason == "error" and ex.usage is None
    error = frame(
        b'{"message":"Model stream error","originalStatusCode":424,"originalMessage":"boom"}',
        message_type="exception",
        exception_type="modelStreamErrorException",
    )
    ex = decode_exchange(
        "bedrock.converse",
        response=_event("messageStart", {"role": "assistant"}) + error,
        path=CONVERSE_PATH,
        status=200,
        content_type="application/vnd.amazon.eventstream",
    )
    assert ex.error is not None
    assert (ex.error.type, ex.error.code, ex.error.message) == (
        "modelStreamErrorException",
        "424",
        "Model stream error",
    )
    assert ex.finish_reason == "error"


def test_converse_json_reasoning_and_cited_text():
    body = {
        "output": {
            "message": {
                "role": "assistant",
                "content": [
                    {"reasoningContent": {"reasoningText": {"text": "think", "signature": "s"}}},
                    {"reasoningContent": {"redactedContent": "AAAA"}},
                    {"text": "Per the doc, "},
                    {"citationsContent": {"content": [{"text": "it is 5C."}], "citations": [{"title": "doc"}]}},
                ],
            }
        },
        "stopReason": "end_turn",
        "usage": {"inputTokens": 10, "outputTokens": 20, "totalTokens": 30},
    }
    ex = decode_exchange("bedrock.converse", response=json.dumps(body).encode(), path="/model/m/converse", status=200)
    assert ex.text == "Per the doc, it is 5C."
    assert ex.reasoning_blocks == 2
    assert ex.finish_reason == "end_turn" and ex.model == "m"
