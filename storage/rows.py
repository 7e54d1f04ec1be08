"""A `Recorded` exchange as the rows of the store's tables, under a body mode.

Body modes (SPEC §4): `none` keeps numbers, names and ids but no content (no answer text,
no tool arguments, no bodies); `metadata` (the default) keeps the canonical record with
the answer text and tool arguments but no raw bodies; `full` keeps the raw request and
response bodies too, redacted, compressed and content-addressed.

Not responsible for executing SQL (see `batch_insert.py`).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from llmtap.protocols.canonical import RequestFacts
from llmtap.protocols.headers import session_id
from llmtap.storage import bodies, threads
from llmtap.storage.record import Recorded
from llmtap.storage.secrets import scrub, scrub_json

BODY_MODES = ("none", "metadata", "full")
PRICE_COLUMNS = (
    "price_status",
    "price_reason",
    "price_model",
    "price_version",
    "cost_input_pico",
    "cost_cache_read_pico",
    "cost_cache_write_pico",
    "cost_output_pico",
    "cost_fee_pico",
    "cost_total_pico",
    "cost_detail",
    "rate_input_pico",
    "rate_cache_read_pico",
)


@dataclass(slots=True)
class RowSet:
    """Everything one batch inserts, table by table."""

    exchanges: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    body_refs: list[dict[str, Any]] = field(default_factory=list)

    def extend(self, other: RowSet) -> None:
        self.exchanges += other.exchanges
        self.tool_calls += other.tool_calls
        self.bodies += other.bodies
        self.body_refs += other.body_refs

    def __len__(self) -> int:
        return len(self.exchanges)


def _ms(start: datetime, end: datetime | None) -> float | None:
    if end is None:
        return None
    return round((end - start).total_seconds() * 1000.0, 3)


def dedupe_key(rec: Recorded) -> str:
    """The record's id (SPEC §6: two records are the same only when they are the same
    captured exchange, and the id says which: see `ids.py`).

    Rows stored before this rule carry a digest of the provider's response id here; a new
    row's key is its id (26 characters), so the two never meet. A response id is never
    part of the key: a caching gateway, a replay or a fake upstream gives different
    requests the same one, and each of them is a record of its own.
    """
    return rec.id


def rows_for(rec: Recorded, body_mode: str = "metadata") -> RowSet:
    ex = rec.exchange
    keep_content = body_mode != "none"
    out = RowSet()
    row = _identity(rec) | _canonical(ex, keep_content) | _request(ex)
    row["body_mode"] = body_mode
    row["request_body_ref"] = row["response_body_ref"] = None
    row.update(dict.fromkeys(PRICE_COLUMNS))  # filled by a pricer the writer was given
    row["price_reason"] = rec.price_reason  # `unverified_host` holds whatever a pricer says
    if body_mode == "full":
        _bodies(rec, row, out)
    out.exchanges.append(row)
    for position, call in enumerate(ex.tool_calls):
        out.tool_calls.append(
            {
                "exchange_id": rec.id,
                "position": position,
                "call_id": call.id,
                "name": call.name,
                "arguments": scrub_json(call.arguments) if keep_content else None,
                "arguments_raw": scrub(call.arguments_raw) if keep_content else None,
                "arguments_chars": len(call.arguments_raw),
                "valid_json": call.valid_json,
                "kind": call.kind,
                "status": call.status,
                "status_detail": call.status_detail,
            }
        )
    return out


def _identity(rec: Recorded) -> dict[str, Any]:
    team = rec.team or "unattributed"
    # the conversation a session header names; a response chain's key is the writer's (threads.py)
    session = session_id(rec.request_headers)
    return {
        "id": rec.id,
        "dedupe_key": dedupe_key(rec),
        "client_session_id": session,
        "thread_key": threads.session_key(threads.scope(rec.key_fingerprint, team), session) if session else None,
        "previous_exchange_id": None,  # the exchange whose response it names: threads.py
        "team": team,
        "attribution": rec.attribution,
        "key_fingerprint": rec.key_fingerprint,
        "key_last4": rec.key_last4,
        "key_secret_id": rec.key_secret_id if rec.key_fingerprint else None,
        "client_addr": rec.client_addr,
        "tags": _tags(rec.tags),
        "source": rec.source,
        "method": rec.method,
        "host": rec.host,
        "destination": rec.destination,
        "path": scrub(rec.path) if rec.path else rec.path,
        "started_at": rec.started_at,
        "first_byte_at": rec.first_byte_at,
        "first_token_at": rec.first_token_at,
        "ended_at": rec.ended_at,
        "ttfb_ms": _ms(rec.started_at, rec.first_byte_at),
        "ttft_ms": _ms(rec.started_at, rec.first_token_at),
        "duration_ms": _ms(rec.started_at, rec.ended_at),
        "retry_after_s": rec.retry_after_s,
        "response_content_type": rec.response_content_type,
    }


def _canonical(ex: Any, keep_content: bool) -> dict[str, Any]:
    usage = ex.usage
    error = ex.error
    return {
        "protocol": ex.protocol,
        "provider": ex.provider,
        "streamed": ex.streamed,
        "status": ex.status,
        "complete": ex.complete,
        "model_requested": ex.model_requested,
        "model": ex.model,
        "response_id": ex.response_id,
        "finish_reason": ex.finish_reason,
        "finish_reason_raw": ex.finish_reason_raw,
        "usage_input_tokens": usage.input_tokens if usage else None,
        "usage_cache_read_input_tokens": usage.cache_read_tokens if usage else None,
        "usage_cache_creation_input_tokens": usage.cache_write_tokens if usage else None,
        "usage_cache_creation_5m_input_tokens": usage.cache_write_5m_tokens if usage else None,
        "usage_cache_creation_1h_input_tokens": usage.cache_write_1h_tokens if usage else None,
        "usage_output_tokens": usage.output_tokens if usage else None,
        "usage_reasoning_output_tokens": usage.reasoning_tokens if usage else None,
        "usage_total_tokens_reported": usage.total_tokens_reported if usage else None,
        "usage_provenance": ex.usage_provenance,
        "usage_raw": ex.usage_raw,
        "usage_check": ex.usage_check or None,
        "usage_modalities": (usage.modalities or None) if usage else None,
        "usage_sub": (usage.sub_usages or None) if usage else None,
        "service_tier": ex.service_tier,
        "inference_geo": ex.inference_geo,
        "service_speed": ex.speed,
        "server_tool_uses": ex.server_tool_uses or None,
        "warmup": ex.warmup,
        "background_state": ex.background_state,  # its polls complete it (storage/followups.py)
        "text": scrub(ex.text) if keep_content else None,
        "text_truncated": ex.text_truncated,
        "refusal": scrub(ex.refusal) if keep_content else None,
        "reasoning_blocks": ex.reasoning_blocks,
        "tool_call_count": len(ex.tool_calls),
        "server_tool_calls": [dataclasses.asdict(c) for c in ex.server_tool_calls] or None,
        "error_type": error.type if error else None,
        "error_code": error.code if error else None,
        "error_message": scrub(error.message) if error and error.message else None,
        "events": ex.events,
        "interrupted": ex.interrupted,
        "decode_error": scrub(ex.decode_error) if ex.decode_error else None,
    }


def _tags(tags: dict[str, str]) -> str | None:
    """Compact JSON, names sorted (so equal tag sets store equal text); values are the
    client's text, scrubbed like any (a key-shaped value is no tag to keep)."""
    if not isinstance(tags, dict):  # a spool file's, say: kept only as the recorder makes them
        return None
    kept = {name: scrub(value) for name, value in tags.items() if isinstance(name, str) and isinstance(value, str)}
    if not kept:
        return None
    return json.dumps(dict(sorted(kept.items())), separators=(",", ":"), ensure_ascii=False)


