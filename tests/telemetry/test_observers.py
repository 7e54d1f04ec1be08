"""A telemetry part that cannot start never stops recording: it is logged and left out,
and a writer whose observers cannot be made at all writes without them."""

from __future__ import annotations

import functools
import logging
from pathlib import Path

from llmtap.storage import migrate
from llmtap.storage.engine import make_engine
from llmtap.storage.writer_process import WriterSpec
from llmtap.telemetry import budgets, metrics, observers
from llmtap.telemetry.settings import Telemetry
from tests.storage.helpers import count, make_record


def _broken(_telemetry: Telemetry) -> None:
    raise OSError("no room for the counter files")


def test_a_part_that_fails_to_start_is_left_out(tmp_path: Path, monkeypatch, caplog) -> None:
    monkeypatch.setattr(metrics, "observer", _broken)
    made = []
    monkeypatch.setattr(budgets, "observer", lambda telemetry: made.append(telemetry) or "budget observer")
    telemetry = Telemetry(
        db_url="sqlite://",
        spool_dir=tmp_path,
        metrics=object(),
        budgets=object(),  # type: ignore[arg-type]
    )
    with caplog.at_level(logging.ERROR, logger="llmtap.telemetry"):
        assert observers.build(telemetry) == ["budget observer"]
    assert "metrics could not start" in caplog.text and made == [telemetry]


def _factory_that_raises() -> list:
    raise RuntimeError("broken set-up")


def test_a_writer_whose_observers_cannot_be_made_still_writes(tmp_path: Path, caplog) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = make_engine(url)
    migrate.upgrade(engine)
    spec = WriterSpec(url=url, spool_dir=tmp_path / "spool", observers_factory=functools.partial(_factory_that_raises))
    with caplog.at_level(logging.ERROR, logger="llmtap.storage"):
        writer = spec.open()
    try:
        assert writer.observers == ()
        for index in range(3):
            writer.submit(make_record(index))
    finally:
        assert writer.close()
    assert count(engine) == 3 and "observers could not start" in caplog.text
    engine.dispose()
