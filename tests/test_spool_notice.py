"""A report, the log and the dashboard say so when records wait in the spool (issue 24):
figures read while the database was away leave out what the proxy spooled, and said
nothing of it. One line on stderr, naming how many and where; none once a command that
writes has put them in the store.

Not responsible for the spool itself (tests/storage/test_writer_faults.py) or for the
proxy's own exit line (tests/e2e/test_store_trust.py -k spool).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmtap.storage import spool
from llmtap.storage.engine import make_engine
from llmtap.storage.rows import rows_for
from tests.helpers import llmtap
from tests.storage.helpers import count, make_record

READERS = (("report", "usage"), ("log",))


@pytest.fixture
def spooled(tmp_path: Path) -> dict[str, str]:
    """A store with nothing in it, and three records in its spool, as the writer spools them."""
    folder = tmp_path / "spool"
    pool = spool.Spool(folder)
    for n in range(3):
        pool.append(rows_for(make_record(n)))
    pool.close()
    empty = tmp_path / "empty.har"
    empty.write_text(json.dumps({"log": {"version": "1.2", "entries": []}}))
    return {"LLMTAP_SPOOL": str(folder), "db": f"sqlite:///{tmp_path / 'store.db'}", "har": str(empty)}


def _notice(err: str) -> list[str]:
    return [line for line in err.splitlines() if "wait in the spool" in line]


@pytest.mark.parametrize("command", READERS, ids=" ".join)
def test_a_reader_says_what_waits_in_the_spool(spooled, command):
    result = llmtap(*command, "--db", spooled["db"], env={"LLMTAP_SPOOL": spooled["LLMTAP_SPOOL"]})
    line = f"llmtap: 3 records wait in the spool at {spooled['LLMTAP_SPOOL']} and are not in the store yet"
    assert [x.split(" (", 1)[0] for x in _notice(result.err)] == [line], result.err


def test_the_dashboard_says_it_and_nothing_once_they_are_stored(spooled, tmp_path):
    env = {"LLMTAP_SPOOL": spooled["LLMTAP_SPOOL"]}
    html = str(tmp_path / "d.html")
    result = llmtap("dashboard", "-o", html, "--db", spooled["db"], env=env, process=True)
    assert result.code == 0, result.err
    assert len(_notice(result.err)) == 1, result.err

    # a command that writes (here an import of nothing) replays the spool into the store
    assert llmtap("import", spooled["har"], "--db", spooled["db"], env=env).code == 0
    for command in READERS:
        after = llmtap(*command, "--db", spooled["db"], env=env)
        assert _notice(after.err) == [], after.err
    engine = make_engine(spooled["db"])
    try:
        assert count(engine) == 3
    finally:
        engine.dispose()
