"""Metrics and spans say the verdicts the writer stored (SPEC §5, "Verdicts are data"):
over a traffic mix written by the real Writer with the counting observer and the span
observer attached, the cache-miss counters by cause, the not_cacheable counter and the
missed tokens by cause equal the stored `exchanges` columns; every live span's cache
attributes, conversation id and trace equal its exchange's stored verdicts, and so do its
backfilled twin's (`llmtap export --format otlp`).

Traffic: synthetic conversations (workloads/synthetic.with_sessions: misses of several causes,
every fourth conversation in a client's session) and one two-turn line per hand-made case,
each written to show one verdict (a miss of each cause, a hit, a not_cacheable, a new run
after an hour, a row that takes no part). On SQLite, and PostgreSQL when
LLMTAP_TEST_POSTGRES_URL is set.

Not responsible for the rules themselves (tests/storage/test_verdicts.py checks the writer
against a full walk, tests/analytics/test_verdict_oracle.py against the reports' SQL).
"""

from __future__ import annotations

import copy
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, values
from prometheus_client.multiprocess import MultiProcessCollector
from sqlalchemy import select

from llmtap.storage import schema, verdicts
from llmtap.storage.engine import make_engine
from llmtap.storage.migrate import ensure_current
from llmtap.storage.rows import RowSet
from llmtap.storage.writer import Writer
from llmtap.telemetry.metrics_count import Counting
from llmtap.telemetry.metrics_labels import Labels
from llmtap.telemetry.otlp import SpanObserver, settings_from
from llmtap.telemetry.otlp_spans import ids_for, trace_key
from llmtap.workloads.synthetic import with_sessions
from tests.helpers import llmtap
from tests.storage.conftest import BACKENDS
from tests.storage.helpers import fresh_postgres_database
from tests.telemetry.otlp_receiver import Received, Receiver
from tests.telemetry.test_otlp_history import _by_exchange

pytestmark = pytest.mark.timeout(240)

# a stored column -> the span attribute that says it
ATTRIBUTES = {
    "cache_verdict": "llmtap.cache.verdict",
    "cache_cause": "llmtap.cache.cause",
    "cache_missed_tokens": "llmtap.cache.missed_tokens",
    "cache_message_index": "llmtap.cache.message_index",
    "conversation_id": "llmtap.conversation.id",
}

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)
# (what the second turn changes, at how many seconds after the first began; the stored
# verdict and cause it gets). The first turn: 5,000 input tokens, nothing read from cache,
# claude-sonnet-4 (minimum 1,024), one breakpoint of the default 5-minute TTL.
CASES: list[tuple[dict[str, Any], float, tuple[str | None, str | None]]] = [
    ({}, 10, ("miss", "unexplained")),
    ({"usage_cache_read_input_tokens": 4800}, 10, ("hit", None)),
    ({"usage_cache_read_input_tokens": None}, 10, (None, None)),  # unknown: takes no part
    ({"tools_hash": "other"}, 10, ("miss", "tools_changed")),
    ({"system_hash": None}, 10, ("miss", "system_changed")),
    ({"message_hashes": ["m0", "edited", "m2"]}, 10, ("miss", "message_edited")),
    ({"message_hashes": ["m0", "m1", "m2", "m3"]}, 10, ("miss", "unexplained")),  # a continuation
    ({"message_hashes": ["m0"]}, 10, ("miss", "unexplained")),  # a shorter retry
    ({}, 400, ("miss", "ttl_expired")),
    ({}, 4000, ("first", None)),  # a new run without a thread
    ({"thread_key": "s1"}, 4000, ("miss", "ttl_expired")),  # a session: one line at any gap
    ({"request_cache_breakpoints": 0}, 10, ("miss", "no_breakpoint")),
    ({"request_cache_breakpoints": 0, "protocol": "openai.chat"}, 10, ("miss", "unexplained")),
    ({"status": 529}, 10, (None, None)),  # an error takes no part
    ({"model": "claude-opus-4-5"}, 10, ("first", None)),  # another line: the first of its own
    ({"first": {"usage_input_tokens": 900}, "tools_hash": "other"}, 10, ("not_cacheable", "below_minimum")),
]


