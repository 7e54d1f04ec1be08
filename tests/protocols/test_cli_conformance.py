"""`llmtap decode` over the corpora (tests/corpus/ and tests/corpus_next/) and their
transport variants, as outside checks run it: the case's files and its case.json flags
become the command's arguments, and what it prints must hold the case's `expect`. The
variants (tests/corpus_tools.py) are the same exchange gzip- or br-encoded on the wire,
with CRLF framing, or cut at 60 % of its bytes (an AWS event-stream body: inside the
frame at that point)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.corpus_tools import CORPUS, CORPUS_NEXT, EVENTSTREAM, case_folders, read_case, write_variants
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


CORPORA = {"corpus": CORPUS, "corpus_next": CORPUS_NEXT}
CASES = [folder for root in CORPORA.values() for folder in case_folders(root)]


@pytest.fixture(scope="module")
def variants(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Path]]:
    """Each corpus's variants, by folder name."""
    return {
        corpus: {folder.name: folder for folder in write_variants(root, tmp_path_factory.mktemp(f"variants-{corpus}"))}
        for corpus, root in CORPORA.items()
    }


@pytest.mark.parametrize("corpus", CORPORA)
def test_every_case_has_its_variants(corpus: str, variants: dict[str, dict[str, Path]]) -> None:
    cases = [read_case(folder)[:2] for folder in case_folders(CORPORA[corpus])]
    sse = [case for case, body in cases if case["streamed"] and b"data:" in body and case.get("framing") is None]
    frames = [case for case, _ in cases if case.get("framing") == EVENTSTREAM]
    assert len(variants[corpus]) == 2 * len(cases) + 2 * len(sse) + len(frames)
    assert corpus == "corpus" or frames, "corpus-next holds AWS event-stream cases"


@pytest.mark.parametrize("folder", CASES, ids=lambda f: f"{f.parent.name}/{f.name}")
def test_case(folder: Path) -> None:
    assert differences(read_case(folder)[0]["expect"], decoded(folder)) == []


@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("suffix", ["gzip", "br", "crlf", "cut"])
def test_variants(corpus: str, suffix: str, variants: dict[str, dict[str, Path]]) -> None:
    folders = [folder for name, folder in variants[corpus].items() if name.endswith(f"__{suffix}")]
    assert folders
    failed = {}
    for folder in folders:
        result = llmtap(*decode_args(folder))
        if result.code != 0:
            failed[folder.name] = [result.err.strip()[-300:]]
            continue
        got = json.loads(result.out)
        if suffix == "cut":  # no crash, and it says the stream did not end
            if (got["complete"], got["finish_reason"]) != (False, None):
                failed[folder.name] = [f"cut: complete {got['complete']}, finish_reason {got['finish_reason']}"]
        elif diffs := differences(read_case(folder)[0]["expect"], got):
            failed[folder.name] = diffs
    assert failed == {}
