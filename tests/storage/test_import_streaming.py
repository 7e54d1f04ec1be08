"""`llmtap import` reads a HAR as a stream: memory holds an entry and a bounded backlog,
never the file. A HAR of ~100 MB through the real command in a child process peaks under
250 MB and stores every entry once (twice imported, once stored); a HAR cut or turned to
garbage mid-way keeps the entries before the cut, says where in one line and exits 2, and
the whole file imported afterwards adds exactly the rest; the nesting guard counts only
JSON's own brackets, whatever the read sizes; one huge body costs memory in proportion
to that body, not more."""

from __future__ import annotations

import base64
import io
import json
import os
import sys
from pathlib import Path

import pytest

from llmtap.storage.importers.har import HarError, NestingGuard
from llmtap.workloads.har import make_har
from llmtap.workloads.peak_rss import run_measured
from tests.helpers import CONSOLE_SCRIPT, llmtap
from tests.storage.helpers import count, exchange_ids

pytestmark = pytest.mark.timeout(600)

MB = 1 << 20


def peak_import(path: Path, url: str, home: Path) -> tuple[int, str, str, int]:
    """`llmtap import PATH` as a child process: exit code, stdout, stderr, and the peak
    resident memory of that command alone (workloads/peak_rss.py: a pytest worker's own
    high-water mark is not counted in)."""
    command = [str(CONSOLE_SCRIPT)] if CONSOLE_SCRIPT.exists() else [sys.executable, "-m", "llmtap.cli.main"]
    out, err = home / "out.txt", home / "err.txt"
    home.mkdir(parents=True, exist_ok=True)
    with open(out, "w") as stdout, open(err, "w") as stderr:
        measured = run_measured(
            [*command, "import", str(path), "--db", url],
            env={**os.environ, "LLMTAP_HOME": str(home)},
            stdout=stdout,
            stderr=stderr,
        )
    return measured.code, out.read_text(), err.read_text(), measured.peak


# -- at size --------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_100_mb_har_imports_in_bounded_memory_and_exactly_once(tmp_path, engines):
    """250 MB: the command's own floor (Python, SQLAlchemy, the translators, rich: about
    110 MB here) plus at most WAITING (500) records queued for the writer and a batch
    of rows; the old path held the parsed file, about 6 times its size (189 MB → 1.1 GB)."""
    har = tmp_path / "big.har"
    entries = make_har(har, 100 * MB)
    assert har.stat().st_size >= 100 * MB
    url = f"sqlite:///{tmp_path / 'store.db'}"
    code, out, err, peak = peak_import(har, url, tmp_path / "home")
    assert code == 0, err
    assert f"imported {entries} LLM exchanges (0 already stored)" in out
    # And against the same command on a small HAR: memory does not grow with the file (the
    # old path grew by about 6 times it: +600 MB here).
    small = tmp_path / "small.har"
    make_har(small, 2 * MB)
    small_code, _, small_err, small_peak = peak_import(small, f"sqlite:///{tmp_path / 'small.db'}", tmp_path / "h2")
    assert small_code == 0, small_err
    assert peak < small_peak + 120 * MB, f"peak RSS {peak / MB:.0f} MB against {small_peak / MB:.0f} MB for 2 MB"
    assert peak < 250 * MB, f"peak RSS {peak / MB:.0f} MB"
    engine = engines(url)
    ids = exchange_ids(engine)
    assert len(ids) == len(set(ids)) == entries

    code, out, err, _ = peak_import(har, url, tmp_path / "home")
    assert code == 0, err
    assert f"imported {entries} LLM exchanges ({entries} already stored)" in out
    assert sorted(exchange_ids(engine)) == sorted(ids)


