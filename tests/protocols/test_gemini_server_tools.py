"""Gemini's server tools (SPEC §2 `server_tool_calls`, `server_tool_uses`): a record lists
only the tools the response shows ran, whatever the request declared. Grounding with
Google Search shows its `webSearchQueries` (and is billed per use), URL context its
`urlContextMetadata` (its pages are input tokens, no fee), Google Maps its `maps` grounding
chunks, code execution its `executableCode` parts. URL context and Maps also fill
`groundingChunks`, so a chunk alone names no tool.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmtap.protocols import Exchange, decode_exchange

PATH = "/v1beta/models/gemini-2.5-flash:generateContent"
URL = "https://ai.google.dev/gemini-api/docs/url-context"
WEB_CHUNK = {"web": {"uri": URL, "title": "URL context | Gemini API"}}
SEARCH_CHUNK = {"web": {"uri": "https://vertexaisearch.cloud.google.com/grounding-api-redirect/AbC1", "title": "a.com"}}
MAPS_CHUNK = {"maps": {"uri": "https://maps.google.com/?cid=1", "title": "Trattoria", "placeId": "places/ChIJ1"}}
URL_METADATA = {"urlMetadata": [{"retrievedUrl": URL, "urlRetrievalStatus": "URL_RETRIEVAL_STATUS_SUCCESS"}]}


def decode(candidate_extra: dict[str, Any], parts: list[Any] | None = None, request: Any = None) -> Exchange:
    candidate = {"content": {"role": "model", "parts": parts or [{"text": "Done."}]}, "finishReason": "STOP"}
    body = {"candidates": [candidate | candidate_extra], "modelVersion": "gemini-2.5-flash"}
    return decode_exchange(
        "gemini.generate",
        response=json.dumps(body).encode(),
        request=json.dumps(request or {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}).encode(),
        path=PATH,
        status=200,
        content_type="application/json",
    )


def kinds(ex: Exchange) -> list[str]:
    return [call.type for call in ex.server_tool_calls]


def test_url_context_alone_is_no_google_search() -> None:
    grounding = {"groundingChunks": [WEB_CHUNK], "groundingSupports": [{"groundingChunkIndices": [0]}]}
    request = {"contents": [{"parts": [{"text": f"Summarize {URL}"}]}], "tools": [{"url_context": {}}]}
    ex = decode({"groundingMetadata": grounding, "urlContextMetadata": URL_METADATA}, request=request)
    assert kinds(ex) == ["url_context"]
    assert ex.server_tool_uses == {}  # URL context bills its pages as input tokens, no fee per use
    assert ex.request is not None and ex.request.server_tools == ["url_context"]


def test_google_search_grounding() -> None:
    grounding = {
        "webSearchQueries": ["euro 2024 winner"],
        "searchEntryPoint": {"renderedContent": "<div></div>"},
        "groundingChunks": [SEARCH_CHUNK],
    }
    ex = decode({"groundingMetadata": grounding})
    assert kinds(ex) == ["google_search"]
    assert ex.server_tool_uses == {"web_search": 1}


def test_google_search_and_url_context_together() -> None:
    grounding = {"webSearchQueries": ["gemini url context"], "groundingChunks": [SEARCH_CHUNK, WEB_CHUNK]}
    ex = decode({"groundingMetadata": grounding, "urlContextMetadata": URL_METADATA})
    assert kinds(ex) == ["google_search", "url_context"]
    assert ex.server_tool_uses == {"web_search": 1}


def test_google_maps_grounding() -> None:
    grounding = {"groundingChunks": [MAPS_CHUNK], "googleMapsWidgetContextToken": "widgetcontent/AbC"}
    ex = decode({"groundingMetadata": grounding})
    assert kinds(ex) == ["google_maps"]
    assert ex.server_tool_uses == {}


@pytest.mark.parametrize(
    "grounding",
    [{}, {"groundingChunks": []}, {"webSearchQueries": []}, {"webSearchQueries": [""]}, {"groundingChunks": [{}]}],
    ids=["empty", "no-chunks", "no-queries", "blank-query", "chunk-of-nothing"],
)
def test_grounding_that_shows_no_tool_lists_none(grounding: dict[str, Any]) -> None:
    request = {"contents": [{"parts": [{"text": "hi"}]}], "tools": [{"google_search": {}}]}
    ex = decode({"groundingMetadata": grounding}, request=request)
    assert kinds(ex) == []
    assert ex.server_tool_uses == {}


def test_code_execution_parts() -> None:
    parts = [
        {"executableCode": {"language": "PYTHON", "code": "print(1 + 1)"}},
        {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "2\n"}},
        {"text": "It is 2."},
    ]
    ex = decode({}, parts=parts)
    assert kinds(ex) == ["code_execution"]
    assert ex.text == "It is 2."


def test_interactions_list_the_steps_that_ran() -> None:
    """Interactions shows each server tool as a `…_call` step (its `…_result` is no call)."""
    body = {
        "id": "v1_int",
        "status": "completed",
        "model": "gemini-3-flash-preview",
        "steps": [
            {"type": "url_context_call", "id": "u1", "arguments": {"urls": [URL]}},
            {"type": "url_context_result", "call_id": "u1", "result": [{"url": URL, "status": "success"}]},
            {"type": "model_output", "content": [{"type": "text", "text": "Done."}]},
        ],
    }
    ex = decode_exchange(
        "gemini.interactions",
        response=json.dumps(body).encode(),
        path="/v1beta/interactions",
        status=200,
        content_type="application/json",
    )
    assert [(c.type, c.id) for c in ex.server_tool_calls] == [("url_context_call", "u1")]
    assert ex.server_tool_uses == {}
