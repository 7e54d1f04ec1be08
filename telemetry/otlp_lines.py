"""What the live span export remembers between exchanges, in bounded memory: which
conversation each exchange belongs to and its prompt-cache verdict, told as the exchanges
are written, by the rules analytics/sql/conversation_ids.sql and cache_misses.sql apply
to the whole store.

Conversation: a thread_key's conversation is its digits (any gap); without one, the run of
one key (else team), model and first message, each started at most an hour after the one
before ended, named by its first exchange's id. Cache (cache_lines.py): a request that
continues the turn before it (the exchange a follow-up names, else the previous one of the
same thread or key, model and first message) yet reads under 5% of that one's input from
cache is a miss, and its cause the first that applies:
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

from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from llmtap.storage.export import utc
from llmtap.telemetry.cache_lines import CacheLines

LINES = 50_000  # lines remembered, each a few hundred bytes
GAP_S = 3600.0  # without a thread_key, a longer gap starts a new conversation


@dataclass
class _Conversation:
    first_id: str
    end: datetime


class Lines:
    def __init__(self, size: int = LINES) -> None:
        self.size = size
        self._conversations: OrderedDict[tuple[Any, ...], _Conversation] = OrderedDict()
        self._cache = CacheLines(size)

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
        """{"verdict": hit | miss | not_cacheable | no cache read | unknown, "cause": …}
        by the rule the metrics count with (cache_lines.py)."""
        return self._cache.verdict(row)

    def _remember(self, table: OrderedDict[tuple[Any, ...], Any], key: tuple[Any, ...], value: Any) -> None:
        table[key] = value
        table.move_to_end(key)
        while len(table) > self.size:
            table.popitem(last=False)
