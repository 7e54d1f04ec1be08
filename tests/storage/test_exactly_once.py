"""Exactly once, and faults told to somebody (SPEC §6, issue 13): records that share a
provider response id are each stored; a HAR imported twice, a spool replayed, a batch
resent by a new writer process are stored once; a store that vanishes or loses its tables
is made again and the spool written into it; the rejected file holds whole records that
`llmtap import` loads back; a writer that stops with records in the spool says so."""

from __future__ import annotations

import json
import os
import pickle
import signal
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select, text
from sqlalchemy.engine import make_url

from llmtap.addon.tee import PendingExchange
from llmtap.storage import rejected, schema
from llmtap.storage.migrate import upgrade
from llmtap.storage.shipped import identified
from llmtap.storage.writer import Writer
from llmtap.storage.writer_process import WriterProcess, WriterSpec
from tests.corpus_tools import har_entry
from tests.helpers import llmtap
from tests.storage.helpers import (
    count,
    exchange_ids,
    held_exchange,
    make_record,
    spool_files,
    sqlite_exclusive,
    wait_until,
)

pytestmark = pytest.mark.timeout(120)

SAME_ID = "msg_01SAMEFROMACACHINGGATEWAY"
ANSWER = (
    b'{"id": "' + SAME_ID.encode() + b'", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",'
    b' "content": [{"type": "text", "text": "hello %d"}], "stop_reason": "end_turn",'
    b' "usage": {"input_tokens": 12, "output_tokens": 3}}'
)
REQUEST = b'{"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "hi %d"}]}'


def quick_writer(engine, spool_dir: Path, **kwargs) -> Writer:
    options = {"batch_size": 50, "max_delay": 0.02, "retry_initial": 0.05, "retry_max": 0.2} | kwargs
    return Writer(engine, spool_dir=spool_dir, **options)


def held(index: int, team: str = "team-held") -> PendingExchange:
    """What the proxy hands over for a small JSON answer, every one with the same response id."""
    return held_exchange(index, request=REQUEST % index, answer=ANSWER % index, team=team)


# -- 1. one response id, many records ------------------------------------------------------------


def test_records_that_share_a_response_id_are_each_stored(store, spool_dir):
    writer = quick_writer(store, spool_dir)
    try:
        first = make_record(3, prefix="F", response_id=SAME_ID)
        writer.submit(first)
        writer.submit(make_record(3, prefix="G", response_id=SAME_ID))  # the same batch
        assert writer.flush(timeout=10)
        writer.submit(make_record(3, prefix="H", response_id=SAME_ID))  # a later batch
        writer.submit(first)  # the very same record again: the one duplicate
        assert writer.flush(timeout=10)
    finally:
        assert writer.close()
    assert len(exchange_ids(store)) == 3
    assert count(store, schema.tool_calls) == 3
    assert writer.stats.written == 3 and writer.stats.duplicates == 1


def test_pending_records_keep_their_id_through_a_resend(store, tmp_path):
    """The id is fixed before a pending record first leaves the proxy's process: a child
    that builds it after another died builds the same id, which the store recognises."""
    (wrapped,) = identified([held(1)])
    again = pickle.loads(pickle.dumps(wrapped))
    assert wrapped.build().id == again.build().id == pickle.loads(pickle.dumps(wrapped)).build().id

    engine = store
    url = engine.url.render_as_string(hide_password=False)
    writer = WriterProcess(WriterSpec(url=url, spool_dir=tmp_path / "spool", max_delay=0.5))
    try:
        for index in range(300):
            writer.submit(held(index, team=f"team-{index % 3}"))
        time.sleep(0.3)  # shipped, not settled: the child waits out its batch window
        pid = writer.child_pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        for index in range(300, 400):
            writer.submit(held(index, team=f"team-{index % 3}"))
    finally:
        assert writer.close(120)
    assert count(engine) == 400  # one response id, 400 exchanges, none twice


def _har(path: Path, teams: list[str]) -> None:
    """Three teams' requests answered with the same response id (a caching gateway)."""
    case = {"protocol": "anthropic.messages", "host": "api.anthropic.com", "path": "/v1/messages", "status": 200}
    entries = [
        har_entry(case, ANSWER % n, REQUEST % n, team, datetime(2026, 11, 2, 9, n, tzinfo=UTC))
        for n, team in enumerate(teams)
    ]
    har = {"log": {"version": "1.2", "creator": {"name": "t", "version": "1"}, "entries": entries}}
    path.write_text(json.dumps(har))


