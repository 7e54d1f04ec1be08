"""`llmtap decode` over the corpus and its transport variants, as outside checks run it: the
case's files and its case.json flags become the command's arguments, and what it prints
must hold the case's `expect`. The variants (tests/corpus_tools.py) are the same exchange
gzip- or br-encoded on the wire, with CRLF framing, or cut at 60 % of its bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.corpus_tools import CORPUS, case_folders, read_case, write_variants
from tests.helpers import llmtap
from tests.protocols.corpus import differences


def decode_args(folder: Path) -> list[str]:
    case, _, request = read_case(folder)
    args = ["decode", "--response", str(folder / "response.body"), "--path", case["path"]]
    args += ["--host", case["host"], "--status", str(case["status"])]
    if request is not None:
        args += ["--request", str(folder / "request.json")]
    if case.get("content_type"):
        args += ["--content-type", case["content_type"]]
    if case.get("content_encoding"):
        args += ["--content-encoding", case["content_encoding"]]
    return args


def decoded(folder: Path) -> dict:
    result = llmtap(*decode_args(folder))
    assert result.code == 0, result.err
    return json.loads(result.out)


@pytest.fixture(scope="module")
def variants(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return {folder.name: folder for folder in write_variants(CORPUS, tmp_path_factory.mktemp("variants"))}


def test_every_case_has_its_variants(variants: dict[str, Path]) -> None:
    cases = case_folders(CORPUS)
    streams = [f for f in cases if read_case(f)[0]["streamed"] and b"data:" in read_case(f)[1]]
    assert len(variants) == 2 * len(cases) + 2 * len(streams)


@pytest.mark.parametrize("folder", case_folders(CORPUS), ids=lambda f: f.name)
def test_case(folder: Path) -> None:
    assert differences(read_case(folder)[0]["expect"], decoded(folder)) == []


@pytest.mark.parametrize("suffix", ["gzip", "br", "crlf", "cut"])
def test_variants(suffix: str, variants: dict[str, Path]) -> None:
    folders = [folder for name, folder in variants.items() if name.endswith(f"__{suffix}")]
    assert folders
    for folder in folders:
        case = read_case(folder)[0]
        got = decoded(folder)
        if suffix == "cut":  # no crash, and it says the stream did not end
            assert (got["complete"], got["finish_reason"]) == (False, None), folder.name
        else:
            assert differences(case["expect"], got) == [], folder.name
