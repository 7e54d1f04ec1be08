"""The lake is readable without llmtap: the plain SQL of docs/lake.md, run by DuckDB alone
over `iceberg_scan` of the tables' metadata files, and a pyiceberg scan alone, give the
numbers `llmtap report` gives for the same store (the corpus traffic of tests/analytics).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import duckdb_extension_avro  # type: ignore[import-untyped]
import duckdb_extension_iceberg  # type: ignore[import-untyped]
import pyarrow.compute as pc
import pytest
from pyiceberg.catalog.sql import SqlCatalog

from llmtap.analytics.duck import extension_path
from llmtap.protocols.error_kinds import kinds
from tests.analytics import traffic
from tests.analytics.conftest import BACKENDS, blank_database, fill, report
from tests.lake import read_lake

DOC = Path(__file__).resolve().parents[2] / "docs" / "lake.md"
# each question of docs/lake.md: the report that answers it and its grouping columns
QUESTIONS = {
    "cost per team per day": (("cost", "--by", "team,day"), ("team", "day")),
    "tokens by model": (("usage", "--by", "model"), ("model",)),
    "error rate by provider": (("errors", "--by", "provider"), ("provider",)),
    "cache hit rate by team": (("cache", "--by", "team"), ("team",)),
    "p95 latency by model": (("latency", "--by", "model"), ("model",)),
    "tool-call problems by team": (("tools", "--by", "team"), ("team",)),
}


@pytest.fixture(scope="module", params=BACKENDS)
def synced(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A store of the corpus traffic and its lake, everything synced."""
    folder = tmp_path_factory.mktemp(f"plain-{request.param}")
    with blank_database(request.param, folder) as url:
        fill(url, [k.rec for k in traffic.build()], folder / "spool")
        read_lake.sync(url, folder / "lake")
        yield url, folder / "lake"


