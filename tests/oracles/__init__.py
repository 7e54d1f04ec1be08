"""The test oracle of the stored verdicts (SPEC §5, "Verdicts are data"): the window
queries the reports once ran, which decide each exchange's conversation, cache verdict and
tool problems from the whole history at once, with the rules' constants spliced in from
protocols/rules.py (`{{name}}` placeholders: no number is copied into them).

`differences(connection)` runs them beside the readers of the stored columns
(analytics/sql/cache_misses.sql, tool_problems.sql and exchanges.conversation_id) and
returns what differs, an empty dict when the stored verdicts are the window's.

Not responsible for deciding verdicts (storage/verdicts.py) nor for any report: the
product never runs these queries.
"""

from __future__ import annotations

from importlib import resources
from string import Template
from typing import Any

import duckdb

from llmtap.analytics import reports
from llmtap.protocols import rules


def _words(values: tuple[str, ...] | list[str]) -> str:
    return "(" + ", ".join("'" + value.replace("'", "''") + "'" for value in values) + ")"


def constants() -> dict[str, str]:
    """Each placeholder's SQL, from the rules' constants."""
    ttl = " ".join(f"WHEN '{name}' THEN {seconds}" for name, seconds in rules.TTL_S.items())
    minimums = ", ".join(f"('{p}', {t}, {i})" for i, (p, t) in enumerate(rules.MINIMUM_CACHEABLE))
    return {
        "run_gap_s": str(rules.RUN_GAP_S),
        "miss_share": repr(rules.MISS_SHARE),
        "error_status": str(rules.ERROR_STATUS),
        "chained": _words(list(rules.CHAINED)),
        "breakpoint_protocols": _words(rules.BREAKPOINT_PROTOCOLS),
        "ttl_seconds_of_prev_ttl": f"CASE prev_ttl {ttl} ELSE {rules.DEFAULT_TTL_S} END",
        "minimums": f"minimums(pattern, tokens, priority) AS (VALUES {minimums})",
    }


def query(name: str) -> str:
    """The oracle query `name` (cache_misses, conversation_ids, tool_problems), ready to run
    with $since and $until bound."""
    text = resources.files(__package__).joinpath(f"{name}.sql").read_text()
    for placeholder, value in constants().items():
        text = text.replace("{{" + placeholder + "}}", value)
    assert "{{" not in text, f"{name}.sql has a placeholder constants() does not fill"
    return Template(text).safe_substitute()


WINDOW = {"since": None, "until": None}


def _rows(connection: duckdb.DuckDBPyConnection, sql: str, columns: tuple[str, ...]) -> list[tuple[Any, ...]]:
    result = connection.execute(sql, WINDOW if "$since" in sql else None)
    names = [d[0] for d in result.description]
    picked = [names.index(c) for c in columns]
    return sorted((tuple(row[i] for i in picked) for row in result.fetchall()), key=repr)


MISS = ("exchange_id", "cause", "message_index", "missed_tokens", "extra_cost_usd", "previous_exchange_id")
PROBLEM = ("exchange_id", "tool", "call_id", "status", "detail")


def differences(connection: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """What the stored verdicts say that the window does not, and the reverse, by kind
    (conversation, cache, gap, tools); empty when they agree."""
    found: dict[str, Any] = {}
    window = dict(
        _rows(connection, f"SELECT id, conversation_id FROM ({query('conversation_ids')})", ("id", "conversation_id"))
    )
    stored = dict(connection.execute("SELECT id, conversation_id FROM exchanges").fetchall())
    conversations = {
        i: (stored.get(i), window.get(i)) for i in window.keys() | stored.keys() if stored.get(i) != window.get(i)
    }
    if conversations:
        found["conversation"] = conversations
    for kind, name, columns in (("cache", "cache_misses", MISS), ("tools", "tool_problems", PROBLEM)):
        by_window = set(_rows(connection, query(name), columns))
        by_store = set(_rows(connection, reports.sql(name), columns))
        if by_window != by_store:
            found[kind] = {
                "stored only": sorted(by_store - by_window, key=repr),
                "window only": sorted(by_window - by_store, key=repr),
            }
    # the gap is stored to the millisecond: the window's, rounded to it, within one
    gaps_window = dict(_rows(connection, query("cache_misses"), ("exchange_id", "gap_s")))
    gaps_store = dict(_rows(connection, reports.sql("cache_misses"), ("exchange_id", "gap_s")))
    off = {
        i: (gaps_store.get(i), g) for i, g in gaps_window.items() if i in gaps_store and abs(gaps_store[i] - g) > 0.0011
    }
    if off:
        found["gap"] = off
    return found


def counts(connection: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """How much the compared traffic holds (a test asserts it is not empty)."""
    misses = _rows(connection, reports.sql("cache_misses"), ("cause",))
    problems = _rows(connection, reports.sql("tool_problems"), ("status",))
    row = connection.execute("SELECT count(*), count(DISTINCT conversation_id) FROM exchanges").fetchone()
    assert row is not None
    return {
        "exchanges": row[0],
        "conversations": row[1],
        "causes": sorted({c for (c,) in misses}),
        "misses": len(misses),
        "problems": sorted({s for (s,) in problems}),
    }
