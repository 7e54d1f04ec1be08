"""Report tables as text (rich), JSON (an array of row objects, SPEC §3), JSONL or CSV, and the
two rules every command's output of stored data follows (SPEC §3, §6): in a terminal a
value is text, never markup or terminal control (`shown`); in CSV a text cell never
starts a formula (`csv_cell`).

Money is an exact `Decimal`: JSON and CSV write it with its exact digits, tables in the
one money format (`money`); ratios are exact numbers in JSON and CSV, percentages in
tables (`percent`). A terminal table ends with a totals row (`totals`: sums, ratios
recomputed from the summed parts); JSON and CSV stay row-only. The one table-fitting rule
(issue 26) is layout.fit's; here, for reports: which columns are whole and which free text
(`FREE_TEXT`), what a narrow terminal gives up first (`ranks`), the cost's parts beside the
cost (`with_cost_parts`), headers in words (`header`), no padding into a pipe (`emit`).
Times are shown in the zone asked for, and the header says which; JSON, JSONL and CSV write
each with its offset (timestamps.iso). Not responsible for computing a report, nor for
what a command chooses to show.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import sys
from datetime import UTC, date, datetime, tzinfo
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from rich.console import Console
from rich.text import Text

from llmtap.analytics import layout, timestamps
from llmtap.analytics.reports import MONEY, Table

PERCENT = ("hit_rate", "share", "error_rate", "percent")
# Ratios whose total is recomputed from the summed parts: column -> (numerator, denominator).
RATIOS = {"hit_rate": ("cache_read_tokens", "input_tokens"), "error_rate": ("errors", "requests")}
MAXED = ("retry_after_max_s",)  # a total that is the largest, not the sum
NOT_TOTALLED = ("share", "retry_after_avg_s", "price_version", "first_prompt")  # and every *_ms, *_at


def _json_value(value: Any, zone: tzinfo = UTC) -> str:
    """JSON text of one value; money (`Decimal`) as a number with its exact digits, a
    moment with its offset in `zone` (timestamps.iso)."""
    if isinstance(value, Decimal):
        return _decimal_text(value)
    if isinstance(value, datetime):
        return json.dumps(timestamps.iso(value, zone))
    if isinstance(value, date):
        return json.dumps(value.isoformat())
    return json.dumps(value, ensure_ascii=False, default=str)


def _decimal_text(value: Decimal) -> str:
    return format(value.normalize(), "f") if value else "0"


def _json_row(row: dict[str, Any], zone: tzinfo) -> str:
    return "{" + ", ".join(f"{json.dumps(key)}: {_json_value(value, zone)}" for key, value in row.items()) + "}"


def as_json(table: Table, zone: tzinfo = UTC) -> str:
    """A JSON array of row objects, one row per line (SPEC §3); times in `zone`."""
    if not table.rows:
        return "[]"
    lines = ["  " + _json_row(row, zone) for row in table.rows]
    return json_c1_escaped("[\n" + ",\n".join(lines) + "\n]")


def as_jsonl(table: Table, zone: tzinfo = UTC) -> str:
    """The row objects of `as_json`, one JSON object a line (nothing for no rows)."""
    return json_c1_escaped("".join(_json_row(row, zone) + "\n" for row in table.rows))


def json_c1_escaped(text: str) -> str:
    """JSON text with DEL and the C1 controls (U+009B, CSI, among them) as \\u escapes: json.dumps
    escapes the C0 ones itself, but not these with `ensure_ascii=False`, and some terminals act
    on them. They can only occur inside strings, so the JSON means the same."""
    return text.translate(_JSON_C1)


def as_csv(table: Table, zone: tzinfo = UTC) -> str:
    """A header and a line per row; times with their offset in `zone` (timestamps.iso)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(table.columns)
    if not table.columns:
        writer.writerows([] for _ in table.rows)
        return out.getvalue()
    made = [_csv_column([row.get(k) for row in table.rows], zone) for k in table.columns]
    rows = zip(*(cells for cells, _texts in made), strict=True)
    if not any(texts and any(type(c) is str and "\r" in c for c in cells) for cells, texts in made):
        writer.writerows(rows)
        return out.getvalue()
    # The writer quotes a cell with a newline, but not one with a bare carriage return
    # (only what its line terminator holds): a reader then ends the row there. A row with
    # one is written with its text cells quoted.
    guarded = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_STRINGS)
    for row in rows:
        (guarded if any(type(c) is str and "\r" in c for c in row) else writer).writerow(row)
    return out.getvalue()


