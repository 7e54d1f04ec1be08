"""The proxy's access log (`llmtap proxy --access-log`, `[proxy] access_log`): one line on
stderr per finished exchange, once the writer has built and priced its record (so before
the database has it, which a spooled record may wait for):

    llmtap: 2026-12-02T05:59:01.123Z team=search POST api.anthropic.com/v1/messages 200
        model=claude-sonnet-4-5 tokens=1,234/56 cost=$0.004512 1,234 ms

(one line), `tokens` the input (cached input included) and output tokens, `cost` the
record's price or `unpriced` (no price for the model, or no usage to price), `-` for what
the record does not know. Never a key: a record holds none, and the path's key-bearing
query parameters are redacted already. A team, model or path is shown as a terminal
should show it (every control character as `\\xNN`, as analytics/render.py `shown` does),
and quoted when it has a space, so one line stays one line.

Not responsible for the records (storage.rows) or their prices (analytics.pricing).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from decimal import Decimal
from typing import IO, Any

_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}
PICO = Decimal(10) ** 12


def line(row: dict[str, Any]) -> str:
    """One exchange row (after pricing) as its access line."""
    at = row.get("started_at")
    when = _when(at) if isinstance(at, datetime) else "-"
    where = f"{_shown(row.get('host') or '-')}{_shown(row.get('path') or '')}"
    status = row.get("status")
    inp, out = row.get("usage_input_tokens"), row.get("usage_output_tokens")
    tokens = "-" if inp is None and out is None else f"{_count(inp)}/{_count(out)}"
    duration = row.get("duration_ms")
    return " ".join(
        [
            "llmtap:",
            when,
            f"team={_shown(row.get('team') or '-')}",
            _shown(row.get("method") or "-"),
            where,
            str(status) if status is not None else "-",
            f"model={_shown(row.get('model') or row.get('model_requested') or '-')}",
            f"tokens={tokens}",
            f"cost={_cost(row)}",
            f"{duration:,.0f} ms" if isinstance(duration, (int, float)) else "- ms",
        ]
    )


def write(rows: list[dict[str, Any]], stream: IO[str] | None = None) -> None:
    """The lines of a batch's new exchanges, in one write."""
    out = stream if stream is not None else sys.stderr
    out.write("".join(line(row) + "\n" for row in rows))
    out.flush()


def _cost(row: dict[str, Any]) -> str:
    total = row.get("cost_total_pico")
    if row.get("price_status") != "priced" or total is None:
        return "unpriced"
    return f"${Decimal(total) / PICO:f}".rstrip("0").rstrip(".") if total else "$0"


def _when(at: datetime) -> str:
    aware = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _count(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else "-"


def _shown(value: Any) -> str:
    text = str(value).translate(_CONTROLS)
    return '"' + text.replace('"', '\\"') + '"' if (" " in text or '"' in text) else text
