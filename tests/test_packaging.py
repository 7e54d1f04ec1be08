"""What the wheel carries: every package folder of the checkout (bench/ and workloads/
excepted: they are developers' tools) and every file in them that is not Python, because the code reads them
(SQL, templates, the Alembic script template, py.typed). Built here with `uv build` from
the sdist, as .ci/run, pip and every packager build it. Also: mypy checks every package."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.corpus_tools import ROOT

NOT_SHIPPED = {"bench", "workloads"}
NOT_DATA = {".py", ".pyc"}
TOOL_FILES = {"ruff.toml"}


def package_folders() -> list[Path]:
    """Every folder of the checkout that is a package (has `__init__.py`), tests aside."""
    skip = {"tests", "build", "dist"}
    return sorted(
        init.parent
        for init in ROOT.rglob("__init__.py")
        if not ({".venv", "__pycache__"} & set(init.parts))
        and init.parent.relative_to(ROOT).parts[0] not in skip
        and not init.parent.relative_to(ROOT).parts[0].startswith(".")
    )


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    uv = shutil.which("uv")
    assert uv, "uv is not on PATH (the tests run as `uv run pytest`)"
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run([uv, "build", "--out-dir", str(out), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = out.glob("llmtap-*.whl")
    return set(zipfile.ZipFile(wheel).namelist())


def test_every_package_is_in_the_wheel(wheel_names: set[str]) -> None:
    folders = package_folders()
    assert {f.relative_to(ROOT).parts[0] for f in folders} >= {"protocols", "storage", "addon", "analytics", "cli"}
    for folder in folders:
        relative = folder.relative_to(ROOT).as_posix()
        init = f"llmtap/{relative}/__init__.py"
        if relative.split("/")[0] in NOT_SHIPPED:
            assert init not in wheel_names, f"{relative} is a developer's tool, not for the wheel"
        else:
            assert init in wheel_names, f"the wheel lacks the package {relative}"


def test_every_module_and_data_file_is_in_the_wheel(wheel_names: set[str]) -> None:
    missing = []
    for folder in package_folders():
        relative = folder.relative_to(ROOT)
        if relative.parts[0] in NOT_SHIPPED:
            continue
        for path in folder.iterdir():
            if path.is_file() and path.suffix != ".pyc" and path.name not in TOOL_FILES:
                if f"llmtap/{path.relative_to(ROOT).as_posix()}" not in wheel_names:
                    missing.append(path.relative_to(ROOT).as_posix())
        for path in folder.rglob("*"):  # data folders below a package (analytics/sql/)
            if path.is_file() and path.suffix not in NOT_DATA and path.parent != folder:
                hidden = any(part.startswith(".") or part == "__pycache__" for part in path.relative_to(folder).parts)
                if not (path.parent / "__init__.py").exists() and not hidden:
                    if f"llmtap/{path.relative_to(ROOT).as_posix()}" not in wheel_names:
                        missing.append(path.relative_to(ROOT).as_posix())
    assert missing == []
    assert not any(name.endswith("ruff.toml") or "/." in name for name in wheel_names), "tool files in the wheel"


def test_mypy_checks_every_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    top = {f.relative_to(ROOT).parts[0] for f in package_folders()}
    assert set(config["packages"]) == {f"llmtap.{name}" for name in top}


def test_every_package_folder_has_its_layer_rules() -> None:
    top = {f.relative_to(ROOT).parts[0] for f in package_folders()} - {"migrations"}
    assert all((ROOT / name / "ruff.toml").is_file() for name in top), "a package folder without ruff.toml"


LAKE_LIBRARIES = {"pyiceberg", "duckdb-extension-iceberg", "duckdb-extension-avro", "duckdb-extension-httpfs"}
LAKE_MODULES = {"pyiceberg", "pyarrow", "pyiceberg_core", *(n.replace("-", "_") for n in LAKE_LIBRARIES)}


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower()


def test_the_lake_libraries_are_an_extra_that_the_checkout_installs() -> None:
    """About 300 MB only `llmtap lake` and reports over a lake use: not in the core install;
    the dev group (what `uv run` and CI install) pulls the extra in, so the lake's tests run."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    core = {_name(r) for r in project["project"]["dependencies"]}
    assert not core & (LAKE_LIBRARIES | {"pyarrow", "pyiceberg-core"})
    assert {_name(r) for r in project["project"]["optional-dependencies"]["lake"]} == LAKE_LIBRARIES
    assert "llmtap[lake]" in project["dependency-groups"]["dev"]
    # uv's compile-bytecode compiles all of the venv on every `uv run` (1-2 s each): the
    # entry point writes the bytecode of what it imports instead (cli/main.py)
    assert "compile-bytecode" not in project["tool"]["uv"]


def test_only_the_lake_imports_its_libraries_at_module_level() -> None:
    """A module-level import of a lake library outside lake/ (and the folders the wheel
    leaves out) would break every command that imports it on a core install; elsewhere
    they are imported where used."""
    offenders = []
    for folder in package_folders():
        top = folder.relative_to(ROOT).parts[0]
        if top in {"lake"} | NOT_SHIPPED:
            continue
        for path in folder.glob("*.py"):
            for node in ast.parse(path.read_text()).body:
                names = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names = [node.module]
                if any(name.split(".")[0] in LAKE_MODULES for name in names):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []
