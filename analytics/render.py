"""Report tables as text (rich), JSON (an array of row objects, SPEC §3) or CSV, and the
two rules every command's output of stored data follows (SPEC §3, §6): in a terminal a
value is text, never markup or terminal control (`shown`); in CSV a text cell never
starts a formula (`csv_cell`).

Money is an exact `Decimal`: JSON writes it as a number with its exact digits, CSV and
tables as plain decimal text. Not responsible for computing anything, nor for what a
command chooses to show.
"""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import date, datetime
from decimal import ROUND_HALF_UP, Decimal
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
    return json_c1_escaped("[\n" + ",\n".join(lines) + "\n]")


def json_c1_escaped(text: str) -> str:
    """JSON text with DEL and the C1 controls (U+009B, CSI, among them) as \\u escapes: json.dumps
    escapes the C0 ones itself, but not these with `ensure_ascii=False`, and some terminals act
    on them. They can only occur inside strings, so the JSON means the same."""
    return text.translate(_JSON_C1)


def as_csv(table: Table) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=table.columns, lineterminator="\n")
    writer.writeheader()
    for row in table.rows:
        writer.writerow({k: csv_cell(_text(v)) for k, v in row.items()})
    return out.getvalue()


# A spreadsheet reads a cell that starts with one of these as a formula (OWASP, "CSV
# injection"); one that starts with spaces and then one of them, too, in some importers.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def csv_cell(value: Any) -> Any:
    """A CSV cell a spreadsheet shows as text: a text value that would start a formula gets
    a leading `'`. Numbers stay numbers, negative ones too, whether int, Decimal or the text
    of one; other values are returned as they are."""
    if not isinstance(value, str) or not value.lstrip(" \n").startswith(_FORMULA_START):
        return value
    if _NUMBER.fullmatch(value.strip(" ")):
        return value
    return "'" + value


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
        view.add_row(*(shown(_cell(column, row.get(column))) for column in columns))
    console.print(view)


def money(value: Decimal | int | None, *, missing: str = "") -> str:
    """The one money format of every table and page (issue 14): `$1,234.56`; under a
    dollar, four significant digits (`$0.01235`, `$0.0004500`); zero is `$0.00`. Exact
    figures are JSON's and CSV's: this is for reading."""
    if value is None:
        return missing
    amount = Decimal(value)
    sign = "-" if amount < 0 else ""
    amount = abs(amount)
    if amount == 0:
        return "$0.00"
    if amount >= 1:
        return f"{sign}${amount.quantize(Decimal('0.01'), rounding=ROUND_HALF_UP):,}"
    shown = amount.quantize(Decimal(1).scaleb(amount.adjusted() - 3), rounding=ROUND_HALF_UP)
    if shown >= 1:  # 0.99996 rounds up to a dollar
        return f"{sign}$1.00"
    return f"{sign}${format(shown, 'f')}"


def percent(ratio: float | Decimal | None, *, missing: str = "") -> str:
    """A ratio (0.7467) as a percentage with one decimal (`74.7%`)."""
    if ratio is None:
        return missing
    return f"{float(ratio) * 100:.1f}%"


def _cell(column: str, value: Any) -> str:
    if column in MONEY and isinstance(value, Decimal):
        return money(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return _text(value)


def shown(value: Any, *, lines: bool = False) -> Text:
    """`value` as a terminal shows it: rich `Text`, so "[/bold]" in a team or model name is
    never read as markup (rich raises on a closing tag it did not open), and every control
    character as `\\xNN`, so an ESC or OSC sequence, a BEL or a CR that rewrites the line is
    never sent to the terminal. With `lines` (multi-line text: an answer, a prompt, a body)
    a newline stays a newline, CRLF counts as one, and a tab stays (rich expands it)."""
    text = value if isinstance(value, str) else _text(value)
    if lines:
        return Text(text.replace("\r\n", "\n").translate(_CONTROLS_IN_LINES))
    return Text(text.translate(_CONTROLS))


# JSON and CSV keep control characters verbatim (they are the data); only a terminal
# view translates them.
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}
_CONTROLS_IN_LINES = {c: v for c, v in _CONTROLS.items() if c not in (0x09, 0x0A)}
_JSON_C1 = {c: f"\\u{c:04x}" for c in range(0x7F, 0xA0)}
