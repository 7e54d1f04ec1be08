"""A store whose names and numbers are as wide as real ones get, for the terminal-width
tests (test_render_widths.py) and the captures in docs/terminal.md (terminal_doc.py):
the known traffic of `traffic.py` (tools, cache misses, errors, latency) under long team
names, plus a few exchanges with long model names, cache writes and big money and token
counts, and some from the last minutes (so `report budgets` has spend in its periods).

Not responsible for what a report says about it (the other analytics tests check that).
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

from llmtap.storage.record import Recorded
from tests.analytics import traffic
from tests.analytics import wire as w
from tests.analytics.conftest import fill

PLATFORM = "claude-users-platform-team"
TEAMS = {
    "search": "search-relevance-platform",
    "support": PLATFORM,
    "cache": "prompt-cache-experiments",
    "agents": "autonomous-agents-research",
    "ops": "ops",
}
SONNET = traffic.SONNET  # claude-sonnet-4-5-20250929
FLASH_PREVIEW = "gemini-2.5-flash-preview-09-2025"
DATA = "data-platform-analytics-eu"
BUDGETS = f"""[budgets.teams]
"{PLATFORM}" = {{ usd = 25000, period = "month" }}
"{DATA}" = {{ usd = 0.01, period = "day" }}
ops = {{ usd = 1500.5, period = "week" }}
"""


def _renamed(record: Recorded) -> Recorded | None:
    team = TEAMS.get(record.team)
    return dataclasses.replace(record, team=team) if team else None  # (the hostile names: not here)


def _big(now: datetime) -> list[Recorded]:
    """Exchanges with the long models, cache writes (1 h) and thousands of dollars."""
    out = []
    for index, (fresh, write, read, output) in enumerate(
        ((40_000_000, 120_000_000, 900_000_000, 3_000_000), (1_200, 45_000, 0, 800), (30, 0, 45_000, 1_500))
    ):
        request = w.anthropic_request(SONNET, [{"role": "user", "content": f"big {index}: refactor the monorepo"}])
        usage = w.anthropic_usage(fresh, write, read, output, write_1h=True)
        response = w.anthropic_response(SONNET, usage, msg_id=f"msg_big_{index}")
        out.append(w.record(w.ANTHROPIC, request, response, at=now - timedelta(minutes=30 - index), team=PLATFORM))
    for index, (prompt, candidates) in enumerate(((52_000_000, 7_500_000), (1_800, 250))):
        body = w.gemini_request(f"flash {index}: summarise the quarter")
        response = w.gemini_response(FLASH_PREVIEW, prompt=prompt, candidates=candidates)
        moment = now - timedelta(minutes=20 - index)
        out.append(w.record(w.gemini(FLASH_PREVIEW), body, response, at=moment, team=DATA, duration_ms=123_456.0))
    return out


def records(now: datetime | None = None) -> list[Recorded]:
    now = now or datetime.now(UTC)
    known = [r for r in (_renamed(k.rec) for k in traffic.build()) if r is not None]
    return [*known, *_big(now)]


def build(folder: Path) -> tuple[str, Path]:
    """The store's URL (SQLite in `folder`) and a config file with budgets for its teams."""
    url = f"sqlite:///{folder / 'wide.db'}"
    fill(url, records(), folder / "spool")
    config = folder / "config.toml"
    config.write_text(BUDGETS)
    return url, config
