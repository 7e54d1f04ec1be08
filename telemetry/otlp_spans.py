"""One exchange as one OpenTelemetry span's parts: its name, its times, its trace and span
ids and its attributes, after the OpenTelemetry GenAI semantic conventions' inference
span (`gen_ai.inference.client`, kind CLIENT, named "{operation} {request model}";
https://github.com/open-telemetry/semantic-conventions-genai/blob/main/docs/gen-ai/gen-ai-spans.md,
schema https://opentelemetry.io/schemas/gen-ai-dev/1.42.0-dev) plus `llmtap.*`. The
request's own settings are otlp_request.py's.

Both the live export (a committed table row) and the backfill (an `llmtap export` row)
come here as the same thing: the canonical dict of storage/export.py (`to_canonical`) with
`cost_usd`, `price_status` and `price_version` beside it, so a span's values are export's
values, column for column, and the exchange's stored verdicts (STORED: its conversation
and prompt-cache verdict, decided when it was written, storage/verdicts.py), so a span
says what every report reads.

Metadata only: no prompt, answer text, tool arguments, bodies or key (not even its last
four characters) ever becomes an attribute.

Not responsible for deciding a conversation or a cache verdict (the writer stored them;
nothing here applies a rule), nor for sending spans (otlp_export.py).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from llmtap.storage.export import to_canonical, utc
from llmtap.telemetry.otlp_request import request_attributes

# our protocol id -> gen_ai.operation.name (the conventions' well-known values)
OPERATIONS = {
    "anthropic.messages": "chat",
    "openai.chat": "chat",
    "openai.responses": "chat",
    "bedrock.converse": "chat",
    "gemini.generate": "generate_content",
    "gemini.interactions": "chat",
}
# our provider name -> gen_ai.provider.name; Google's depends on the host (below)
PROVIDERS = {"anthropic": "anthropic", "openai": "openai", "aws": "aws.bedrock", "azure": "azure.ai.openai"}
# OpenAI-compatible servers the conventions name, by host suffix; any other host is its own name
_COMPATIBLE = (
    ("api.groq.com", "groq"),
    ("api.deepseek.com", "deepseek"),
    ("api.mistral.ai", "mistral_ai"),
    ("api.x.ai", "x_ai"),
    ("api.perplexity.ai", "perplexity"),
    ("api.cohere.com", "cohere"),
)
# export's usage keys -> the conventions' token attributes. The meanings are the same:
# input counts all input, cache reads and writes included; output counts reasoning (SPEC
# §2). `cache_write` was `cache_creation` until semantic-conventions-genai#440.
TOKENS = {
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "cache_read_tokens": "gen_ai.usage.cache_read.input_tokens",
    "cache_write_tokens": "gen_ai.usage.cache_write.input_tokens",
    "reasoning_tokens": "gen_ai.usage.reasoning.output_tokens",
}
THREAD = "thread:"  # a trace key of a conversation the wire named (trace_key)
# the stored verdict columns a span reads (storage/verdicts.py decided them)
STORED = ("conversation_id", "cache_verdict", "cache_cause", "cache_missed_tokens", "cache_message_index")
# a stored cache column -> its attribute; a NULL verdict (the exchange takes no part) says none
CACHE = {
    "cache_verdict": "llmtap.cache.verdict",  # first | hit | miss | not_cacheable
    "cache_cause": "llmtap.cache.cause",  # a miss's (or not_cacheable's) cause
    "cache_missed_tokens": "llmtap.cache.missed_tokens",
    "cache_message_index": "llmtap.cache.message_index",  # message_edited: the first that differs
}
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class SpanParts:
    name: str
    trace_id: int  # 128 bits
    span_id: int  # 64 bits
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    error: bool


def ids_for(trace_key: str, exchange_id: str) -> tuple[int, int]:
    """A trace id from the conversation's identity and a span id from the exchange's: the
    same exchange sent twice (live, then backfilled) is the same span of the same trace."""
    trace = int.from_bytes(hashlib.sha256(b"llmtap-trace\0" + trace_key.encode()).digest()[:16], "big")
    span = int.from_bytes(hashlib.sha256(b"llmtap-span\0" + exchange_id.encode()).digest()[:8], "big")
    return trace or 1, span or 1  # an id of all zeros is invalid


def trace_key(thread_key: str | None, conversation_id: str | None, exchange_id: str) -> str:
    """A trace's identity: the digits of the exchange's thread_key after the first letter
    when it has one (a session or response chain is one conversation at any gap: its
    trace stays the same even when an earlier exchange of it is stored later), else its
    stored conversation_id (the id of its conversation's first exchange)."""
    if thread_key:
        return THREAD + thread_key[1:]
    return "first:" + (conversation_id or exchange_id)


def from_table_row(row: dict[str, Any], calls: list[dict[str, Any]]) -> dict[str, Any]:
    """A committed `exchanges` row (its verdict columns decided: the writer hands its
    observers the rows as stored) and its `tool_calls` rows as an export row with the
    stored verdicts."""
    canonical = to_canonical(row, [{"name": c["name"], "status": c["status"], "kind": c["kind"]} for c in calls])
    pico = row.get("cost_total_pico")
    canonical["cost_usd"] = None if pico is None else Decimal(int(pico)).scaleb(-12)
    canonical["price_status"] = row.get("price_status")
    canonical["price_version"] = row.get("price_version")
    canonical.update({name: row.get(name) for name in STORED})
    return canonical


def span_parts(row: dict[str, Any], trace: str) -> SpanParts:
    """`row`: an export row (or `from_table_row`'s) with the STORED columns; `trace`:
    `trace_key`'s identity."""
    operation = OPERATIONS.get(row["protocol"], "chat")
    model = row["model_requested"] or row["model"]
    trace_id, span_id = ids_for(trace, row["id"])
    start = _ns(row["started_at"])
    end = _ns(row["ended_at"]) if row["ended_at"] is not None else start
    attributes = _genai(row, operation, named=trace.startswith(THREAD)) | _llmtap(row)
    error = (row["status"] or 0) >= 400 or row["error"] is not None
    if error:
        attributes["error.type"] = (row["error"] or {}).get("type") or str(row["status"] or "_OTHER")
    return SpanParts(
        name=f"{operation} {model}" if model else operation,
        trace_id=trace_id,
        span_id=span_id,
        start_ns=start,
        end_ns=max(end, start),
        attributes={k: v for k, v in attributes.items() if v is not None},
        error=error,
    )


def provider_name(provider: str | None, host: str | None, path: str | None) -> str | None:
    if provider is None:
        return None
    if provider in PROVIDERS:
        return PROVIDERS[provider]
    name = _host_name(host)
    if provider == "google":
        # the Gemini API's host, else Vertex AI (its hosts, or a Vertex route through a listener)
        if name.endswith("aiplatform.googleapis.com") or "/publishers/" in (path or ""):
            return "gcp.vertex_ai"
        return "gcp.gemini"
    for suffix, known in _COMPATIBLE:
        if name == suffix or name.endswith("." + suffix):
            return known
    return provider


def _genai(row: dict[str, Any], operation: str, named: bool) -> dict[str, Any]:
    usage = row["usage"] or {}
    host = row["host"]
    provider = provider_name(row["provider"], host, row["path"])
    out: dict[str, Any] = {
        "gen_ai.operation.name": operation,
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": row["model_requested"],
        "gen_ai.response.model": row["model"],
        "gen_ai.response.id": row["response_id"],
        # only a conversation the wire named (a client's session, a response chain): the
        # conventions ask for no id made up from content, which the gap rule's is
        "gen_ai.conversation.id": row.get("conversation_id") if named else None,
        "gen_ai.request.max_tokens": (row.get("request") or {}).get("max_tokens"),
        "gen_ai.response.finish_reasons": _finish_reasons(row),
        "gen_ai.response.time_to_first_chunk": _first_chunk_s(row),
        "server.address": _host_name(host) or None,
        "server.port": _host_port(host),
        "http.response.status_code": row["status"],
    }
    for key, attribute in TOKENS.items():
        out[attribute] = usage.get(key)
    return out | request_attributes(row, provider)


def _finish_reasons(row: dict[str, Any]) -> list[str] | None:
    """The provider's own reason (else the canonical one); `error` for a generation that
    ended without one (a cut or cancelled stream, an error), as the conventions ask. A
    background response's first answer (queued) has no reason yet: none is said."""
    reason = row["finish_reason_raw"] or row["finish_reason"]
    if reason is not None:
        return [str(reason)]
    params = (row.get("request") or {}).get("params") or {}
    if row["error"] is not None or (row["status"] or 0) >= 400:
        return ["error"]
    if not row["complete"] and params.get("background") is not True:
        return ["error"]
    return None


def _first_chunk_s(row: dict[str, Any]) -> float | None:
    """A stream's first response bytes, in seconds after the request began (a stream's
    first chunk reaches the proxy with them)."""
    first, started = row.get("first_byte_at"), row["started_at"]
    if not row["streamed"] or first is None or started is None:
        return None
    return max((utc(first) - utc(started)) / timedelta(seconds=1), 0.0)


def _llmtap(row: dict[str, Any]) -> dict[str, Any]:
    calls = row["tool_calls"] or []
    cost = row.get("cost_usd")
    out: dict[str, Any] = {
        "llmtap.exchange.id": row["id"],
        "llmtap.conversation.id": row.get("conversation_id"),
        "llmtap.team": row["team"],
        "llmtap.attribution": row["attribution"],
        "llmtap.key.fingerprint": row["key_fingerprint"],
        "llmtap.protocol": row["protocol"],
        "llmtap.provider": row["provider"],
        "llmtap.streamed": row["streamed"],
        "llmtap.complete": row["complete"],
        "llmtap.finish_reason": row["finish_reason"],
        "llmtap.ttfb_ms": row["ttfb_ms"],
        "llmtap.ttft_ms": row["ttft_ms"],
        "llmtap.duration_ms": row["duration_ms"],
        "llmtap.usage.provenance": row["usage_provenance"],
        # money: a double for dashboards, and its exact digits as text (export's value)
        "llmtap.cost_usd": float(cost) if cost is not None else None,
        "llmtap.cost_usd.exact": _decimal_text(cost) if cost is not None else None,
        "llmtap.price.status": row.get("price_status"),
        "llmtap.price.version": row.get("price_version"),
        "llmtap.tool_calls.count": len(calls),
        "llmtap.interrupted": row["interrupted"],
        "llmtap.decode_error": bool(row["decode_error"]) or None,
    }
    if calls:
        out["llmtap.tool_calls.statuses"] = [str(c["status"]) for c in calls]
        out["llmtap.tool_calls.names"] = [str(c["name"] or "") for c in calls]
    if row.get("cache_verdict") is not None:
        out.update({attribute: row.get(column) for column, attribute in CACHE.items()})
    tags = row.get("tags")
    if isinstance(tags, dict):  # SPEC §4: a request's tags, each an attribute (at most 16, bounded)
        out.update({f"llmtap.tag.{name}": str(value) for name, value in tags.items()})
    return out


def _decimal_text(value: Decimal) -> str:
    return format(value.normalize(), "f") if value else "0"


def _ns(moment: datetime) -> int:
    # in whole microseconds: a float of epoch seconds loses the last digits
    return (utc(moment) - EPOCH) // timedelta(microseconds=1) * 1000


def _host_name(host: str | None) -> str:
    if not host:
        return ""
    return (urlsplit("//" + host).hostname or "").lower()


def _host_port(host: str | None) -> int | None:
    if not host:
        return None
    try:
        return urlsplit("//" + host).port
    except ValueError:
        return None
