"""The rejected file's lines: what the writer could not store, kept whole so that
`llmtap import rejected.jsonl` can load it back (SPEC §6).

Each line is one JSON object, `{"llmtap_rejected": 1, "error": …}` and one of
`"record"` (a record that could not become rows: the canonical exchange with its who,
when and where, ids included), `"rows"` (rows the database refused: the spool's batch
shape, every column of the exchange row) or `"followup"` (a poll, resumed stream or
cancel of background work the database refused to apply: the spool's follow-up shape).
Records and rows keep their id, so loading a line back twice, or loading a line the
store already holds, stores it once; a follow-up loaded back completes its exchange at
most once (`followups.apply` leaves a finished exchange alone).

Not responsible for where the file is or its mode (the writer), nor for writing what it
reads back (the importer hands it to a writer like any other record).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from llmtap.storage import record_json, spool
from llmtap.storage.followups import FollowUp
from llmtap.storage.record import Recorded
from llmtap.storage.rows import RowSet
from llmtap.storage.secrets import scrub

MARK = "llmtap_rejected"


class RejectedFileError(ValueError):
    """A line that is not a rejected record this llmtap can load."""


def record_line(record: Recorded, error: str) -> bytes:
    """A record that could not become rows, as one line (scrubbed like the rows)."""
    line = json.dumps({MARK: 1, "error": error, "record": record_json.to_json(record)}, default=str)
    return scrub(line).encode("ascii") + b"\n"


def followup_line(followup: FollowUp, error: str) -> bytes:
    """A follow-up of background work the database refused to apply, as one line (the
    spool's follow-up shape inside the envelope, scrubbed the same way)."""
    line = json.dumps({MARK: 1, "error": error, "followup": followup.to_json()}, default=str)
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


def read(path: Path) -> Iterator[tuple[Recorded | RowSet | FollowUp | None, str | None]]:
    """Each line as a record or rows to store, or (None, why it cannot be loaded)."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            try:
                yield parse(raw), None
            except (RejectedFileError, ValueError, KeyError, TypeError, RecursionError) as exc:
                yield None, f"line {number}: {exc}"


def parse(raw: bytes) -> Recorded | RowSet | FollowUp:
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise RejectedFileError("not a JSON object")
    if "rows" in value:
        return spool.decode(json.dumps(value["rows"]).encode("utf-8"))
    if "record" in value:
        return record_json.from_json(value["record"])
    if "followup" in value:
        return FollowUp.from_json(value["followup"])
    if "exchanges" in value and "tool_calls" in value:  # an older llmtap's refused rows
        return spool.decode(raw)
    raise RejectedFileError("an older llmtap's line without who and when; it cannot be loaded")
