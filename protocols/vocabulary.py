"""The fixed vocabularies of SPEC §2, §3 and §5, written once: each a `Literal` type and
the tuple of its values (taken from the type, so the two cannot drift apart).

Every other spelling of these words takes them from here: the decoders and tool checks
(protocols/), the stored verdicts (protocols/rules.py, storage/verdicts.py), the CLI's
choices (cli/report.py, cli/audit.py), and the dashboard, whose `vocabulary.js` is
generated from this module (protocols/vocabulary_js.py).
The SQL reports spell the words as quoted literals; a test checks each one they compare a
status, cause, verdict or reason column with is a word of its vocabulary.

Not responsible for deciding which word applies (protocols/toolcheck.py, rules.py,
analytics/pricing.py), nor for labels, colours or order of display.
"""

from __future__ import annotations

from typing import Literal, get_args

# SPEC §5: the status of each tool call against its own request's declarations, decided by
# protocols/toolcheck.py (with schema_check.py and grammar.py); `unchecked`: the check
# could not run within its bound.
ToolStatus = Literal["valid", "invalid_json", "schema_violation", "unknown_tool", "truncated", "args_lost", "unchecked"]
TOOL_STATUSES: tuple[ToolStatus, ...] = get_args(ToolStatus)

# SPEC §5: the problems across a conversation (the `status` of an entry of the stored
# `tool_problems` list), decided by protocols/rules.py.
ToolProblem = Literal["duplicate_id", "missing_result", "orphan_result"]
TOOL_PROBLEMS: tuple[ToolProblem, ...] = get_args(ToolProblem)

# SPEC §5 "Verdicts are data": the stored `cache_verdict` (NULL: the exchange takes no part).
CacheVerdict = Literal["first", "hit", "miss", "not_cacheable"]
CACHE_VERDICTS: tuple[CacheVerdict, ...] = get_args(CacheVerdict)

# The stored `cache_cause` of a `miss` (and `below_minimum`, the cause of every
# `not_cacheable`), in the order protocols/rules.py tries them: the first that applies.
MissCause = Literal[
    "below_minimum",
    "tools_changed",
    "system_changed",
    "message_edited",
    "ttl_expired",
    "no_breakpoint",
    "unexplained",
]
MISS_CAUSES: tuple[MissCause, ...] = get_args(MissCause)

# SPEC §2 "Canonical finish reasons"; each translator maps its raw values onto these.
FinishReason = Literal[
    "end_turn",
    "max_tokens",
    "tool_use",
    "stop_sequence",
    "content_filter",
    "refusal",
    "pause_turn",
    "context_window",
    "error",
]
FINISH_REASONS: tuple[FinishReason, ...] = get_args(FinishReason)
# The reports' and `log --finish`'s name for a null finish reason (a cut stream, a raw
# value no mapping knows): never stored, never a FinishReason.
NO_FINISH = "unknown"

# SPEC §3 (`export`): the stored `price_status` of an exchange.
PriceStatus = Literal["priced", "unpriced", "usage_missing"]
PRICE_STATUSES: tuple[PriceStatus, ...] = get_args(PriceStatus)

# Why an exchange is `unpriced` (the stored `price_reason`): `unverified_host`, set by the
# recorder for traffic to a host that may not bill (SPEC §4, protocols/hosts.py), whatever
# the prices say; `unknown_model`, set by the pricer for a model (or sub-usage model)
# without a price.
PriceReason = Literal["unverified_host", "unknown_model"]
PRICE_REASONS: tuple[PriceReason, ...] = get_args(PriceReason)

# SPEC §3 `llmtap report KIND`, in the order `llmtap report --help` lists them.
ReportKind = Literal[
    "usage", "cost", "cache", "finish", "tools", "errors", "latency", "conversations", "budgets", "whatif"
]
REPORT_KINDS: tuple[ReportKind, ...] = get_args(ReportKind)

# Each vocabulary by its name, the one the dashboard's `LlmtapVocabulary` gives it too.
ALL: dict[str, tuple[str, ...]] = {
    "TOOL_STATUSES": TOOL_STATUSES,
    "TOOL_PROBLEMS": TOOL_PROBLEMS,
    "CACHE_VERDICTS": CACHE_VERDICTS,
    "MISS_CAUSES": MISS_CAUSES,
    "FINISH_REASONS": FINISH_REASONS,
    "PRICE_STATUSES": PRICE_STATUSES,
    "PRICE_REASONS": PRICE_REASONS,
    "REPORT_KINDS": REPORT_KINDS,
}
