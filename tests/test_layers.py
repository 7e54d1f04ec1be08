"""The layer rules: CONTRIBUTING.md's Layout table (what each folder may import of llmtap,
and which libraries it never imports) and each package folder's `ruff.toml` (ruff's
TID251 bans) say the same thing, and ruff refuses every import the table forbids.

The second half does not trust the ban lists: it copies pyproject.toml and every
`ruff.toml` into a temporary tree shaped like the checkout, plants one module per
(folder, import) pair in it, runs ruff over the tree once, and expects exactly the
forbidden ones refused, each for the import it plants.

tests/ has a row and a `ruff.toml` too: it may import everything but bench/ (what a test
shares with a benchmark is in workloads/), and a probe planted deep below it is refused.

Not responsible for whether the code keeps the rules (`ruff check .` does that) nor for
every folder having a `ruff.toml` at all (tests/test_packaging.py).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.corpus_tools import ROOT

LIBRARIES = ("mitmproxy", "duckdb", "sqlalchemy")  # the libraries the table fences in
NOT_PACKAGES = {"tests", "build", "dist", "docs"}


@dataclass(frozen=True)
class Row:
    folder: str
    may_import: frozenset[str]  # llmtap packages, the folder's own aside
    never_imports: frozenset[str]  # libraries


def package_folders() -> set[str]:
    """The top-level folders that are llmtap packages (setup.py's rule)."""
    return {
        path.name
        for path in ROOT.iterdir()
        if path.is_dir()
        and path.name not in NOT_PACKAGES
        and not path.name.startswith(".")
        and (path / "__init__.py").is_file()
    }


def _names(cell: str, known: set[str], what: str) -> frozenset[str]:
    cell = cell.strip()
    if cell in ("nothing", "—", "-"):
        return frozenset()
    if cell == "everything":
        return frozenset(known)
    but = re.fullmatch(r"everything but (.+)", cell)
    listed = {name.strip().strip("`").rstrip("/") for name in (but.group(1) if but else cell).split(",")}
    unknown = listed - known
    assert not unknown, f"CONTRIBUTING.md's table names unknown {what}: {sorted(unknown)} in {cell!r}"
    return frozenset(known - listed) if but else frozenset(listed)


def matrix(text: str) -> dict[str, Row]:
    """CONTRIBUTING.md's Layout table, by folder."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    header = next(line for line in lines if "may import (of llmtap)" in line)
    columns = [cell.strip() for cell in header.strip("|").split("|")]
    folder_at = columns.index("folder")
    may_at = columns.index("may import (of llmtap)")
    never_at = columns.index("never imports (libraries)")
    packages = package_folders()
    rows: dict[str, Row] = {}
    for line in lines[lines.index(header) + 2 :]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert len(cells) == len(columns), f"a row of CONTRIBUTING.md's table has {len(cells)} cells: {line}"
        folder = cells[folder_at].strip("`").rstrip("/")
        assert folder not in rows, f"CONTRIBUTING.md's table has two rows for {folder}/"
        may = _names(cells[may_at], packages, "folders") - {folder}
        rows[folder] = Row(folder, may, _names(cells[never_at], set(LIBRARIES), "libraries"))
    return rows


def banned(folder: str) -> dict[str, str]:
    """The `banned-api` entries of a folder's ruff.toml: name -> message."""
    config = tomllib.loads((ROOT / folder / "ruff.toml").read_text())
    entries = config.get("lint", {}).get("flake8-tidy-imports", {}).get("banned-api", {})
    return {name: entry["msg"] for name, entry in entries.items()}


def forbidden(row: Row) -> set[str]:
    """What `row`'s folder may not import, as ruff's banned-api names it."""
    others = package_folders() - {row.folder} - row.may_import
    return {f"llmtap.{name}" for name in others} | set(row.never_imports)


def allowed(row: Row) -> set[str]:
    return {f"llmtap.{name}" for name in row.may_import | {row.folder}} | (set(LIBRARIES) - row.never_imports)


@pytest.fixture(scope="module")
def rows() -> dict[str, Row]:
    return matrix((ROOT / "CONTRIBUTING.md").read_text())


@pytest.fixture(scope="module")
def layers(rows: dict[str, Row]) -> list[Row]:
    """Every row with a `ruff.toml`: the package folders, and tests/."""
    return [row for _, row in sorted(rows.items())]


DEV_ONLY = {"bench", "workloads"}  # editable installs only: the wheel leaves them out


def test_the_table_has_a_row_for_every_package_folder(rows: dict[str, Row]) -> None:
    assert set(rows) == package_folders() | {"tests"}
    assert rows["tests"].may_import == frozenset(package_folders() - {"bench"}) and not rows["tests"].never_imports
    # the rules the issue found missing, said in the table itself
    assert "lake" not in rows["analytics"].may_import and "telemetry" not in rows["analytics"].may_import
    assert "duckdb" in rows["dashboards"].never_imports
    # what ships imports nothing the wheel leaves out; the shared workloads import no bench
    assert all(not row.may_import & DEV_ONLY for name, row in rows.items() if name not in DEV_ONLY | {"tests"})
    assert rows["workloads"].may_import == frozenset(package_folders() - {"cli", "bench", "workloads"})
    assert "workloads" in rows["bench"].may_import


def test_each_ruff_toml_bans_exactly_what_the_table_forbids(layers: list[Row]) -> None:
    for row in layers:
        config = tomllib.loads((ROOT / row.folder / "ruff.toml").read_text())
        assert config.get("extend") == "../pyproject.toml", f"{row.folder}/ruff.toml must extend ../pyproject.toml"
        bans = banned(row.folder)
        assert set(bans) == forbidden(row), (
            f"{row.folder}/ruff.toml: bans missing {sorted(forbidden(row) - set(bans))}, "
            f"bans the table does not {sorted(set(bans) - forbidden(row))}"
        )
        assert all(message.strip() for message in bans.values()), f"{row.folder}/ruff.toml: a ban without a reason"


def test_no_nested_ruff_config_shadows_a_folders_bans(layers: list[Row]) -> None:
    """ruff takes the closest config: one below a folder would drop its bans there."""
    names = ("ruff.toml", ".ruff.toml", "pyproject.toml")
    for row in layers:
        nested = [p for name in names for p in (ROOT / row.folder).rglob(name) if p.parent != ROOT / row.folder]
        beside = [ROOT / row.folder / name for name in names[1:] if (ROOT / row.folder / name).exists()]
        others = nested + beside
        assert others == [], f"a ruff config in or below {row.folder}/ beside its ruff.toml: {others}"


def _plant(tree: Path, folder: str, target: str, n: int) -> str:
    """A module in `folder` of `tree` importing `target` twice over (both import forms)."""
    path = tree / folder / f"probe_{n}.py"
    path.write_text(f"import {target}  # noqa: F401\nfrom {target}.probe import thing  # noqa: F401\n")
    return path.name


def _tid251(tree: Path) -> list[dict[str, Any]]:
    """What ruff's TID251 says of `tree` (a copy of the configuration and planted probes)."""
    ran = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "TID251", "--output-format", "json", "."],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode in (0, 1), ran.stderr[-2000:]
    diagnostics: list[dict[str, Any]] = json.loads(ran.stdout)
    return diagnostics


