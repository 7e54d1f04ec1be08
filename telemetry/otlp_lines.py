"""What the live span export remembers between exchanges, in bounded memory: which
conversation each exchange belongs to and its prompt-cache verdict, told as the exchanges
are written, by the rules analytics/sql/conversation_ids.sql and cache_misses.sql apply
to the whole store.

Conversation: a thread_key's conversation is its digits (any gap); without one, the run of
one key (else team), model and first message, each started at most an hour after the one
before ended, named by its first exchange's id. Cache: a request that continues its line
(the previous one of the same thread or key, model and first message) yet reads under 5%
of that one's input from cache is a miss, and its cause the first that applies:
below_minimum, tools_changed, system_changed, message_edited, ttl_expired, no_breakpoint,
unexplained.

Limits, said once: a line this process has not seen (the proxy restarted, or the line was
evicted from the LRU of LINES entries) starts afresh here, where the store's reports (and
the backfill) see its earlier exchanges: its conversation id is then this exchange's own
and its cache verdict is not a miss. Rows arrive commit by commit, in order within a
commit; two concurrent exchanges of one line are taken in started_at order per batch only.

Not responsible for making spans (otlp_spans.py) nor for the reports' own verdicts.
"""

from __future__ import annotations

import fnmatch
import json
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from llmtap.storage.export import utc

LINES = 50_000  # lines remembered, each a few hundred bytes
GAP_S = 3600.0  # without a thread_key, a longer gap starts a new conversation
TTL_S = {"1h": 3600.0, "24h": 86400.0}  # else 5 minutes
# The minimum cacheable prompt per model, first match wins: analytics/reports.py's
# MINIMUM_CACHEABLE (SQL ILIKE patterns), read here without importing DuckDB's module.
MINIMUM_CACHEABLE = (
    ("%opus-4-5%", 4096),
    ("%opus-4-6%", 4096),
    ("%haiku-4-5%", 4096),
    ("%sonnet-4-6%", 2048),
    ("%opus-4-7%", 2048),
    ("%claude-3-haiku%", 2048),
    ("%claude-3-5-haiku%", 2048),
    ("%claude%", 1024),
    ("gemini%pro%", 4096),
    ("gemini%", 1024),
    ("%", 1024),
)


@dataclass
class _Conversation:
    first_id: str
    end: datetime


@dataclass
class _Previous:
    id: str
    end: datetime
    input_tokens: int
    tools_hash: str | None
    system_hash: str | None
    messages: list[str]
    breakpoints: int
    ttl: str | None


class Lines:
    def __init__(self, size: int = LINES) -> None:
        self.size = size
        self._conversations: OrderedDict[tuple[Any, ...], _Conversation] = OrderedDict()
        self._cache: OrderedDict[tuple[Any, ...], _Previous] = OrderedDict()

    def conversation(self, row: dict[str, Any]) -> str:
        """The conversation id of a committed `exchanges` row (its first exchange's id)."""
        started, ended = utc(row["started_at"]), utc(row["ended_at"] or row["started_at"])
        if row["thread_key"]:
            key: tuple[Any, ...] = ("thread", row["thread_key"][1:])
        elif row["first_message_hash"]:
            key = ("line", row["key_fingerprint"] or "team:" + row["team"], row["model"], row["first_message_hash"])
        else:
            return str(row["id"])
        found = self._conversations.get(key)
        if found is None or (key[0] == "line" and (started - found.end).total_seconds() > GAP_S):
            found = _Conversation(row["id"], ended)
        found.end = max(found.end, ended)
        self._remember(self._conversations, key, found)
        return found.first_id

    def cache(self, row: dict[str, Any]) -> dict[str, Any]:
        """{"verdict": hit | miss | not_cacheable | no cache read | unknown, "cause": …}."""
        read = row["usage_cache_read_input_tokens"] or 0
        usual = {"verdict": "hit"} if read else {"verdict": "no cache read"}
        if row["usage_input_tokens"] is None:
            return {"verdict": "hit"} if read else {"verdict": "unknown"}
        if not row["first_message_hash"] or (row["status"] or 0) >= 400:
            return usual
        thread = row["thread_key"]
        chained = bool(thread) and thread[0] in "cr"
        key = (thread or row["key_fingerprint"] or "team:" + row["team"], row["model"])
        key += ("",) if chained else (row["first_message_hash"],)
        previous = self._cache.get(key)
        self._remember(self._cache, key, _previous(row))
        if previous is None or previous.input_tokens <= 0 or row["usage_cache_read_input_tokens"] is None:
            return usual
        if read >= 0.05 * previous.input_tokens:
            return usual
        gap = (utc(row["started_at"]) - previous.end).total_seconds()
        if not thread and gap > GAP_S:
            return usual
        cause = _cause(row, previous, gap, chained)
        return {"verdict": "not_cacheable" if cause == "below_minimum" else "miss", "cause": cause}

    def _remember(self, table: OrderedDict[tuple[Any, ...], Any], key: tuple[Any, ...], value: Any) -> None:
        table[key] = value
        table.move_to_end(key)
        while len(table) > self.size:
            table.popitem(last=False)


def _previous(row: dict[str, Any]) -> _Previous:
    return _Previous(
        id=row["id"],
        end=utc(row["ended_at"] or row["started_at"]),
        input_tokens=row["usage_input_tokens"] or 0,
        tools_hash=row["tools_hash"],
        system_hash=row["system_hash"],
        messages=_messages(row["message_hashes"]),
        breakpoints=row["request_cache_breakpoints"] or 0,
        ttl=row["request_cache_ttl"],
    )


def _cause(row: dict[str, Any], previous: _Previous, gap: float, chained: bool) -> str:
    if previous.input_tokens < minimum_cacheable(row["model"]):
        return "below_minimum"
    if row["tools_hash"] != previous.tools_hash:
        return "tools_changed"
    if row["system_hash"] != previous.system_hash:
        return "system_changed"
    if not chained and _first_difference(previous.messages, _messages(row["message_hashes"])) is not None:
        return "message_edited"
    if gap > TTL_S.get(previous.ttl or "", 300.0):
        return "ttl_expired"
    explicit = row["protocol"] in ("anthropic.messages", "bedrock.converse")  # caching needs breakpoints
    if explicit and (not row["request_cache_breakpoints"] or not previous.breakpoints):
        return "no_breakpoint"
    return "unexplained"


def minimum_cacheable(model: str | None) -> int:
    if model is None:
        return 0  # the report's join finds no minimum for a missing model
    for pattern, tokens in MINIMUM_CACHEABLE:
        if fnmatch.fnmatchcase(model.lower(), pattern.replace("%", "*")):
            return tokens
    return 0


def _first_difference(earlier: list[str], later: list[str]) -> int | None:
    """The first message that differs among those both requests have; None when one's
    messages are the start of the other's."""
    for index, (a, b) in enumerate(zip(earlier, later, strict=False)):
        if a != b:
            return index
    return None


def _messages(value: Any) -> list[str]:
    if isinstance(value, str):
        value = json.loads(value)
    return [str(v) for v in value or []]
