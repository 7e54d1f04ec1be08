"""Which credential is a request's key (SPEC §4): the one its destination authenticates
with, and beside it every other credential the request carries.

A request may carry several credential headers, and any client can add one the
destination never reads (a junk `x-api-key` on OpenAI traffic). The key is the one the
destination reads, by protocol and route:

| destination | reads |
|---|---|
| Anthropic Messages (api.anthropic.com or compatible) | `x-api-key`, else `Authorization: Bearer` (OAuth) |
| OpenAI Chat and Responses, and every compatible server | `Authorization: Bearer` |
| Azure OpenAI v1 (`/openai/v1/…`) | `Authorization: Bearer`, else `api-key` |
| Azure OpenAI deployments (`/openai/deployments/…`) | `api-key`, else `Authorization: Bearer` (Entra ID) |
| Gemini (Google AI) | `x-goog-api-key`, else `?key=`, else `Authorization: Bearer` |
| Vertex AI, AWS Bedrock (SigV4 or an API key) | `Authorization` |

https://docs.anthropic.com/en/api/overview#authentication,
https://platform.openai.com/docs/api-reference/authentication,
https://learn.microsoft.com/en-us/azure/ai-foundry/openai/reference#authentication,
https://ai.google.dev/gemini-api/docs/api-key,
https://cloud.google.com/vertex-ai/generative-ai/docs/start/api-keys,
https://docs.aws.amazon.com/bedrock/latest/userguide/api-keys-use.html

Budgets and the key map then consider every credential in the order `request_keys`
gives: the destination's first, then the others, so an extra header can neither take a
request out from under its key's budget or team nor put it under another's.

Pure functions of a request's headers, query and route, shared by the proxy
(addon/attribution.py) and the importers (storage/ingest.py).

Not responsible for fingerprinting or redacting keys (storage/secrets.py), nor for
deciding a team (storage/teams.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from urllib.parse import parse_qsl

from llmtap.protocols.providers import provider_of

QUERY = "?key"  # a key query parameter (`key`, `api_key`, …), as a source beside the headers
HEADERS = ("x-api-key", "x-goog-api-key", "api-key", "authorization")
QUERY_PARAMS = ("key", "api_key", "api-key", "access_token")
# When the destination is not known (not an LLM route): the order keys were always read in.
ANY_ORDER = (*HEADERS, QUERY)
_BEARER = ("authorization",)


def carried(headers: Mapping[str, str] | Iterable[tuple[str, str]], query: str = "") -> dict[str, str]:
    """The credential each source holds (the first value of each): a key header's value,
    an Authorization bearer token or the access key id of an AWS SigV4 signature, and a
    key parameter of the query string."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    found: dict[str, str] = {}
    for name, value in pairs:
        lowered = name.lower()
        if lowered in ("x-api-key", "x-goog-api-key", "api-key") and value.strip():
            found.setdefault(lowered, value.strip())
        elif lowered == "authorization":
            credential = _authorization(value)
            if credential:
                found.setdefault(lowered, credential)
    if query:
        for name, value in parse_qsl(query, keep_blank_values=False):
            if name.lower() in QUERY_PARAMS and value:
                found.setdefault(QUERY, value)
                break
    return found


def _authorization(value: str) -> str | None:
    scheme, _, credential = value.strip().partition(" ")
    if scheme.lower() == "bearer" and credential.strip():
        return credential.strip()
    if scheme.upper() == "AWS4-HMAC-SHA256":
        # AWS Signature V4 (Bedrock): the request carries no secret, only the access key
        # id that signed it (`Credential=AKID/date/region/service/aws4_request`), which
        # names the key as well as a bearer key would
        return _sigv4_access_key(credential)
    return None


def _sigv4_access_key(parameters: str) -> str | None:
    for part in parameters.split(","):
        name, _, value = part.strip().partition("=")
        if name.strip().lower() == "credential":
            access_key = value.strip().split("/", 1)[0]
            return access_key or None
    return None


def destination_order(
    protocol: str | None, host: str | None, path: str, provider: str | None = None
) -> tuple[str, ...]:
    """The sources the destination reads its credential from, most authoritative first
    (the table in the module's docstring). `provider`: the exchange's, when the caller
    knows it (a reverse listener's, a `[[providers]]` entry's); else the host or the
    route names it (protocols/providers.py)."""
    if protocol is None:
        return ANY_ORDER
    provider = provider or provider_of(protocol, host, path)
    bare = path.partition("?")[0]
    if provider == "azure":
        return ("api-key", "authorization") if "/openai/deployments/" in bare else ("authorization", "api-key")
    if provider == "aws" or protocol == "bedrock.converse":
        return _BEARER
    if protocol == "anthropic.messages":
        return _BEARER if ":rawPredict" in bare or ":streamRawPredict" in bare else ("x-api-key", "authorization")
    if protocol.startswith("gemini."):
        if "/projects/" in bare and "/locations/" in bare:  # Vertex AI: OAuth, or an express-mode key
            return ("authorization", "x-goog-api-key", QUERY)
        return ("x-goog-api-key", QUERY, "authorization")
    return _BEARER  # openai.chat, openai.responses and every compatible server


def request_keys(
    headers: Mapping[str, str] | Iterable[tuple[str, str]],
    query: str = "",
    *,
    protocol: str | None = None,
    host: str | None = None,
    path: str = "",
    provider: str | None = None,
) -> tuple[str, ...]:
    """Every credential the request carries, each once: the destination's own first (the
    request's key), then the others in `ANY_ORDER`. Empty when it carries none."""
    found = carried(headers, query)
    ordered: list[str] = []
    for source in (*destination_order(protocol, host, path, provider), *ANY_ORDER):
        value = found.get(source)
        if value is not None and value not in ordered:
            ordered.append(value)
    return tuple(ordered)
