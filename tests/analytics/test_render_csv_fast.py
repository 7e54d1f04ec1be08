"""The CSV fast path (render._csv_fast) writes every cell as the per-cell rules
(render._csv_value: csv_cell of _text) do, the formula guard included."""

from __future__ import annotations

import enum
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