def test_har_with_a_shared_response_id_imported_twice_is_stored_once_each(db_url, engines, tmp_path):
    path = tmp_path / "gateway.har"
    _har(path, ["search", "agents", "support"])
    first = llmtap("import", str(path), "--db", db_url)
    assert first.code == 0, first.err
    assert "imported 3 LLM exchanges (0 already stored)" in first.out
    again = llmtap("import", str(path), "--db", db_url)
    assert again.code == 0, again.err
    assert "(3 already stored)" in again.out
    engine = engines(db_url)
    with engine.connect() as connection:
        rows = connection.execute(select(schema.exchanges.c.team, schema.exchanges.c.response_id)).all()
    assert sorted(rows) == [("agents", SAME_ID), ("search", SAME_ID), ("support", SAME_ID)]


# -- 2. a store that vanishes or loses its tables ------------------------------------------------


def _sqlite_file(url: str) -> Path:
    return Path(make_url(url).database or "")


def test_a_deleted_sqlite_file_is_made_again_and_the_spool_written_into_it(tmp_path, engines, spool_dir, caplog):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = engines(url)
    upgrade(engine)
    writer = quick_writer(engine, spool_dir)
    try:
        for index in range(5):
            writer.submit(make_record(index))
        assert writer.flush(10)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{_sqlite_file(url)}{suffix}").unlink(missing_ok=True)
        for index in range(5, 12):
            writer.submit(make_record(index))
        assert writer.flush(10)
        assert wait_until(lambda: _sqlite_file(url).exists() and not spool_files(spool_dir), 10)
    finally:
        assert writer.close()
    fresh = engines(url)
    assert sorted(exchange_ids(fresh)) == sorted(make_record(i).id for i in range(5, 12))
    assert "the store is gone" in caplog.text and "made the store again" in caplog.text
    assert not (spool_dir / "rejected.jsonl").exists()