def _case_rows(template: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, tuple[str | None, str | None]]]:
    """Two turns per case, each case a line of its own (its own key); the second turns'
    expected (verdict, cause) by id."""
    rows, expected = [], {}
    for n, (changes, after, verdict) in enumerate(CASES):
        changes = dict(changes)
        first_changes = changes.pop("first", {})
        thread = changes.get("thread_key")
        turns = []
        for turn, (at, change) in enumerate(((0.0, first_changes), (after, changes))):
            exchange_id = f"9{n:02d}{turn}".ljust(26, "0")
            started = T0 + timedelta(hours=2 * n) + at * SECOND
            row = copy.deepcopy(template) | {
                "id": exchange_id,
                "dedupe_key": exchange_id,
                "response_id": f"case-{exchange_id}",
                "key_fingerprint": f"case-key-{n}",
                "team": "cases",
                "thread_key": thread,
                "model": "claude-sonnet-4",
                "model_requested": "claude-sonnet-4",
                "protocol": "anthropic.messages",
                "status": 200,
                "started_at": started,
                "first_byte_at": started + SECOND,
                "first_token_at": started + SECOND,
                "ended_at": started + 2 * SECOND,
                "first_message_hash": "m0",
                "message_hashes": ["m0", "m1"],
                "tools_hash": "tools",
                "system_hash": "system",
                "request_cache_breakpoints": 1,
                "request_cache_ttl": None,
                "usage_input_tokens": 5000,
                "usage_cache_read_input_tokens": 0,
                "usage_cache_creation_input_tokens": 0,
                "usage_cache_creation_5m_input_tokens": None,
                "request_tool_call_ids": None,
                "request_tool_result_ids": None,
                "previous_exchange_id": None,
            }
            row.update(change)
            turns.append(row)
        rows += turns
        expected[turns[1]["id"]] = verdict
    return rows, expected


def _chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


@pytest.fixture(scope="module")
def traffic() -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    return with_sessions(800, days=0.2, seed=27)


@pytest.fixture(scope="module", params=BACKENDS)
def written(
    request: pytest.FixtureRequest,
    traffic: list[tuple[dict[str, Any], list[dict[str, Any]]]],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, Any]]:
    """The traffic written with both observers; what they said and what the store holds."""
    tmp_path = tmp_path_factory.mktemp("stored-verdicts")
    with ExitStack() as stack:
        # the counters' multiprocess files: for this module only (Counting sets both)
        monkeypatch = stack.enter_context(pytest.MonkeyPatch.context())
        monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "metrics"))
        monkeypatch.setattr(values, "ValueClass", values.ValueClass)
        if request.param == "sqlite":
            url = f"sqlite:///{tmp_path / 'store.db'}"
        else:
            url = stack.enter_context(fresh_postgres_database())
        engine = make_engine(url)
        stack.callback(engine.dispose)
        ensure_current(engine)
        template = next(row for row, _ in traffic if row["protocol"] == "anthropic.messages")
        cases, expected = _case_rows(template)
        batches = [copy.deepcopy(chunk) for chunk in _chunks(traffic, 40)]
        receiver = stack.enter_context(Receiver())
        settings = settings_from(receiver.url, None)
        assert settings is not None
        counting = Counting(tmp_path / "metrics", Labels(teams=200, models=200, unpriced_models=50, series=10_000))
        writer = Writer(
            engine,
            spool_dir=tmp_path / "spool",
            max_delay=0.01,
            batch_size=10_000,
            observers=[counting, SpanObserver(settings.options)],
        )
        try:
            writer.submit(RowSet(exchanges=cases))  # both turns of every case in one commit
            assert writer.flush(timeout=60)
            for batch in batches:  # in time order, a commit at a time
                writer.submit(RowSet(exchanges=[r for r, _ in batch], tool_calls=[c for _, cs in batch for c in cs]))
                assert writer.flush(timeout=60)
        finally:
            assert writer.close()
        count = len(cases) + len(traffic)
        live = receiver.wait_for(count)
        columns = [schema.exchanges.c[name] for name in ("id", "thread_key", *verdicts.VERDICT_COLUMNS)]
        with engine.connect() as connection:
            stored = {str(r["id"]): dict(r) for r in connection.execute(select(*columns)).mappings()}
        families = {
            family.name: family.samples
            for family in MultiProcessCollector(CollectorRegistry(), path=str(tmp_path / "metrics")).collect()
        }
        env = {"LLMTAP_HOME": str(tmp_path / "home"), "LLMTAP_CONFIG": None}
        with Receiver() as later:
            backfill = llmtap("export", "--db", url, "--format", "otlp", "--endpoint", later.url, env=env)
            assert backfill.code == 0, backfill.err
            backfilled = later.taken()
        yield {
            "count": count,
            "stored": stored,
            "expected": expected,
            "families": families,
            "live": live,
            "backfilled": backfilled,
        }


