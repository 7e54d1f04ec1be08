"""What `llmtap lake sync` leaves on disk for a local warehouse, through the real command:
every file and folder it writes is private to its user whatever the umask (SPEC §4), and
a lake whose files were damaged or removed is a one-line error, for the sync and for the
reports that read it, never an internal error or a crash.

Not responsible for what the tables hold (test_sync.py, test_read_*.py).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
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


# -- a damaged lake --------------------------------------------------------------------------


def _cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _first(lake: Path, pattern: str) -> Path:
    found = sorted((lake / "llmtap" / "exchanges").rglob(pattern))
    assert found, pattern
    return found[-1]


def _without_schemas(path: Path) -> None:
    import json

    metadata = json.loads(path.read_text())
    del metadata["schemas"]
    path.write_text(json.dumps(metadata))


DAMAGE: dict[str, Callable[[Path], None]] = {
    "a data file removed": lambda lake: _first(lake, "*.parquet").unlink(),
    "a data file cut short": lambda lake: _cut(_first(lake, "*.parquet")),
    "a manifest cut short": lambda lake: _cut(_first(lake, "*-m0.avro")),
    "a manifest removed": lambda lake: _first(lake, "*-m0.avro").unlink(),
    "a manifest list of garbage": lambda lake: _first(lake, "snap-*.avro").write_bytes(b"garbage\n"),
    "the metadata file cut short": lambda lake: _cut(_first(lake, "*.metadata.json")),
    "the metadata file without its schemas": lambda lake: _without_schemas(_first(lake, "*.metadata.json")),
}


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """A store and its lake, synced once, and a copy of both to start each test from."""
    root = tmp_path_factory.mktemp("damaged")
    os.environ["LLMTAP_HOME"] = str(root / "home")  # a module's own home: restored below
    try:
        url = f"sqlite:///{root / 'work' / 'store.db'}"
        (root / "work").mkdir()
        engine = make_engine(url)
        upgrade(engine)
        write(engine, root / "spool", 0, 30)
        engine.dispose()
        assert run("lake", "sync", "--db", url, "--warehouse", str(root / "work" / "lake")).returncode == 0
        shutil.copytree(root / "work", root / "pristine")
        yield root / "work", root / "pristine"
    finally:
        os.environ.pop("LLMTAP_HOME", None)


@pytest.fixture(params=list(DAMAGE))
def damaged(request: pytest.FixtureRequest, synced: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> str:
    """The store and lake as synced, then damaged one way; the store changed since, so a
    sync must read the lake. Returns the store's URL."""
    work, pristine = synced
    monkeypatch.setenv("LLMTAP_HOME", str(work.parent / "home"))
    shutil.rmtree(work)
    shutil.copytree(pristine, work)
    DAMAGE[request.param](work / "lake")
    url = f"sqlite:///{work / 'store.db'}"
    engine = make_engine(url)
    with engine.begin() as connection:
        connection.execute(text("UPDATE exchanges SET cost_total_pico = cost_total_pico + 1"))
    engine.dispose()
    return url


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr[-2000:]
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    return done.stderr


def test_a_report_over_a_damaged_lake_is_one_line(damaged: str) -> None:
    lake = str(Path(damaged.removeprefix("sqlite:///")).parent / "lake")
    err = _one_line(run("report", "usage", "--db", damaged, "--lake", lake))
    assert "lake" in err


def test_a_sync_to_a_damaged_lake_is_one_line(damaged: str) -> None:
    lake = str(Path(damaged.removeprefix("sqlite:///")).parent / "lake")
    err = _one_line(run("lake", "sync", "--db", damaged, "--warehouse", lake))
    assert "lake" in err or "warehouse" in err
