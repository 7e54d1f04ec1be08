"""The first prompt of a conversation, for `report conversations`: the start of the first
user message of its first request, read from the stored request body when bodies were
kept (body mode `full`), for the few rows a report keeps (its top N, never the whole
store).

Not responsible for ranking conversations (sql/conversations.sql) nor for redaction
(bodies are stored redacted).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine
from sqlalchemy.exc import NoResultFound

from llmtap.protocols.transcript import transcript
from llmtap.storage import bodies as blobs
from llmtap.storage.engine import make_engine
from llmtap.storage.maintenance import load_blob

if TYPE_CHECKING:
    from llmtap.analytics.reports import Table

_INTERNAL = ("first_body_ref", "first_protocol")  # what the SQL hands over for this, not shown


def with_first_prompts(url: str, table: Table, limit: int, engine: Engine | None = None) -> None:
    """Replace the body reference of each row by `first_prompt` (NULL without a body), read
    through the command's `engine` when it has one open (else one opened for this)."""
    wanted = {row["first_body_ref"]: None for row in table.rows if row.get("first_body_ref")}
    prompts: dict[str, str | None] = {}
    if wanted:
        own = engine is None
        engine = engine or make_engine(url)
        try:
            with engine.connect() as connection:
                for row in table.rows:
                    ref = row.get("first_body_ref")
                    if ref and ref not in prompts:
                        prompts[ref] = _first_prompt(connection, ref, row.get("first_protocol"), limit)
        finally:
            if own:
                engine.dispose()
    for row in table.rows:
        ref = row.pop("first_body_ref", None)
        row.pop("first_protocol", None)
        row["first_prompt"] = prompts.get(ref) if ref else None
    table.columns = [c for c in table.columns if c not in _INTERNAL] + ["first_prompt"]


def _first_prompt(connection: Any, ref: str, protocol: str | None, limit: int) -> str | None:
    try:
        body, _ = blobs.join_request(load_blob(connection, ref), lambda h: load_blob(connection, h))
        parsed = json.loads(body)
    except (ValueError, LookupError, NoResultFound):
        return None  # a body that is not JSON, or a blob pruned away: no prompt to show
    if not isinstance(parsed, dict):
        return None
    for role, text in transcript(protocol or "", parsed).messages:
        if role == "user" and text.strip():
            text = " ".join(text.split())
            return text if len(text) <= limit else text[: limit - 1] + "…"
    return None