_NONE = type(None)


def _csv_column(values: list[Any], zone: tzinfo) -> tuple[list[Any], bool]:
    """A column's cells (`_csv_fast` of each value), a column at a time: a report's column
    holds values of one type, and its ints (most of its cells) are their own cells. And
    whether they may hold any text but a number's."""
    kinds = set(map(type, values))
    if kinds <= {int, _NONE}:
        return (values if _NONE not in kinds else ["" if v is None else v for v in values]), False
    if kinds <= {Decimal, _NONE} or kinds <= {float, _NONE}:
        if Decimal in kinds:
            texts = ["" if v is None else _decimal_text(v) for v in values]
        else:
            texts = ["" if v is None else f"{v:g}" for v in values]  # _text's
        return [t if not t or t[0] not in _PLAIN_START else csv_cell(t) for t in texts], False
    if kinds <= {str, _NONE}:
        return ["" if v is None else v if v and v[0] not in _PLAIN_START else csv_cell(v) for v in values], True
    return [_csv_fast(v, zone) for v in values], True


# A text whose first character is none of these is a cell as it is (csv_cell looks past
# leading spaces and newlines only, and quotes only a formula start after them).
_PLAIN_START = frozenset(" \n=+-@\t\r")


def _csv_fast(value: Any, zone: tzinfo) -> Any:
    """`_csv_value`, by the exact type of the value for the common cells (int, None, str,
    Decimal) without the generic path: 18,000 rows of a 100M-exchange report are
    ~100,000 cells. Anything else, subclasses included, takes `_csv_value`."""
    kind = type(value)
    if kind is int:
        return value
    if value is None:
        return ""
    if kind is str:
        return value if value and value[0] not in _PLAIN_START else csv_cell(value)
    if kind is Decimal:
        text = _decimal_text(value)
        return text if text[0] not in _PLAIN_START else csv_cell(text)
    return _csv_value(value, zone)


def _csv_value(value: Any, zone: tzinfo) -> Any:
    """A value's CSV cell (csv_cell of its text); an int, most of a report's cells, as it is."""
    if type(value) is int:  # its text is a number: csv_cell keeps it (not bool, whose text is a word)
        return value
    if isinstance(value, datetime):
        return csv_cell(timestamps.iso(value, zone))
    return csv_cell(_text(value))


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


def make_console(fallback_width: int = 200) -> Console:
    """A console as wide as the terminal, or as `COLUMNS` says; `fallback_width` when the
    output is a pipe or a file and nothing says how wide."""
    if os.environ.get("COLUMNS", "").isdigit() or sys.stdout.isatty():
        return Console(highlight=False)
    return Console(width=fallback_width, highlight=False)


# What a terminal table keeps in any case (never left out; folded under a neighbour at
# most): the --by keys besides these.
KEPT = ("id", "exchange_id", "conversation_id", "team", "model", "name", "setting", "cost_usd")
# Free text: wraps at its words (and folds a longer word); every other cell is whole.
FREE_TEXT = ("first_prompt", "detail", "value", "price_version", "crossed", "alerted", "whatif_prices")
# A cost's parts, shown beside it when the rows have them and they are not all zero;
# a narrow terminal leaves them out first, in this order.
COST_PARTS = ("fee_cost_usd", "input_cost_usd", "output_cost_usd", "cache_read_cost_usd", "cache_write_cost_usd")
_PARTS_SHOWN = ("input_cost_usd", "cache_read_cost_usd", "cache_write_cost_usd", "output_cost_usd", "fee_cost_usd")
# Metrics a narrow terminal leaves out before the others (after a report's own `optional`).
LESS_NEEDED = ("usage_missing", "reasoning_tokens", "cache_write_tokens", "cache_read_tokens")
HEADERS = {"cost_usd": "cost", "fee_cost_usd": "fees"}
FORMATS = "--format json/csv"


def header(column: str, zone: tzinfo = UTC) -> str:
    """A column's header in words (`cache_read_tokens` is "cache read tokens", money
    loses its `_usd`, a time says its zone); JSON and CSV keep the names."""
    if column in HEADERS:
        return HEADERS[column]
    if column.endswith("_at"):
        return f"{column.removesuffix('_at').replace('_', ' ')} ({zone_label(zone)})"
    return column.removesuffix("_usd").replace("_", " ")


