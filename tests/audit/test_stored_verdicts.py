"""`show`, `show --conversation`, `log`'s filters, `export` and the dashboard's detail
give the verdicts the store holds (SPEC §5, "Verdicts are data"), over mixed synthetic
traffic (misses of several causes, not-cacheable turns, tool problems, sessions and the
prefix rule) written through the Writer, on SQLite and PostgreSQL.

So that reading them is told from working them out again, the store is then changed
behind the rules' back: two misses swap causes, an exchange moves into another
conversation, an exchange with no problem gets one. A reader that decided for itself
would give the old answers. And `show --conversation` reads one conversation by the
index on conversation_id, not the store (the plan, not a time).

Not responsible for deciding the verdicts (tests/storage/test_verdicts.py).
"""

from __future__ import annotations

import copy
import json
import os
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select, text, update

from llmtap.analytics import audit
from llmtap.analytics.pricing import Pricer
from llmtap.storage import schema, verdicts
from llmtap.storage.engine import make_engine
from llmtap.storage.migrate import upgrade
from llmtap.storage.rows import RowSet
from llmtap.storage.writer import Writer
from llmtap.workloads.scratch import scratch_postgres
from llmtap.workloads.synthetic import with_sessions
from tests.helpers import llmtap

POSTGRES_URL = os.environ.get("LLMTAP_TEST_POSTGRES_URL", "").strip() or None
BACKENDS = [
    "sqlite",
    pytest.param(
        "postgresql", marks=pytest.mark.skipif(not POSTGRES_URL, reason="LLMTAP_TEST_POSTGRES_URL is not set")
    ),
]
STORED = (
    "id",
    "started_at",
    *verdicts.VERDICT_COLUMNS,
    "rate_input_pico",
    "rate_cache_read_pico",
    "usage_cache_read_input_tokens",
)
PICO = Decimal(10) ** 12


class Store:
    def __init__(self, url: str, engine: Engine, env: dict[str, str], tampered: dict[str, str]) -> None:
        self.url, self.engine, self.env, self.tampered = url, engine, env, tampered

    def rows(self) -> dict[str, dict[str, Any]]:
        """Every exchange's stored verdict columns, read straight from the table."""
        with self.engine.connect() as connection:
            query = select(*(schema.exchanges.c[name] for name in STORED))
            out = {}
            for row in connection.execute(query).mappings():
                row = dict(row)
                if isinstance(row["tool_problems"], str):
                    row["tool_problems"] = json.loads(row["tool_problems"])
                out[row["id"]] = row
            return out

    def bad_calls(self) -> dict[str, set[str]]:
        """The stored statuses of each exchange's calls that are not `valid`."""
        with self.engine.connect() as connection:
            query = select(schema.tool_calls.c.exchange_id, schema.tool_calls.c.status).where(
                schema.tool_calls.c.status != "valid"
            )
            out: dict[str, set[str]] = {}
            for exchange_id, status in connection.execute(query):
                out.setdefault(exchange_id, set()).add(status)
            return out


def _write(engine: Engine, spool: Path) -> None:
    traffic = with_sessions(1_500, days=0.2, seed=11)
    pricer = Pricer()
    writer = Writer(engine, spool_dir=spool, max_delay=0.01, batch_size=10_000)
    try:
        for start in range(0, len(traffic), 100):
            batch = copy.deepcopy(traffic[start : start + 100])
            rows = [row for row, _ in batch]
            pricer.price_rows(rows)  # stored rates: a miss's extra cost is known
            writer.submit(RowSet(exchanges=rows, tool_calls=[c for _, calls in batch for c in calls]))
            assert writer.flush(timeout=60)
    finally:
        writer.close()


def _tamper(engine: Engine) -> dict[str, str]:
    """Change stored verdicts as no rule would; returns which rows, by what was done."""
    e = schema.exchanges.c
    with engine.begin() as connection:
        misses = connection.execute(
            select(e.id, e.cache_cause).where(e.cache_verdict == "miss").order_by(e.started_at, e.id)
        ).all()
        first = misses[0]
        other = next(m for m in misses if m.cache_cause != first.cache_cause)
        for row, cause in ((first, other.cache_cause), (other, first.cache_cause)):
            connection.execute(update(schema.exchanges).where(e.id == row.id).values(cache_cause=cause))
        by_conversation = connection.execute(
            select(e.conversation_id, e.id).order_by(e.conversation_id, e.started_at, e.id)
        ).all()
        conversation_of = {i: c for c, i in by_conversation}
        conversations = sorted(set(conversation_of.values()))
        moved = next(i for i, c in conversation_of.items() if c != i)  # not a conversation's first
        home = next(c for c in conversations if c != conversation_of[moved])
        connection.execute(update(schema.exchanges).where(e.id == moved).values(conversation_id=home))
        clean = connection.execute(
            select(e.id).where(e.tool_problems.is_(None), e.tool_call_count == 0).order_by(e.id).limit(1)
        ).scalar_one()
        planted = [{"status": "orphan_result", "call_id": "planted_call", "tool": None, "next_id": None}]
        connection.execute(update(schema.exchanges).where(e.id == clean).values(tool_problems=planted))
    assert len(conversations) > 10
    return {"cause_a": first.id, "cause_b": other.id, "moved": moved, "home": home, "planted": clean}


