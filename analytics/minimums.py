"""The minimum cacheable prompt length per model, in tokens, first match wins (Anthropic:
https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching; Gemini context
caching: 1,024 for Flash, 4,096 for Pro). A prefix under it cannot be cached: such a
would-be miss is `not_cacheable` (SPEC §5).

One table, read by the cache reports' SQL (analytics/reports.py makes it a VALUES list and
a CASE of SQL ILIKE patterns) and by the live rule the proxy's telemetry applies
(telemetry/cache_lines.py): a module of its own, so the writer's process reads it without
loading DuckDB.

Not responsible for applying it (the SQL and cache_lines do).
"""

from __future__ import annotations

import re

MINIMUM_CACHEABLE = (
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
    """The model's minimum, as the SQL's ILIKE finds it; None for no model (the reports'
    join finds none, so nothing is under it)."""
    if model is None:
        return None
    for pattern, tokens in _PATTERNS:
        if pattern.fullmatch(model):
            return tokens
    return None
