"""Terminal tables at 80, 100 and 120 columns (issue 26, SPEC §3 "Output vocabulary"):
no line wider than the terminal; every id, team, model and amount of money whole on one
line; no cell cut or wrapped but free text; the least needed columns left out (or
folded under a neighbour) and named in one line; the cost's parts beside the cost;
headers in words; no line of piped output ending in spaces; numbers with separators in
`show`. Every report kind, `log`, `show` (and `--conversation`) and `report budgets`,
over the store of wide_store.py, through the CLI in this process (its output is a pipe).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from llmtap.analytics.render import money, percent
from tests.analytics import wide_store
from tests.helpers import llmtap

WIDTHS = (80, 100, 120)
WIDE = 400  # wide enough for every column: the cells as a table shows them unfitted
COMMANDS = {
    "usage": ("report", "usage"),
    "cost": ("report", "cost"),
    "cost-team-model": ("report", "cost", "--by", "team,model"),
    "cache": ("report", "cache"),
    "finish": ("report", "finish", "--by", "provider"),  # its default, named: its values are kept
    "tools": ("report", "tools"),
    "errors-provider-model": ("report", "errors", "--by", "provider,model"),
    "latency": ("report", "latency"),
    "conversations": ("report", "conversations"),
    "cache-list": ("report", "cache", "--list"),
    "tools-list": ("report", "tools", "--list"),
    "whatif": ("report", "whatif", "--model", "gemini-2.5-pro", "--by", "team"),
    "budgets": ("report", "budgets"),
    "log": ("log", "--limit", "30"),
}
# the columns whose every value must be whole on a line at every width
KEPT = ("id", "conversation_id", "team", "model", "name", "cost_usd")  # and the --by keys


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    yield wide_store.build(tmp_path_factory.mktemp("wide"))


def run(wide: tuple[str, Path], *args: str, columns: int | None = None) -> Any:
    url, config = wide
    env = {"COLUMNS": str(columns) if columns else None, "LLMTAP_CONFIG": None}
    result = llmtap(*args, "--db", url, "--config", str(config), env=env)
    assert result.code == 0, result.err
    return result.json() if "json" in args else result.out


def body(out: str) -> list[str]:
    """The table's rows (and totals): the lines between its header rule and the last rule."""
    lines = out.splitlines()
    rules = [i for i, line in enumerate(lines) if line.startswith("───")]
    if not rules:
        return []
    end = rules[-1] + 2 if len(rules) > 1 else len(lines)  # the totals row after the last rule
    rows = lines[rules[0] + 1 : end]
    return [line for line in rows if line and not line.startswith(("───", "left out: "))]


def cells(out: str) -> set[str]:
    """The cells of a table printed wide enough for all of them: runs between two spaces."""
    return {cell for line in body(out) for cell in re.split(r"\s{2,}", line.strip()) if cell}


def whole(chunk: str, known: set[str]) -> bool:
    """`chunk` (text between two runs of spaces) is whole cells with single spaces between
    (a table that needs a gap of one), or a piece of a cell that has spaces (free text)."""
    words = chunk.split(" ")
    reach = {0}
    for start in range(len(words)):
        if start in reach:
            reach |= {end for end in range(start + 1, len(words) + 1) if " ".join(words[start:end]) in known}
    if len(words) in reach or any(" " in cell and chunk in cell for cell in known):
        return True
    # an amount that moves between two runs (a budget's forecast) is whole if it is one
    amount = re.fullmatch(r"-?\$([\d,]+\.\d+)", chunk)
    return amount is not None and money(Decimal(amount[1].replace(",", ""))) == chunk.lstrip("-")


def on_a_line(value: str, out: str) -> bool:
    return re.search(rf"(^|\s){re.escape(value)}(\s|$)", out, re.MULTILINE) is not None


def kept_values(rows: list[dict[str, Any]], args: tuple[str, ...]) -> set[str]:
    by = args[args.index("--by") + 1].split(",") if "--by" in args else []
    values = set()
    for row in rows:
        for column in (*KEPT, *by):
            value = row.get(column)
            if isinstance(value, Decimal | int) and column == "cost_usd":
                values.add(money(value))
            elif isinstance(value, str) and value:
                values.add(value)
    return values


def as_json(args: tuple[str, ...]) -> tuple[str, ...]:
    return (*args, "--format", "json")