@pytest.fixture(scope="module", params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    folder = tmp_path_factory.mktemp("stored")
    env = dict(os.environ, LLMTAP_HOME=str(folder / "home"))
    env.pop("LLMTAP_CONFIG", None)
    with ExitStack() as stack:
        if request.param == "sqlite":
            url = f"sqlite:///{folder / 'store.db'}"
        else:
            url = stack.enter_context(scratch_postgres(POSTGRES_URL or "", "llmtap_audit"))
        engine = make_engine(url)
        stack.callback(engine.dispose)
        upgrade(engine)
        _write(engine, folder / "spool")
        tampered = _tamper(engine)
        yield Store(url, engine, env, tampered)


def _cache_expected(row: dict[str, Any]) -> dict[str, Any]:
    """The cache verdict `show` must give for a stored row, written out from the columns."""
    verdict = row["cache_verdict"]
    if verdict is None:
        return {"verdict": "none"}
    out: dict[str, Any] = {"verdict": verdict, "cache_read_tokens": row["usage_cache_read_input_tokens"]}
    if verdict in ("miss", "not_cacheable"):
        rate = row["rate_input_pico"]
        extra = None
        if rate is not None:
            extra = Decimal(row["cache_missed_tokens"] * max(rate - (row["rate_cache_read_pico"] or 0), 0)) / PICO
        out.update(
            cause=row["cache_cause"],
            message_index=row["cache_message_index"],
            missed_tokens=row["cache_missed_tokens"],
            extra_cost_usd=extra,
        )
    if row["cache_previous_id"] is not None:
        out.update(previous_exchange_id=row["cache_previous_id"], gap_ms=row["cache_gap_ms"])
    return out


def _sample(rows: dict[str, dict[str, Any]], tampered: dict[str, str]) -> list[str]:
    """A few exchanges of every verdict and cause, with problems and without, and the
    tampered ones."""
    picked: dict[tuple[Any, ...], list[str]] = {}
    for row in sorted(rows.values(), key=lambda r: r["id"]):
        kinds = tuple(sorted({p["status"] for p in row["tool_problems"] or []}))
        key = (row["cache_verdict"], row["cache_cause"], kinds)
        if len(picked.setdefault(key, [])) < 3:
            picked[key].append(row["id"])
    return sorted({i for ids in picked.values() for i in ids} | set(tampered.values()))


def test_the_traffic_has_what_it_claims(store: Store):
    rows = store.rows()
    verdicts = Counter(r["cache_verdict"] for r in rows.values())
    causes = Counter(r["cache_cause"] for r in rows.values() if r["cache_verdict"] == "miss")
    problems = Counter(p["status"] for r in rows.values() for p in r["tool_problems"] or [])
    assert {"first", "hit", "miss", "not_cacheable"} <= set(verdicts), verdicts
    assert len(causes) >= 3, causes
    assert {"missing_result", "orphan_result"} <= set(problems), problems
    assert any(r["rate_input_pico"] is not None and r["cache_verdict"] == "miss" for r in rows.values())


def test_show_gives_the_stored_cache_verdict_and_tool_problems(store: Store):
    rows = store.rows()
    ids = _sample(rows, store.tampered)
    assert len(ids) > 15
    for exchange_id in ids:
        shown = audit.show(store.engine, exchange_id)
        expected = _cache_expected(rows[exchange_id])
        got = {k: v for k, v in shown["cache"].items() if k != "reason"}
        assert got == expected, exchange_id
        assert shown["tool_problems"] == (rows[exchange_id]["tool_problems"] or []), exchange_id
        assert shown["conversation_id"] == rows[exchange_id]["conversation_id"]
    a, b = store.tampered["cause_a"], store.tampered["cause_b"]
    assert audit.show(store.engine, a)["cache"]["cause"] == rows[a]["cache_cause"] != rows[b]["cache_cause"]
    planted = audit.show(store.engine, store.tampered["planted"])["tool_problems"]
    assert [p["call_id"] for p in planted] == ["planted_call"]


def test_show_json_on_the_command_line_gives_the_same(store: Store):
    rows = store.rows()
    for exchange_id in (store.tampered["cause_a"], store.tampered["planted"]):
        result = llmtap("show", exchange_id, "--format", "json", "--db", store.url, env=store.env)
        assert result.code == 0, result.err
        shown = json.loads(result.out)
        expected = _cache_expected(rows[exchange_id])
        assert shown["cache"]["verdict"] == expected["verdict"]
        assert shown["cache"].get("cause") == expected.get("cause")
        assert shown["tool_problems"] == (rows[exchange_id]["tool_problems"] or [])
    text_view = llmtap("show", store.tampered["planted"], "--db", store.url, env=store.env).out
    assert "\ntool problems\n" in text_view and "orphan_result: call planted_call" in text_view


def test_show_conversation_lists_the_stored_conversation(store: Store):
    rows = store.rows()
    members: dict[str, list[dict[str, Any]]] = {}
    for row in rows.values():
        members.setdefault(row["conversation_id"], []).append(row)
    moved, home = store.tampered["moved"], store.tampered["home"]
    several = sorted((c for c, m in members.items() if len(m) >= 4), key=lambda c: c)[:8]
    for conversation_id in [*several, home]:
        expected = sorted(members[conversation_id], key=lambda r: (r["started_at"], r["id"]))
        for asked in (expected[0]["id"], expected[-1]["id"]):
            data = audit.conversation(store.engine, asked)
            assert data["conversation_id"] == conversation_id
            assert [t["id"] for t in data["turns"]] == [r["id"] for r in expected]
            for turn, row in zip(data["turns"], expected, strict=True):
                assert turn["cache"]["verdict"] == _cache_expected(row)["verdict"]
                assert turn["cache"].get("cause") == row["cache_cause"]
            assert data["totals"]["cache_misses"] == sum(r["cache_verdict"] == "miss" for r in expected)
    assert moved in [t["id"] for t in audit.conversation(store.engine, home)["turns"]]
    result = llmtap("show", moved, "--conversation", "--format", "json", "--db", store.url, env=store.env)
    assert result.code == 0, result.err
    assert json.loads(result.out)["conversation_id"] == home


def test_log_filters_read_the_stored_columns(store: Store):
    rows = store.rows()
    bad = store.bad_calls()

    def logged(*args: str) -> set[str]:
        result = llmtap("log", "--db", store.url, "--format", "json", "--limit", "100000", *args, env=store.env)
        assert result.code == 0, result.err
        return {row["id"] for row in json.loads(result.out)}

    misses = {i for i, r in rows.items() if r["cache_verdict"] == "miss"}
    assert misses and logged("--cache-miss") == misses
    for cause in ("tools_changed", "message_edited", "below_minimum", rows[store.tampered["cause_a"]]["cache_cause"]):
        want = {
            i for i, r in rows.items() if r["cache_verdict"] in ("miss", "not_cacheable") and r["cache_cause"] == cause
        }
        assert want and logged("--cache-miss", cause) == want, cause
    for status in ("missing_result", "orphan_result", "duplicate_id"):
        want = {i for i, r in rows.items() if any(p["status"] == status for p in r["tool_problems"] or [])}
        want |= {i for i, statuses in bad.items() if status in statuses}
        assert want and logged("--tool-problem", status) == want, status
    anything = {i for i, r in rows.items() if r["tool_problems"]} | set(bad)
    assert logged("--tool-problem") == anything
    assert store.tampered["planted"] in anything


def test_export_gives_the_stored_conversation_id(store: Store, tmp_path: Path):
    rows = store.rows()
    out = tmp_path / "export.jsonl"
    result = llmtap("export", "--format", "jsonl", "--output", str(out), "--db", store.url, env=store.env)
    assert result.code == 0, result.err
    exported = {row["id"]: row["conversation_id"] for row in map(json.loads, out.read_text().splitlines())}
    assert exported == {i: r["conversation_id"] for i, r in rows.items()}
    assert exported[store.tampered["moved"]] == store.tampered["home"]


def test_the_dashboard_detail_gives_the_stored_verdicts(store: Store):
    rows = store.rows()
    ids = _sample(rows, store.tampered)
    found = audit.details(store.engine, ids)
    assert ids and set(found) == set(ids)
    priced = [i for i in ids if found[i]["cache"].get("extra_cost_usd") is not None]
    assert priced  # the extra cost's decimal text is compared, not only None == None
    for exchange_id in ids:
        expected = _cache_expected(rows[exchange_id])
        cache = found[exchange_id]["cache"]
        assert cache["verdict"] == expected["verdict"] and cache.get("cause") == expected.get("cause")
        extra = expected.get("extra_cost_usd")
        assert cache.get("extra_cost_usd") == (None if extra is None else str(extra))
        assert found[exchange_id]["conversation"] == rows[exchange_id]["conversation_id"]


def test_show_conversation_reads_one_conversation_by_its_index(tmp_path: Path):
    """The query of `show --conversation` is a search of ix_exchanges_conversation_id on
    SQLite (after ANALYZE, as a store of any size would be planned), never a scan."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = make_engine(url)
    try:
        upgrade(engine)
        _write(engine, tmp_path / "spool")
        with engine.begin() as connection:
            connection.execute(text("ANALYZE"))
            some = connection.execute(select(schema.exchanges.c.conversation_id).limit(1)).scalar_one()
            compiled = audit.turns_query(some).compile(engine, compile_kwargs={"literal_binds": True})
            plan = [row[-1] for row in connection.execute(text(f"EXPLAIN QUERY PLAN {compiled}"))]
    finally:
        engine.dispose()
    assert any("USING INDEX ix_exchanges_conversation_id" in step for step in plan), plan
    assert not any(step.startswith("SCAN") for step in plan), plan
