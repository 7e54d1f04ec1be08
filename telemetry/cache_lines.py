"""Prompt-cache misses as exchanges are committed: the rule of analytics/sql/cache_misses.sql
(SPEC §5) applied to each row against the previous row of its line, kept in memory. One
rule for the live telemetry: the metrics count its misses (metrics_count.py), the spans
carry its verdicts (otlp_lines.py).

A request's turn before it is the exchange whose response it names (its
`previous_exchange_id`, a Responses follow-up: storage/threads.py), else the previous row
of its line: one thread_key (else key fingerprint, else team), one model and one first
message; only exchanges with a first message and usage, and no error status, take part.
A request that continues that turn and reads under 5% of its input from cache is a miss
(without a thread_key, only within an hour of the previous request's end); its cause is
the first that applies of below_minimum (then it is `not_cacheable`, no miss),
tools_changed, system_changed, message_edited (never in a response chain: its bodies
carry only what is new), ttl_expired, no_breakpoint, unexplained. A follow-up's tools and
system hashes are already those of the prefix it extends (protocols/prefix.py).

Where it can differ from `llmtap report cache`: the report orders each line by start
time over the whole store; this sees rows in commit order, one proxy's at a time. They
agree for traffic whose requests on one line do not overlap, from one proxy, into a store
this proxy started. They can differ for overlapping requests on one line (committed in
the order they ended), for rows other proxies or `llmtap import` add to the same lines,
for lines older than this process (their first request here has no previous one), and
for lines pushed out of the memory (`lines` most recently used are kept), and for a
follow-up whose named exchange this process did not see (or no longer keeps: as many
turns as lines are kept by id): it has no turn before it here.

Not responsible for counting or spans (metrics_count.py, otlp_lines.py), the model
minimums (protocols/rules.py) or the grouped cache report (analytics).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from llmtap.protocols.rules import minimum

NOT_CACHEABLE = "below_minimum"
BREAKPOINT_PROTOCOLS = ("anthropic.messages", "bedrock.converse")  # caching needs explicit breakpoints
TTL_SECONDS = {"1h": 3600, "24h": 86400}  # else 5 minutes
RUN_GAP_SECONDS = 3600  # without a thread_key, a longer gap starts a new conversation


@dataclass(frozen=True)
class _Turn:
    ended: datetime
    input_tokens: int
    tools: Any
    system: Any
    messages: list[Any]
    breakpoints: int
    ttl: str | None


class CacheLines:
    """The previous turn of each line, for the `lines` lines most recently seen."""

    def __init__(self, lines: int = 50_000) -> None:
        self.limit = lines
        self._lines: OrderedDict[tuple[Any, ...], _Turn] = OrderedDict()
        self._by_id: OrderedDict[str, _Turn] = OrderedDict()  # the turns a follow-up may name

    def verdict(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """What a span says of the row: {"verdict": hit | miss | not_cacheable | no cache
        read | unknown, "cause": … (misses and not_cacheable)}; remembers it as `observe`."""
        read = row.get("usage_cache_read_input_tokens") or 0
        usual = {"verdict": "hit" if read else "no cache read"}
        if row.get("usage_input_tokens") is None:
            return usual if read else {"verdict": "unknown"}
        cause = self.observe(row)
        if cause is None:
            return usual
        return {"verdict": "not_cacheable" if cause == NOT_CACHEABLE else "miss", "cause": cause}

    def observe(self, row: Mapping[str, Any]) -> str | None:
        """A miss's cause (`below_minimum`: could not have been cached), or None."""
        if row.get("first_message_hash") is None or row.get("usage_input_tokens") is None:
            return None
        if (row.get("status") or 0) >= 400:
            return None
        thread = row.get("thread_key")
        chained = thread is not None and thread[:1] in ("c", "r")
        who = thread or row.get("key_fingerprint") or f"team:{row.get('team')}"
        line = (who, row.get("model"), row["first_message_hash"])
        previous = self._lines.pop(line, None)
        named = row.get("previous_exchange_id")
        if named is not None:
            previous = self._by_id.get(named)
        started: datetime = row["started_at"]
        turn = self._lines[line] = _Turn(
            ended=row.get("ended_at") or started,
            input_tokens=row["usage_input_tokens"],
            tools=row.get("tools_hash"),
            system=row.get("system_hash"),
            messages=_messages(row.get("message_hashes")),
            breakpoints=row.get("request_cache_breakpoints") or 0,
            ttl=row.get("request_cache_ttl"),
        )
        if row.get("id") is not None:
            self._by_id[row["id"]] = turn
        for table in (self._lines, self._by_id):
            while len(table) > self.limit:
                table.popitem(last=False)
        if previous is None:
            return None
        return _cause(row, previous, started, threaded=thread is not None, chained=chained)


def _cause(row: Mapping[str, Any], prev: _Turn, started: datetime, *, threaded: bool, chained: bool) -> str | None:
    cache_read = row.get("usage_cache_read_input_tokens")
    gap = (started - prev.ended).total_seconds()
    if prev.input_tokens <= 0 or cache_read is None or cache_read >= 0.05 * prev.input_tokens:
        return None
    if not threaded and gap > RUN_GAP_SECONDS:
        return None
    least = minimum(row.get("model"))
    if least is not None and prev.input_tokens < least:
        return NOT_CACHEABLE
    if row.get("tools_hash") != prev.tools:
        return "tools_changed"
    if row.get("system_hash") != prev.system:
        return "system_changed"
    if not chained and _first_difference(prev.messages, _messages(row.get("message_hashes"))) is not None:
        return "message_edited"
    if gap > TTL_SECONDS.get(prev.ttl or "", 300):
        return "ttl_expired"
    if row.get("protocol") in BREAKPOINT_PROTOCOLS and (
        not (row.get("request_cache_breakpoints") or 0) or not prev.breakpoints
    ):
        return "no_breakpoint"
    return "unexplained"


def _first_difference(previous: list[Any], current: list[Any]) -> int | None:
    """The first message that differs among those both requests have; None when one
    list is the start of the other (a continuation, or a shorter retry)."""
    for index, (before, now) in enumerate(zip(previous, current, strict=False)):
        if before is None or now is None or before != now:
            return index
    return None


def _messages(value: Any) -> list[Any]:
    """The row's message hashes: a list from the writer, JSON text from a store read."""
    if isinstance(value, str):
        value = json.loads(value)
    return list(value or [])