@pytest.mark.parametrize("columns", WIDTHS)
@pytest.mark.parametrize("name", COMMANDS)
def test_tables_fit_and_cut_nothing(wide, name, columns):
    args = COMMANDS[name]
    out = run(wide, *args, columns=columns)
    known = cells(run(wide, *args, columns=WIDE))
    assert body(out), out
    too_wide = [line for line in out.splitlines() if len(line) > columns]
    assert not too_wide, "\n" + out
    padded = [line for line in out.splitlines() if line != line.rstrip()]
    assert not padded, "\n" + out
    for line in body(out):
        for chunk in re.split(r"\s{2,}", line.strip()):
            assert not chunk or whole(chunk, known), f"{chunk!r} is a cut cell at {columns}:\n{out}"
    values = list(kept_values(run(wide, *as_json(args)), args))
    assert values, "the JSON gives values the table must keep whole"
    for value in values:
        assert on_a_line(value, out), f"{value!r} is not whole at {columns}:\n{out}"
    left_out = [line for line in out.splitlines() if line.startswith("left out: ")]
    assert len(left_out) <= 1 and all("--format json" in line for line in left_out)


def test_cost_parts_show_beside_the_cost_and_go_first(wide):
    wider = run(wide, "report", "cost", columns=200)
    rows = run(wide, "report", "cost", "--format", "json")
    platform = next(r for r in rows if r["team"] == wide_store.PLATFORM)
    assert platform["cache_write_cost_usd"] > platform["cost_usd"] / 2  # what the table must not hide
    for column in ("cache_write_cost_usd", "cache_read_cost_usd", "input_cost_usd", "output_cost_usd"):
        assert money(platform[column]) in wider
    assert "cache write" in wider and "cache_write" not in wider  # headers in words
    assert "fees" not in wider  # no fee anywhere: not shown
    narrow = run(wide, "report", "cost", columns=100)
    assert money(platform["cost_usd"]) in narrow and money(platform["cache_write_cost_usd"]) not in narrow
    assert "left out: input cost, output cost" in narrow
    conversations = run(wide, "report", "conversations", columns=250)
    assert "cache write cost" in conversations.replace("\n", " ") or "cache write" in conversations


def test_a_folded_column_keeps_each_value_on_its_line(wide):
    rows = run(wide, "log", "--limit", "5", "--format", "json")
    out = run(wide, "log", "--limit", "5", columns=80)
    lines = out.splitlines()
    for row in rows:
        [at] = [i for i, line in enumerate(lines) if row["id"] in line]
        assert row["team"] in lines[at] and row["model"] in lines[at + 1]  # the model under its team
        assert row["started_at"][:19].replace("T", " ") in lines[at + 1]  # the time under its id
    assert out.count("$") == len(rows) + 1  # each cost, and the total, once


def test_log_cost_column_is_as_wide_as_its_values(wide):
    out = run(wide, "log", "--limit", "60", columns=200)
    rows = run(wide, "log", "--limit", "60", "--format", "json")
    unpriced = sum(1 for r in rows if r["cost_usd"] is None)
    assert unpriced and f"+ {unpriced} unpriced exchanges (not in the total)" in out
    total = next(line for line in body(out) if line.startswith("total"))
    priced = sum(r["cost_usd"] for r in rows if r["cost_usd"] is not None)
    assert total.split()[-1] == money(priced)  # (the id column's total is blank)
    assert max(len(cell) for cell in re.split(r"\s{2,}", total)) < len(f"{money(priced)} + {unpriced} unpriced")


def test_show_has_separators_and_words(wide):
    rows = run(wide, "log", "--limit", "60", "--format", "json")
    big = max((r for r in rows if r["cost_usd"] is not None), key=lambda r: r["cost_usd"])
    data = run(wide, "show", big["id"], "--format", "json")
    for columns in WIDTHS:
        out = run(wide, "show", big["id"], columns=columns)
        assert all(len(line) <= columns and line == line.rstrip() for line in out.splitlines()), out
        for value in (
            big["id"],
            big["team"],
            big["model"],
            *(money(v) for v in data["cost"].values() if isinstance(v, Decimal)),
        ):
            assert on_a_line(value, out), f"{value!r} at {columns}:\n{out}"
        tokens = data["usage"]["input_tokens"]
        assert f"{tokens:,}" in out and str(tokens) not in out
        assert "cache read tokens" in out and "cache_read_tokens" not in out
    turns = run(wide, "show", big["id"], "--conversation", columns=80)
    assert all(len(line) <= 80 and line == line.rstrip() for line in turns.splitlines()), turns
    assert on_a_line(money(big["cost_usd"]), turns) and on_a_line(big["id"], turns)


def test_budgets_money_is_a_number(wide):
    rows = run(wide, "report", "budgets", "--format", "json")
    for columns in WIDTHS:
        out = run(wide, "report", "budgets", columns=columns)
        for row in rows:
            for value in (row["name"], money(row["limit_usd"]), money(row["spent_usd"])):
                assert on_a_line(value, out), f"{value!r} at {columns}:\n{out}"
    over = next(r for r in rows if r["name"] == wide_store.DATA)
    assert percent(over["percent"]) in out and re.search(r"\d,\d{3}\.\d%", percent(over["percent"]))