def _by_cause(samples: list[Any], name: str) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for sample in samples:
        if sample.name == name:
            out[sample.labels["cause"]] += sample.value
    return dict(out)


def test_the_hand_made_cases_are_stored_as_they_say(written: dict[str, Any]) -> None:
    stored = written["stored"]
    assert written["expected"]
    for exchange_id, verdict in written["expected"].items():
        row = stored[exchange_id]
        assert (row["cache_verdict"], row["cache_cause"]) == verdict, exchange_id


def test_the_counters_equal_the_stored_verdicts(written: dict[str, Any]) -> None:
    stored, families = written["stored"].values(), written["families"]
    misses = Counter(r["cache_cause"] for r in stored if r["cache_verdict"] == "miss")
    missed: Counter[str] = Counter()
    for r in stored:
        if r["cache_verdict"] == "miss":
            missed[r["cache_cause"]] += r["cache_missed_tokens"] or 0
    not_cacheable = sum(1 for r in stored if r["cache_verdict"] == "not_cacheable")
    # the mix has what it claims: misses of several causes, and not_cacheable ones
    assert len(misses) >= 5 and not_cacheable >= 1, (misses, not_cacheable)
    assert _by_cause(families["llmtap_cache_misses"], "llmtap_cache_misses_total") == {
        cause: float(n) for cause, n in misses.items()
    }
    assert _by_cause(families["llmtap_cache_missed_tokens"], "llmtap_cache_missed_tokens_total") == {
        cause: float(n) for cause, n in missed.items() if n
    }
    assert sum(s.value for s in families["llmtap_cache_not_cacheable"]) == not_cacheable
    assert sum(s.value for s in families["llmtap_requests"]) == written["count"]


def _check(span: Received, row: dict[str, Any]) -> None:
    a = span.attributes
    for column, attribute in ATTRIBUTES.items():
        said = row[column] if row["cache_verdict"] is not None or column == "conversation_id" else None
        assert a.get(attribute) == said, (attribute, row["id"])
    trace, span_id = ids_for(trace_key(row["thread_key"], row["conversation_id"], row["id"]), row["id"])
    assert (span.trace_id, span.span_id) == (f"{trace:032x}", f"{span_id:016x}")


def test_live_and_backfilled_spans_say_the_stored_verdicts(written: dict[str, Any]) -> None:
    stored = written["stored"]
    live, backfilled = _by_exchange(written["live"]), _by_exchange(written["backfilled"])
    assert set(live) == set(backfilled) == set(stored)
    for exchange_id, row in stored.items():
        _check(live[exchange_id], row)
        _check(backfilled[exchange_id], row)
    said = Counter(s.attributes.get("llmtap.cache.verdict") for s in live.values())
    assert {"first", "hit", "miss", "not_cacheable", None} <= set(said), said
    # a session's turns are one trace, whichever conversation id its first exchange gave
    threads: dict[str, set[str]] = defaultdict(set)
    for exchange_id, row in stored.items():
        if row["thread_key"]:
            threads[row["thread_key"][1:]].add(live[exchange_id].trace_id)
    assert threads and all(len(found) == 1 for found in threads.values())
