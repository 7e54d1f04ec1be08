"""`protocols/routing.py`: which requests are generations of which protocol (SPEC §1), by
method, path and body shape, never by host; and the `provider` a host names."""

from __future__ import annotations

import json

import pytest

from llmtap.protocols import provider_for, route
from llmtap.protocols.routing import may_be_json_object, websocket_protocol

VERTEX = "/v1/projects/p/locations/l/publishers/google/models/gemini-2.5-pro"
VERTEX_BETA = "/v1beta1/projects/p/locations/global/publishers/google/models/gemini-2.5-flash"

GENERATIONS = {
    "/v1/messages": "anthropic.messages",
    "/v1/messages?beta=true": "anthropic.messages",
    "/v1/messages/": "anthropic.messages",
    "/anthropic/v1/messages": "anthropic.messages",
    "/v1/chat/completions": "openai.chat",
    "/api/v1/chat/completions": "openai.chat",  # OpenRouter
    "/v1beta/openai/chat/completions": "openai.chat",  # Gemini's compat endpoint
    "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21": "openai.chat",  # Azure
    "/chat/completions": "openai.chat",
    "/v1/responses": "openai.responses",
    "/openai/v1/responses": "openai.responses",
    "/v1beta/models/gemini-2.5-flash:generateContent": "gemini.generate",
    "/v1beta/models/gemini-2.5-flash:streamGenerateContent": "gemini.generate",
    "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse": "gemini.generate",
    "/v1/models/gemini-2.5-flash:generateContent?key=REDACTED": "gemini.generate",
    f"{VERTEX}:generateContent": "gemini.generate",
    f"{VERTEX}:streamGenerateContent?alt=sse": "gemini.generate",
    f"{VERTEX_BETA}:streamGenerateContent": "gemini.generate",
    "/v1beta/interactions": "gemini.interactions",
    "/v1/interactions": "gemini.interactions",
}

NOT_GENERATIONS = [
    "/v1/messages/count_tokens",
    "/v1/messages/count_tokens?beta=true",
    "/v1/messages/batches",
    "/v1/messages/batches/msgbatch_01/results",
    "/v1/models",
    "/v1/models/claude-sonnet-4-5",
    "/v1beta/models",
    "/v1beta/models/gemini-2.5-flash",
    "/v1beta/models/gemini-2.5-flash:countTokens",
    "/v1beta/models/gemini-2.5-flash:embedContent",
    "/v1beta/models/gemini-2.5-flash:batchGenerateContent",
    f"{VERTEX}:countTokens",
    "/v1/embeddings",
    "/v1/completions",
    "/v1/responses/resp_123",
    "/v1/responses/resp_123/cancel",
    "/v1/responses/resp_123/input_items",
    "/v1/chat/completions/chatcmpl-123",
    "/v1beta/interactions/v1_abc",
    "/v1/files?purpose=/v1/messages",
    "/",
    "",
]


@pytest.mark.parametrize(("path", "protocol"), GENERATIONS.items(), ids=GENERATIONS.keys())
def test_generation_paths(path: str, protocol: str):
    assert route("POST", path) == protocol
    assert route("post", path) == protocol


@pytest.mark.parametrize("path", NOT_GENERATIONS)
def test_other_posts_are_not_generations(path: str):
    assert route("POST", path) is None


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH"])
@pytest.mark.parametrize("path", ["/v1/messages", "/v1/chat/completions", "/v1/responses", "/v1/models"])
def test_only_post_is_a_generation(method: str, path: str):
    assert route(method, path) is None