def is_money(column: str) -> bool:
    return column in MONEY or column.endswith("_usd")


def with_cost_parts(columns: list[str], table: Table) -> list[str]:
    """`columns` with the cost's parts before the cost (and the cache writes after the
    cache reads), where the table has them and some shown row is not zero in them."""

    def some(column: str) -> bool:
        return column in table.columns and column not in columns and any(row.get(column) for row in table.rows)

    out = list(columns)
    if "cache_read_tokens" in out and some("cache_write_tokens"):
        out.insert(out.index("cache_read_tokens") + 1, "cache_write_tokens")
    if "cost_usd" in out:
        parts = [c for c in _PARTS_SHOWN if some(c)]
        at = out.index("cost_usd")
        out[at:at] = parts
    return out


Steps = dict[str, tuple[int, str | None]]


def ranks(columns: list[str], dimensions: list[str], optional: tuple[str, ...] = ()) -> Steps:
    """The fitting steps of a report's columns: column -> (rank, neighbour it folds under
    or None); the highest rank goes first. The cost's parts go first, then the report's
    `optional` columns in their order, then `LESS_NEEDED`; then the columns always kept
    (`KEPT`, the --by keys), which are never left out, fold their text ones under their
    left neighbour, the rightmost first (a value on a line of its own loses nothing);
    only then do the other columns go, from the right."""
    kept = set(KEPT) | set(dimensions)
    order: list[str] = []
    for column in [*COST_PARTS, *optional, *LESS_NEEDED]:
        # the cache writes go with the cache reads (with_cost_parts adds them beside them)
        for one in ("cache_write_tokens", column) if column == "cache_read_tokens" else (column,):
            if one in columns and one not in kept and one not in order:
                order.append(one)
    texts = [c for c in columns if c in kept and not is_money(c)]
    folds = [c for c in reversed(texts[1:]) if columns[columns.index(c) - 1] in texts]
    rest = [c for c in reversed(columns) if c not in kept and c not in order]
    steps: Steps = {}
    for rank, column in enumerate(reversed([*order, *folds, *rest]), start=1):
        steps[column] = (rank, columns[columns.index(column) - 1] if column in folds else None)
    return steps


def as_rich(
    table: Table,
    title: str,
    console: Console,
    columns: list[str] | None = None,
    *,
    zone: tzinfo = UTC,
    total: bool = True,
    optional: tuple[str, ...] = (),
) -> None:
    """The table fitted to the console (`print_fitted`), with a totals row under the rows
    (`total`), headers in words, times in `zone` (the header says which), the cost's parts
    beside it (`with_cost_parts`); `ranks` says what a narrow terminal gives up first."""
    columns = with_cost_parts(list(columns or table.columns), table)
    sums = totals(table) if total and table.rows else {}
    steps = ranks(columns, table.dimensions, optional)
    headers = {column: header(column, zone) for column in columns}
    drawn = []
    for column in columns:
        values = [row.get(column) for row in table.rows]
        numeric = bool(values) and all(
            isinstance(v, (int, float, Decimal)) and not isinstance(v, bool) or v is None for v in values
        )
        rank, under = steps.get(column, (0, None))
        drawn.append(
            layout.Column(
                headers[column],
                [shown(_cell(column, value, zone)) for value in values],
                layout.FREE if column in FREE_TEXT and not numeric else layout.WHOLE,
                justify="right" if numeric or is_money(column) else "left",
                drop=rank,
                fold=headers[under] if under else None,
                total=shown(_cell(column, sums.get(column), zone)) if sums else None,
            )
        )
    print_fitted(console, title, drawn)


def print_fitted(console: Console, title: str, columns: list[layout.Column], *, formats: str = FORMATS) -> None:
    """`title` on a line of its own, then `columns` as a table fitted to the console
    (`layout.fit`), then one line naming the columns left out, if any. Wider than the
    console only when even the columns always kept do not fit (the terminal then wraps
    the lines: nothing is cropped). Into a pipe or a file, no line ends in spaces."""
    fitted = layout.fit(columns, console.width)
    if title:
        heading = shown(title)
        heading.stylize("bold")
        emit(console, heading)
    width = console.width
    console.width = max(width, fitted.width)
    try:
        emit(console, layout.draw(None, fitted))
    finally:
        console.width = width
    if fitted.left_out:
        line = shown(left_out_line(fitted.left_out, width, formats))
        line.stylize("dim")
        emit(console, line)


