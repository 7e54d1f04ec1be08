"""The cloud routes of SPEC §1: which Bedrock, Vertex AI and Azure OpenAI requests are
generations of which protocol, the provider that bills them (from the host, else the
path: a reverse listener on 127.0.0.1 serves the same paths), the model the path names;
standalone compaction is a generation; token counting never is."""

from __future__ import annotations

import json

import pytest

from llmtap.protocols import decode_exchange, route
from llmtap.protocols.providers import provider_of
from llmtap.protocols.routing import path_model

BEDROCK = "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0"
VERTEX = "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-3-7-sonnet@20250219"
AZURE = "/openai/deployments/my-gpt4o/chat/completions?api-version=2024-10-21"

ANTHROPIC_ON_CLOUD = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 10, "messages": []}
CONVERSE = {"messages": [{"role": "user", "content": [{"text": "hi"}]}]}

ROUTES = [
    (f"{BEDROCK}/invoke", ANTHROPIC_ON_CLOUD, "anthropic.messages"),
    (f"{BEDROCK}/invoke-with-response-stream", ANTHROPIC_ON_CLOUD, "anthropic.messages"),
    (f"{BEDROCK}/converse", CONVERSE, "bedrock.converse"),
    (f"{BEDROCK}/converse-stream", CONVERSE, "bedrock.converse"),
    (f"{VERTEX}:rawPredict", {**ANTHROPIC_ON_CLOUD, "anthropic_version": "vertex-2023-10-16"}, "anthropic.messages"),
    (
        f"{VERTEX}:streamRawPredict",
        {**ANTHROPIC_ON_CLOUD, "anthropic_version": "vertex-2023-10-16"},
        "anthropic.messages",
    ),
    (AZURE, {"messages": [{"role": "user", "content": "hi"}]}, "openai.chat"),
    ("/openai/v1/responses", {"model": "gpt-5", "input": "hi"}, "openai.responses"),
    ("/openai/responses?api-version=2025-04-01-preview", {"model": "gpt-5", "input": "hi"}, "openai.responses"),
    ("/v1/responses/compact", {"model": "gpt-5.1-codex-max", "input": []}, "openai.responses"),
    ("/openai/v1/responses/compact", {"model": "gpt-5.1-codex-max", "input": []}, "openai.responses"),
]


@pytest.mark.parametrize(("path", "body", "protocol"), ROUTES, ids=[r[0] for r in ROUTES])
def test_cloud_generation_routes(path: str, body: dict, protocol: str):
    assert route("POST", path) == protocol
    assert route("POST", path, json.dumps(body).encode()) == protocol
    assert route("GET", path) is None


@pytest.mark.parametrize(
    ("path", "body"),
    [
        # other makers' models share InvokeModel: Llama's `prompt`, Mistral's `messages` without anthropic_version
        ("/model/meta.llama3-8b-instruct-v1%3A0/invoke", {"prompt": "hi", "max_gen_len": 10}),
        ("/model/mistral.mistral-large-2402-v1%3A0/invoke", {"messages": [{"role": "user", "content": "hi"}]}),
        ("/model/amazon.titan-embed-text-v2%3A0/invoke", {"inputText": "hi"}),
        (f"{BEDROCK}/converse", {"inputText": "hi"}),
        (f"{VERTEX}:rawPredict", {"instances": [{"prompt": "hi"}]}),
    ],
)
def test_cloud_paths_with_another_body_are_not_recorded(path: str, body: dict):
    assert route("POST", path, json.dumps(body).encode()) is None


TOKEN_COUNTING = [
    "/v1/messages/count_tokens",
    "/v1/messages/count_tokens?beta=true",
    "/v1/responses/input_tokens",
    "/openai/v1/responses/input_tokens",
    "/v1beta/models/gemini-2.5-flash:countTokens",
    "/v1/projects/p/locations/l/publishers/google/models/gemini-2.5-pro:countTokens",
    f"{BEDROCK}/count-tokens",
    "/v1/projects/p/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict",
]


@pytest.mark.parametrize("path", TOKEN_COUNTING)
def test_token_counting_is_never_a_generation(path: str):
    bodies = [
        {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]},
        {"model": "gpt-5", "input": "hi"},
        {"contents": [{"parts": [{"text": "hi"}]}]},
        {"input": {"converse": CONVERSE}},
    ]
    assert route("POST", path) is None
    assert all(route("POST", path, json.dumps(body).encode()) is None for body in bodies)


def test_vertex_count_tokens_model_path_is_no_claude():
    # Vertex counts Claude tokens at a `count-tokens` model through rawPredict; its body names the model
    # https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/count-tokens
    path = "/v1/projects/p/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict"
    body = {"anthropic_version": "vertex-2023-10-16", "model": "claude-3-7-sonnet@20250219", "messages": []}
    assert route("POST", path, json.dumps(body).encode()) is None


