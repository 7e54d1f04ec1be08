"""The project's copies of the corpora (tests/corpus/, and tests/corpus_next/ with the cloud
routes): every case is whole and named in its SOURCES.md with its repository, path and
licence, and, where the team's shared corpora sit beside the checkout, each copy still
equals its shared folder file for file (corpus-next's README too: it says how the cases'
`expect` was read)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.corpus_tools import CORPUS, CORPUS_NEXT, SHARED_CORPUS, SHARED_CORPUS_NEXT, case_folders, read_case

LICENCES = {"MIT", "Apache-2.0", "BSD-3-Clause", "Apache-2.0 OR BSD-3-Clause"}
# (the copy, its shared original, how many cases it holds at least, files beside the cases)
CORPORA = {
    "corpus": (CORPUS, SHARED_CORPUS, 49, ()),
    "corpus_next": (CORPUS_NEXT, SHARED_CORPUS_NEXT, 10, ("README.md",)),
}
CASE_KEYS = {"protocol", "host", "path", "status", "streamed", "source", "expect"}


def files_of(root: Path, beside: tuple[str, ...] = ()) -> dict[str, bytes]:
    """Every file of every case folder under `root` (and the named files beside them), by
    its path relative to `root`."""
    files = {
        path.relative_to(root).as_posix(): path.read_bytes()
        for folder in case_folders(root)
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }
    return files | {name: (root / name).read_bytes() for name in beside if (root / name).is_file()}


def source_rows(root: Path) -> dict[str, list[str]]:
    rows = {}
    for line in (root / "SOURCES.md").read_text().splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 5 and (name := re.fullmatch(r"`(\w+)`", cells[0])):
            rows[name.group(1)] = cells[1:]
    return rows


ALL_CASES = [folder for root, *_ in CORPORA.values() for folder in case_folders(root)]


@pytest.mark.parametrize("corpus", CORPORA)
def test_every_case_is_whole(corpus: str) -> None:
    root, _, at_least, _ = CORPORA[corpus]
    folders = case_folders(root)
    assert len(folders) >= at_least
    for folder in folders:
        case, body, _ = read_case(folder)
        assert CASE_KEYS <= case.keys(), folder.name
        assert case.get("id", folder.name) == folder.name
        assert body, folder.name


def test_the_next_corpus_names_who_bills_each_case() -> None:
    folders = case_folders(CORPUS_NEXT)
    assert folders
    for folder in folders:
        case = read_case(folder)[0]
        assert case["provider"] in ("aws", "azure", "google"), folder.name
        assert case.get("framing") in (None, "aws-eventstream"), folder.name


@pytest.mark.parametrize("folder", ALL_CASES, ids=lambda folder: f"{folder.parent.name}/{folder.name}")
def test_sources_name_each_case(folder: Path) -> None:
    repository, path, commit, licence = source_rows(folder.parent)[folder.name]
    source = json.loads((folder / "case.json").read_text())["source"]
    assert (repository, path.strip("`"), commit.strip("`")) == (source["repo"], source["path"], source["commit"][:12])
    assert licence in LICENCES


@pytest.mark.parametrize("corpus", CORPORA)
def test_sources_list_nothing_else(corpus: str) -> None:
    root = CORPORA[corpus][0]
    assert set(source_rows(root)) == {folder.name for folder in case_folders(root)}


def test_the_corpora_share_no_case_name() -> None:
    names = [folder.name for folder in ALL_CASES]
    assert len(names) == len(set(names))


_SHARED = [name for name, (_, shared, *_) in CORPORA.items() if shared.is_dir()]

if _SHARED:  # defined only beside the team's shared folders: a user's clone has no such test (and no skip)

    @pytest.mark.parametrize("corpus", _SHARED)
    def test_copy_equals_the_shared_corpus(corpus: str) -> None:
        """Only where the checkout has the team's shared folders beside it."""
        root, shared, _, beside = CORPORA[corpus]
        ours, theirs = files_of(root, beside), files_of(shared, beside)
        assert sorted(ours) == sorted(theirs), f"cases or files differ from {shared}"
        changed = [name for name in ours if ours[name] != theirs[name]]
        assert changed == [], f"differ from {shared}: {changed}"