def emit(console: Console, renderable: Any) -> None:
    """`renderable` printed, uncropped; into a pipe or a file without the spaces rich pads
    each line with to the table's width."""
    if console.is_terminal:
        console.print(renderable, crop=False)
        return
    with console.capture() as captured:
        console.print(renderable, crop=False)
    console.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


def left_out_line(headers: list[str], width: int, formats: str = FORMATS) -> str:
    """One line, at most `width` wide where it can be, naming the columns a table left out."""
    names = [h.replace("\n", " and ") for h in headers]
    tail = f" (all columns: {formats})"
    for count in range(len(names), 0, -1):
        rest = f" and {len(names) - count} more" if count < len(names) else ""
        line = f"left out: {', '.join(names[:count])}{rest}{tail}"
        if len(line) <= width:
            return line
    return f"left out: {len(names)} columns{tail}"


def zone_label(zone: tzinfo) -> str:
    return str(getattr(zone, "key", None) or zone.tzname(None) or "UTC")


def totals(table: Table) -> dict[str, Any]:
    """The totals row of a terminal table: the first grouping column says `total`, counts
    and money are summed (money over the rows that have it; None when none has), ratios
    recomputed from the summed parts (hit rate = Σ cache_read / Σ input), maxima kept;
    names, percentiles and times are left blank (None)."""
    out: dict[str, Any] = {}
    for column in table.columns:
        values = [row.get(column) for row in table.rows]
        numbers = [v for v in values if v is not None]
        if column in table.dimensions or column in NOT_TOTALLED or column.endswith(("_ms", "_at")):
            out[column] = None
        elif column in RATIOS:
            part, whole = (sum(row.get(c) or 0 for row in table.rows) for c in RATIOS[column])
            out[column] = Decimal(part) / Decimal(whole) if whole else None
        elif not numbers or not all(isinstance(v, (int, Decimal)) and not isinstance(v, bool) for v in numbers):
            out[column] = None
        elif column in MAXED:
            out[column] = max(numbers)
        else:
            out[column] = sum(numbers)
    first = table.columns[0] if table.columns else None
    if first is not None and out.get(first) is None:
        out[first] = "total"
    return out


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
    """A ratio (0.7467) as a percentage with one decimal (`74.7%`, `3,435.1%`)."""
    if ratio is None:
        return missing
    return f"{float(ratio) * 100:,.1f}%"


def _cell(column: str, value: Any, zone: tzinfo = UTC) -> str:
    if is_money(column) and isinstance(value, (Decimal, int)) and not isinstance(value, bool):
        return money(value)
    if column in PERCENT and isinstance(value, (Decimal, float, int)) and not isinstance(value, bool):
        return percent(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, datetime):
        return local(value, zone).strftime("%Y-%m-%d %H:%M:%S")
    return _text(value)


def local(moment: datetime, zone: tzinfo = UTC) -> datetime:
    """A stored time (naive UTC, or aware) as the wall time in `zone`."""
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return aware.astimezone(zone)


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


def price_footer_lines(footer: dict[str, Any]) -> list[str]:
    """The lines under `report cost`'s table (`reports.price_footer`): which prices were
    used, and what is not in the total."""
    versions = footer.get("price_versions") or []
    lines = [f"prices: {'; '.join(versions)}" if versions else "prices: none used (nothing was priced)"]
    for entry in footer.get("unpriced_models") or []:
        lines.append(
            f"unpriced: {entry['model']} — {_count(entry['requests'], 'request')}, "
            f"{entry['input_tokens']:,} input and {entry['output_tokens']:,} output tokens, not in the total"
        )
    if footer.get("unverified_host"):
        lines.append(f"of those, {footer['unverified_host']:,} went to an unverified host (never priced)")
    if footer.get("usage_missing"):
        missing = _count(footer["usage_missing"], "exchange")
        lines.append(f"usage missing: {missing} without usage, not priced (not $0)")
    return lines


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}" + ("" if number == 1 else "s")
