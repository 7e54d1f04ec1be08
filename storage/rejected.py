"""The rejected file's lines: what the writer could not store, kept whole so that
`llmtap import rejected.jsonl` can load it back (SPEC §6).

Each line is one JSON object, `{"llmtap_rejected": 1, "error": …}` and either
`"record"` (a record that could not become rows: the canonical exchange with its who,
when and where, ids included) or `"rows"` (rows the database refused: the spool's batch
shape, every column of the exchange row). Both keep the record's id, so loading a line
back twice, or loading a line the store already holds, stores it once.

Not responsible for where the file is or its mode (the writer), nor for writing what it
reads back (the importer hands it to a writer like any other record).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import fields
from datetime import datetime
from pathlib import Path
from typing import Any

from llmtap.protocols.canonical import ApiError, Exchange, RequestFacts, ServerToolCall, ToolCall, ToolSpec, Usage
from llmtap.storage import spool
from llmtap.storage.record import Recorded
from llmtap.storage.rows import RowSet
from llmtap.storage.secrets import scrub

MARK = "llmtap_rejected"
_BODY_B64 = "$llmtap_b64"
_TIMES = ("started_at", "first_byte_at", "first_token_at", "ended_at")
_BODIES = ("request_body", "response_body")
# An allow-list, not every field: a secret that travels with a record in memory (for
# scrubbing) must never reach this file.
_PLAIN = (
    "id",
    "team",
    "attribution",
    "key_fingerprint",
    "key_last4",
    "client_addr",
    "source",
    "method",
    "host",
    "path",
    "retry_after_s",
    "response_content_type",
)


class RejectedFileError(ValueError):
    """A line that is not a rejected record this llmtap can load."""


def record_line(record: Recorded, error: str) -> bytes:
    """A record that could not become rows, as one line (scrubbed like the rows)."""
    out: dict[str, Any] = {name: getattr(record, name) for name in _PLAIN if hasattr(record, name)}
    for name in _TIMES:  # a record is rejected for bad values too: keep whatever is there
        moment = getattr(record, name)
        out[name] = moment.isoformat() if isinstance(moment, datetime) else moment
    for name in _BODIES:
        out[name] = _body(getattr(record, name))
    out["request_headers"] = [list(pair) for pair in record.request_headers or []]
    out["exchange"] = record.exchange.to_dict()
    line = json.dumps({MARK: 1, "error": error, "record": out}, default=str)
    return scrub(line).encode("ascii") + b"\n"


def rows_line(rows: RowSet, error: str) -> bytes:
    """Rows the database refused, as one line: the spool's batch inside the envelope."""
    batch = spool.encode(rows).rstrip(b"\n")
    head = json.dumps({MARK: 1, "error": error}, ensure_ascii=False).encode("utf-8")
    return head[:-1] + b', "rows": ' + batch + b"}\n"


def looks_like_rejected(path: Path) -> bool:
    """True for a file that starts as a rejected file does (this llmtap's or an older one's,
    whose lines were the spool's batches or `{"error": …}`). Read no further: a HAR file
    may be one line of any size."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(64).lstrip()
    except OSError:
        return False
    return head.startswith((b'{"' + MARK.encode() + b'"', b'{"exchanges":', b'{"error":'))


def read(path: Path) -> Iterator[tuple[Recorded | RowSet | None, str | None]]:
    """Each line as a record or rows to store, or (None, why it cannot be loaded)."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            try:
                yield parse(raw), None
            except (RejectedFileError, ValueError, KeyError, TypeError, RecursionError) as exc:
                yield None, f"line {number}: {exc}"


def parse(raw: bytes) -> Recorded | RowSet:
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise RejectedFileError("not a JSON object")
    if "rows" in value:
        return spool.decode(json.dumps(value["rows"]).encode("utf-8"))
    if "record" in value:
        return _record(value["record"])
    if "exchanges" in value and "tool_calls" in value:  # an older llmtap's refused rows
        return spool.decode(raw)
    raise RejectedFileError("an older llmtap's line without who and when; it cannot be loaded")


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


def _record(data: dict[str, Any]) -> Recorded:
    if not data.get("id") or not data.get("started_at") or not isinstance(data.get("exchange"), dict):
        raise RejectedFileError("a record without its id, start time or exchange")
    known = {f.name for f in fields(Recorded)}
    values: dict[str, Any] = {name: data[name] for name in _PLAIN if name in data and name in known}
    for name in _TIMES:
        values[name] = datetime.fromisoformat(data[name]) if data.get(name) else None
    for name in _BODIES:
        values[name] = _unbody(data.get(name))
    values["request_headers"] = [(str(k), str(v)) for k, v in data.get("request_headers") or []]
    values["exchange"] = _exchange(data["exchange"])
    return Recorded(**values)


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
