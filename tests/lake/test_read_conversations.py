"""`report conversations` over a lake gives what the query before it gave (the first
exchange's columns carried through the GROUP BY: tests/analytics/test_conversations_first.py's
ORACLE_SQL) over the same lake, for every window and --top tried: its lookup of the first
exchanges reads every day of the lake, as the GROUP BY does, whatever --since says.

Two lakes of the same store: bent (a first exchange deleted, another moved to another
conversation) before `lake sync`, so the lake alone holds the result; and bent after it,
so the deletion is a tombstone and the move a row of the store's tail.

Not responsible for the report over the store (test_conversations_first.py) or for the
figures (tests/analytics/test_conversations.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from llmtap.analytics.duck import connect
from tests.analytics.conftest import BACKENDS, blank_database
from tests.analytics.test_conversations_first import assert_as_before, bend, fill_store
from tests.lake import read_lake


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bent", ["before the sync", "after the sync"])
def test_the_first_exchanges_over_a_lake_are_what_they_were(backend: str, bent: str, tmp_path: Path) -> None:
    with blank_database(backend, tmp_path) as url:
        hand = fill_store(url, tmp_path)
        if bent == "before the sync":
            changed = bend(url, hand)
            read_lake.sync(url, tmp_path / "lake")
        else:
            read_lake.sync(url, tmp_path / "lake")
            changed = bend(url, hand)
        connection = connect(url, lake=str(tmp_path / "lake"))
        try:
            tail = connection.execute("SELECT count(*) FROM lake_tail_exchanges").fetchone()
            assert tail is not None and (tail[0] > 0) == (bent == "after the sync")
            assert_as_before(url, connection, changed)
        finally:
            connection.close()