def _questions() -> dict[str, str]:
    """The SQL blocks of docs/lake.md, by the `-- question:` line that opens each."""
    blocks = re.findall(r"```sql\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)
    found = {}
    for block in blocks:
        first = block.splitlines()[0]
        if first.startswith("-- question:"):
            found[first.removeprefix("-- question:").strip()] = block
    return found


def _metadata(url: str, lake: Path) -> dict[str, str]:
    catalog = SqlCatalog("llmtap", uri=url, warehouse=f"file://{lake}")
    try:
        return {name: catalog.load_table(f"llmtap.{name}").metadata_location for name in ("exchanges", "tool_calls")}
    finally:
        catalog.engine.dispose()


def _plain(value: Any) -> Any:
    if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
        return round(float(value), 9)
    if isinstance(value, date):
        return value.isoformat()
    return value


def test_every_question_in_the_docs_is_answered(synced: tuple[str, Path]) -> None:
    assert set(_questions()) == set(QUESTIONS)


def test_duckdb_alone_runs_the_docs_sql_and_gets_the_reports_numbers(synced: tuple[str, Path]) -> None:
    url, lake = synced
    connection = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    try:
        # the docs' preamble, with the extensions loaded from their PyPI packages (no download here)
        connection.execute(f"LOAD '{extension_path(duckdb_extension_avro, 'avro')}'")
        connection.execute(f"LOAD '{extension_path(duckdb_extension_iceberg, 'iceberg')}'")
        connection.execute("SET TimeZone = 'UTC'")
        for name, location in _metadata(url, lake).items():
            connection.execute(f"CREATE VIEW {name} AS SELECT * FROM iceberg_scan('{location}')")
        questions = _questions()
        assert questions, DOC  # the loop below checks at least one of the docs' queries
        for question, sql in questions.items():
            args, keys = QUESTIONS[question]
            result = connection.execute(sql)
            columns = [d[0] for d in result.description]
            mine = {tuple(_plain(row[columns.index(k)]) for k in keys): row for row in result.fetchall()}
            theirs = {tuple(_plain(r[k]) for k in keys): r for r in report(url, *args)}
            if question.startswith("tool-call"):  # the report lists teams without tool calls too
                theirs = {k: r for k, r in theirs.items() if r["tool_calls"]}
            assert mine.keys() == theirs.keys(), question
            assert mine, question
            for key, row in mine.items():
                for index, column in enumerate(columns):
                    assert _plain(row[index]) == _plain(theirs[key][column]), (question, key, column)
    finally:
        connection.close()


def test_pyiceberg_alone_gets_the_reports_totals(synced: tuple[str, Path]) -> None:
    url, lake = synced
    catalog = SqlCatalog("llmtap", uri=url, warehouse=f"file://{lake}")
    try:
        exchanges = catalog.load_table("llmtap.exchanges").scan().to_arrow()
        tool_calls = catalog.load_table("llmtap.tool_calls").scan(selected_fields=("exchange_id",)).to_arrow()
    finally:
        catalog.engine.dispose()

    usage = report(url, "usage")
    assert exchanges.num_rows == sum(r["requests"] for r in usage) == len(traffic.build())
    for column, total in (("usage_input_tokens", "input_tokens"), ("usage_output_tokens", "output_tokens")):
        assert pc.sum(exchanges[column]).as_py() == sum(r[total] for r in usage), column
    cost = report(url, "cost")
    in_dollars = Decimal(pc.sum(exchanges["cost_total_pico"]).as_py()) / 10**12
    assert in_dollars > 0
    assert in_dollars == sum(Decimal(str(r["cost_usd"])) for r in cost if r["cost_usd"] is not None)
    tools = report(url, "tools")
    assert tool_calls.num_rows == sum(r["tool_calls"] for r in tools) > 0


def test_the_docs_error_lists_are_the_reports() -> None:
    """The error rate's SQL in docs/lake.md counts the error types and codes that
    protocols/error_kinds.py says stand for a 429 and for a server error, no more, no fewer."""
    block = _questions()["error rate by provider"]
    lists = [
        set(re.findall(r"'([^']+)'", body)) for body in re.findall(r"list_has_any\(named, \[(.*?)\]\)", block, re.S)
    ]
    assert lists == [
        {kind.lower() for kind in kinds("rate_limited")},
        {kind.lower() for kind in kinds("server_error", "overloaded")},
    ]


def test_the_columns_read_from_the_metadata_file_are_the_ones_duckdb_reads(synced: tuple[str, Path]) -> None:
    """lake_views takes each table's columns (and which of them hold instants) from its
    metadata file instead of a DESCRIBE of the scan: the same names and the same instants
    as DuckDB's iceberg reader gives, for every table of the lake, the summary included."""
    import json

    from llmtap.analytics import lake_views

    url, lake = synced
    catalog = SqlCatalog("llmtap", uri=url, warehouse=f"file://{lake}")
    try:
        locations = {
            name: catalog.load_table(f"llmtap.{name}").metadata_location
            for name in ("exchanges", "tool_calls", "daily")
        }
    finally:
        catalog.engine.dispose()
    connection = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    connection.execute(f"LOAD '{extension_path(duckdb_extension_avro, 'avro')}'")
    connection.execute(f"LOAD '{extension_path(duckdb_extension_iceberg, 'iceberg')}'")
    instants = 0
    for name, location in locations.items():
        metadata = json.loads(Path(location.removeprefix("file://")).read_text())
        snapshot = lake_views._current_snapshot(metadata, location)
        assert snapshot is not None
        described = connection.execute(f"DESCRIBE SELECT * FROM iceberg_scan('{location}')").fetchall()
        want = {str(row[0]): "TIME ZONE" in str(row[1]).upper() for row in described}
        assert lake_views.held_columns(metadata, snapshot, location) == want, name
        instants += sum(want.values())
    assert instants >= 3  # started_at and the rest: the instants were tried


def test_a_metadata_file_whose_schema_lists_no_columns_is_a_damaged_lake() -> None:
    from llmtap.analytics import lake_views

    snapshot = {"snapshot-id": 1, "schema-id": 0}
    for schemas in ([{"schema-id": 0}], [{"schema-id": 0, "fields": [{"id": 1}]}], [{"schema-id": 7, "fields": []}]):
        with pytest.raises(lake_views.LakeError, match="damaged"):
            lake_views.held_columns({"schemas": schemas, "current-schema-id": 0}, snapshot, "m.json")
    # a v1 table's one `schema`, with no schema id: its columns
    v1 = {
        "schema": {
            "fields": [{"id": 1, "name": "id", "type": "string"}, {"id": 2, "name": "at", "type": "timestamptz"}]
        }
    }
    assert lake_views.held_columns(v1, {"snapshot-id": 1}, "m.json") == {"id": False, "at": True}
