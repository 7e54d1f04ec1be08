"""SPEC §5's conversation, prompt-cache and tool-conversation rules, and their constants:
the one place they are written. The writer decides each exchange's verdicts with them
(storage/verdicts.py) and stores them, for every reader to read.

Words used below, each of one exchange (a row of `exchanges`, as a mapping):
- scope: whose traffic it is, the key fingerprint, else `team:` + team.
- line: the exchanges that follow one another turn by turn: one thread_key (else scope),
  one model, one first message; for the tool rules a response chain's rows (thread_key `c…`,
  `r…`) ignore their first message (a follow-up's body carries only what is new). No first
  message, no line.
- cache line: the line with the first message always (`cache_line`): the roots of a
  session's chains (its agent, a subagent) each start their own, and a follow-up is compared
  with the response it names, not with its line.
- conversation key: the thread's digits (a session and its chains are one conversation, at
  any gap), else the line; a conversation is a run of its key's exchanges where (without a
  thread) each starts at most RUN_GAP_S after the one before it ended.
- taking part (cache): a line, usage, a cache-read count and no error status.

Not responsible for reading or writing the store (storage/verdicts.py), the tool-call checks
against a schema (protocols/toolcheck.py and friends) or the words' vocabularies
(protocols/vocabulary.py: every verdict, cause and problem below is typed by it, so mypy
refuses a word it does not hold).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from llmtap.protocols import vocabulary
from llmtap.protocols.vocabulary import MissCause, ToolProblem

RUN_GAP_S = 3600  # without a thread_key, a longer gap starts a new conversation
MISS_SHARE = 0.05  # a continuing request that reads under this share of the previous input misses
DEFAULT_TTL_S = 300  # Anthropic's default cache lifetime: 5 minutes
TTL_S: Mapping[str, int] = {"5m": 300, "1h": 3600, "24h": 86400}
BREAKPOINT_PROTOCOLS = ("anthropic.messages", "bedrock.converse")  # caching needs explicit breakpoints
CHAINED = ("c", "r")  # thread_key letters of a response chain: the server holds the history
ERROR_STATUS = 400  # a response at or above it takes no part in the cache rule

BELOW_MINIMUM: MissCause = "below_minimum"  # the cause of every `not_cacheable`
MISSING_RESULT: ToolProblem = "missing_result"  # the one problem a later request decides again

# The minimum cacheable prompt length per model, in tokens, first match wins (SQL ILIKE
# patterns). Anthropic: https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching;
# Gemini context caching: 1,024 for Flash, 4,096 for Pro. A prefix under it cannot be
# cached: such a would-be miss is `not_cacheable`.
MINIMUM_CACHEABLE: tuple[tuple[str, int], ...] = (
    ("%opus-4-5%", 4096),
    ("%opus-4-6%", 4096),
    ("%haiku-4-5%", 4096),
    ("%sonnet-4-6%", 2048),
    ("%opus-4-7%", 2048),
    # a leading % for the clouds' ids: Bedrock Converse records `us.anthropic.claude-…`
    ("%claude-3-haiku%", 2048),
    ("%claude-3-5-haiku%", 2048),
    ("%claude%", 1024),
    ("gemini%pro%", 4096),
    ("gemini%", 1024),
    ("%", 1024),
)


def _like(pattern: str) -> re.Pattern[str]:
    """A SQL ILIKE pattern as a regular expression (`%` any run, `_` any one character)."""
    parts = (".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern)
    return re.compile("".join(parts), re.IGNORECASE | re.DOTALL)


_PATTERNS = tuple((_like(pattern), tokens) for pattern, tokens in MINIMUM_CACHEABLE)


def minimum(model: str | None) -> int | None:
    """The model's minimum cacheable length; None for no model."""
    if model is None:
        return None
    for pattern, tokens in _PATTERNS:
        if pattern.fullmatch(model):
            return tokens
    return None


# -- identity -----------------------------------------------------------------------------


def scope(row: Mapping[str, Any]) -> str:
    return str(row.get("key_fingerprint") or f"team:{row.get('team')}")


def chained(row: Mapping[str, Any]) -> bool:
    thread = row.get("thread_key")
    return bool(thread) and str(thread)[:1] in CHAINED


