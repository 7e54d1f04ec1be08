"""The CSV fast path (render._csv_fast) writes every cell as the per-cell rules
(render._csv_value: csv_cell of _text) do, the formula guard included."""

from __future__ import annotations

import csv
import enum
import io
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal

import pytest

from llmtap.analytics import render
from llmtap.analytics.reports import Table

HOSTILE = [
    "",
    " ",
    "\n",
    "plain",
    "=1+1",
    "+1",
    "-1",
    "-1.5e3",
    "+.5",
    "@SUM(A1)",
    "\t=x",
    "\r=x",
    " =cmd|' /C calc'!A0",
    "\n=x",
    " \n -2",
    " -x",
    "- 1",
    "1-",
    "=",
    "-",
    "'=x",
    "é=x",
    "\u009b31m",
]


class Colour(enum.StrEnum):
    RED = "=red"


VALUES = [
    *HOSTILE,
    None,
    0,
    -3,
    10**20,
    True,
    False,
    Decimal("0"),
    Decimal("-0"),
    Decimal("0.00"),
    Decimal("-1.2300"),
    Decimal("1E+3"),
    Decimal("-Infinity"),
    Decimal("NaN"),
    0.0,
    -1.5,
    1e-9,
    float("-inf"),
    datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=timezone(timedelta(hours=-5))),
    date(2026, 1, 2),
    Colour.RED,
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
@pytest.mark.parametrize("zone", [UTC, timezone(timedelta(hours=9))], ids=str)
def test_a_fast_cell_is_the_per_cell_rules_cell(value: object, zone: timezone) -> None:
    fast = render._csv_fast(value, zone)
    slow = render._csv_value(value, zone)
    assert (type(fast), fast) == (type(slow), slow)


def test_a_hostile_text_is_guarded_in_the_written_csv() -> None:
    table = Table(columns=["a", "b"], rows=[{"a": text, "b": Decimal("-2.50")} for text in HOSTILE])
    lines = render.as_csv(table).splitlines()
    assert "'=1+1,-2.5" in lines
    assert "-1,-2.5" in lines


def _per_row_csv(table: Table, zone: timezone) -> str:
    """The CSV as the per-cell rules write it, a row at a time (as_csv before its columns)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(table.columns)
    writer.writerows([render._csv_value(row.get(k), zone) for k in table.columns] for row in table.rows)
    return out.getvalue()


@pytest.mark.parametrize("zone", [UTC, timezone(timedelta(hours=-3))], ids=str)
def test_the_written_csv_is_the_per_cell_rules_csv_column_by_column(zone: timezone) -> None:
    ints = [0, -3, 10**20, None, 7]
    decimals = [Decimal("0"), None, Decimal("-1.2300"), Decimal("1E+3"), Decimal("NaN"), Decimal("0.77699515")]
    floats = [0.0, -1.5, 1e-9, None, float("-inf"), float("nan"), 0.6904, -0.0, 1e300]
    n = len(VALUES)
    columns = {
        "ints": lambda i: ints[i % len(ints)],
        "ints_no_none": lambda i: i * 3 - 40,
        "decimals": lambda i: decimals[i % len(decimals)],
        "texts": lambda i: HOSTILE[i % len(HOSTILE)],
        "texts_and_none": lambda i: None if i % 5 == 0 else HOSTILE[(i * 3) % len(HOSTILE)],
        "floats": lambda i: floats[i % len(floats)],
        "nothing": lambda i: None,
        "mixed": lambda i: VALUES[i],
        "mixed_turned": lambda i: VALUES[(i * 7) % n],
        "int_and_bool": lambda i: True if i % 4 == 0 else i,
        "missing": lambda i: Decimal(i) if i % 3 else ...,  # ... is a key the row lacks
    }
    rows = [{k: v for k, f in columns.items() if (v := f(i)) is not ...} for i in range(n)]
    table = Table(columns=list(columns), rows=rows)
    written = render.as_csv(table, zone)
    # read back, each cell is the per-cell rules' text, and each row one record: a cell
    # with a carriage return ("\r=x") quoted too, which the per-row writer did not do
    want = [[str(render._csv_value(row.get(k), zone)) for k in table.columns] for row in rows]
    assert list(csv.reader(io.StringIO(written)))[1:] == want
    assert [row for row in rows if any("\r" in str(v) for v in row.values())], "no carriage return tried"
    # without a carriage return, the very bytes the per-row writer wrote
    plain = Table(columns=list(columns), rows=[r for r in rows if not any("\r" in str(v) for v in r.values())])
    assert render.as_csv(plain, zone) == _per_row_csv(plain, zone)
    # no columns at all: a line per row, as the per-row writer wrote them
    empty = Table(columns=[], rows=[{}, {}])
    assert render.as_csv(empty, zone) == _per_row_csv(empty, zone)
