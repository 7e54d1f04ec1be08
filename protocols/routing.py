"""Which protocol an HTTP request speaks (SPEC §1), from its method, path and body shape.

Never from the host alone: OpenAI-compatible servers run anywhere, and a known host also
serves count_tokens, model lists and batches, which are not generations. Also names the
`provider` of an exchange from its host.

Not responsible for decoding: it only tells which translator applies.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

PROTOCOLS = (
    "anthropic.messages",
    "openai.chat",
    "openai.responses",
    "gemini.generate",
    "gemini.interactions",
)

_ANTHROPIC = re.compile(r"/v1/messages$")
_CHAT = re.compile(r"/chat/completions$")
_RESPONSES = re.compile(r"/responses$")
_GEMINI = re.compile(r"/models/[^/:]+:(?:stream)?[gG]enerateContent$")
_INTERACTIONS = re.compile(r"/v1(?:beta|alpha)?/interactions$")


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
}
# What a JSON object's bytes may start with: a byte-order mark, whitespace, `{`.
_OBJECT_START = re.compile(rb"(?:\xef\xbb\xbf)?[ \t\r\n]*\{")

_KNOWN_HOSTS = (
    ("api.anthropic.com", "anthropic"),
    ("api.openai.com", "openai"),
    ("googleapis.com", "google"),
)
_DEFAULT_PROVIDER = {
    "anthropic.messages": "anthropic",
    "openai.chat": "openai",
    "openai.responses": "openai",
    "gemini.generate": "google",
    "gemini.interactions": "google",
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
    return protocol if has_shape(protocol, _parse(body)) else None


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
    bare = path.split("?", 1)[0].split("#", 1)[0].rstrip("/")
    if _ANTHROPIC.search(bare):
        return "anthropic.messages"
    if _CHAT.search(bare):
        return "openai.chat"
    if _RESPONSES.search(bare):
        return "openai.responses"
    if _GEMINI.search(bare):
        return "gemini.generate"
    if _INTERACTIONS.search(bare):
        return "gemini.interactions"
    return None


def websocket_protocol(path: str) -> str | None:
    """OpenAI Responses WebSocket mode opens a GET upgrade on the same path."""
    return "openai.responses" if protocol_for_path(path) == "openai.responses" else None


def provider_for(protocol: str, host: str | None) -> str:
    """`anthropic`, `openai`, `google`, or the host's name for compatible servers."""
    if not host:
        return _DEFAULT_PROVIDER[protocol]
    name = host.lower().split("@")[-1]
    name = name.rsplit(":", 1)[0] if name.count(":") == 1 else name
    for suffix, provider in _KNOWN_HOSTS:
        if name == suffix or name.endswith("." + suffix):
            return provider
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
