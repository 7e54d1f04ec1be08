"""What `llmtap lake sync` leaves on disk for a local warehouse, through the real command:
every file and folder it writes is private to its user whatever the umask (SPEC §4), and
a lake whose files were damaged or removed is a one-line error, for the sync and for the
reports that read it, never an internal error or a crash.

Not responsible for what the tables hold (test_sync.py, test_read_*.py).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from llmtap.storage.engine import make_engine
from llmtap.storage.migrate import upgrade
from tests.lake.test_sync import ROOT, write

FILE_MODE, DIR_MODE = 0o600, 0o700


def run(*args: str, umask: int = 0o022) -> subprocess.CompletedProcess[str]:
    """`llmtap ARGS…` as a child process under `umask` (a usual 022 by default)."""
    return subprocess.run(
        [sys.executable, "-m", "llmtap.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        preexec_fn=lambda: os.umask(umask),
    )


@pytest.fixture
def store(tmp_path: Path, llmtap_home: Path) -> Iterator[str]:
    """A SQLite store with 30 exchanges (and their tool calls)."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = make_engine(url)
    upgrade(engine)
    write(engine, tmp_path / "spool", 0, 30)
    engine.dispose()
    yield url


def modes(folder: Path) -> tuple[set[str], set[str]]:
    """The files and folders under `folder` (itself included) that are not private."""
    loose_files, loose_dirs = set(), set()
    for path in [folder, *folder.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        if path.is_dir() and mode != DIR_MODE:
            loose_dirs.add(f"{path.relative_to(folder)} {mode:o}")
        elif path.is_file() and mode != FILE_MODE:
            loose_files.add(f"{path.relative_to(folder)} {mode:o}")
    return loose_files, loose_dirs


def test_every_file_and_folder_of_the_lake_is_private_under_umask_022(store: str, tmp_path: Path) -> None:
    warehouse = tmp_path / "lake" / "deep"  # neither folder there yet: the sync makes both
    first = run("lake", "sync", "--db", store, "--warehouse", str(warehouse))
    assert first.returncode == 0, first.stderr
    with make_engine(store).begin() as connection:  # a reprice: a second sync rewrites files
        connection.execute(text("UPDATE exchanges SET cost_total_pico = cost_total_pico * 2"))
    second = run("lake", "sync", "--db", store, "--warehouse", str(warehouse))
    assert second.returncode == 0, second.stderr
    assert "30 rows written" in second.stdout
    files = [path for path in warehouse.rglob("*") if path.is_file()]
    assert any(p.suffix == ".parquet" for p in files) and any(p.name.endswith(".metadata.json") for p in files)
    assert modes(warehouse.parent) == (set(), set())


def test_a_warehouse_folder_the_user_made_keeps_its_mode(store: str, tmp_path: Path) -> None:
    warehouse = tmp_path / "shared-lake"
    warehouse.mkdir(mode=0o755)
    os.chmod(warehouse, 0o755)
    assert run("lake", "sync", "--db", store, "--warehouse", str(warehouse)).returncode == 0
    assert stat.S_IMODE(warehouse.stat().st_mode) == 0o755  # theirs
    inside = [path for path in warehouse.iterdir()]
    assert inside and modes(inside[0]) == (set(), set())  # what llmtap wrote: private
