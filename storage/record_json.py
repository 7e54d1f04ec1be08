"""A `Recorded` as plain JSON values and back, for the files that keep a record whole
outside the database: the rejected file (`rejected.py`) and a follow-up of background
work waiting in the spool (`followups.py`, `spool.py`).

Only an allow-list of the record's fields is written, never every field: a secret that
travels with a record in memory (for scrubbing) must never reach a file. Text is not
scrubbed here; the caller scrubs the JSON it writes (`secrets.scrub` on the whole line).

Not responsible for the line's envelope, the file, or scrubbing.
"""

from __future__ import annotations

import base64
from dataclasses import fields
from datetime import datetime
from typing import Any

from llmtap.protocols.canonical import ApiError, Exchange, RequestFacts, ServerToolCall, ToolCall, ToolSpec, Usage
from llmtap.storage.record import Recorded

_BODY_B64 = "$llmtap_b64"
_TIMES = ("started_at", "first_byte_at", "first_token_at", "ended_at")
_BODIES = ("request_body", "response_body")
PLAIN = (
    "id",
    "team",
    "attribution",
    "key_fingerprint",
    "key_last4",
    "key_secret_id",
    "client_addr",
    "source",
    "method",
    "host",
    "destination",
    "path",
    "retry_after_s",
    "response_content_type",
    # what the recorder decided of the destination: kept for the spool (the proxy's own
    # files); `llmtap import` decides it again, whatever a file says (storage/imported.py)
    "price_reason",
    "tags",  # a dict of text: JSON as it is
)


class RecordJsonError(ValueError):
    """JSON that is not a record this llmtap can load."""


def to_json(record: Recorded) -> dict[str, Any]:
    """The record as JSON values (bodies as text, or base64 when they are not UTF-8).
    Tolerates bad values: a record is rejected for those too, and kept whatever is there."""
    out: dict[str, Any] = {name: getattr(record, name) for name in PLAIN if hasattr(record, name)}
    for name in _TIMES:
        moment = getattr(record, name)
        out[name] = moment.isoformat() if isinstance(moment, datetime) else moment
    for name in _BODIES:
        out[name] = _body(getattr(record, name))
    out["request_headers"] = [list(pair) for pair in record.request_headers or []]
    out["exchange"] = record.exchange.to_dict()
    return out


def from_json(data: Any) -> Recorded:
    """The record `to_json` wrote. Raises `RecordJsonError` (or ValueError, KeyError,
    TypeError from a value of the wrong shape) for anything else."""
    if not isinstance(data, dict):
        raise RecordJsonError("a record that is not a JSON object")
    if not data.get("id") or not data.get("started_at") or not isinstance(data.get("exchange"), dict):
        raise RecordJsonError("a record without its id, start time or exchange")
    known = {f.name for f in fields(Recorded)}
    values: dict[str, Any] = {name: data[name] for name in PLAIN if name in data and name in known}
    for name in _TIMES:
        values[name] = datetime.fromisoformat(data[name]) if data.get(name) else None
    for name in _BODIES:
        values[name] = _unbody(data.get(name))
    values["request_headers"] = [(str(k), str(v)) for k, v in data.get("request_headers") or []]
    values["exchange"] = _exchange(data["exchange"])
    return Recorded(**values)


def _body(value: bytes | None) -> Any:
    if value is None:
        return None
    try:
        return value.decode("utf-8")  # as text, so a key in it is scrubbed with the rest
    except UnicodeDecodeError:
        return {_BODY_B64: base64.b64encode(value).decode("ascii")}


def _unbody(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return base64.b64decode(value[_BODY_B64])
    return str(value).encode("utf-8", "surrogateescape")


def _only(cls: Any, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def _exchange(data: dict[str, Any]) -> Exchange:
    values = _only(Exchange, data)
    if values.get("usage") is not None:
        values["usage"] = Usage(**_only(Usage, values["usage"]))
    values["tool_calls"] = [ToolCall(**_only(ToolCall, c)) for c in values.get("tool_calls") or []]
    values["server_tool_calls"] = [
        ServerToolCall(**_only(ServerToolCall, c)) for c in values.get("server_tool_calls") or []
    ]
    if values.get("error") is not None:
        values["error"] = ApiError(**_only(ApiError, values["error"]))
    if values.get("request") is not None:
        facts = _only(RequestFacts, values["request"])
        facts["tools"] = [ToolSpec(**_only(ToolSpec, t)) for t in facts.get("tools") or []]
        values["request"] = RequestFacts(**facts)
    return Exchange(**values)
