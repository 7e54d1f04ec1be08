"""`llmtap prune --synced`: deletes from the store only the exchanges the lake holds as the
store does, and the next `lake sync` keeps them in the lake (the prune's own tombstones are
gone); rows changed or written since the sync stay in the store."""

from __future__ import annotations

import subprocess
import sys

from sqlalchemy import text

from tests.lake.test_sync import ROOT, lake_totals, run_sync, store, store_totals, write

__all__ = ["store"]  # the fixture, over SQLite and PostgreSQL


def llmtap(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "llmtap.cli.main", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, cwd=ROOT)


def test_prune_synced_keeps_the_lake_whole(store, tmp_path):
    url, engine = store
    warehouse = str(tmp_path / "lake")
    write(engine, tmp_path / "spool", 0, 30)
    run_sync(url, warehouse)
    with engine.begin() as connection:  # changed after the sync: the lake's copy is stale
        connection.execute(text("UPDATE exchanges SET cost_total_pico = 5 WHERE id LIKE '%02'"))
    write(engine, tmp_path / "spool", 30, 5)  # not synced yet
    everything = store_totals(engine)
    common = ["--older-than", "1d", "--db", url, "--warehouse", warehouse]
    dry = llmtap("prune", "--synced", "--dry-run", *common)
    assert dry.returncode == 0, dry.stderr
    assert "would prune 29 synced exchanges" in dry.stdout
    assert store_totals(engine) == everything
    done = llmtap("prune", "--synced", *common)
    assert done.returncode == 0, done.stderr
    assert "pruned 29 synced exchanges" in done.stdout
    with engine.connect() as connection:
        kept = sorted(connection.execute(text("SELECT id FROM exchanges")).scalars())
        assert connection.execute(text("SELECT count(*) FROM fact_deletions")).scalar_one() == 0
    assert [k[-2:] for k in kept] == ["02", "30", "31", "32", "33", "34"]
    again = run_sync(url, warehouse)
    assert again[0].gone == 0 and again[0].written == 6
    assert lake_totals(url, warehouse) == everything


def test_prune_synced_without_a_lake_is_one_line(store, tmp_path):
    url, engine = store
    write(engine, tmp_path / "spool", 0, 3)
    done = llmtap("prune", "--synced", "--older-than", "1d", "--db", url, "--warehouse", str(tmp_path / "none"))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "no lake yet" in done.stderr, done.stderr
    assert store_totals(engine)[0] == 3
