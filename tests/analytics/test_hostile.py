"""Hostile and broken input: SQL in --by is refused in one line; team and model names made
of SQL, HTML and terminal markup come back verbatim in every format and break nothing;
bad times are one-line errors (exit 2); an empty store says so."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator

import pytest

from tests.analytics import traffic
from tests.analytics.conftest import BACKENDS, blank_database, by_key, llmtap, report

KINDS = ("usage", "cost", "cache", "finish", "tools", "errors", "latency")


def one_line_error(result, *words: str) -> None:
    assert result.code == 2, (result.code, result.out, result.err)
    assert result.out == ""
    assert result.err.startswith("llmtap: error: ") and result.err.count("\n") == 1, result.err
    assert "Traceback" not in result.err
    for word in words:
        assert word in result.err


@pytest.mark.parametrize(
    "by",
    [
        "team;DROP TABLE exchanges",
        "team,(SELECT count(*) FROM exchanges)",
        'team" FROM exchanges; --',
        "1",
        "team,team",
        "status",  # a dimension the errors report has, usage has not
    ],
)
def test_by_with_sql_is_refused(store, by):
    result = llmtap("report", "usage", "--by", by, "--db", store)
    one_line_error(result, "--by")


def test_hostile_names_verbatim_in_json(store):
    teams = by_key(report(store, "usage", "--by", "team"), "team")
    assert teams[traffic.SQL_NAME]["requests"] == 2
    assert teams[traffic.HTML_NAME]["requests"] == 1
    assert teams[traffic.MARKUP_NAME]["requests"] == 1
    models = by_key(report(store, "cost", "--by", "team,model"), "team", "model")
    assert models[traffic.SQL_NAME, traffic.HTML_NAME]["unpriced"] == 2
    assert models[traffic.HTML_NAME, traffic.SQL_NAME]["unpriced"] == 1
    assert models[traffic.MARKUP_NAME, traffic.MARKUP_NAME]["unpriced"] == 1
    listed = [i for i in report(store, "cache", "--list") if i["team"] == traffic.SQL_NAME]
    assert [(i["team"], i["model"]) for i in listed] == [(traffic.SQL_NAME, traffic.HTML_NAME)]
    # and the store is whole: every exchange is still there
    assert sum(r["requests"] for r in teams.values()) == 60


def test_hostile_names_verbatim_in_csv_and_table(store):
    result = llmtap("report", "cost", "--by", "team,model", "--format", "csv", "--db", store)
    assert result.code == 0, result.err
    rows = list(csv.DictReader(io.StringIO(result.out)))
    pairs = {(r["team"], r["model"]) for r in rows}
    assert {
        (traffic.SQL_NAME, traffic.HTML_NAME),
        (traffic.HTML_NAME, traffic.SQL_NAME),
        (traffic.MARKUP_NAME, traffic.MARKUP_NAME),
    } <= pairs
    unpriced = next(r for r in rows if r["team"] == traffic.HTML_NAME)
    assert unpriced["cost_usd"] == ""  # unknown, not 0

    for kind, by in (("usage", "team"), ("cost", "team,model"), ("cache", "team,model"), ("finish", "team")):
        result = llmtap("report", kind, "--by", by, "--db", store)
        assert result.code == 0, result.err
        for name in (traffic.SQL_NAME, traffic.HTML_NAME, traffic.MARKUP_NAME.replace("\x1b", "\\x1b")):
            assert name in result.out, (kind, name)
        assert "\x1b" not in result.out


@pytest.mark.parametrize(
    "flag,value",
    [
        ("--since", "garbage"),
        ("--since", "yesterday"),
        ("--until", "2026-13-45"),
        ("--since", "7 fortnights"),
        ("--until", "'; DROP TABLE exchanges; --"),
    ],
)
def test_bad_times_are_one_line_errors(store, flag, value):
    one_line_error(llmtap("report", "usage", flag, value, "--db", store), value)


def test_unknown_kind_and_list_without_items(store):
    one_line_error(llmtap("report", "everything", "--db", store))
    one_line_error(llmtap("report", "usage", "--list", "--db", store), "--list")


@pytest.fixture(scope="module", params=BACKENDS)
def empty(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with blank_database(request.param, tmp_path_factory.mktemp(f"empty-{request.param}")) as url:
        yield url


@pytest.mark.parametrize("kind", KINDS)
def test_empty_store_says_so(empty, kind):
    result = llmtap("report", kind, "--db", empty)
    assert result.code == 0, result.err
    assert result.out.strip().startswith(f"{kind}: no exchanges recorded yet")
    result = llmtap("report", kind, "--format", "json", "--db", empty)
    assert result.code == 0, result.err
    assert result.out.strip() == "[]" and "nothing to report" in result.err
    if kind in ("cache", "tools"):
        assert report(empty, kind, "--list") == []


def test_empty_window_says_so(store):
    result = llmtap("report", "usage", "--since", "2031-01-01", "--db", store)
    assert result.code == 0 and "no exchanges in that period" in result.out


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:"])
def test_an_in_memory_store_is_a_one_line_error(url):
    # an in-memory database exists only in the command's own connection: nothing to report on
    one_line_error(llmtap("report", "usage", "--db", url), "in-memory")
