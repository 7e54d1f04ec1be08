"""The writer under faults (SPEC §6): a locked SQLite file, a PostgreSQL connection cut
mid-load, a process killed between batches or stopped with SIGTERM, two writers on one
database, retried exchanges. Every record ends up stored exactly once."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.engine import make_url

from llmtap.storage import schema
from llmtap.storage.migrate import upgrade
from llmtap.storage.writer import Writer
from tests.storage.helpers import (
    ROOT,
    Forwarder,
    LockInThread,
    count,
    exchange_ids,
    make_record,
    record_id,
    spool_files,
    sqlite_exclusive,
    wait_until,
)

pytestmark = pytest.mark.timeout(120)


def quick_writer(engine: Engine, spool_dir: Path, **kwargs) -> Writer:
    options = {"batch_size": 50, "max_delay": 0.02, "retry_initial": 0.05, "retry_max": 0.2} | kwargs
    return Writer(engine, spool_dir=spool_dir, **options)


def assert_exactly_once(engine: Engine, expected_ids: list[str]) -> None:
    ids = exchange_ids(engine)
    assert len(ids) == len(set(ids))
    assert sorted(ids) == sorted(expected_ids)
    with engine.connect() as connection:
        calls = connection.execute(
            select(schema.tool_calls.c.exchange_id, func.count()).group_by(schema.tool_calls.c.exchange_id)
        ).all()
    assert all(n == 1 for _, n in calls)
    assert len(calls) == sum(1 for i in expected_ids if int(i[1:]) % 3 == 0)


def drained(engine: Engine, spool_dir: Path, expected: int) -> Callable[[], bool]:
    return lambda: count(engine) >= expected and not spool_files(spool_dir)


# -- (a) SQLite locked -----------------------------------------------------------------------


def test_sqlite_lock_spools_then_replays_exactly_once(tmp_path, engines, spool_dir):
    url = f"sqlite:///{tmp_path / 'locked.db'}"
    upgrade(engines(url))
    engine = engines(url, busy_timeout_ms=50)
    writer = quick_writer(engine, spool_dir)
    lock = LockInThread(url, hold=1.0)
    total = 2000
    try:
        for i in range(total):
            if i == 300:
                lock.start()
            writer.submit(make_record(i))
            if i % 50 == 49:
                time.sleep(0.02)  # ~0.8 s of load, most of it under the lock
        assert writer.flush(timeout=30)
        assert writer.stats.spooled > 0, "the lock never pushed a batch to the spool"
        assert lock.released.wait(10)
        assert wait_until(drained(engine, spool_dir, total), timeout=20)
    finally:
        assert writer.close()
    assert_exactly_once(engine, [record_id("R", i) for i in range(total)])
    assert not spool_files(spool_dir)
    assert not (spool_dir / "rejected.jsonl").exists()


def test_close_replays_what_waits_in_the_spool(tmp_path, engines, spool_dir):
    """A writer closed as soon as it opens still writes what an earlier one spooled."""
    url = f"sqlite:///{tmp_path / 'closing.db'}"
    upgrade(engines(url))
    engine = engines(url, busy_timeout_ms=50)
    with sqlite_exclusive(url):
        writer = quick_writer(engine, spool_dir)
        for i in range(120):
            writer.submit(make_record(i))
        assert writer.close()
        assert writer.stats.spooled == 120 and spool_files(spool_dir)
    fresh = quick_writer(engine, spool_dir, max_delay=30)  # never idle before close
    assert fresh.close()
    assert_exactly_once(engine, [record_id("R", i) for i in range(120)])
    assert not spool_files(spool_dir)


# -- (b) PostgreSQL connection cut -----------------------------------------------------------


def test_postgres_connection_cut_mid_load(pg_url, engines, spool_dir):
    upgrade(engines(pg_url))
    target = make_url(pg_url)
    forwarder = Forwarder((target.host or "127.0.0.1", target.port or 5432))
    forwarder.start()
    via = target.set(host="127.0.0.1", port=forwarder.port).render_as_string(hide_password=False)
    engine = engines(via)
    writer = quick_writer(engine, spool_dir)
    total = 2000
    try:
        for i in range(total):
            if i == 500:
                assert wait_until(lambda: writer.stats.written > 0, timeout=10)
                forwarder.stop()  # refuse new connections, reset the pooled ones
            if i == 1300:
                forwarder.start()
            writer.submit(make_record(i))
            if i % 50 == 49:
                time.sleep(0.02)
        assert writer.flush(timeout=60)
        assert writer.stats.spooled > 0 and writer.stats.db_errors > 0
        assert wait_until(drained(engine, spool_dir, total), timeout=30)
    finally:
        closed = writer.close()
        forwarder.stop()
    assert closed
    assert_exactly_once(engines(pg_url), [record_id("R", i) for i in range(total)])
    assert not spool_files(spool_dir)


# -- writers in processes of their own -------------------------------------------------------


class Child:
    """`python -m tests.storage.writer_child …`, its stdout read line by line on a thread."""

    def __init__(self, mode: str, url: str, spool: Path | str, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.storage.writer_child", mode, url, str(spool), *args],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.err: list[str] = []
        threading.Thread(target=self._read, args=(self.process.stdout, self.lines.put), daemon=True).start()
        threading.Thread(target=self._read, args=(self.process.stderr, self.err.append), daemon=True).start()

    @staticmethod
    def _read(stream, put) -> None:
        with stream:
            for line in stream:
                put(line)
        put(None)

    def line(self, timeout: float = 30) -> str:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            line = None
        if line is None:
            self.process.kill()
            self.process.wait(10)
            stderr = "".join(e for e in self.err if e)[-3000:]
            raise AssertionError(f"the child said nothing more (exit {self.process.returncode}): {stderr}")
        return line.strip()

    def send(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text)
        self.process.stdin.flush()

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def wait(self, timeout: float = 30) -> int:
        code = self.process.wait(timeout)
        if self.process.stdin:
            self.process.stdin.close()
        return code


def replay_with_fresh_writer(engine: Engine, spool_dir: Path, expected: int) -> None:
    writer = quick_writer(engine, spool_dir)
    try:
        assert wait_until(lambda: not spool_files(spool_dir), timeout=30)
    finally:
        assert writer.close()
    assert count(engine) >= expected


# -- (c) SIGKILL between batches -------------------------------------------------------------


def kill_after_acks(url: str, spool_dir: Path, at_least: int) -> int:
    """Run an `ack` child, SIGKILL it once it acknowledged `at_least` records; returns
    the last acknowledged count."""
    process = Child("ack", url, str(spool_dir), "--batch", "40", "--busy-ms", "50")
    acked = 0
    while acked < at_least:
        line = process.line()
        assert line.startswith("ACK "), line
        acked = int(line.split()[1])
    process.signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL
    return acked


def assert_acked_stored(engine: Engine, acked: int) -> None:
    ids = exchange_ids(engine)
    assert len(ids) == len(set(ids))
    assert {record_id("K", i) for i in range(acked)} <= set(ids)


def test_sigkill_between_batches_loses_no_acked_record(db_url, engines, spool_dir):
    engine = engines(db_url)
    upgrade(engine)
    acked = kill_after_acks(db_url, spool_dir, 200)
    replay_with_fresh_writer(engine, spool_dir, acked)
    assert_acked_stored(engine, acked)
    assert not spool_files(spool_dir)


def test_sigkill_while_locked_keeps_acked_records_in_the_spool(tmp_path, engines, spool_dir):
    url = f"sqlite:///{tmp_path / 'killed.db'}"
    engine = engines(url)
    upgrade(engine)
    with sqlite_exclusive(url):
        acked = kill_after_acks(url, spool_dir, 200)
        assert spool_files(spool_dir), "a locked database should have sent the batches to the spool"
    replay_with_fresh_writer(engine, spool_dir, acked)
    assert_acked_stored(engine, acked)
    assert not spool_files(spool_dir)


# -- (d) SIGTERM -----------------------------------------------------------------------------


def test_sigterm_closes_and_keeps_every_submitted_record(db_url, engines, spool_dir):
    engine = engines(db_url)
    upgrade(engine)
    process = Child("term", db_url, spool_dir)
    assert process.line() == "READY"
    assert wait_until(lambda: count(engine) >= 300, timeout=30)
    process.signal(signal.SIGTERM)
    line = process.line(timeout=60)
    assert process.wait() == 0
    assert line.startswith("SUBMITTED "), line
    _, submitted, _, closed = line.split()
    submitted = int(submitted)
    assert closed == "True"
    replay_with_fresh_writer(engine, spool_dir, submitted)
    assert_acked_stored(engine, submitted)
    assert not spool_files(spool_dir)


# -- (e) two writer processes on one PostgreSQL database -------------------------------------


def test_two_writer_processes_store_the_union_once(pg_url, engines, tmp_path):
    engine = engines(pg_url)
    upgrade(engine)
    shared = 300
    common = ("--shared", str(shared))
    # Both start on the same records at the same moment: row locks, and perhaps deadlocks.
    first = Child("overlap", pg_url, tmp_path / "spool-a", "--ranges", "600:1200,0:600", "--prefix", "A", *common)
    second = Child("overlap", pg_url, tmp_path / "spool-b", "--ranges", "600:1200,1200:1800", "--prefix", "B", *common)
    for process in (first, second):
        process.send("go\n")
    said = []
    for process in (first, second):
        line = process.line(timeout=90)
        assert line.startswith("DONE ") and "CLOSED True" in line, line
        assert process.wait() == 0
        words = line.split()
        said.append({name: int(value) for name, value in zip(words[::2], words[1::2], strict=True) if value.isdigit()})
    # The shared records are each proxy's own capture of a response with the same id: each
    # is stored (SPEC §6); the overlapping range has the same ids, and is stored once.
    if not any(s["SPOOLED"] for s in said):  # each record was written by exactly one of them
        assert sum(s["WRITTEN"] for s in said) == 1800 + 2 * shared
        assert sum(s["DUPLICATES"] for s in said) == 600
    for folder in (tmp_path / "spool-a", tmp_path / "spool-b"):
        replay_with_fresh_writer(engine, folder, 0)
    ids = exchange_ids(engine)
    assert len(ids) == len(set(ids)) == 1800 + 2 * shared
    assert {record_id("O", i) for i in range(1800)} <= set(ids)
    with engine.connect() as connection:
        responses = connection.execute(
            select(func.count(), func.count(schema.exchanges.c.response_id.distinct())).where(
                schema.exchanges.c.response_id.like("msg_shared_%")
            )
        ).one()
        orphans = connection.execute(
            select(func.count())
            .select_from(schema.tool_calls)
            .where(~schema.tool_calls.c.exchange_id.in_(select(schema.exchanges.c.id)))
        ).scalar_one()
    assert tuple(responses) == (2 * shared, shared)
    assert orphans == 0


# -- (f) a retried exchange ------------------------------------------------------------------


def test_retried_exchange_is_stored_once(store, spool_dir):
    """The same record (its id) again is one; records that only share a provider response
    id are not the same exchange (tests/storage/test_exactly_once.py)."""
    writer = quick_writer(store, spool_dir)
    try:
        first = make_record(3, prefix="F", response_id="msg_retried")
        writer.submit(first)
        writer.submit(first)  # the same batch
        assert writer.flush(timeout=10)
        writer.submit(first)  # a later batch
        assert writer.flush(timeout=10)
    finally:
        assert writer.close()
    assert exchange_ids(store) == [first.id]
    assert count(store, schema.tool_calls) == 1
    assert writer.stats.written == 1 and writer.stats.duplicates == 2
