"""`RecordSink` (storage/sink.py) is what the proxy and the CLI hold: the in-process
`Writer` and the `WriterProcess` both offer each of its members, with its signature, and
the same calls through it store the same records, whichever one is behind it. (mypy holds
the two to it statically too: `_both_are_sinks` in storage/writer_process.py.)"""

from __future__ import annotations

import inspect
import typing
from pathlib import Path

import pytest

from llmtap.storage.engine import make_engine
from llmtap.storage.migrate import upgrade
from llmtap.storage.sink import RecordSink, WriterStats
from llmtap.storage.writer import Writer
from llmtap.storage.writer_process import WriterProcess, WriterSpec
from tests.storage.helpers import count, make_record

METHODS = ("submit", "flush", "close")
PROPERTIES = {"stats": WriterStats, "backlog": int, "body_mode": str}


def test_the_protocol_is_what_the_proxy_and_the_cli_call() -> None:
    assert RecordSink.__protocol_attrs__ == set(METHODS) | set(PROPERTIES)


@pytest.mark.parametrize("name", METHODS)
@pytest.mark.parametrize("implementation", [Writer, WriterProcess], ids=["Writer", "WriterProcess"])
def test_each_writer_has_each_method_with_the_protocols_signature(implementation: type, name: str) -> None:
    wanted = inspect.signature(getattr(RecordSink, name))
    found = inspect.signature(getattr(implementation, name))
    assert [(p.name, p.kind, p.default) for p in found.parameters.values()] == [
        (p.name, p.kind, p.default) for p in wanted.parameters.values()
    ]
    # each in its own module's names: a method's annotations resolve where it is defined
    assert typing.get_type_hints(getattr(implementation, name)) == typing.get_type_hints(getattr(RecordSink, name))


def _through_the_protocol(into: RecordSink, records: int) -> tuple[bool, bool, int, WriterStats, str]:
    """What the proxy and the CLI do with a writer, and only that."""
    for index in range(records):
        into.submit(make_record(index))
    flushed = into.flush(timeout=60)
    backlog = into.backlog
    closed = into.close()
    return flushed, closed, backlog, into.stats, into.body_mode


def test_the_same_calls_through_either_writer_store_the_same(tmp_path: Path) -> None:
    results = {}
    for name in ("thread", "process"):
        url = f"sqlite:///{tmp_path / name}.db"
        engine = make_engine(url)
        try:
            upgrade(engine)
            spool_dir = tmp_path / f"{name}-spool"
            opened: RecordSink = (
                Writer(engine, spool_dir=spool_dir, max_delay=0.02)
                if name == "thread"
                else WriterProcess(WriterSpec(url=url, spool_dir=spool_dir, max_delay=0.02))
            )
            for member, kind in PROPERTIES.items():
                assert isinstance(getattr(opened, member), kind), member
            results[name] = _through_the_protocol(opened, 7)
            assert count(engine) == 7
        finally:
            engine.dispose()
    for flushed, closed, backlog, stats, body_mode in results.values():
        assert (flushed, closed, backlog, body_mode) == (True, True, 0, "metadata")
        assert (stats.submitted, stats.written, stats.settled) == (7, 7, 7)