BODIES = [
    # (path, body, protocol)
    ("/v1/messages", {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": []}, "anthropic.messages"),
    ("/v1/messages", {"requests": [{"custom_id": "a", "params": {}}]}, None),  # a batch's shape
    ("/v1/chat/completions", {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}, "openai.chat"),
    ("/v1/chat/completions", {"prompt": "hi", "max_tokens": 5}, None),  # a legacy completion
    ("/v1/responses", {"model": "gpt-4.1", "input": "hi"}, "openai.responses"),
    ("/v1/responses", {"previous_response_id": "resp_1", "input": []}, "openai.responses"),
    ("/v1/responses", {"foo": "bar"}, None),
    ("/v1beta/models/gemini-2.5-flash:generateContent", {"contents": []}, "gemini.generate"),
    ("/v1beta/models/gemini-2.5-flash:generateContent", {"model": "x", "messages": []}, None),
    ("/v1beta/interactions", {"model": "gemini-2.5-flash", "input": "hi"}, "gemini.interactions"),
    ("/v1beta/interactions", {"agent": "deep-research-pro-preview", "input": "hi"}, "gemini.interactions"),
    ("/v1beta/interactions", {}, "gemini.interactions"),  # empty: nothing to expose, a 400 to report
    ("/v1/responses", {}, "openai.responses"),
    # SPEC §1: a body without the protocol's JSON shape is another API sharing the path
    ("/v1/messages", {"messages": [{"role": "user", "content": "hi"}]}, None),  # Anthropic names its model
    ("/v1/messages", {"model": "claude-sonnet-4-5", "messages": "hi"}, None),
    ("/v1/messages", {"model": ["x"], "messages": []}, None),
    ("/openai/deployments/gpt-4o/chat/completions", {"messages": []}, "openai.chat"),  # model in the path
    ("/v1/chat/completions", {"model": 4, "messages": []}, None),
    ("/v1/chat/completions", {"model": "gpt-4o", "messages": {"role": "user"}}, None),
    ("/v3/surveys/123/responses", {"answers": [1, 2], "password": "p", "card": "4111111111111111"}, None),
    ("/v3/surveys/123/responses", {"input": {"q1": "yes"}, "password": "p"}, None),
    ("/v3/surveys/123/responses", {"model": 3, "input": "x"}, None),
    ("/v1/responses", {"input": [{"role": "user", "content": "hi"}]}, "openai.responses"),
    ("/v1/responses", {"prompt": {"id": "pmpt_1", "version": "2"}}, "openai.responses"),
    ("/v1/responses", {"conversation": "conv_1", "input": "hi"}, "openai.responses"),
    ("/v1/responses", {"type": "response.create", "model": "gpt-4.1", "input": "hi"}, "openai.responses"),
    ("/v1/responses", {"type": "response.create", "response": {"model": "gpt-4.1"}}, "openai.responses"),
    ("/v1beta/models/gemini-2.5-flash:generateContent", {"contents": "hi"}, None),
    ("/v1beta/models/gemini-2.5-flash:generateContent", {"contents": {"parts": [{"text": "hi"}]}}, "gemini.generate"),
    ("/v1beta/interactions", {"input": "hi"}, None),
    ("/v1beta/interactions", {"model": "gemini-2.5-flash", "input": 3}, None),
]


@pytest.mark.parametrize(("path", "body", "protocol"), BODIES)
def test_body_shape(path: str, body: dict, protocol: str | None):
    assert route("POST", path, body) == protocol
    assert route("POST", path, json.dumps(body).encode()) == protocol


NOT_JSON_OBJECTS = [
    b"",
    b"not json",
    b"\xff\xfe",
    b"[1, 2]",
    b'"text"',
    b"{",
    b"email=a%40b.example&password=hunter2&card=4111111111111111",  # a form post
    b'--b\r\nContent-Disposition: form-data; name="password"\r\n\r\nhunter2\r\n--b--',
    b"[" * 100_000,  # too deep for the parser: not an object either
]


@pytest.mark.parametrize("body", NOT_JSON_OBJECTS, ids=lambda b: repr(b[:20]))
@pytest.mark.parametrize("path", ["/v1/messages", "/v3/surveys/123/responses", "/v1/chat/completions"])
def test_a_body_that_is_not_a_json_object_is_not_a_generation(path: str, body: bytes):
    # SPEC §1: passed through, not recorded (a form post to `…/responses` is a survey's)
    assert route("POST", path, body) is None
    assert not may_be_json_object(body) or body.startswith(b"{")


@pytest.mark.parametrize(
    "body", [None, b"{}", b'  \r\n\t{"model": 1}', b'\xef\xbb\xbf{"a": 1}', b"{not json"], ids=repr
)
def test_the_event_loop_look_lets_what_may_be_an_object_through(body: bytes | None):
    # None is a request body mitmproxy streamed: not known until after the exchange
    assert may_be_json_object(body)


def test_a_bom_or_whitespace_before_the_object_still_routes():
    body = b'\xef\xbb\xbf \n{"model": "claude-sonnet-4-5", "messages": []}'
    assert route("POST", "/v1/messages", body) == "anthropic.messages"


def test_websocket_mode_only_for_responses():
    assert websocket_protocol("/v1/responses") == "openai.responses"
    assert websocket_protocol("/v1/responses?model=gpt-4.1") == "openai.responses"
    assert websocket_protocol("/v1/chat/completions") is None
    assert websocket_protocol("/v1/realtime") is None


# Without a provider list (protocols/providers.py asks genai-prices' first; see
# tests/protocols/test_provider_names.py): the host's name, the maker without a host.
PROVIDERS = [
    ("anthropic.messages", "api.anthropic.com", "api.anthropic.com"),
    ("openai.chat", "OpenRouter.ai:443", "openrouter.ai"),
    ("openai.chat", "localhost:11434", "localhost"),
    ("openai.chat", "vllm.internal:8000", "vllm.internal"),
    ("gemini.generate", "gateway.internal.example", "google"),
    ("anthropic.messages", None, "anthropic"),
    ("openai.chat", None, "openai"),
    ("openai.responses", "", "openai"),
    ("gemini.generate", None, "google"),
    # the host as protocols.hosts.bare_host reads it: an IPv6 literal without its port,
    # a user part and a trailing dot dropped, surrounding space ignored
    ("openai.chat", "[::1]:8080", "[::1]"),
    ("openai.chat", "[fd00::2]", "[fd00::2]"),
    ("openai.chat", "user@VLLM.internal.:8000", "vllm.internal"),
    ("openai.chat", " vllm.internal ", "vllm.internal"),
]


@pytest.mark.parametrize(("protocol", "host", "provider"), PROVIDERS)
def test_provider_for_names_no_host(protocol: str, host: str | None, provider: str):
    assert provider_for(protocol, host) == provider
