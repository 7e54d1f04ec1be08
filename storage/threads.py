"""Explicit conversation identity, decided when an exchange is written (SPEC §5).

A conversation is, first match wins: the session a client names in a request header; the
Responses `previous_response_id` chain an exchange continues; else the prefix rule the
reports apply (one key or team and model, the same first message, gaps of at most an
hour). The first two are stored as `exchanges.thread_key`, 32 characters: a letter that
says how the exchange joined its conversation, then 31 hex digits that name the
conversation (the reports' identity is those digits):

- `s` + sha256("session", scope, session id): a request of a client's session.
  `scope` is the key fingerprint, else `team:` + team, so two keys (or teams) that send
  the same session id never share a conversation.
- `c` + the same digits: a request of a response chain inside that session (a follow-up
  naming a previous response, and the response it names once one does). The reports
  compare a chain's requests with each other rather than by first message (a follow-up
  sends only what is new).
- `r` + sha256("chain", scope, response id): a response chain without a session, named
  by the earliest response of it the store has seen.

A follow-up takes the conversation of the exchange whose `response_id` it names (same
scope; looked up by the indexed `response_id`, in the store and earlier in the same
batch), unless its own session header names another; when that exchange has no key yet
(a chain root without a session), both get the chain key of the root's response id, and
a root of the same session becomes `c`: the root's row is updated in the same
transaction. A follow-up whose referenced response was never recorded gets the chain key
of the id it names (or its session's `c` key), which later follow-ups inherit.

The same lookup gives a follow-up, for the cache rules, the exchange it names
(`previous_exchange_id`: the turn its verdict compares it with) and the prefix it extends
(protocols/prefix.py): its `request_prefix` gains the "effective" parts it stands on, and
its `tools_hash` / `system_hash` become those of that prefix (the named one's unless it
declares others). A named exchange stored before its parts were (before schema 0012, and
not reprocessed) leaves the follow-up its own hashes.

NULL leaves the exchange to the prefix rule. The session id is read off the request's
headers by protocols/headers.py (`session_id`).

Not responsible for the reports' use of the key (analytics/sql/*.sql) nor for writing
rows (batch_insert.py); a follow-up stored before the root it names (an import out of time
order) is not joined to it afterwards.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select, update

from llmtap.protocols import prefix
from llmtap.storage.schema import exchanges

# what a follow-up reads of the exchange it names, beside its identity
_PREFIX_COLUMNS = (exchanges.c.tools_hash, exchanges.c.system_hash, exchanges.c.request_prefix)

KEY_LENGTH = 32
SESSION_PREFIX = "s"
SESSION_CHAIN_PREFIX = "c"  # a response chain inside a session
CHAIN_PREFIX = "r"
CHAINED = (SESSION_CHAIN_PREFIX, CHAIN_PREFIX)


def scope(key_fingerprint: str | None, team: str | None) -> str:
    """Whose traffic a thread belongs to: the key, else the team (as the prefix rule)."""
    return key_fingerprint or f"team:{team}"


def session_key(who: str, session: str) -> str:
    return SESSION_PREFIX + _digest("session", who, session)


def chain_key(who: str, response_id: str) -> str:
    return CHAIN_PREFIX + _digest("chain", who, response_id)


def same_conversation(key: str) -> tuple[str, ...]:
    """Every thread key of the conversation `key` names (a session's requests and its chains)."""
    if key[0] in (SESSION_PREFIX, SESSION_CHAIN_PREFIX):
        return (SESSION_PREFIX + key[1:], SESSION_CHAIN_PREFIX + key[1:])
    return (key,)


def _digest(kind: str, who: str, value: str) -> str:
    text = "\x00".join((kind, who, value)).encode("utf-8", "surrogatepass")
    return hashlib.sha256(text).hexdigest()[: KEY_LENGTH - 1]


def assign(connection: Any, rows: Sequence[dict[str, Any]]) -> None:
    """Give each exchange row of a batch that names a previous response its thread key,
    in place (see the module's docstring); the root it names gets one too where it needs
    it (UPDATE in the caller's transaction). The batch is taken in time order; one indexed
    query for every response id it names. Idempotent: a transaction rolled back and tried
    again (the writer's duplicate path) computes the same keys and makes the same updates."""
    for row in rows:  # one set of columns for the whole batch (rows spooled by older versions)
        for column in ("thread_key", "previous_exchange_id", "request_prefix"):
            row.setdefault(column, None)
    wanted = [r for r in rows if r.get("request_previous_response_id")]
    if not wanted:
        return
    named = {r["request_previous_response_id"] for r in wanted}
    stored: dict[tuple[str, str], dict[str, Any]] = {}
    columns = (exchanges.c.id, exchanges.c.response_id, exchanges.c.thread_key, exchanges.c.key_fingerprint)
    found = connection.execute(
        select(*columns, exchanges.c.team, *_PREFIX_COLUMNS)
        .where(exchanges.c.response_id.in_(sorted(named)))
        .order_by(exchanges.c.started_at, exchanges.c.id)
    )
    for row in found.mappings():
        who = scope(row["key_fingerprint"], row["team"])
        # the earliest stored id first when a response id repeats (a replayed stream)
        stored.setdefault((who, row["response_id"]), dict(row) | {"stored": True})
    batch: dict[tuple[str, str], dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: (r["started_at"], r["id"])):
        who = scope(row.get("key_fingerprint"), row.get("team"))
        previous = row.get("request_previous_response_id")
        if previous:
            # a stored root first: the same exchange in the batch is a duplicate, never inserted
            root = stored.get((who, previous)) or batch.get((who, previous))
            row["thread_key"] = _continue(connection, who, str(previous), row.get("thread_key"), root)
            _stand_on(row, root)
        if row.get("response_id"):
            batch.setdefault((who, row["response_id"]), row)


def _stand_on(row: dict[str, Any], named: dict[str, Any] | None) -> None:
    """A follow-up's turn before it (the exchange it names, or None) and the prefix it
    stands on: the named one's, extended by its own (protocols/prefix.py), as its
    `request_prefix` "effective" and its tools and system hashes. Computed from its own
    parts each time, so a batch taken twice (the writer's duplicate path) comes out alike."""
    row["previous_exchange_id"] = named["id"] if named is not None else None
    mine = row.get("request_prefix")
    theirs = named.get("request_prefix") if named is not None else None
    if not isinstance(mine, dict) or not isinstance(mine.get("own"), dict) or named is None:
        return
    if not isinstance(theirs, dict):  # stored before its parts were: its follow-ups keep their own
        mine.pop("effective", None)
        return
    chain = theirs.get("effective") or theirs.get("own")
    effective, tools, system = prefix.follow(
        chain, (named.get("tools_hash"), named.get("system_hash")), mine["own"], (row["tools_hash"], row["system_hash"])
    )
    row["request_prefix"] = {"own": mine["own"], "effective": effective}
    row["tools_hash"], row["system_hash"] = tools, system


def _continue(connection: Any, who: str, previous: str, own: str | None, root: dict[str, Any] | None) -> str:
    """The thread key of a follow-up naming `previous` (`own`: its session's key, if it
    sent one), marking the root it names (`root`, a stored or a batch row) as it goes."""
    if own is not None and own[0] in (SESSION_PREFIX, SESSION_CHAIN_PREFIX):
        key = SESSION_CHAIN_PREFIX + own[1:]  # its own session says where it goes
        if root is not None and root["thread_key"] == SESSION_PREFIX + own[1:]:
            _mark(connection, root, key)
        return key
    if root is None:
        return chain_key(who, previous)  # the chain as far as the store saw it
    found = root["thread_key"]
    if not found:
        _mark(connection, root, chain_key(who, previous))
    elif found[0] == SESSION_PREFIX:
        _mark(connection, root, SESSION_CHAIN_PREFIX + found[1:])
    return str(root["thread_key"])


def _mark(connection: Any, root: dict[str, Any], key: str) -> None:
    """Give the root of a chain its key; a stored root's row too, unless it changed since."""
    before = root["thread_key"]
    root["thread_key"] = key
    if root.get("stored"):
        match = exchanges.c.thread_key.is_(None) if before is None else exchanges.c.thread_key == before
        connection.execute(update(exchanges).where(exchanges.c.id == root["id"], match).values(thread_key=key))
        # its conversation key moved: verdicts.finish walks its old and new keys again
        connection.info.setdefault("llmtap_rekeyed", set()).add(str(root["id"]))


def reprocessed(connection: Any, fresh: dict[str, Any], stored_key: str | None) -> None:
    """The thread key of a re-decoded exchange row: its session's, else its chain's (as
    when it was written), except what it was given as a chain's root, which its own bodies
    cannot say again: a chain key where it computes none, its session's chain key where it
    computes its session's."""
    assign(connection, [fresh])
    computed = fresh.get("thread_key")
    if stored_key and (
        (computed is None and stored_key[0] == CHAIN_PREFIX)
        or (computed == SESSION_PREFIX + stored_key[1:] and stored_key[0] == SESSION_CHAIN_PREFIX)
    ):
        fresh["thread_key"] = stored_key