def _digest(*parts: Any) -> str:
    text = json.dumps([None if p is None else str(p) for p in parts], separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def line_key(row: Mapping[str, Any]) -> str | None:
    """The row's line (see the module's docstring); None without a first message."""
    first = row.get("first_message_hash")
    if first is None:
        return None
    return _digest(row.get("thread_key") or scope(row), row.get("model"), "" if chained(row) else first)


def cache_line(row: Mapping[str, Any]) -> str | None:
    """The row's line for the cache rule (see the module's docstring): its line_key, except
    that a chain's row keeps its first message."""
    first = row.get("first_message_hash")
    if first is None:
        return None
    return _digest(row.get("thread_key") or scope(row), row.get("model"), first)


def conversation_key(row: Mapping[str, Any]) -> str | None:
    """`T` + the thread's digits, else `L` + the line of an unthreaded row; None for a row
    with neither a thread nor a first message (a conversation of its own)."""
    thread = row.get("thread_key")
    if thread:
        return "T" + str(thread)[1:]
    line = line_key(row)
    return None if line is None else "L" + line


def threaded(row: Mapping[str, Any]) -> bool:
    return bool(row.get("thread_key"))


def utc(value: datetime) -> datetime:
    """A stored time as aware UTC (SQLite hands back naive UTC)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def ended(row: Mapping[str, Any]) -> datetime:
    return utc(row.get("ended_at") or row["started_at"])


def gap_s(row: Mapping[str, Any], before_end: datetime) -> float:
    return (utc(row["started_at"]) - before_end).total_seconds()


def order(row: Mapping[str, Any]) -> tuple[datetime, str]:
    """The order of turns: start time, then id."""
    return utc(row["started_at"]), str(row["id"])


def starts_conversation(row: Mapping[str, Any], previous: Mapping[str, Any] | None) -> bool:
    """Whether the row starts a conversation, given the row of its key just before it."""
    if previous is None:
        return True
    return not threaded(row) and gap_s(row, ended(previous)) > RUN_GAP_S


# -- prompt cache -------------------------------------------------------------------------


def takes_part(row: Mapping[str, Any]) -> bool:
    return (
        row.get("first_message_hash") is not None
        and row.get("usage_input_tokens") is not None
        and (row.get("status") or 0) < ERROR_STATUS
    )


@dataclass(frozen=True, slots=True)
class CacheVerdict:
    verdict: vocabulary.CacheVerdict | None  # None: takes no part
    cause: MissCause | None = None
    message_index: int | None = None
    missed_tokens: int | None = None
    previous_id: str | None = None
    gap_ms: int | None = None

    def columns(self) -> dict[str, Any]:
        return {
            "cache_verdict": self.verdict,
            "cache_cause": self.cause,
            "cache_message_index": self.message_index,
            "cache_missed_tokens": self.missed_tokens,
            "cache_previous_id": self.previous_id,
            "cache_gap_ms": self.gap_ms,
        }


NO_PART = CacheVerdict(None)


def messages(value: Any) -> list[Any]:
    """A row's message hashes: a list from the writer, JSON text from a store read."""
    if isinstance(value, str):
        value = json.loads(value)
    return list(value or [])


def first_difference(previous: Sequence[Any], current: Sequence[Any]) -> int | None:
    """The first message that differs, 0-based, among those both requests have; None when
    one list is the start of the other (a continuation, or a shorter retry)."""
    for index, (before, now) in enumerate(zip(previous, current, strict=False)):
        if before is None or now is None or before != now:
            return index
    return None


def cache_verdict(row: Mapping[str, Any], previous: Mapping[str, Any] | None) -> CacheVerdict:
    """The row's verdict against the turn before it: the exchange it names
    (previous_exchange_id) when that one takes part, else the previous taking-part row of
    its line. The caller finds `previous`; this decides."""
    if not takes_part(row) or row.get("usage_cache_read_input_tokens") is None:
        return NO_PART
    if previous is None:
        return CacheVerdict("first")
    gap = gap_s(row, ended(previous))
    gap_ms = round(gap * 1000)
    if not threaded(row) and gap > RUN_GAP_S:
        return CacheVerdict("first")
    prev_input = previous["usage_input_tokens"] or 0
    read = row["usage_cache_read_input_tokens"]
    previous_id = str(previous["id"])
    if prev_input <= 0 or read >= MISS_SHARE * prev_input:
        return CacheVerdict("hit", previous_id=previous_id, gap_ms=gap_ms)
    least = minimum(row.get("model"))
    if least is not None and prev_input < least:
        return CacheVerdict("not_cacheable", BELOW_MINIMUM, missed_tokens=0, previous_id=previous_id, gap_ms=gap_ms)
    missed = max(min(prev_input, row["usage_input_tokens"]) - read, 0)
    index = None
    cause: MissCause
    if row.get("tools_hash") != previous.get("tools_hash"):
        cause = "tools_changed"
    elif row.get("system_hash") != previous.get("system_hash"):
        cause = "system_changed"
    elif (
        not chained(row)
        and (index := first_difference(messages(previous.get("message_hashes")), messages(row.get("message_hashes"))))
        is not None
    ):
        cause = "message_edited"
    elif gap > TTL_S.get(previous.get("request_cache_ttl") or "", DEFAULT_TTL_S):
        cause = "ttl_expired"
    elif row.get("protocol") in BREAKPOINT_PROTOCOLS and (
        not (row.get("request_cache_breakpoints") or 0) or not (previous.get("request_cache_breakpoints") or 0)
    ):
        cause = "no_breakpoint"
    else:
        cause = "unexplained"
    return CacheVerdict(
        "miss", cause, message_index=index, missed_tokens=missed, previous_id=previous_id, gap_ms=gap_ms
    )


# -- tool calls across a conversation -----------------------------------------------------


def ids(value: Any) -> list[str]:
    """A stored JSON list of tool-call ids (text from a store read)."""
    if isinstance(value, str):
        value = json.loads(value)
    return [str(v) for v in value or []]


def problem(status: ToolProblem, call_id: str, tool: str | None = None, next_id: str | None = None) -> dict[str, Any]:
    return {"status": status, "call_id": call_id, "tool": tool, "next_id": next_id}


def duplicates(
    calls: Iterable[Mapping[str, Any]], used_before: Callable[[str], bool], conversation: str | None
) -> list[dict[str, Any]]:
    """duplicate_id: a call whose id an earlier call of the conversation (or an earlier
    position of the same response) already used. `used_before(call_id)` answers for the
    conversation's earlier exchanges."""
    if conversation is None:
        return []
    found, seen = [], set()
    for call in sorted(calls, key=lambda c: c["position"]):
        call_id = call.get("call_id")
        if call_id is None:
            continue
        if call_id in seen or used_before(call_id):
            found.append(problem("duplicate_id", call_id, call.get("name")))
        seen.add(call_id)
    return found


def missing_results(
    row: Mapping[str, Any], calls: Iterable[Mapping[str, Any]], following: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """missing_result: the next request of the line continues this one (carries more
    messages, or the row is a chain's) yet carries no result for a call."""
    if following is None or line_key(row) is None:
        return []
    longer = (following.get("request_message_count") or 0) > (row.get("request_message_count") or 0)
    if not (longer or chained(row)):
        return []
    answered = set(ids(following.get("request_tool_result_ids")))
    return [
        problem(MISSING_RESULT, call["call_id"], call.get("name"), str(following["id"]))
        for call in sorted(calls, key=lambda c: c["position"])
        if call.get("call_id") is not None and call["call_id"] not in answered
    ]


def orphans(
    row: Mapping[str, Any],
    line_before: Mapping[str, Any] | None,
    called_before: Callable[[str], bool],
    conversation_seen_before: bool,
) -> list[dict[str, Any]]:
    """orphan_result: a result for an id that neither an earlier call of the conversation
    nor the request's own history holds, reported where it first appears (a request that
    repeats the previous one's results brings none). A thread whose first exchange the
    store never saw reports none at its first exchange."""
    results = row.get("request_tool_result_ids")
    if results is None or conversation_key(row) is None:
        return []
    earlier = line_before.get("request_tool_result_ids") if line_before is not None else None
    if _same_json(results, earlier):
        return []
    if threaded(row) and not conversation_seen_before:
        return []
    history = set(ids(row.get("request_tool_call_ids")))
    repeated = set(ids(earlier))
    found, seen = [], set()
    for result_id in ids(results):
        if result_id in seen:
            continue
        seen.add(result_id)
        if result_id in history or result_id in repeated or called_before(result_id):
            continue
        found.append(problem("orphan_result", result_id))
    return found


def _same_json(left: Any, right: Any) -> bool:
    """The stored lists compared as the store holds them (text), or as values."""
    if left is None or right is None:
        return left is None and right is None
    return bool(_canonical(left) == _canonical(right))


def _canonical(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value
