"""The writer in a process of its own (`WriterProcess`): real child processes, real
databases. Every record submitted is stored exactly once when the child works, when it is
killed mid-way (a new one gets what it had not settled), when it cannot start at all (a
writer thread takes over, and never builds a record), and when the parent itself is killed
(the child writes what it holds and exits). A record whose build overruns its deadline or
memory bound, or takes the child down, is stored quarantined and stops nothing behind it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from llmtap.addon.tee import PendingExchange
from llmtap.storage import schema
from llmtap.storage.errors import StoreError
from llmtap.storage.record import Recorded
from llmtap.storage.shipped import identified, quarantined
from llmtap.storage.writer_process import RESTARTS, WriterProcess, WriterSpec
from llmtap.workloads.costly_requests import bloating_request
from tests.storage.helpers import ROOT, count, held_exchange, make_record, wait_until

ANTHROPIC_JSON = (
    b'{"id": "msg_held_%d", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",'
    b' "content": [{"type": "text", "text": "hello"}], "stop_reason": "end_turn",'
    b' "usage": {"input_tokens": 12, "output_tokens": 3}}'
)
REQUEST = b'{"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}'


def held(index: int) -> PendingExchange:
    """What the proxy hands over for a small JSON answer: metadata and the raw body."""
    return held_exchange(index, request=REQUEST, answer=ANTHROPIC_JSON % index)


class Endless(PendingExchange):
    """A record whose build never ends, and holds the GIL all along (Python's backtracking
    `re` on a hostile pattern): only something outside the interpreter can stop it."""

    __slots__ = ()

    def __reduce__(self):
        return (Endless, (None, self.meta, None, self.body))

    def build(self):
        re.fullmatch(r"(a|a)*b", "a" * 64)
        raise AssertionError("it ended")


def endless(index: int) -> Endless:
    pending = held_exchange(index, request=REQUEST, answer=ANTHROPIC_JSON % index, team="team-bad")
    return Endless(None, pending.meta, None, body=pending.body)


def bloated(index: int) -> PendingExchange:
    """A legitimate request that swells to ~400 MB while it is built (15 MB of `{}`)."""
    return held_exchange(index, request=bloating_request(15), answer=ANTHROPIC_JSON % index, team="team-bad")


def rows(engine) -> list[dict]:
    with engine.connect() as connection:
        return [dict(row._mapping) for row in connection.execute(select(schema.exchanges))]


def the_bad_one(engine, total: int) -> dict:
    """The one `team-bad` row, once every row is in; the others decoded, each id once."""
    found = rows(engine)
    assert len(found) == total and len({row["id"] for row in found}) == total
    assert {row["decode_error"] for row in found if row["team"] != "team-bad"} == {None}
    (bad,) = [row for row in found if row["team"] == "team-bad"]
    assert (bad["host"], bad["path"], bad["status"], bad["protocol"]) == (
        "api.anthropic.com", "/v1/messages", 200, "anthropic.messages"
    )  # fmt: skip
    return bad


def spec(url: str, tmp_path: Path, **kwargs) -> WriterSpec:
    return WriterSpec(url=url, spool_dir=tmp_path / "spool", max_delay=kwargs.pop("max_delay", 0.02), **kwargs)


@pytest.fixture
def store(db_url: str, engines):
    from llmtap.storage.migrate import upgrade

    engine = engines(db_url)
    upgrade(engine)
    return db_url, engine


@pytest.fixture
def sqlite_store(tmp_path: Path, engines):
    """For what does not depend on the database: the watchdog's tests run on SQLite only."""
    from llmtap.storage.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = engines(url)
    upgrade(engine)
    return url, engine


def test_records_and_pending_exchanges_are_written_by_the_child(store, tmp_path: Path) -> None:
    url, engine = store
    writer = WriterProcess(spec(url, tmp_path))
    pid = writer.child_pid
    for index in range(150):
        writer.submit(make_record(index))
        writer.submit(held(index))
    assert writer.flush(60)
    assert count(engine) == 300  # flushed means stored, before close
    assert writer.close()
    stats = writer.stats
    assert (stats.submitted, stats.written, stats.spooled) == (300, 300, 0)
    assert pid is not None and _gone(pid)
    teams = {team for (team,) in engine.connect().execute(select(schema.exchanges.c.team)).all()}
    assert teams == {"team-a", "team-held"}
    usage = engine.connect().execute(
        select(schema.exchanges.c.usage_input_tokens).where(schema.exchanges.c.team == "team-held")
    )
    assert {value for (value,) in usage} == {12}


