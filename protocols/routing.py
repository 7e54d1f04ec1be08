"""Which protocol an HTTP request speaks (SPEC §1), from its method, path and body shape.

Never from the host alone: OpenAI-compatible servers run anywhere, and a known host also
serves count_tokens, model lists and batches, which are not generations. Also names the
`provider` of an exchange from its host.

Not responsible for decoding: it only tells which translator applies.
"""

from __future__ import annotations

import json
import re
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

# Keys a request body of each protocol carries; a JSON object with none of them is some
# other API that happens to share the path.
_BODY_KEYS = {
    "anthropic.messages": ("messages", "model"),
    "openai.chat": ("messages", "model"),
    "openai.responses": ("input", "model", "previous_response_id", "instructions"),
    "gemini.generate": ("contents",),
    "gemini.interactions": ("input", "model", "agent"),
}

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
    (then only method and path decide). A body that is not JSON still routes by path:
    its exchange is recorded with a decode error rather than silently ignored.
    """
    if method.upper() != "POST":
        return None
    protocol = protocol_for_path(path)
    if protocol is None or body is None:
        return protocol
    parsed = _parse(body)
    if isinstance(parsed, dict) and parsed and not any(key in parsed for key in _BODY_KEYS[protocol]):
        return None  # a JSON object of some other API that shares the path
    return protocol


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
    except (ValueError, UnicodeDecodeError):
        return None
