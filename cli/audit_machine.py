"""The machine output of `llmtap log` and `llmtap show` (SPEC §3): JSON, JSONL and CSV,
money with its exact digits, every moment with its offset in `--tz`
(analytics/timestamps.py), DEL and the C1 controls escaped in JSON as in a report's.

Not responsible for the terminal views (cli/audit.py) nor for what is shown
(analytics/audit.py).
"""

from __future__ import annotations

import json
import re
import secrets
import sys
from datetime import datetime, tzinfo
from decimal import Decimal
from typing import Any

from llmtap.cli.errors import UsageError

# The columns of `log --format csv` (analytics/sql/log.sql's, in its order; a test keeps
# them equal), so that a log with no rows still has its header.
LOG_FIELDS = (
    "id",
    "started_at",
    "team",
    "key_last4",
    "protocol",
    "provider",
    "model",
    "status",
    "finish_reason",
    "input_tokens",
    "cached_tokens",
    "output_tokens",
    "cost_usd",
    "price_status",
    "duration_ms",
    "tool_call_count",
    "tool_problems",
    "tool_problem_kinds",
    "cache_miss",
    "has_bodies",
    "error_type",
    "decode_error",
)


def as_json(value: Any, indent: int | None = None, zone: tzinfo | None = None) -> str:
    """JSON text of `value`, money (`Decimal`) as a number with its exact digits: each
    Decimal goes in as a string with an unguessable mark and comes out as its bare digits
    (json.dumps has no hook for a number it does not know)."""
    from llmtap.analytics.render import json_c1_escaped
    from llmtap.analytics.timestamps import iso

    def default(item: Any) -> Any:  # every moment with its offset in --tz (SPEC §3)
        return iso(item, zone) if isinstance(item, datetime) else str(item)

    mark = f"\x00{secrets.token_hex(8)}:"
    text = json.dumps(_marked(value, mark), default=default, ensure_ascii=False, indent=indent)
    quoted = json.dumps(mark)[1:-1]
    text = re.sub(re.escape('"' + quoted) + r'(-?[0-9.E+-]+)"', r"\1", text)
    return json_c1_escaped(text)


def _marked(value: Any, mark: str) -> Any:
    if isinstance(value, Decimal):
        return mark + format(value.normalize(), "f") if value else mark + "0"
    if isinstance(value, dict):
        return {key: _marked(item, mark) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_marked(item, mark) for item in value]
    return value


def log(rows: list[dict[str, Any]], form: str, zone: tzinfo) -> None:
    """The log's rows as `form` (json, jsonl or csv)."""
    from llmtap.analytics.render import as_csv
    from llmtap.analytics.reports import Table

    if form == "json":
        print(as_json(rows, indent=2, zone=zone))
    elif form == "jsonl":
        for row in rows:
            print(as_json(row, zone=zone))
    else:
        sys.stdout.write(as_csv(Table(list(LOG_FIELDS), rows), zone))


def show(data: dict[str, Any], form: str, zone: tzinfo, *, conversation: bool) -> None:
    """json: the object; jsonl: an exchange on one line, a conversation's turns a line
    each; csv: a conversation's turns, a row each (tool calls by name, tool problems by
    status, the cache verdict and cause as two columns). One exchange is no table: csv needs --conversation."""
    from llmtap.analytics.render import as_csv
    from llmtap.analytics.reports import Table

    if form == "json":
        print(as_json(data, indent=2, zone=zone))
    elif form == "jsonl":
        for item in data["turns"] if conversation else [data]:
            print(as_json(item, zone=zone))
    elif not conversation:
        raise UsageError("show --format csv lists a conversation's turns: add --conversation, or use json or jsonl")
    else:
        rows = [
            {
                **{k: v for k, v in turn.items() if k not in ("tool_calls", "tool_problems", "cache")},
                "tool_calls": " ".join(str(name) for name in turn["tool_calls"]),
                "tool_problems": " ".join(str(status) for status in turn.get("tool_problems") or []),
                "cache": turn["cache"].get("verdict"),
                "cache_cause": turn["cache"].get("cause"),
            }
            for turn in data["turns"]
        ]
        columns = list(rows[0]) if rows else ["id", "started_at"]
        sys.stdout.write(as_csv(Table(columns, rows), zone))
