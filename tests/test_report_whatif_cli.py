"""`llmtap report whatif` as the installed console script runs it, in a process of its
own: a model or provider nobody prices is one line with close matches and exit 2, never
a traceback; an empty store says so. (Each process costs seconds: the other bad inputs
run in-process in tests/analytics/test_whatif.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import llmtap


def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store.db'}"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--model", "nope"), "--model 'nope' has no price in genai-prices"),
        (("--model", "gpt-4o", "--provider", "antropic"), "--provider 'antropic' is not a genai-prices provider"),
    ],
)
def test_bad_model_or_provider_is_one_line_and_exit_2(tmp_path: Path, args: tuple[str, ...], says: str):
    result = llmtap("report", "whatif", *args, "--db", store(tmp_path), process=True, timeout=60)
    assert result.code == 2, result
    assert result.err.startswith("llmtap: error:") and says in result.err, result.err
    assert len(result.err.strip().splitlines()) == 1 and result.out == ""


@pytest.mark.slow
def test_an_empty_store_says_so(tmp_path: Path):
    table = llmtap("report", "whatif", "--model", "gpt-5", "--db", store(tmp_path), process=True, timeout=60)
    assert table.code == 0, table.err
    assert "whatif: no exchanges recorded yet" in table.out
    as_json = llmtap("report", "whatif", "--model", "gpt-5", "--format", "json", "--db", store(tmp_path))
    assert as_json.code == 0 and as_json.out.strip() == "[]"
    assert "nothing to report" in as_json.err
