"""Token-counting routes are never billed (SPEC §1): Anthropic `/v1/messages/count_tokens`
(Claude Code sends it with `?beta=true`), Gemini and Vertex `:countTokens` and
`:computeTokens`, Vertex Claude's `count-tokens:rawPredict`, OpenAI and Azure
`/responses/input_tokens`, Bedrock `/model/{id}/count-tokens`. Their request bodies have
the very shape of a generation's, so only the path tells them apart: none routes to a
protocol, `llmtap decode` refuses them, and a HAR import skips them as other requests
while the generations beside them land."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, select

from llmtap.protocols import route
from llmtap.storage import schema
from tests.corpus_tools import CORPUS, CORPUS_NEXT, HAR_START, HAR_STEP, har_entry, read_case
from tests.helpers import llmtap

MESSAGES = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "How many tokens?"}]}
VERTEX_CLAUDE = {"anthropic_version": "vertex-2023-10-16"} | MESSAGES
CONTENTS = {"contents": [{"role": "user", "parts": [{"text": "How many tokens?"}]}]}
INPUT = {"model": "gpt-5", "input": "How many tokens?"}
VERTEX = "/v1/projects/p/locations/us-central1/publishers"
BEDROCK_MODEL = "/model/anthropic.claude-3-haiku-20240307-v1%3A0"

# (host, counting path, the generation path beside it, protocol, provider, request, response)
COUNTING = [
    pytest.param(
        "api.anthropic.com",
        "/v1/messages/count_tokens?beta=true",
        "/v1/messages?beta=true",
        "anthropic.messages",
        None,
        MESSAGES,
        {"input_tokens": 14},
        id="anthropic count_tokens",
    ),
    pytest.param(
        "generativelanguage.googleapis.com",
        "/v1beta/models/gemini-2.5-flash:countTokens",
        "/v1beta/models/gemini-2.5-flash:generateContent",
        "gemini.generate",
        None,
        CONTENTS,
        {"totalTokens": 31, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 31}]},
        id="gemini countTokens",
    ),
    pytest.param(
        "us-central1-aiplatform.googleapis.com",
        f"{VERTEX}/google/models/gemini-2.5-flash:countTokens",
        f"{VERTEX}/google/models/gemini-2.5-flash:generateContent",
        "gemini.generate",
        None,
        CONTENTS,
        {"totalTokens": 31, "totalBillableCharacters": 96},
        id="vertex countTokens",
    ),
    pytest.param(
        "us-central1-aiplatform.googleapis.com",
        f"{VERTEX}/google/models/gemini-2.5-flash:computeTokens",
        f"{VERTEX}/google/models/gemini-2.5-flash:generateContent",
        "gemini.generate",
        None,
        CONTENTS,
        {"tokensInfo": [{"tokenIds": ["1", "2"], "tokens": ["SG93", "IG1hbnk="], "role": "user"}]},
        id="vertex computeTokens",
    ),
    pytest.param(
        "us-east5-aiplatform.googleapis.com",
        "/v1/projects/p/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict",
        "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5:rawPredict",
        "anthropic.messages",
        None,
        VERTEX_CLAUDE | {"max_tokens": 10},
        {"input_tokens": 14},
        id="vertex claude count-tokens",
    ),
    pytest.param(
        "api.openai.com",
        "/v1/responses/input_tokens",
        "/v1/responses",
        "openai.responses",
        None,
        INPUT,
        {"object": "response.input_tokens", "input_tokens": 11},
        id="openai input_tokens",
    ),
    pytest.param(
        "contoso.openai.azure.com",
        "/openai/v1/responses/input_tokens",
        "/openai/v1/responses",
        "openai.responses",
        "azure",
        INPUT,
        {"object": "response.input_tokens", "input_tokens": 11},
        id="azure input_tokens",
    ),
    pytest.param(
        "bedrock-runtime.us-east-1.amazonaws.com",
        f"{BEDROCK_MODEL}/count-tokens",
        f"{BEDROCK_MODEL}/converse",
        "bedrock.converse",
        "aws",
        {"input": {"converse": {"messages": [{"role": "user", "content": [{"text": "How many tokens?"}]}]}}},
        {"inputTokens": 14},
        id="bedrock count-tokens",
    ),
]


def generation_body(protocol: str, request: dict[str, Any]) -> dict[str, Any]:
    """The request a generation route of the same protocol would take."""
    if protocol == "bedrock.converse":
        return request["input"]["converse"]
    return request


@pytest.mark.parametrize(("host", "path", "beside", "protocol", "provider", "request_", "response"), COUNTING)
def test_a_counting_route_is_no_protocol(
    host: str, path: str, beside: str, protocol: str, provider: str | None, request_: dict, response: dict
) -> None:
    assert route("POST", path, json.dumps(request_).encode()) is None
    # the same body on the generation path beside it is one: only the path tells them apart
    assert route("POST", beside, json.dumps(generation_body(protocol, request_)).encode()) == protocol


@pytest.mark.parametrize(("host", "path", "beside", "protocol", "provider", "request_", "response"), COUNTING)
def test_decode_refuses_a_counting_route(
    tmp_path: Path,
    host: str,
    path: str,
    beside: str,
    protocol: str,
    provider: str | None,
    request_: dict,
    response: dict,
) -> None:
    (tmp_path / "response.json").write_text(json.dumps(response))
    (tmp_path / "request.json").write_text(json.dumps(request_))
    result = llmtap(
        "decode",
        "--response",
        str(tmp_path / "response.json"),
        "--request",
        str(tmp_path / "request.json"),
        "--path",
        path,
        "--host",
        host,
    )
    assert result.code != 0
    assert "not a path of a supported LLM API" in result.err
    assert result.out == ""


def counting_entries() -> list[tuple[dict[str, Any], bytes, bytes]]:
    """(case-like dict, response, request) of every counting route, as har_entry takes them."""
    entries = []
    for param in COUNTING:
        host, path, _, protocol, provider, request_, response = param.values
        case = {"protocol": protocol, "provider": provider, "host": host, "path": path, "status": 200}
        entries.append((case, json.dumps(response).encode(), json.dumps(request_).encode()))
    return entries


def test_a_har_import_skips_counting_routes_and_keeps_the_generations(tmp_path: Path) -> None:
    generations = [CORPUS / "a_anth_json_text_max_tokens", CORPUS_NEXT / "c_bedrock_converse_json_text_tool_use"]
    rows = [read_case(folder) for folder in generations]
    mixed = counting_entries()[:4] + [(c, b, r or b"{}") for c, b, r in rows] + counting_entries()[4:]
    entries = [
        har_entry(case, body, request, "alpha", HAR_START + index * HAR_STEP + timedelta(seconds=1))
        for index, (case, body, request) in enumerate(mixed)
    ]
    har = tmp_path / "counting.har"
    har.write_text(
        json.dumps({"log": {"version": "1.2", "creator": {"name": "t", "version": "1"}, "entries": entries}})
    )
    db = f"sqlite:///{tmp_path / 'store.db'}"

    result = llmtap("import", str(har), "--db", db, process=True)

    assert result.code == 0, result.err
    assert "imported 2 LLM exchanges" in result.out
    assert f"skipped {len(COUNTING)} other requests" in result.out
    engine = create_engine(db)
    try:
        with engine.connect() as connection:
            x = schema.exchanges.c
            stored = connection.execute(select(x.path, x.protocol, x.provider).order_by(x.started_at)).all()
    finally:
        engine.dispose()
    assert [(path, protocol) for path, protocol, _ in stored] == [
        (case["path"], case["protocol"]) for case, _, _ in rows
    ]
    assert not any("count" in path or "input_tokens" in path for path, _, _ in stored)
