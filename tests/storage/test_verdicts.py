"""Stored verdicts (SPEC §5, "Verdicts are data"): what the writer decides row by row from
the store's neighbours equals a walk of every conversation from its start, whatever order
the exchanges arrive in (in time order, shuffled, split in two files imported the later
first), on SQLite and PostgreSQL. The window SQL the reports once ran is the oracle of
tests/analytics/test_verdict_oracle.py; this checks the writer against its own full walk."""

from __future__ import annotations

import itertools
import random
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from sqlalchemy import select

from llmtap.storage import schema, verdicts
from llmtap.storage.maintenance import reprocess
from llmtap.storage.migrate import downgrade, upgrade
from llmtap.workloads.synthetic import with_sessions
from tests.storage.conftest import BACKENDS
from tests.storage.helpers import fresh_postgres_database, write_batches

COLUMNS = [schema.exchanges.c[name] for name in ("id", *verdicts.VERDICT_COLUMNS)]


def _traffic(n: int) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Synthetic conversations (misses of every cause, tool calls and results), every
    fourth of them in a client's session (a thread_key) so both identities take part."""
    return with_sessions(n, days=0.2, seed=11)


def _write(engine: Any, spool_dir: Any, batches: list[list[tuple[dict[str, Any], list[dict[str, Any]]]]]) -> None:
    write_batches(engine, spool_dir, batches)


def _stored(engine: Any) -> dict[str, tuple[Any, ...]]:
    with engine.connect() as connection:
        return {row[0]: tuple(row[1:]) for row in connection.execute(select(*COLUMNS).order_by(schema.exchanges.c.id))}


def _walked(engine: Any) -> dict[str, tuple[Any, ...]]:
    with engine.begin() as connection:
        verdicts.recompute_all(connection)
    return _stored(engine)


def _chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


@pytest.fixture(params=BACKENDS)
def make_store(request, tmp_path, engines) -> Iterator[Callable[[], Any]]:
    """`make_store()`: another blank store at the head revision, of this test's backend."""
    with ExitStack() as stack:
        made = itertools.count()

        def make() -> Any:
            if request.param == "sqlite":
                url = f"sqlite:///{tmp_path / f'store{next(made)}.db'}"
            else:
                url = stack.enter_context(fresh_postgres_database())
            engine = engines(url)
            upgrade(engine)
            return engine

        yield make


@pytest.fixture(scope="module")
def traffic() -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    return _traffic(1_500)


def test_in_time_order_the_writer_decides_what_a_full_walk_decides(traffic, make_store, tmp_path):
    engine = make_store()
    _write(engine, tmp_path / "spool", _chunks(traffic, 40))
    written = _stored(engine)
    walked = _walked(engine)
    assert written == walked
    verdict_counts = Counter(v[1] for v in written.values())
    causes = Counter(v[2] for v in written.values() if v[1] == "miss")
    problems = Counter(p["status"] for v in written.values() for p in v[-1] or [])
    # the traffic exercises what it claims to: every verdict, several causes, tool problems
    assert {"first", "hit", "miss"} <= set(verdict_counts), verdict_counts
    assert len(causes) >= 3, causes
    assert problems, "no tool problems in the traffic"
    assert len({v[0] for v in written.values()}) < len(written) / 2  # conversations of several turns


@pytest.mark.parametrize("order", ["shuffled", "split_later_first", "again_with_what_is_stored"])
def test_out_of_order_arrivals_end_where_time_order_does(order, traffic, make_store, tmp_path):
    reference = make_store()
    _write(reference, tmp_path / "a", _chunks(traffic, 200))
    expected = _stored(reference)
    engine = make_store()
    if order == "shuffled":
        shuffled = list(traffic)
        random.Random(5).shuffle(shuffled)
        batches = _chunks(shuffled, 37)
    elif order == "split_later_first":
        half = len(traffic) // 2
        batches = _chunks(traffic[half:], 100) + _chunks(traffic[:half], 100)
    else:  # every other exchange, then all of them: batches where some are stored already
        batches = _chunks(traffic[::2], 100) + _chunks(traffic, 100)
    _write(engine, tmp_path / "b", batches)
    assert _stored(engine) == expected


def test_a_store_upgraded_to_0013_gets_the_verdicts_the_writer_gives(traffic, make_store, tmp_path):
    """Rows stored before the verdicts were (schema 0012) are walked by the migration."""
    engine = make_store()
    _write(engine, tmp_path / "spool", _chunks(traffic[:600], 50))
    expected = _stored(engine)
    assert any(v[1] == "miss" for v in expected.values())
    downgrade(engine, "0012")
    upgrade(engine)
    assert _stored(engine) == expected


def test_reprocess_walks_the_verdicts_again(make_store, tmp_path):
    """A verdict that a stored fact no longer supports is decided again by `reprocess`."""
    engine = make_store()
    rows = _traffic(300)
    _write(engine, tmp_path / "spool", _chunks(rows, 50))
    expected = _stored(engine)
    with engine.begin() as connection:
        connection.execute(schema.exchanges.update().values(cache_verdict="miss", conversation_id="x"))
    reprocess(engine)
    assert _stored(engine) == expected


def test_three_writers_at_once_decide_what_one_walk_decides(traffic, make_store, tmp_path):
    """Several proxies into one store: every writer decides from what the others
    committed (verdicts.lock), so the rows of one conversation, spread over three writers
    writing at the same time, end as a walk of the whole store decides."""
    engine = make_store()
    streams = [traffic[i::3] for i in range(3)]
    failures: list[BaseException] = []

    def run(index: int) -> None:
        try:
            _write(engine, tmp_path / f"spool{index}", _chunks(streams[index], 15))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not failures, failures
    written = _stored(engine)
    assert len(written) == len(traffic)
    assert written == _walked(engine)
