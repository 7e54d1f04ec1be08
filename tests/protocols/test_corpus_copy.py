"""The project's copy of the corpus (tests/corpus/): every case is whole and named in
SOURCES.md with its repository, path and licence, and, where the team's shared corpus sits
beside the checkout, the copy still equals it file for file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.corpus_tools import CORPUS, SHARED_CORPUS, case_folders, read_case

SOURCES = CORPUS / "SOURCES.md"
LICENCES = {"MIT", "Apache-2.0", "BSD-3-Clause", "Apache-2.0 OR BSD-3-Clause"}


def files_of(root: Path) -> dict[str, bytes]:
    """Every file of every case folder under `root`, by its path relative to `root`."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for folder in case_folders(root)
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def source_rows() -> dict[str, list[str]]:
    rows = {}
    for line in SOURCES.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 5 and (name := re.fullmatch(r"`(\w+)`", cells[0])):
            rows[name.group(1)] = cells[1:]
    return rows


def test_every_case_is_whole() -> None:
    folders = case_folders(CORPUS)
    assert len(folders) >= 49
    for folder in folders:
        case, body, _ = read_case(folder)
        assert {"protocol", "host", "path", "status", "streamed", "source", "expect"} <= case.keys(), folder.name
        assert body, folder.name


@pytest.mark.parametrize("folder", case_folders(CORPUS), ids=lambda folder: folder.name)
def test_sources_name_each_case(folder: Path) -> None:
    repository, path, commit, licence = source_rows()[folder.name]
    source = json.loads((folder / "case.json").read_text())["source"]
    assert (repository, path.strip("`"), commit.strip("`")) == (source["repo"], source["path"], source["commit"][:12])
    assert licence in LICENCES


def test_sources_list_nothing_else() -> None:
    assert set(source_rows()) == {folder.name for folder in case_folders(CORPUS)}


if SHARED_CORPUS.is_dir():  # only where the checkout has the team's shared folder beside it

    def test_copy_equals_the_shared_corpus() -> None:
        ours, theirs = files_of(CORPUS), files_of(SHARED_CORPUS)
        assert sorted(ours) == sorted(theirs), "cases or files differ from ../shared/corpus"
        changed = [name for name in ours if ours[name] != theirs[name]]
        assert changed == [], f"differ from ../shared/corpus: {changed}"
