"""Report tables as text (rich), JSON (an array of row objects, SPEC §3) or CSV.

Money is an exact `Decimal`: JSON writes it as a number with its exact digits, CSV and
tables as plain decimal text. Not responsible for computing anything.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from llmtap.analytics.reports import MONEY, Table


def _json_value(value: Any) -> str:
    """JSON text of one value; money (`Decimal`) as a number with its exact digits."""
    if isinstance(value, Decimal):
        return _decimal_text(value)
    if isinstance(value, (datetime, date)):
        return json.dumps(value.isoformat())
    return json.dumps(value, ensure_ascii=False, default=str)


def _decimal_text(value: Decimal) -> str:
    return format(value.normalize(), "f") if value else "0"


def as_json(table: Table) -> str:
    """A JSON array of row objects, one row per line (SPEC §3)."""
    if not table.rows:
        return "[]"
    lines = [
        "  {" + ", ".join(f"{json.dumps(key)}: {_json_value(value)}" for key, value in row.items()) + "}"
        for row in table.rows
    ]
    return "[\n" + ",\n".join(lines) + "\n]"


def as_csv(table: Table) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=table.columns, lineterminator="\n")
    writer.writeheader()
    for row in table.rows:
        writer.writerow({k: _text(v) for k, v in row.items()})
    return out.getvalue()


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, Decimal):
        return _decimal_text(value)
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    return str(value)


def as_rich(table: Table, title: str, console: Console, columns: list[str] | None = None) -> None:
    view = RichTable(title=title, title_justify="left", header_style="bold")
    columns = columns or table.columns
    for column in columns:
        numeric = bool(table.rows) and all(
            isinstance(r.get(column), (int, float, Decimal)) or r.get(column) is None for r in table.rows
        )
        view.add_column(column, justify="right" if numeric else "left")
    for row in table.rows:
        # Text, not str: rich would read "[red]" in a team or model name as markup (and
        # raise on "[/bold]"); values are shown as they are.
        view.add_row(*(Text(_cell(column, row.get(column))) for column in columns))
    console.print(view)


def _cell(column: str, value: Any) -> str:
    if column in MONEY and isinstance(value, Decimal):
        return f"${value:,.6f}" if abs(value) < 1 else f"${value:,.2f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return _text(value).translate(_CONTROLS)


# Control characters in a name (an ESC starting a terminal sequence, say) are shown as
# \xNN in a terminal table, never sent to the terminal; JSON and CSV keep them verbatim.
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}
