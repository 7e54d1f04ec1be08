"""`report conversations` looks up each kept conversation's first exchange (team, model,
first prompt) after ranking, instead of carrying it through the GROUP BY: its rows equal,
column for column and in order, those of the query that carried it (ORACLE_SQL, the
report's SQL before), for every window and --top tried, on SQLite and PostgreSQL.

The store: the hand-made conversations of test_conversations.py (bodies kept, so first
prompts are read) and the corpus traffic, then two conversations bent out of shape: one
whose first exchange is gone (deleted, as a prune would) and one whose first exchange was
moved to another conversation. Both must keep the old answer: no team, model or prompt.
tests/lake/test_read_conversations.py holds the same comparison over a lake.

Not responsible for what the figures mean (test_conversations.py checks them by hand).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from itertools import product
from pathlib import Path
from typing import Any

import duckdb
import pytest
from sqlalchemy import text

from llmtap.analytics import reports
from llmtap.analytics.duck import connect
from llmtap.analytics.pricing import Pricer
from llmtap.analytics.prompts import with_first_prompts
from llmtap.storage.engine import make_engine
from llmtap.storage.migrate import ensure_current
from llmtap.storage.record import Recorded
from llmtap.storage.writer import Writer
from tests.analytics import traffic
from tests.analytics.conftest import BACKENDS, blank_database, fill
from tests.analytics.test_conversations import conversations

# analytics/sql/conversations.sql as it was: the first exchange's columns as string
# aggregates over every exchange of the GROUP BY
ORACLE_SQL = """
SELECT
    conversation_id,
    max(team) FILTER (WHERE id = conversation_id) AS team,
    max(coalesce(model, model_requested)) FILTER (WHERE id = conversation_id) AS model,
    count(*) AS turns,
    coalesce(sum(usage_input_tokens), 0) AS input_tokens,
    coalesce(sum(usage_cache_read_input_tokens), 0) AS cache_read_tokens,
    coalesce(sum(usage_cache_creation_input_tokens), 0) AS cache_write_tokens,
    coalesce(sum(usage_output_tokens), 0) AS output_tokens,
    sum(cost_total_pico) AS cost_usd,
    sum(cost_input_pico) AS input_cost_usd,
    sum(cost_cache_read_pico) AS cache_read_cost_usd,
    sum(cost_cache_write_pico) AS cache_write_cost_usd,
    sum(cost_output_pico) AS output_cost_usd,
    sum(CASE WHEN cost_total_pico IS NOT NULL THEN coalesce(cost_fee_pico, 0) END) AS fee_cost_usd,
    count(*) FILTER (WHERE price_status = 'unpriced') AS unpriced,
    count(*) FILTER (WHERE usage_input_tokens IS NULL) AS usage_missing,
    min(started_at) AS started_at,
    max(coalesce(ended_at, started_at)) AS ended_at,
    max(request_body_ref) FILTER (WHERE id = conversation_id) AS first_body_ref,
    max(protocol) FILTER (WHERE id = conversation_id) AS first_protocol
