"""Which packages and data files make up `llmtap`, found from the folders.

The top-level folders are the subpackages of `llmtap` (STYLE.md): every folder beside this
file that has an `__init__.py` (except `tests`) is `llmtap.<folder>`, and every folder
under it with an `__init__.py` is a subpackage. Every other file inside a package (SQL,
templates, the Alembic script template) is package data, so nothing the code reads can be
left out of the wheel by a list that was not kept up to date.

`bench/` and `workloads/` are developers' tools (the benchmarks, and what they share with
the tests): editable installs carry them as `llmtap.bench` and `llmtap.workloads`, wheels
do not.
Everything else (name, dependencies, entry point) is in pyproject.toml.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
NOT_PACKAGES = {"tests", "build", "dist", "docs"}
NOT_DATA = {".py", ".pyc"}
TOOL_FILES = {"ruff.toml"}  # a folder's lint rules, not something the code reads
DEV_ONLY = ("llmtap.bench", "llmtap.workloads")


def top_level_folders() -> list[Path]:
    return sorted(
        folder
        for folder in HERE.iterdir()
        if folder.is_dir()
        and folder.name not in NOT_PACKAGES
        and not folder.name.startswith(".")
        and (folder / "__init__.py").is_file()
    )


def package_dirs() -> dict[str, str]:
    """`llmtap.X` -> `X/` for every package folder, subpackages included."""
    found: dict[str, str] = {}
    for top in top_level_folders():
        for init in sorted(top.rglob("__init__.py")):
            folder = init.parent
            if any(part == "__pycache__" or part.startswith(".") for part in folder.relative_to(HERE).parts):
                continue
            found["llmtap." + ".".join(folder.relative_to(HERE).parts)] = folder.relative_to(HERE).as_posix()
    return found


def data_files(folder: str) -> list[str]:
    """The files of one package folder that are neither Python nor bytecode, nor in a subpackage."""
    root = HERE / folder
    files = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if not path.is_file() or path.suffix in NOT_DATA or path.name in TOOL_FILES:
            continue
        if any(part == "__pycache__" or part.startswith(".") for part in relative.parts):
            continue  # bytecode, tool caches (.ruff_cache), editor files
        folders = (root.joinpath(*relative.parts[: i + 1]) for i in range(len(relative.parts) - 1))
        if any((folder / "__init__.py").exists() for folder in folders):
            continue  # belongs to a subpackage, which lists it itself
        files.append(relative.as_posix())
    return files


def shipped(package: str) -> bool:
    return not any(package == dev or package.startswith(dev + ".") for dev in DEV_ONLY)


class BuildPyWithoutBench(build_py):
    """Leaves `llmtap.bench` and `llmtap.workloads` out of wheels; an editable install keeps
    them for the benchmarks and the tests."""

    def run(self) -> None:
        if not self.editable_mode:
            self.packages = [p for p in self.packages if shipped(p)]
            self.data_files = self._get_data_files()
        super().run()

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:  # type: ignore[override]
        if not self.editable_mode:
            self.packages = [p for p in self.packages if shipped(p)]
        return super().get_outputs(include_bytecode)


PACKAGE_DIRS = package_dirs()

setup(
    package_dir=PACKAGE_DIRS,
    packages=list(PACKAGE_DIRS),
    package_data={name: files for name, folder in PACKAGE_DIRS.items() if (files := data_files(folder))},
    exclude_package_data={"": sorted(TOOL_FILES)},
    cmdclass={"build_py": BuildPyWithoutBench},
)
