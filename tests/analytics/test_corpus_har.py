"""SPEC §3, end to end: a HAR made from the shared corpus (`make_har.py`, which prints the
per-team sums it expects), `llmtap import`, then `llmtap report usage --by team --format
json` gives exactly those sums — run as the console script, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.analytics.conftest import BACKENDS, blank_database
from tests.corpus_tools import make_har

ROOT = Path(__file__).resolve().parents[2]
KEYS = (
    "requests",
    "input_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "output_tokens",
    "reasoning_tokens",
    "usage_missing",
)


def llmtap(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "llmtap"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "llmtap.cli.main"]
    return subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "LLMTAP_HOME": str(home)},
    )


@pytest.fixture(scope="module", params=BACKENDS)
def blank(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with blank_database(request.param, tmp_path_factory.mktemp(f"har-{request.param}")) as url:
        yield url


def test_har_import_then_usage_by_team_matches(blank, corpus_dir: Path, tmp_path: Path):
    har = tmp_path / "corpus.har"
    expected = make_har(corpus_dir, har)
    assert expected, "make_har gave no sums"

    done = llmtap("import", str(har), "--db", blank, home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    shown = llmtap("report", "usage", "--by", "team", "--format", "json", "--db", blank, home=tmp_path / "home")
    assert shown.returncode == 0, shown.stderr
    rows = json.loads(shown.stdout)
    assert {row["team"]: {k: row[k] for k in KEYS} for row in rows} == expected
    assert list(rows[0])[0] == "team"

    if blank.startswith("sqlite"):  # the fake keys make_har.py puts in headers never reach the store
        database = Path(blank.split(":///", 1)[1])
        for path in (database, Path(f"{database}-wal")):
            if path.exists():
                assert b"HARLEAKCANARY" not in path.read_bytes()