PROVIDERS = [
    ("anthropic.messages", "bedrock-runtime.us-east-1.amazonaws.com", f"{BEDROCK}/invoke", "aws"),
    ("anthropic.messages", "bedrock-runtime-fips.us-gov-west-1.amazonaws.com:443", f"{BEDROCK}/invoke", "aws"),
    ("bedrock.converse", "bedrock-runtime.eu-west-3.amazonaws.com", f"{BEDROCK}/converse", "aws"),
    ("anthropic.messages", "127.0.0.1:8083", f"{BEDROCK}/invoke-with-response-stream", "aws"),
    ("bedrock.converse", None, f"{BEDROCK}/converse-stream", "aws"),
    ("anthropic.messages", "us-east5-aiplatform.googleapis.com", f"{VERTEX}:rawPredict", "google"),
    ("anthropic.messages", "localhost:9000", f"{VERTEX}:streamRawPredict", "google"),
    ("openai.chat", "myres.openai.azure.com", AZURE, "azure"),
    ("openai.chat", "myres.cognitiveservices.azure.com", "/openai/v1/chat/completions", "azure"),
    ("openai.responses", "proj.services.ai.azure.com", "/openai/v1/responses", "azure"),
    ("openai.chat", "127.0.0.1:8084", AZURE, "azure"),
    ("openai.responses", "127.0.0.1", "/openai/v1/responses", "azure"),
    ("openai.responses", "[::1]:8080", "/openai/responses?api-version=2025-04-01-preview", "azure"),
    # Groq serves /openai/v1/… on its own host: the host names it, not Azure
    ("openai.responses", "api.groq.com", "/openai/v1/responses", "groq"),
    ("openai.chat", "api.groq.com", "/openai/v1/chat/completions", "groq"),
    # plain routes on a local host stay the host's
    ("openai.chat", "127.0.0.1:11434", "/v1/chat/completions", "127.0.0.1"),
    ("anthropic.messages", "api.anthropic.com", "/v1/messages", "anthropic"),
    ("anthropic.messages", "bedrock-runtime.evil.example", f"{BEDROCK}/invoke", "aws"),
    ("openai.chat", "openai.azure.com.evil.example", "/v1/chat/completions", "openai.azure.com.evil.example"),
]


@pytest.mark.parametrize(("protocol", "host", "path", "provider"), PROVIDERS)
def test_provider_of_cloud_routes(protocol: str, host: str | None, path: str, provider: str):
    assert provider_of(protocol, host, path) == provider


@pytest.mark.parametrize(
    ("path", "model"),
    [
        (f"{BEDROCK}/invoke", "anthropic.claude-3-5-haiku-20241022-v1:0"),
        (
            "/model/us.anthropic.claude-3-7-sonnet-20250219-v1%3A0/converse-stream",
            "us.anthropic.claude-3-7-sonnet-20250219-v1:0",
        ),
        (
            "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123%3Aapplication-inference-profile%2Fabc/converse",
            "arn:aws:bedrock:us-east-1:123:application-inference-profile/abc",
        ),
        (f"{VERTEX}:streamRawPredict", "claude-3-7-sonnet@20250219"),
        (AZURE, "my-gpt4o"),
        ("/openai/deployments/gpt%2D4o%20mini/chat/completions", "gpt-4o mini"),
        ("/v1/messages", None),
        ("/openai/v1/responses", None),
    ],
)
def test_path_model(path: str, model: str | None):
    assert path_model(path) == model


def test_azure_deployment_is_model_requested_and_empty_model_is_no_model():
    # Azure's first chunk carries model "" (prompt_filter_results only): an empty model is none
    chunks = [
        {"choices": [], "created": 0, "id": "", "model": "", "object": "", "prompt_filter_results": []},
        {"id": "c1", "model": "gpt-4o-2024-11-20", "choices": [{"index": 0, "delta": {"content": "hi"}}]},
        {"id": "c1", "model": "gpt-4o-2024-11-20", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    ex = decode_exchange(
        "openai.chat",
        response=body.encode(),
        request=json.dumps({"messages": [{"role": "user", "content": "hi"}], "stream": True}).encode(),
        path=AZURE,
        host="myres.openai.azure.com",
        status=200,
        content_type="text/event-stream",
    )
    assert ex.provider == "azure"
    assert ex.model_requested == "my-gpt4o"
    assert ex.model == "gpt-4o-2024-11-20"
    assert ex.text == "hi"


def test_azure_body_model_outranks_the_path():
    ex = decode_exchange(
        "openai.chat",
        response=b'{"choices":[{"index":0,"message":{"content":"ok"},"finish_reason":"stop"}],"model":""}',
        request=b'{"model":"gpt-4o","messages":[]}',
        path=AZURE,
        status=200,
    )
    assert ex.model_requested == "gpt-4o"
    assert ex.model == "gpt-4o"  # the response's "" is no model


def test_standalone_compaction_is_a_billed_responses_exchange():
    # https://platform.openai.com/docs/api-reference/responses/compact: a `response.compaction`
    # object with the compacted `output` items and `usage`
    response = {
        "id": "cmp_01",
        "object": "response.compaction",
        "created_at": 1764547200,
        "output": [{"id": "cmp_item_1", "type": "compaction", "encrypted_content": "gAAAAB"}],
        "usage": {
            "input_tokens": 5120,
            "input_tokens_details": {"cached_tokens": 4096},
            "output_tokens": 310,
            "output_tokens_details": {"reasoning_tokens": 128},
            "total_tokens": 5430,
        },
    }
    request = {"model": "gpt-5.1-codex-max", "input": [{"role": "user", "content": "hi"}]}
    path = "/v1/responses/compact"
    assert route("POST", path, json.dumps(request).encode()) == "openai.responses"
    ex = decode_exchange(
        "openai.responses",
        response=json.dumps(response).encode(),
        request=json.dumps(request).encode(),
        path=path,
        host="api.openai.com",
        status=200,
        content_type="application/json",
        provider=provider_of("openai.responses", "api.openai.com", path),
    )
    assert ex.decode_error is None
    assert ex.provider == "openai" and ex.model == "gpt-5.1-codex-max"
    assert ex.usage is not None
    assert (ex.usage.input_tokens, ex.usage.cache_read_tokens, ex.usage.output_tokens) == (5120, 4096, 310)