@pytest.fixture(scope="module")
def refused(tmp_path_factory: pytest.TempPathFactory, layers: list[Row]) -> dict[tuple[str, str], list[str]]:
    """(folder, planted import) -> what ruff's TID251 said of that probe, for every pair
    the table forbids or allows, from one ruff run over a copy of the configuration."""
    tree = tmp_path_factory.mktemp("layers")
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    planted: dict[str, tuple[str, str]] = {}
    for row in layers:
        (tree / row.folder).mkdir()
        shutil.copy(ROOT / row.folder / "ruff.toml", tree / row.folder / "ruff.toml")
        (tree / row.folder / "__init__.py").write_text("")
        for target in sorted(forbidden(row) | allowed(row)):
            name = _plant(tree, row.folder, target, len(planted))
            planted[f"{row.folder}/{name}"] = (row.folder, target)
    found: dict[tuple[str, str], list[str]] = {pair: [] for pair in planted.values()}
    for diagnostic in _tid251(tree):
        where = Path(diagnostic["filename"]).resolve().relative_to(tree.resolve()).as_posix()
        assert where in planted, f"ruff refused a file the test did not plant: {where}: {diagnostic['message']}"
        assert diagnostic["code"] == "TID251", diagnostic
        found[planted[where]].append(diagnostic["message"])
    return found


def test_ruff_refuses_every_import_the_table_forbids(
    layers: list[Row], refused: dict[tuple[str, str], list[str]]
) -> None:
    pairs = [(row.folder, target) for row in layers for target in sorted(forbidden(row))]
    assert len(pairs) > 100  # every folder bans most of the others: a table read as empty would pass vacuously
    let_through = [pair for pair in pairs if len(refused[pair]) != 2]
    assert let_through == [], f"ruff let these (folder, import) pairs through: {let_through}"
    for folder, target in pairs:
        assert all(message.startswith(f"`{target}` is banned") for message in refused[(folder, target)])


def test_ruff_refuses_the_bench_anywhere_below_tests(tmp_path: Path) -> None:
    """tests/ruff.toml holds for every folder below it (none has a config of its own,
    `test_no_nested_ruff_config_shadows_a_folders_bans`): a probe two folders down, in a
    copy of the configuration, is refused for the bench and let through for workloads/."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    deep = tmp_path / "tests" / "e2e" / "fleet"
    deep.mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "ruff.toml", tmp_path / "tests" / "ruff.toml")
    (deep / "test_probe.py").write_text(
        "from llmtap.bench.fleet import measure  # noqa: F401\n"
        "from llmtap.workloads.fleet import FleetProxy  # noqa: F401\n"
    )
    messages = [(d["location"]["row"], d["message"]) for d in _tid251(tmp_path)]
    assert len(messages) == 1 and messages[0][0] == 1, messages
    assert messages[0][1].startswith("`llmtap.bench` is banned"), messages


def test_ruff_lets_every_allowed_import_through(layers: list[Row], refused: dict[tuple[str, str], list[str]]) -> None:
    pairs = [(row.folder, target) for row in layers for target in sorted(allowed(row))]
    assert ("dashboards", "llmtap.analytics") in pairs and ("analytics", "duckdb") in pairs
    assert ("addon", "mitmproxy") in pairs and ("cli", "llmtap.lake") in pairs
    stopped = {pair: refused[pair] for pair in pairs if refused[pair]}
    assert stopped == {}, f"ruff refused imports the table allows: {stopped}"
