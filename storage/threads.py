"""Explicit conversation identity, decided when an exchange is written (SPEC §5).

A conversation is, first match wins: the session a client names in a request header; the
Responses `previous_response_id` chain an exchange continues; else the prefix rule the
reports apply (one key or team and model, the same first message, gaps of at most an
hour). The first two are stored as `exchanges.thread_key`, 32 characters:

- `s` + 31 hex digits of sha256("session", scope, session id): the client's session.
  `scope` is the key fingerprint, else `team:` + team, so two keys (or teams) that send
  the same session id never share a conversation.
- `r` + 31 hex digits of sha256("chain", scope, response id): a response chain without a
  session, named by the earliest response of it the store has seen. A follow-up takes
  the thread key of the exchange whose `response_id` it names (same scope; looked up by
  the indexed `response_id`, in the store and earlier in the same batch); when that
  exchange has none yet (a chain root without a session), both get the chain key of the
  root's response id, the root's row updated in the same transaction. A follow-up whose
  referenced response was never recorded gets the chain key of the id it names, which
  later follow-ups of the same chain inherit.

NULL leaves the exchange to the prefix rule. The session headers read here are the
documented ones: Claude Code's `X-Claude-Code-Session-Id` and Codex's `session_id`
(else its `conversation_id`). Gemini CLI sends no session header (its
`x-gemini-api-privileged-user-id` names an installation, not a session: not used).

Not responsible for the reports' use of the key (analytics/sql/*.sql) nor for writing
rows (writer.py); a follow-up stored before the root it names (an import out of time
order) is not joined to it afterwards.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import select, update

from llmtap.storage.schema import exchanges

# In order of preference: the first present with a usable value is the session.
SESSION_HEADERS = ("x-claude-code-session-id", "session_id", "conversation_id")
_SESSION_BYTES = tuple(name.encode() for name in SESSION_HEADERS)
SESSION_ID_MAX = 128  # longer values are no session id a client we know sends
_USABLE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+/=-]*")
KEY_LENGTH = 32
SESSION_PREFIX = "s"
CHAIN_PREFIX = "r"


def session_headers(fields: Iterable[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    """The session-id headers among raw header fields, as text (for the live proxy's
    `request` hook: one pass over the fields, nothing else kept)."""
    out = []
    for name, value in fields:
        if name.lower() in _SESSION_BYTES:
            out.append((name.decode("latin-1"), value.decode("utf-8", "replace")))
    return out


def session_id(headers: Iterable[tuple[str, str]] | None) -> str | None:
    """The client session id a request's headers carry, or None. Only an id's shape is
    taken (letters, digits and `._:@+/=-`, at most 128 characters): anything else (a
    redacted or scrubbed value, free text) is no session id."""
    found: dict[str, str] = {}
    for name, value in headers or ():
        lowered = name.lower()
        if lowered in SESSION_HEADERS and lowered not in found:
            value = value.strip()
            if 0 < len(value) <= SESSION_ID_MAX and _USABLE.fullmatch(value):
                found[lowered] = value
    return next((found[name] for name in SESSION_HEADERS if name in found), None)


def scope(key_fingerprint: str | None, team: str | None) -> str:
    """Whose traffic a thread belongs to: the key, else the team (as the prefix rule)."""
    return key_fingerprint or f"team:{team}"


def session_key(who: str, session: str) -> str:
    return SESSION_PREFIX + _digest("session", who, session)


def chain_key(who: str, response_id: str) -> str:
    return CHAIN_PREFIX + _digest("chain", who, response_id)


def _digest(kind: str, who: str, value: str) -> str:
    text = "\x00".join((kind, who, value)).encode("utf-8", "surrogatepass")
    return hashlib.sha256(text).hexdigest()[: KEY_LENGTH - 1]


def assign(connection: Any, rows: Sequence[dict[str, Any]]) -> None:
    """Give each exchange row of a batch that continues a response chain (and names no
    session) its thread key, in place; a chain root in the store without one gets it
    too (UPDATE in the caller's transaction). Rows keep a key they already have. The
    batch is taken in time order; one indexed query for every response id it names.
    Idempotent: a transaction rolled back and tried again (the writer's duplicate path)
    computes the same keys and makes the same update."""
    wanted = [r for r in rows if _follows(r)]
    if not wanted:
        return
    for row in rows:  # one set of columns for the whole batch (rows spooled by older versions)
        row.setdefault("thread_key", None)
    named = {r["request_previous_response_id"] for r in wanted}
    stored: dict[tuple[str, str], dict[str, Any]] = {}
    columns = (exchanges.c.id, exchanges.c.response_id, exchanges.c.thread_key, exchanges.c.key_fingerprint)
    found = connection.execute(
        select(*columns, exchanges.c.team)
        .where(exchanges.c.response_id.in_(sorted(named)))
        .order_by(exchanges.c.started_at, exchanges.c.id)
    )
    for row in found.mappings():
        who = scope(row["key_fingerprint"], row["team"])
        # the earliest stored id first when a response id repeats (a replayed stream)
        stored.setdefault((who, row["response_id"]), dict(row))
    batch: dict[tuple[str, str], dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: (r["started_at"], r["id"])):
        who = scope(row.get("key_fingerprint"), row.get("team"))
        if _follows(row):
            previous = str(row["request_previous_response_id"])
            row["thread_key"] = _continue(connection, who, previous, batch, stored)
        if row.get("response_id"):
            batch.setdefault((who, row["response_id"]), row)


def _follows(row: dict[str, Any]) -> bool:
    """A row whose thread is its chain's: it names a previous response and no session."""
    key = row.get("thread_key")
    return bool(row.get("request_previous_response_id")) and not (key and key.startswith(SESSION_PREFIX))


def _continue(
    connection: Any,
    who: str,
    previous: str,
    batch: dict[tuple[str, str], dict[str, Any]],
    stored: dict[tuple[str, str], dict[str, Any]],
) -> str:
    """The thread key of a follow-up naming `previous`, setting the root's if it has none.
    A stored root first: the same exchange in the batch is a duplicate, never inserted."""
    root = stored.get((who, previous))
    if root is None:
        referenced = batch.get((who, previous))
        if referenced is None:
            return chain_key(who, previous)  # the chain as far as the store saw it
        if not referenced.get("thread_key"):
            referenced["thread_key"] = chain_key(who, previous)
        return str(referenced["thread_key"])
    if not root["thread_key"]:
        root["thread_key"] = chain_key(who, previous)
        connection.execute(
            update(exchanges)
            .where(exchanges.c.id == root["id"], exchanges.c.thread_key.is_(None))
            .values(thread_key=root["thread_key"])
        )
    return str(root["thread_key"])


def reprocessed(connection: Any, fresh: dict[str, Any], stored_key: str | None) -> None:
    """The thread key of a re-decoded exchange row: its session's, else its chain's (as
    when it was written), else the chain key it was given as a root, which its own bodies
    cannot say again."""
    assign(connection, [fresh])
    if not fresh.get("thread_key") and stored_key and stored_key.startswith(CHAIN_PREFIX):
        fresh["thread_key"] = stored_key