def test_a_killed_child_is_replaced_and_nothing_is_lost(store, tmp_path: Path, caplog) -> None:
    url, engine = store
    writer = WriterProcess(spec(url, tmp_path, max_delay=0.5))  # the child holds a batch 0.5 s
    for index in range(200):
        writer.submit(make_record(index))
    assert writer.flush(60)
    first = writer.child_pid
    for index in range(200, 500):  # fewer than a batch (500): the window is waited out
        writer.submit(make_record(index))
    time.sleep(0.3)  # shipped, not settled: the child is waiting out its batch window
    os.kill(first, signal.SIGKILL)
    for index in range(500, 900):
        writer.submit(make_record(index))
    assert writer.close(120)
    assert count(engine) == 900
    assert writer.child_pid is None and writer.stats.submitted == 900
    # The 300 shipped and unsettled are resent; so is whatever of the next 400 was shipped to
    # the dead child before its death was seen (on a loaded machine, most of them).
    resent = [int(n) for n in re.findall(r"resending (\d+) records", caplog.text)]
    assert len(resent) == 1 and 300 <= resent[0] <= 700, caplog.text


def test_a_child_that_cannot_start_hands_over_to_a_thread(tmp_path: Path, engines) -> None:
    from llmtap.storage.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = engines(url)
    upgrade(engine)
    broken = [sys.executable, "-c", "import sys; sys.exit(3)"]
    writer = WriterProcess(spec(url, tmp_path), command=broken)
    for index in range(50):
        writer.submit(make_record(index))
    assert writer.flush(60)
    assert writer.close()
    assert count(engine) == 50
    assert len(writer._deaths) == RESTARTS


