"""SPEC §3, end to end: a HAR made from the shared corpus (`make_har.py`, which prints the
per-team sums it expects), `llmtap import`, then `llmtap report usage --by team --format
json` gives exactly those sums — run as the console script, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.analytics.conftest import BACKENDS, blank_database
from tests.corpus_tools import make_har
from tests.helpers import llmtap

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


@pytest.fixture(scope="module", params=BACKENDS)
def blank(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with blank_database(request.param, tmp_path_factory.mktemp(f"har-{request.param}")) as url:
        yield url


def test_har_import_then_usage_by_team_matches(blank, corpus_dir: Path, tmp_path: Path):
    har = tmp_path / "corpus.har"
    expected = make_har(corpus_dir, har)
    assert expected, "make_har gave no sums"

    done = llmtap("import", str(har), "--db", blank, env={"LLMTAP_HOME": str(tmp_path / "home")}, process=True)
    assert done.code == 0, done.err
    shown = llmtap(
        "report",
        "usage",
        "--by",
        "team",
        "--format",
        "json",
        "--db",
        blank,
        env={"LLMTAP_HOME": str(tmp_path / "home")},
        process=True,
    )
    assert shown.code == 0, shown.err
    rows = json.loads(shown.out)
    assert {row["team"]: {k: row[k] for k in KEYS} for row in rows} == expected
    assert list(rows[0])[0] == "team"

    if blank.startswith("sqlite"):  # the fake keys make_har.py puts in headers never reach the store
        database = Path(blank.split(":///", 1)[1])
        assert database.is_file()
        for path in (p for p in (database, Path(f"{database}-wal")) if p.exists()):
            assert b"HARLEAKCANARY" not in path.read_bytes()
