"""Which protocol an HTTP request speaks (SPEC §1), from its method, path and body shape.

Never from the host alone: OpenAI-compatible servers run anywhere, and a known host also
serves count_tokens, model lists and batches, which are not generations. Also names the
`provider` of the cloud routes (Bedrock, Vertex AI's Anthropic models, Azure OpenAI)
from the path, and the model a cloud path names.

Not responsible for decoding (it only tells which translator applies), nor for which
hosts name a provider: that is genai-prices' provider list (protocols/providers.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from llmtap.protocols.hosts import bare_host, nameless

PROTOCOLS = (
    "anthropic.messages",
    "openai.chat",
    "openai.responses",
    "gemini.generate",
    "gemini.interactions",
    "bedrock.converse",
)

_ANTHROPIC = re.compile(r"/v1/messages$")
_CHAT = re.compile(r"/chat/completions$")
_RESPONSES = re.compile(r"/responses$")
_GEMINI = re.compile(r"/models/[^/:]+:(?:stream)?[gG]enerateContent$")
_INTERACTIONS = re.compile(r"/v1(?:beta|alpha)?/interactions$")
# Standalone compaction: https://platform.openai.com/docs/api-reference/responses/compact
_COMPACT = re.compile(r"/responses/compact$")
# The clouds (SPEC §1). Bedrock: https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModel.html
# and API_runtime_Converse.html; the model id is URL-encoded in the path (`%3A` for `:`).
_BEDROCK_INVOKE = re.compile(r"/model/(?P<model>[^/]+)/invoke(?:-with-response-stream)?$")
_BEDROCK_CONVERSE = re.compile(r"/model/(?P<model>[^/]+)/converse(?:-stream)?$")
# Vertex AI's Claude: https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/use-claude;
# its token counting is the model `count-tokens` on the same verb, never a generation:
# https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/count-tokens
_VERTEX_ANTHROPIC = re.compile(
    r"/publishers/anthropic/models/(?P<model>(?!count-tokens(?:@|:))[^/:]+):(?:stream)?[rR]awPredict$"
)
# Azure OpenAI: https://learn.microsoft.com/en-us/azure/ai-foundry/openai/reference
_AZURE_DEPLOYMENT = re.compile(r"/openai/deployments/(?P<model>[^/]+)/")
_AZURE_PATH = re.compile(r"/openai/(?:deployments/[^/]+/|v1/)?(?:chat/completions|responses)(?:/compact)?$")


def _is(body: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> bool:
    return isinstance(body.get(key), kind)


def _absent_or(body: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> bool:
    return key not in body or isinstance(body[key], kind)


def _anthropic(body: dict[str, Any]) -> bool:
    # https://docs.anthropic.com/en/api/messages: `model`, `messages` and `max_tokens` are
    # required; a batch (`requests`) or any other API's object on the path has no `messages`.
    return _is(body, "model", str) and _is(body, "messages", list)


def _chat(body: dict[str, Any]) -> bool:
    # `model` may live in the path (an Azure deployment) or a server's default: only `messages`
    return _is(body, "messages", list) and _absent_or(body, "model", str)


def _responses(body: dict[str, Any]) -> bool:
    # https://platform.openai.com/docs/api-reference/responses/create: every field is
    # optional on paper, yet a generation names a model, an input, a conversation to
    # continue, or a stored prompt. WebSocket mode wraps them in `response.create`.
    if body.get("type") == "response.create":
        return isinstance(body.get("response"), dict) or any(k in body for k in ("model", "input"))
    if not _absent_or(body, "model", str) or not _absent_or(body, "input", (str, list)):
        return False
    return (
        _is(body, "model", str)
        or _is(body, "input", (str, list))
        or _is(body, "previous_response_id", str)
        or _is(body, "prompt", dict)
        or _is(body, "conversation", (str, dict))
    )


def _cloud_anthropic(body: dict[str, Any]) -> bool:
    # Bedrock's InvokeModel and Vertex's rawPredict serve other makers' models too (Llama's
    # `prompt`, Mistral's `messages`); an Anthropic body there names its `anthropic_version`
    # (required: `bedrock-2023-05-31`, `vertex-2023-10-16`) and carries no model.
    # https://docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-anthropic-claude-messages.html
    return _is(body, "anthropic_version", str) and _is(body, "messages", list)


def _converse(body: dict[str, Any]) -> bool:
    # https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html:
    # `messages`, or only `promptVariables` when the model id is a managed prompt's ARN
    return _is(body, "messages", list) or _is(body, "promptVariables", dict)


def _gemini(body: dict[str, Any]) -> bool:
    # https://ai.google.dev/api/generate-content: `contents` is required (a list; a single
    # Content object is taken too, as some clients send it)
    return _is(body, "contents", (list, dict))


def _interactions(body: dict[str, Any]) -> bool:
    # https://ai.google.dev/api/interactions-api: a model or an agent, and an input
    return (_is(body, "model", str) or _is(body, "agent", str)) and _absent_or(body, "input", (str, list, dict))


# The JSON shape of each protocol's request (SPEC §1): a body without it is another API
# that shares the path (a survey's `/responses`, a batch on `/v1/messages`), never recorded.
_SHAPES: dict[str, Callable[[dict[str, Any]], bool]] = {
    "anthropic.messages": _anthropic,
    "openai.chat": _chat,
    "openai.responses": _responses,
    "gemini.generate": _gemini,
    "gemini.interactions": _interactions,
    "bedrock.converse": _converse,
}
# What a JSON object's bytes may start with: a byte-order mark, whitespace, `{`.
_OBJECT_START = re.compile(rb"(?:\xef\xbb\xbf)?[ \t\r\n]*\{")

_DEFAULT_PROVIDER = {
    "anthropic.messages": "anthropic",
    "openai.chat": "openai",
    "openai.responses": "openai",
    "gemini.generate": "google",
    "gemini.interactions": "google",
    "bedrock.converse": "aws",
}


def route(method: str, path: str, body: bytes | dict[str, Any] | None = None) -> str | None:
    """The protocol id of a request, or None for traffic that is not a generation.

    `body` may be the raw request bytes, a parsed object, or None when not yet known
    (then only method and path decide). A known body must be a JSON object of the
    protocol's shape: a form post, a JSON array, or an object of another API that shares
    the path is passed through and not recorded (SPEC §1).
    """
    if method.upper() != "POST":
        return None
    protocol = protocol_for_path(path)
    if protocol is None or body is None:
        return protocol
    parsed = _parse(body)
    if _cloud_anthropic_path(_bare(path)):
        return protocol if isinstance(parsed, dict) and (not parsed or _cloud_anthropic(parsed)) else None
    return protocol if has_shape(protocol, parsed) else None


def has_shape(protocol: str, body: Any) -> bool:
    """Whether a parsed request body has the JSON shape of this protocol's requests. An
    empty object passes: it carries nothing to expose, and the provider's 400 to such a
    malformed call belongs in the errors report."""
    return isinstance(body, dict) and (not body or _SHAPES[protocol](body))


def may_be_json_object(body: bytes | None) -> bool:
    """A cheap first look, for the proxy's event loop: False when the body cannot be a
    JSON object (empty, a form post, multipart, a JSON array), True when it may be (the
    shape is checked after the exchange, off the loop) or is not known (None: a request
    body mitmproxy streamed rather than held)."""
    return body is None or _OBJECT_START.match(body) is not None


def protocol_for_path(path: str) -> str | None:
    """The protocol a POST to this path would speak, ignoring the query string."""
    bare = _bare(path)
    if _ANTHROPIC.search(bare) or _cloud_anthropic_path(bare):
        return "anthropic.messages"
    if _BEDROCK_CONVERSE.search(bare):
        return "bedrock.converse"
    if _COMPACT.search(bare):
        return "openai.responses"
    if _CHAT.search(bare):
        return "openai.chat"
    if _RESPONSES.search(bare):
        return "openai.responses"
    if _GEMINI.search(bare):
        return "gemini.generate"
    if _INTERACTIONS.search(bare):
        return "gemini.interactions"
    return None


def _bare(path: str) -> str:
    return path.split("?", 1)[0].split("#", 1)[0].rstrip("/")


def _cloud_anthropic_path(bare: str) -> bool:
    """Bedrock InvokeModel or Vertex rawPredict of an Anthropic model (`bare`: no query)."""
    return _BEDROCK_INVOKE.search(bare) is not None or _VERTEX_ANTHROPIC.search(bare) is not None


def path_model(path: str) -> str | None:
    """The model a cloud path names, URL-decoded: Bedrock's `{modelId}`, Vertex's Claude
    `{model}`, an Azure deployment's name; None for any other path. SPEC §1: where the
    body names no model, this is `model_requested`."""
    bare = _bare(path)
    for pattern in (_BEDROCK_INVOKE, _BEDROCK_CONVERSE, _VERTEX_ANTHROPIC, _AZURE_DEPLOYMENT):
        match = pattern.search(bare)
        if match:
            return unquote(match.group("model")) or None
    return None


def _cloud_provider(path: str, local: bool) -> str | None:
    """The cloud a path belongs to. Bedrock's and Vertex's Claude paths and Azure's
    deployment paths are their own; `/openai/v1/…` is Azure's only on a host that names
    nobody else (Groq serves the same path on api.groq.com), as is an `api-version`
    query, which only Azure asks for."""
    bare = _bare(path)
    if _BEDROCK_INVOKE.search(bare) or _BEDROCK_CONVERSE.search(bare):
        return "aws"
    if _VERTEX_ANTHROPIC.search(bare):
        return "google"
    if _AZURE_DEPLOYMENT.search(bare):
        return "azure"
    if local and (_AZURE_PATH.search(bare) or "api-version=" in path.partition("?")[2]):
        return "azure"
    return None


def websocket_protocol(path: str) -> str | None:
    """OpenAI Responses WebSocket mode opens a GET upgrade on the same path."""
    return "openai.responses" if protocol_for_path(path) == "openai.responses" else None


def provider_for(protocol: str, host: str | None, path: str = "") -> str:
    """The provider a request names without a provider list: a cloud route's path
    (`aws`, `google`, `azure`: a reverse listener or a test upstream on 127.0.0.1 serves
    Bedrock's paths too), else the protocol's maker when there is no host (or any host,
    for Gemini's protocols), else the host's name.

    Which hosts name a provider (api.anthropic.com, openrouter.ai, …) is genai-prices'
    provider list's to say, and the config's `[[providers]]`: protocols/providers.py asks
    them first and this only after; the stored `provider` comes from there."""
    name = bare_host(host)
    cloud = _cloud_provider(path, local=nameless(name))
    if cloud is not None:
        return cloud
    if not name:
        return _DEFAULT_PROVIDER[protocol]
    if protocol.startswith("gemini."):
        return "google"
    return name


def _parse(body: bytes | dict[str, Any]) -> Any:
    if isinstance(body, dict):
        return body
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