def test_sqlite_tables_dropped_under_the_writer_are_migrated_again(tmp_path, engines, spool_dir, caplog):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = engines(url)
    upgrade(engine)
    writer = quick_writer(engine, spool_dir)
    try:
        writer.submit(make_record(0))
        assert writer.flush(10)
        with sqlite3.connect(_sqlite_file(url)) as raw:
            names = [n for (n,) in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            raw.execute("PRAGMA foreign_keys = OFF")
            for name in names:
                raw.execute(f'DROP TABLE "{name}"')
        for index in range(1, 6):
            writer.submit(make_record(index))
        assert writer.flush(10)
        assert wait_until(lambda: not spool_files(spool_dir), 10)
    finally:
        assert writer.close()
    assert sorted(exchange_ids(engines(url))) == sorted(make_record(i).id for i in range(1, 6))
    assert "the store is gone" in caplog.text
    assert not (spool_dir / "rejected.jsonl").exists()


def test_a_postgres_database_dropped_and_made_again_is_migrated(pg_url, engines, spool_dir, caplog):
    engine = engines(pg_url)
    upgrade(engine)
    writer = quick_writer(engine, spool_dir)
    name = make_url(pg_url).database
    admin = create_engine(make_url(pg_url).set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        writer.submit(make_record(0))
        assert writer.flush(10)
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        for index in range(1, 8):
            writer.submit(make_record(index))
        assert writer.flush(20)
        assert wait_until(lambda: not spool_files(spool_dir), 20)
    finally:
        assert writer.close()
        admin.dispose()
    assert sorted(exchange_ids(engine)) == sorted(make_record(i).id for i in range(1, 8))
    assert not (spool_dir / "rejected.jsonl").exists()  # spooled and written, not refused
    assert "the store is gone" in caplog.text


# -- 3. the rejected file: whole records, loaded back -------------------------------------------


class _Broken:
    """A decoder with a bug: `finish` raises."""

    def finish(self, interrupted: str | None) -> None:
        raise RuntimeError("a decoder bug")


def test_a_pending_record_that_cannot_be_finished_is_stored_with_its_who_and_when(store, spool_dir):
    pending = held(4)
    pending.decoder = _Broken()  # type: ignore[assignment]
    writer = quick_writer(store, spool_dir)
    writer.submit(pending)
    assert writer.close()
    with store.connect() as connection:
        row = connection.execute(select(schema.exchanges)).one()._mapping
    assert row["team"] == "team-held" and row["host"] == "api.anthropic.com" and row["status"] == 200
    assert "a decoder bug" in row["decode_error"]
    assert not (spool_dir / "rejected.jsonl").exists()


def _refuse_team(engine, team: str) -> None:
    """The store refuses one team's rows for their content (a constraint an administrator
    added), until the constraint is dropped."""
    with engine.begin() as connection:
        if engine.dialect.name == "postgresql":
            connection.execute(text(f"ALTER TABLE exchanges ADD CONSTRAINT refuse CHECK (team <> '{team}')"))
        else:
            connection.execute(
                text(
                    "CREATE TRIGGER refuse BEFORE INSERT ON exchanges "
                    f"WHEN NEW.team = '{team}' BEGIN SELECT RAISE(ABORT, 'refused'); END"
                )
            )


def _accept_all(engine) -> None:
    with engine.begin() as connection:
        if engine.dialect.name == "postgresql":
            connection.execute(text("ALTER TABLE exchanges DROP CONSTRAINT refuse"))
        else:
            connection.execute(text("DROP TRIGGER refuse"))


def test_rejected_lines_are_whole_records_that_import_loads_back_once(db_url, engines, spool_dir):
    engine = engines(db_url)
    upgrade(engine)
    _refuse_team(engine, "refused")
    writer = quick_writer(engine, spool_dir)
    records = [make_record(i) for i in range(6)]
    for record in records[:3]:
        record.team = "refused"
    for record in records:
        writer.submit(record)
    assert writer.close()
    assert writer.stats.rejected == 3
    path = spool_dir / "rejected.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(lines) == 3 and all("PendingExchange" not in json.dumps(line) for line in lines)
    for line in lines:
        (row,) = line["rows"]["exchanges"]
        assert row["team"] == "refused" and row["started_at"] and row["model"] == "claude-test"
    # and one line of the record form, as a record that could not become rows leaves it
    extra = make_record(9, text_value="kept whole")
    extra.started_at = extra.started_at.replace(microsecond=123456)
    with path.open("ab") as handle:
        handle.write(rejected.record_line(extra, "ValueError('a bug in rows_for')"))

    _accept_all(engine)
    loaded = llmtap("import", str(path), "--db", db_url)
    assert loaded.code == 0, loaded.err
    assert "imported 4 LLM exchanges (0 already stored)" in loaded.out
    assert sorted(exchange_ids(engine)) == sorted(r.id for r in [*records, extra])
    with engine.connect() as connection:
        row = connection.execute(select(schema.exchanges).where(schema.exchanges.c.id == extra.id)).one()._mapping
    assert row["text"] == "kept whole" and row["started_at"].replace(tzinfo=UTC) == extra.started_at
    assert count(engine, schema.tool_calls) == 3  # every third record has one: 0, 3 and 9
    again = llmtap("import", str(path), "--db", db_url)
    assert again.code == 0 and "(4 already stored)" in again.out
    assert len(exchange_ids(engine)) == 7


def test_a_line_of_an_older_rejected_file_is_skipped_in_one_line(tmp_path, db_url):
    path = tmp_path / "rejected.jsonl"
    path.write_text('{"error": "TypeError()", "exchange": "<PendingExchange object at 0x7f00>"}\n')
    done = llmtap("import", str(path), "--db", db_url)
    assert done.code == 0, done.err
    assert "imported 0 LLM exchanges" in done.out and "1 unreadable" in done.out
    assert "Traceback" not in done.err


# -- 4. records left in the spool are reported ---------------------------------------------------


def test_close_reports_the_records_still_in_the_spool(tmp_path, engines, spool_dir, caplog):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = engines(url)
    upgrade(engine)
    writer = quick_writer(engine, spool_dir)
    with sqlite_exclusive(url):
        for index in range(14):
            writer.submit(make_record(index))
        assert writer.close()
    assert writer.stats.spooled == 14
    assert f"llmtap: 14 records are still in the spool at {spool_dir}; they are written when" in caplog.text
