"""The writer in a process of its own (`WriterProcess`): real child processes, real
databases. Every record submitted is stored exactly once when the child works, when it is
killed mid-way (a new one gets what it had not settled), when it cannot start at all (a
writer thread takes over), and when the parent itself is killed (the child writes what it
holds and exits)."""

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
from llmtap.storage.writer_process import RESTARTS, WriterProcess, WriterSpec
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


def spec(url: str, tmp_path: Path, **kwargs) -> WriterSpec:
    return WriterSpec(url=url, spool_dir=tmp_path / "spool", max_delay=kwargs.pop("max_delay", 0.02), **kwargs)


@pytest.fixture
def store(db_url: str, engines):
    from llmtap.storage.migrate import upgrade

    engine = engines(db_url)
    upgrade(engine)
    return db_url, engine


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


def test_a_record_that_will_not_pickle_is_finished_here(tmp_path: Path, engines) -> None:
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
    assert count(engine) == 2
    assert writer.stats.rejected == 1


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie still answers kill(0): check its state
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
