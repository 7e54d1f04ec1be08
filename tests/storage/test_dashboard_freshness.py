"""The served dashboard gathers again only when the store changed (dashboards/freshness.py),
on a real store: SQLite always, PostgreSQL when LLMTAP_TEST_POSTGRES_URL is set."""

from __future__ import annotations

from sqlalchemy import text

from llmtap.dashboards import freshness
from llmtap.dashboards.freshness import Fresh, store_mark
from llmtap.storage.migrate import upgrade


def _write(engine, value: str) -> None:
    with engine.begin() as connection:
        connection.execute(
            text("INSERT INTO store_settings (key, value, updated_at) VALUES (:k, :v, CURRENT_TIMESTAMP)"),
            {"k": value, "v": '"x"'},
        )


def test_the_mark_changes_with_a_commit_and_only_then(db_url, engines) -> None:
    engine = engines(db_url)
    upgrade(engine)
    before = store_mark(engine)
    assert before is not None
    if engine.url.get_backend_name() == "sqlite":  # PostgreSQL flushes its counters within ~1 s
        assert store_mark(engine) == before
    _write(engine, "a")
    assert _changes(engine, before)


def _changes(engine, before) -> bool:
    import time

    for _ in range(40):  # bounded: PostgreSQL's counters reach the view within about a second
        if store_mark(engine) != before:
            return True
        time.sleep(0.1)
    return False


def test_gathered_again_only_when_the_mark_moves_or_the_value_ages() -> None:
    made: list[int] = []
    mark = ["m1"]
    now = [0.0]
    fresh = Fresh(lambda: made.append(len(made)) or {"n": len(made)}, lambda: mark[0], clock=lambda: now[0])
    assert fresh() == {"n": 1}
    assert fresh() == {"n": 1}
    mark[0] = "m2"
    assert fresh() == {"n": 2}
    now[0] = freshness.MAX_AGE_S + 1
    assert fresh() == {"n": 3}
    mark[0] = None  # cannot tell: always gathered
    fresh()
    fresh()
    assert len(made) == 5