def test_the_child_outlives_a_killed_parent_long_enough_to_write_what_it_holds(tmp_path: Path, engines) -> None:
    """SIGKILL the proxy: the records it had shipped are the child's to write."""
    from llmtap.storage.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(engines(url))
    script = textwrap.dedent(f"""
        import os, signal, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from pathlib import Path
        from llmtap.storage.writer_process import WriterProcess, WriterSpec
        from tests.storage.helpers import make_record
        # a batch window longer than the test: the child still holds every record
        writer = WriterProcess(WriterSpec(url={url!r}, spool_dir=Path({str(tmp_path / "spool")!r}), max_delay=30))
        for index in range(120):
            writer.submit(make_record(index))
        time.sleep(1.5)
        print(writer.child_pid, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    parent = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert parent.returncode == -signal.SIGKILL, parent.stderr
    child = int(parent.stdout.split()[-1])
    engine = engines(url)
    assert wait_until(lambda: count(engine) == 120, timeout=30), count(engine)
    assert wait_until(lambda: _gone(child), timeout=30)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_to_the_group_reaches_the_child_but_does_not_stop_it(tmp_path: Path, engines, sig) -> None:
    """A terminal's Ctrl-C signals the whole process group, a service manager's stop every
    process of the service; the parent decides when the child stops (by closing the pipe,
    once it has handed everything over)."""
    from llmtap.storage.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = engines(url)
    upgrade(engine)
    writer = WriterProcess(spec(url, tmp_path))
    writer.submit(make_record(0))
    assert writer.flush(60)
    os.kill(writer.child_pid, sig)
    for index in range(1, 40):
        writer.submit(make_record(index))
    assert writer.close()
    assert count(engine) == 40
    assert len(writer._deaths) == 0


def test_a_record_that_will_not_pickle_is_salvaged_here_never_built(tmp_path: Path, engines) -> None:
    """This process never builds a record (it could be hostile): one that cannot be shipped
    is stored from what is known without decoding it."""
    from llmtap.storage.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = engines(url)
    upgrade(engine)

    class Unpicklable(PendingExchange):
        __slots__ = ("hook",)

        def __reduce__(self):
            raise TypeError("not today")

    class Hopeless(Unpicklable):
        __slots__ = ()

        def build(self):
            raise AssertionError("built in the proxy's process")

        def salvage(self, error, *, bodies=False):
            raise RuntimeError("nor this")

    item = Unpicklable(None, held(7).meta, None, body=ANTHROPIC_JSON % 7)
    item.hook = lambda: None
    hopeless = Hopeless(None, held(9).meta, None, body=b"{}")
    writer = WriterProcess(spec(url, tmp_path))
    writer.submit(item)
    writer.submit(hopeless)  # logged and counted, and flush() does not wait for it forever
    writer.submit(held(8))
    assert writer.flush(30)
    assert writer.close()
    found = rows(engine)
    assert len(found) == 2
    assert writer.stats.rejected == 1
    (salvaged,) = [row for row in found if row["decode_error"]]
    assert salvaged["decode_error"].startswith("the record could not be sent to the writer process")
    assert salvaged["decode_error"].endswith("stored undecoded")


# -- the watchdog on each record's build ----------------------------------------------------------


class Watched(PendingExchange):
    """Notes, in a file, every process that builds it."""

    __slots__ = ("note",)

    def __init__(self, pending: PendingExchange, note: Path) -> None:
        super().__init__(pending.decoder, pending.meta, pending.interrupted, pending.body)
        self.note = note

    def __reduce__(self):
        return (Watched, (PendingExchange(self.decoder, self.meta, self.interrupted, self.body), self.note))

    def build(self):
        with self.note.open("a") as handle:
            handle.write(f"{os.getpid()}\n")
        return super().build()


def test_a_record_whose_build_overruns_its_deadline_is_quarantined_and_the_rest_are_written(
    sqlite_store, tmp_path: Path, caplog
) -> None:
    url, engine = sqlite_store
    writer = WriterProcess(spec(url, tmp_path, record_seconds=0.3))
    for index in range(10):
        writer.submit(held(index))
    writer.submit(endless(10))
    for index in range(11, 60):
        writer.submit(held(index))
    assert writer.close(120)
    bad = the_bad_one(engine, 60)
    assert bad["decode_error"] == "record build exceeded 0.3 s of CPU time; stored undecoded (quarantined)"
    assert bad["team"] == "team-bad" and bad["complete"] is False
    assert writer.restarts == 1 and not writer._deaths  # the record's fault: no step towards a writer thread
    assert "quarantined" in caplog.text


def test_a_writer_process_killed_while_building_a_record_quarantines_that_record(sqlite_store, tmp_path: Path) -> None:
    """The kernel's OOM killer, or anything else, ends the child mid-build: that record is
    not resent to be built again (into another crash), the ones behind it are."""
    url, engine = sqlite_store
    writer = WriterProcess(spec(url, tmp_path))
    writer.submit(held(0))
    assert writer.flush(60)
    writer.submit(endless(1))
    for index in range(2, 30):
        writer.submit(held(index))
    assert wait_until(lambda: writer.building is not None, 30)
    os.kill(writer.child_pid, signal.SIGKILL)
    assert writer.close(120)
    bad = the_bad_one(engine, 30)
    assert bad["decode_error"] == (
        "the writer process was killed (SIGKILL) while building this record; stored undecoded (quarantined)"
    )
    assert writer.restarts == 1 and not writer._deaths


def test_a_build_past_the_memory_bound_is_quarantined(sqlite_store, tmp_path: Path) -> None:
    url, engine = sqlite_store
    writer = WriterProcess(spec(url, tmp_path, record_memory_mb=100))
    writer.submit(held(0))
    writer.submit(bloated(1))
    for index in range(2, 20):
        writer.submit(held(index))
    assert writer.close(120)
    error = the_bad_one(engine, 20)["decode_error"]
    assert "ran out of memory" in error and "bound: 100 MiB" in error, error
    assert error.endswith("stored undecoded (quarantined)"), error
    assert not writer._deaths


def test_a_record_that_fails_again_as_quarantined_is_stored_from_what_the_proxy_knew() -> None:
    """The second death on one record: this process stores who, when and where of it, never
    its bodies, and never sends it to be built again. Its id is the one every child made."""
    (item,) = identified([held(3)])
    first = quarantined(item, "record build exceeded 1 s of CPU time; stored undecoded (quarantined)")
    assert not isinstance(first, Recorded)  # the next child salvages it, bodies and all
    second = quarantined(first, "the writer process was killed (SIGKILL) while building this record")
    assert isinstance(second, Recorded)
    assert second.exchange.decode_error == (
        "the writer process was killed (SIGKILL) while building this record; stored undecoded (quarantined)"
    )
    assert (second.team, second.host, second.request_body, second.response_body) == (
        "team-held", "api.anthropic.com", None, None
    )  # fmt: skip
    assert second.id == item.build().id


def test_the_writer_thread_never_builds_a_record_in_this_process(tmp_path: Path, engines) -> None:
    """After the child failed to start RESTARTS times, records are stored from what is
    known without decoding them: a hostile one must not take this process down."""
    from llmtap.storage.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = engines(url)
    upgrade(engine)
    note = tmp_path / "built-by"
    writer = WriterProcess(spec(url, tmp_path), command=[sys.executable, "-c", "import sys; sys.exit(3)"])
    for index in range(20):
        writer.submit(Watched(held(index), note))
        writer.submit(make_record(index))
    assert writer.flush(60)
    assert writer.close()
    assert not note.exists()  # built nowhere
    found = rows(engine)
    assert len(found) == 40
    errors = {row["decode_error"] for row in found if row["team"] == "team-held"}
    assert errors == {"the writer process kept exiting (status 3); stored undecoded"}


def test_a_close_that_times_out_says_what_is_where(sqlite_store, tmp_path: Path, caplog) -> None:
    url, engine = sqlite_store
    writer = WriterProcess(spec(url, tmp_path, record_seconds=1))
    writer.submit(endless(0))
    for index in range(1, 6):
        writer.submit(held(index))
    assert wait_until(lambda: writer.building is not None, 30)
    pid = writer.child_pid
    assert not writer.close(0.5)
    assert (
        f"llmtap: the writer did not finish within 0.5 s: 6 records are not written yet, 6 of them with the writer "
        f"process (pid {pid}), which goes on writing them; 0 not handed over (lost when this process exits)"
    ) in caplog.text
    assert wait_until(lambda: count(engine) == 6, 60)  # as it said


def test_the_proxy_side_watchdog_stops_a_build_that_the_cpu_timer_cannot(sqlite_store, tmp_path: Path) -> None:
    """A child whose CPU-time signal is blocked (or caught) does not escape its deadline:
    the parent watches the progress slot by the wall clock too."""
    url, engine = sqlite_store
    blocked = [
        sys.executable,
        "-c",
        "import signal, sys; signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPROF});"
        " from llmtap.storage.writer_child import child_main; sys.exit(child_main())",
    ]
    writer = WriterProcess(spec(url, tmp_path, record_seconds=0.1), command=blocked)
    writer.submit(endless(0))
    for index in range(1, 10):
        writer.submit(held(index))
    assert writer.close(120)
    error = the_bad_one(engine, 10)["decode_error"]
    assert error == "record build ran past 3 s (its deadline: 0.1 s of CPU time); stored undecoded (quarantined)"


@pytest.mark.parametrize(
    ("name", "value"),
    [("LLMTAP_RECORD_DEADLINE", "soon"), ("LLMTAP_RECORD_DEADLINE", "0"), ("LLMTAP_RECORD_MEMORY", "-5")],
)
def test_a_bad_bound_in_the_environment_is_one_line(monkeypatch, tmp_path: Path, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(StoreError, match=f"^{name} must be a number above 0, not '{value}'$"):
        WriterSpec(url="sqlite://", spool_dir=tmp_path)


def test_the_bounds_come_from_the_environment(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv("LLMTAP_RECORD_DEADLINE", raising=False)
    monkeypatch.delenv("LLMTAP_RECORD_MEMORY", raising=False)
    made = WriterSpec(url="sqlite://", spool_dir=tmp_path)
    assert (made.record_seconds, made.record_memory_mb) == (30.0, 2048)
    monkeypatch.setenv("LLMTAP_RECORD_DEADLINE", "2.5")
    monkeypatch.setenv("LLMTAP_RECORD_MEMORY", "512")
    made = WriterSpec(url="sqlite://", spool_dir=tmp_path)
    assert (made.record_seconds, made.record_memory_mb) == (2.5, 512)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie still answers kill(0): check its state
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
