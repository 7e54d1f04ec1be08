"""An exchange's stored verdicts (SPEC §5, "Verdicts are data") as `show`, `show
--conversation` and the dashboard's detail give them, read from its `exchanges` row: the
cache verdict with its cause, message index, missed tokens, the turn it was compared with
and the gap since, plus what the miss cost; and the conversation's tool problems stored
on the row.

Extra cost is not stored: it is the missed tokens at the input rate instead of the
cache-read rate, missed × max(rate_input − rate_cache_read, 0) in pico-dollars, from
the row's stored rates; unknown (None, never $0) when the model has no input rate.

Not responsible for deciding any verdict (protocols/rules.py decides, storage/verdicts.py
stores, when the exchange is written), nor for the per-call statuses of its tool calls
(its `tool_calls` rows hold them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from llmtap.analytics.reports import PICO
from llmtap.protocols.rules import ERROR_STATUS

MISSED = ("miss", "not_cacheable")  # the verdicts that carry a cause and missed tokens


def extra_cost_pico(missed: int | None, rate_input: int | None, rate_cache_read: int | None) -> int | None:
    """What `missed` tokens cost at the input rate instead of the cache-read rate."""
    if missed is None or rate_input is None:
        return None
    return int(missed) * max(int(rate_input) - int(rate_cache_read or 0), 0)


def cache(row: Mapping[Any, Any]) -> dict[str, Any]:
    """The row's stored cache verdict: `first`, `hit`, `miss` or `not_cacheable` (each
    with the turn it was compared with and the gap since it ended, but `first`), a miss's
    and a not-cacheable turn's cause and cost; `none` (and why) for a row that takes no
    part in the rule."""
    verdict = row["cache_verdict"]
    if verdict is None:
        return {"verdict": "none", "reason": _no_part(row)}
    out: dict[str, Any] = {"verdict": verdict, "cache_read_tokens": row["usage_cache_read_input_tokens"]}
    if verdict in MISSED:
        pico = extra_cost_pico(row["cache_missed_tokens"], row["rate_input_pico"], row["rate_cache_read_pico"])
        out.update(
            cause=row["cache_cause"],
            message_index=row["cache_message_index"],
            missed_tokens=row["cache_missed_tokens"],
            extra_cost_usd=None if pico is None else Decimal(pico) / PICO,
        )
    if row["cache_previous_id"] is not None:
        out["previous_exchange_id"] = row["cache_previous_id"]
        out["gap_ms"] = row["cache_gap_ms"]
    return out


def _no_part(row: Mapping[Any, Any]) -> str:
    """Why a row has no verdict, in words, from its stored facts."""
    if row.get("first_message_hash") is None:
        return "no request decoded: nothing to compare"
    if (row.get("status") or 0) >= ERROR_STATUS:
        return "an error response"
    if row.get("usage_input_tokens") is None:
        return "no usage reported"
    return "no cache-read count reported"


def tool_problems(row: Mapping[Any, Any]) -> list[dict[str, Any]]:
    """The conversation tool problems stored on the row (status duplicate_id,
    missing_result or orphan_result, call_id, tool, next_id), in their stored order;
    [] when it has none."""
    stored = row["tool_problems"]
    if isinstance(stored, str):
        stored = json.loads(stored)
    return [dict(problem) for problem in stored or []]