def test_one_huge_body_costs_memory_in_proportion_to_it(tmp_path, engines, corpus_dir):
    """A 40 MB base64 body: ijson holds its text while parsing and the entry then holds the
    decoded bytes (the text is dropped as it is decoded), so the peak grows by a small
    multiple of the body, and the rest of the file is still read one entry at a time."""
    small = tmp_path / "small.har"
    entries = make_har(small, 2 * MB, corpus_dir)
    data = json.loads(small.read_text())
    body = os.urandom(30 * MB)
    huge = data["log"]["entries"][0] | {"startedDateTime": "2026-12-01T00:00:00Z"}
    text = base64.b64encode(body).decode()
    content = {"mimeType": "application/octet-stream", "encoding": "base64", "text": text}
    huge["response"] = huge["response"] | {"content": content}
    data["log"]["entries"].insert(len(data["log"]["entries"]) // 2, huge)
    har = tmp_path / "huge.har"
    har.write_text(json.dumps(data))
    assert har.stat().st_size > 40 * MB

    url = f"sqlite:///{tmp_path / 'huge.db'}"
    base_code, _, base_err, floor = peak_import(small, f"sqlite:///{tmp_path / 'floor.db'}", tmp_path / "h1")
    assert base_code == 0, base_err
    code, out, err, peak = peak_import(har, url, tmp_path / "h2")
    assert code == 0, err
    assert f"imported {entries + 1} LLM exchanges" in out
    assert count(engines(url)) == entries + 1
    # Standalone: +153 MB for the 30 MB body (its base64 text, the bytes, their compressed
    # copy); under CI's load the writer lags and holds more of them for a while (+190 MB).
    assert peak - floor < 8 * len(body), f"floor {floor / MB:.0f} MB, peak {peak / MB:.0f} MB"


# -- files that break off ---------------------------------------------------------------------


def har_text(tmp_path: Path, corpus_dir: Path) -> tuple[str, int]:
    path = tmp_path / "whole.har"
    entries = make_har(path, 200_000, corpus_dir)
    return path.read_text(), entries


def cut_after(text: str, kept: int) -> str:
    """The HAR up to the middle of entry `kept` + 1 (entries are one a line)."""
    lines = text.split("\n")
    entry = lines[1 + kept]
    return "\n".join(lines[: 1 + kept]) + "\n" + entry[: len(entry) // 2]


DAMAGE = {
    "cut": lambda text, kept: cut_after(text, kept),
    "garbage": lambda text, kept: cut_after(text, kept) + "\x00\x01 not json at all",
    "truncated-at-a-comma": lambda text, kept: "\n".join(text.split("\n")[: 1 + kept]),
}


@pytest.mark.parametrize("how", DAMAGE)
def test_a_har_that_breaks_off_keeps_what_came_before_and_exits_2(how, tmp_path, corpus_dir, db_url, engines):
    text, entries = har_text(tmp_path, corpus_dir)
    kept = entries // 2
    broken = tmp_path / "broken.har"
    broken.write_text(DAMAGE[how](text, kept))

    result = llmtap("import", str(broken), "--db", db_url, process=True)
    assert result.code == 2
    assert f"imported {kept} LLM exchanges (0 already stored)" in result.out
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("llmtap: error: "), result.err
    assert f"breaks off after entry {kept}" in lines[0]
    engine = engines(db_url)
    assert count(engine) == kept

    whole = tmp_path / "whole.har"
    again = llmtap("import", str(whole), "--db", db_url, process=True)
    assert again.code == 0, again.err
    assert f"imported {entries} LLM exchanges ({kept} already stored)" in again.out
    assert count(engine) == entries


def test_an_empty_entries_list_is_a_har_with_nothing_in_it(tmp_path):
    path = tmp_path / "empty.har"
    path.write_text('{"log": {"version": "1.2", "creator": {"name": "x"}, "pages": [[[]]], "entries": []}}')
    result = llmtap("import", str(path), "--db", f"sqlite:///{tmp_path / 'e.db'}")
    assert result.code == 0, result.err
    assert "imported 0 LLM exchanges" in result.out


def test_an_entry_nested_too_deep_stops_the_file_there(tmp_path, corpus_dir):
    text, entries = har_text(tmp_path, corpus_dir)
    data = json.loads(text)
    deep: list = []
    for _ in range(200):
        deep = [deep]
    data["log"]["entries"][3]["cache"] = {"deep": deep}
    path = tmp_path / "deep.har"
    path.write_text(json.dumps(data))
    result = llmtap("import", str(path), "--db", f"sqlite:///{tmp_path / 'd.db'}", process=True)
    assert result.code == 2
    assert "imported 3 LLM exchanges" in result.out
    assert "breaks off after entry 3 (JSON nested deeper than 64 levels)" in result.err
    assert len(result.err.strip().splitlines()) == 1


# -- the nesting guard ------------------------------------------------------------------------


def deepest(document: object) -> int:
    if isinstance(document, dict):
        return 1 + max((deepest(v) for v in document.values()), default=0)
    if isinstance(document, list):
        return 1 + max((deepest(v) for v in document), default=0)
    return 0


STRINGS = [
    'a "quoted" [bracket] {brace}',
    "ends in a backslash \\",
    '\\"\\\\"[[[[',
    "\\\\\\\\[",
    "{" * 300,
    "ünïcödé ✓ [",
]
DOCUMENTS = {
    "strings full of brackets": {"log": {"entries": [{"t": s} for s in STRINGS]}},
    "keys full of brackets": {"log": {'[{\\"': [{s: [s, {s: s}]} for s in STRINGS]}},
    "deep": {"a": [[[[{"b": [[{"c": "]]]]"}]]}]]]]},
    "flat": [1, 2.5, None, True, "x"],
}


@pytest.mark.parametrize("name", DOCUMENTS)
@pytest.mark.parametrize("read_size", [1, 2, 3, 7, 64, 1 << 16])
def test_the_guard_counts_json_brackets_only_whatever_the_read_size(name, read_size):
    document = DOCUMENTS[name]
    raw = json.dumps(document, ensure_ascii=False).encode()
    depth = deepest(document)

    def read_all(limit: int) -> NestingGuard:
        guard = NestingGuard(io.BytesIO(raw), limit)
        while guard.read(read_size):
            pass
        return guard

    guard = read_all(depth)
    assert guard.depth == 0 and guard.position == len(raw)
    with pytest.raises(HarError, match=f"deeper than {depth - 1} levels"):
        read_all(depth - 1)


def test_the_guard_stops_a_deep_file_at_the_level_too_deep():
    """`[` * 100,000 would cost ijson gigabytes of path strings (one per open level); the
    guard hands ijson the 64 levels it allows and refuses the next read."""
    guard = NestingGuard(io.BytesIO(b"[" * 100_000))
    assert guard.read(1 << 16) == b"[" * 64
    with pytest.raises(HarError, match="deeper than 64 levels"):
        guard.read(1 << 16)
    assert guard.position == 64