def _request(ex: Any) -> dict[str, Any]:
    if ex.request is None:
        return dict.fromkeys(_REQUEST_COLUMNS)
    return _request_values(ex.request)


def _request_values(facts: RequestFacts) -> dict[str, Any]:
    return {
        "request_stream": facts.stream,
        "end_user": scrub(facts.end_user) if facts.end_user else None,
        "request_max_tokens": facts.max_tokens,
        # what a request declares is free text too (schemas, stop sequences): no keys
        "request_tools": scrub_json([{"name": t.name, "schema": t.schema, "type": t.type} for t in facts.tools]),
        "request_server_tools": scrub_json(facts.server_tools),
        "request_tool_choice": scrub_json(facts.tool_choice),
        "request_messages_by_role": facts.messages_by_role,
        "request_message_count": sum(facts.messages_by_role.values()),
        "request_system_chars": facts.system_chars,
        "request_images": facts.images,
        "request_cache_breakpoints": facts.cache_breakpoints,
        "request_cache_ttl": facts.cache_ttl,
        "request_prompt_cache_key": scrub(facts.prompt_cache_key) if facts.prompt_cache_key else facts.prompt_cache_key,
        "request_previous_response_id": facts.previous_response_id,
        "request_cached_content": facts.cached_content,
        "request_thinking": scrub_json(facts.thinking),
        "request_tool_result_ids": facts.tool_result_ids,
        "request_tool_call_ids": facts.tool_call_ids,
        "request_params": scrub_json(facts.params),
        "tools_hash": facts.tools_hash,
        "system_hash": facts.system_hash,
        "first_message_hash": facts.message_hashes[0] if facts.message_hashes else None,
        "message_hashes": facts.message_hashes,
        "message_chars": facts.message_chars,
        # what its follow-ups extend; "effective" is added by threads.py once it names a response
        "request_prefix": {"own": facts.prefix} if facts.prefix is not None else None,
    }


_REQUEST_COLUMNS = tuple(_request_values(RequestFacts()))


def _bodies(rec: Recorded, row: dict[str, Any], out: RowSet) -> None:
    seen: set[str] = set()
    blobs: list[bodies.Blob] = []
    if rec.request_body is not None:
        request_blobs = bodies.split_request(rec.request_body, rec.request_headers, drop_media=True)
        row["request_body_ref"] = request_blobs[0].hash
        blobs += request_blobs
    if rec.response_body is not None:
        response = bodies.response_blob(rec.response_body)
        row["response_body_ref"] = response.hash
        blobs.append(response)
    for piece in blobs:
        if piece.hash in seen:
            continue
        seen.add(piece.hash)
        out.bodies.append(piece.row())
        out.body_refs.append({"exchange_id": rec.id, "body_hash": piece.hash})