FROM exchanges
GROUP BY conversation_id
HAVING count(*) FILTER (
    WHERE ($since IS NULL OR started_at >= $since) AND ($until IS NULL OR started_at < $until)
) > 0
ORDER BY cost_usd DESC NULLS LAST, input_tokens + output_tokens DESC, started_at, conversation_id
LIMIT $top
"""
TOPS = (1, 3, 1000)


def fill_store(url: str, folder: Path) -> dict[str, list[Recorded]]:
    """The hand-made conversations (bodies kept; returned) and the corpus traffic."""
    hand = conversations()
    engine = make_engine(url)
    try:
        ensure_current(engine)
        writer = Writer(engine, spool_dir=folder / "spool-full", enrich=Pricer().price_rows, body_mode="full")
        for turns in hand.values():
            for record in turns:
                writer.submit(record)
        assert writer.close()
    finally:
        engine.dispose()
    fill(url, [k.rec for k in traffic.build()], folder / "spool-corpus")
    return hand


def bend(url: str, hand: dict[str, list[Recorded]]) -> dict[str, str]:
    """Bend two of the `hand`-made conversations: `gone` (its first exchange deleted) and
    `moved` (its first exchange now another conversation's); returns each one's id."""
    gone, moved, into = hand["alpha"][0].id, hand["beta"][0].id, hand["delta"][0].id
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(text("DELETE FROM exchanges WHERE id = :id"), {"id": gone})
            connection.execute(
                text("UPDATE exchanges SET conversation_id = :into WHERE id = :id"), {"into": into, "id": moved}
            )
    finally:
        engine.dispose()
    return {"gone": gone, "moved": moved}


def moments(connection: duckdb.DuckDBPyConnection) -> list[datetime | None]:
    """Window edges: none, and the second turn's start of the three longest conversations
    (a window from there leaves their first exchange before it)."""
    rows = connection.execute(
        "SELECT s[2] FROM (SELECT conversation_id, list(started_at ORDER BY started_at) AS s, count(*) AS n "
        "FROM exchanges GROUP BY conversation_id HAVING n > 1) ORDER BY n DESC, conversation_id LIMIT 3"
    ).fetchall()
    return [None, *(row[0] for row in rows)]


def oracle(
    url: str, connection: duckdb.DuckDBPyConnection, since: datetime | None, until: datetime | None, top: int
) -> reports.Table:
    """What `reports.run` made of ORACLE_SQL's rows: dollars, and the first prompts."""
    result = connection.execute(ORACLE_SQL, {"since": since, "until": until, "top": top})
    columns = [d[0] for d in result.description]
    table = reports.Table(columns, reports._as_dicts(columns, result.fetchall()))
    with_first_prompts(url, table, reports.FIRST_PROMPT_CHARS)
    return table


def windows(edges: list[datetime | None]) -> Iterator[tuple[datetime | None, datetime | None, int]]:
    """Every (since, until, top) of the edges that leaves a window to read."""
    for since, until, top in product(edges, edges, TOPS):
        if since is None or until is None or since < until:
            yield since, until, top


def assert_as_before(url: str, connection: duckdb.DuckDBPyConnection, bent: dict[str, str]) -> None:
    """The report equals the oracle everywhere; and the cases that matter were met: a kept
    conversation whose first exchange lies before the window, and each bent one."""
    seen: dict[str, int] = {"first before the window": 0, "gone": 0, "moved": 0}
    compared = 0
    for since, until, top in windows(moments(connection)):
        params = {"since": since, "until": until, "top": top}
        got = reports.run(url, "conversations", since=since, until=until, top=top, connection=connection)
        want = oracle(url, connection, since, until, top)
        assert got.columns == want.columns and got.rows == want.rows, params
        compared += 1
        for row in want.rows:
            if since is not None and row["team"] is not None and row["started_at"] < since:
                seen["first before the window"] += 1
            for name, conversation in bent.items():
                if row["conversation_id"] == conversation:
                    assert row["team"] is None and row["model"] is None and row["first_prompt"] is None
                    seen[name] += 1
    assert compared > len(TOPS) * 4, compared
    assert all(seen.values()), seen


@pytest.fixture(scope="module", params=BACKENDS)
def bent_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any]]:
    folder = tmp_path_factory.mktemp(f"conversations-first-{request.param}")
    with blank_database(request.param, folder) as url:
        yield url, bend(url, fill_store(url, folder))


def test_the_first_exchange_looked_up_after_ranking_gives_what_the_group_by_gave(bent_store) -> None:
    url, bent = bent_store
    connection = connect(url)
    try:
        assert_as_before(url, connection, bent)
    finally:
        connection.close()


def test_the_ids_looked_up_a_few_at_a_time_give_the_same(bent_store, monkeypatch: pytest.MonkeyPatch) -> None:
    """More kept conversations than one lookup takes: several lookups, the same rows."""
    url, bent = bent_store
    monkeypatch.setattr(reports, "FIRST_IDS_PER_QUERY", 2)
    connection = connect(url)
    try:
        assert len(reports.run(url, "conversations", top=5, connection=connection).rows) > 2
        assert_as_before(url, connection, bent)
    finally:
        connection.close()
