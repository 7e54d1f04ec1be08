"""reports._fetched hands 128-bit sums to Python as BIGINT, and as their digits when one
does not fit (past 2^63): exact either way, in the query's order, with its parameters,
money as Decimal dollars (reports._as_dicts)."""

from __future__ import annotations

from decimal import Decimal

import duckdb
import pytest

from llmtap.analytics import reports

BIG = 9_000_000_000_000_000_000  # two of them sum past 2^63 - 1


@pytest.fixture
def connection() -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    c.execute("CREATE TABLE t (team VARCHAR, tokens BIGINT, pico BIGINT)")
    c.execute("INSERT INTO t VALUES ('b', ?, 5), ('b', ?, 7), ('a', 3, -2), ('a', 4, NULL), ('c', -1, 1)", [BIG, BIG])
    return c


QUERY = """SELECT team, sum(tokens) AS input_tokens, sum(CAST(pico AS DECIMAL(38, 0))) AS cost_usd,
    sum(pico) AS fee_cost_usd, count(*) AS requests
FROM t WHERE team >= $low
GROUP BY team
ORDER BY input_tokens DESC -- the order is the query's"""


def test_a_sum_past_bigint_comes_exact_as_its_digits(connection: duckdb.DuckDBPyConnection) -> None:
    columns, rows, texts = reports._fetched(connection, QUERY, {"low": "a"})
    assert texts == {"input_tokens", "cost_usd", "fee_cost_usd"}  # the fallback ran
    dicts = reports._as_dicts(columns, rows, texts)
    assert [d["team"] for d in dicts] == ["b", "a", "c"]
    assert dicts[0]["input_tokens"] == 2 * BIG and type(dicts[0]["input_tokens"]) is int
    assert dicts[0]["cost_usd"] == Decimal(12) / reports.PICO
    assert dicts[1] == {"team": "a", "input_tokens": 7, "cost_usd": Decimal(-2) / reports.PICO,
                        "fee_cost_usd": Decimal(-2) / reports.PICO, "requests": 2}  # fmt: skip


def test_sums_that_fit_come_as_ints_and_equal_the_digits(connection: duckdb.DuckDBPyConnection) -> None:
    columns, rows, texts = reports._fetched(connection, QUERY, {"low": "c"})
    assert texts == set()
    assert all(type(v) is int for row in rows for v in row[1:] if v is not None)
    fitting = reports._as_dicts(columns, rows, texts)
    assert [d["team"] for d in fitting] == ["c"]
    assert fitting == [{"team": "c", "input_tokens": -1, "cost_usd": Decimal(1) / reports.PICO,
                        "fee_cost_usd": Decimal(1) / reports.PICO, "requests": 1}]  # fmt: skip
    # the same rows, by the text path, are the same values
    as_text = reports._as_dicts(columns, [tuple(str(v) for v in row[:4]) + row[4:] for row in rows],
                                {"input_tokens", "cost_usd", "fee_cost_usd"})  # fmt: skip
    assert as_text == fitting


def test_a_query_without_wide_columns_and_its_parameters(connection: duckdb.DuckDBPyConnection) -> None:
    columns, rows, texts = reports._fetched(
        connection, "SELECT team, tokens FROM t WHERE tokens < $most ORDER BY tokens, team", {"most": 4}
    )
    assert (columns, rows, texts) == (["team", "tokens"], [("c", -1), ("a", 3)], set())
