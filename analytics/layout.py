"""How a terminal table fits its width (issue 14): an id, a model or a cost is never cut
nor wrapped; a number never wraps; a time may break between its date and its hour; other
text (a team, a finish reason, a prompt) wraps. Headers wrap at their underscores. When
even that is too wide, the columns a report marked as optional are left out in its order,
and the title says so.

rich's own fitting shrinks every column alike as a last resort, and then ellipsises an id
or a model; here each column gets an explicit width instead. Not responsible for what a
cell says (render.py formats values) nor for what a command shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rich import box
from rich.table import Table as RichTable
from rich.text import Text

WHOLE, NUMBER, TIME, TEXT = "whole", "number", "time", "text"
TEXT_FLOOR = 6  # the narrowest a wrapping text column gets
TIME_FLOOR = 10  # a date, with the hour on the next line
TEXT_ROOM = 20  # a text column narrower than its text and this wraps: an optional column goes first


@dataclass
class Column:
    header: str
    cells: list[Text]
    kind: str = TEXT  # WHOLE, NUMBER, TIME or TEXT
    justify: str = "left"
    drop: int = 0  # > 0: may be left out when nothing else fits, the highest first
    total: Text | None = None
    widths: tuple[int, int, int] = field(default=(0, 0, 0), init=False)  # (floor, room, natural)

    def measure(self) -> None:
        cells = [c.cell_len for c in self.cells] + ([self.total.cell_len] if self.total is not None else [])
        widest = max(cells, default=0)
        words = max((len(w) for w in self.header.replace("_", " ").split()), default=1)
        natural = max(widest, len(self.header), 1)
        if self.kind in (WHOLE, NUMBER):
            floor = max(widest, words)
        elif self.kind == TIME:
            floor = max(min(widest, TIME_FLOOR), words)
        else:
            floor = max(min(widest, TEXT_FLOOR), words)
        # the width a text keeps before an optional column is left out: TEXT_ROOM, or its
        # longest word (a name is not split inside a word while a column can go instead)
        longest = max((len(w) for c in self.cells for w in c.plain.split()), default=0)
        room = max(floor, min(natural, max(TEXT_ROOM, longest))) if self.kind == TEXT else floor
        self.widths = (floor, room, natural)


def _chrome(count: int, gap: int = 2) -> int:
    """Characters a table of `count` columns spends between them (`gap` each: a divider and
    the padding right of a column)."""
    return gap * (count - 1) if count else 0


def fit(columns: Sequence[Column], width: int) -> tuple[list[Column], list[int], int, int]:
    """The columns kept, their widths, how many optional ones were left out, and the gap
    between two columns (2, or 1 when that is what makes the rest fit)."""
    kept = list(columns)
    for column in kept:
        column.measure()
    left_out = 0
    gap = 2
    # optional columns go while the rest cannot have room (text unwrapped up to TEXT_ROOM)
    while sum(c.widths[1] for c in kept) + _chrome(len(kept), gap) > width:
        rank, index = max((c.drop, i) for i, c in enumerate(kept))
        if rank <= 0:
            break
        kept.pop(index)
        left_out += 1
    if sum(c.widths[0] for c in kept) + _chrome(len(kept), gap) > width:
        gap = 1  # the last way to fit without cutting: one space between two columns
    widths = [c.widths[2] for c in kept]
    excess = sum(widths) + _chrome(len(kept), gap) - width
    # shrink times first (the hour goes under the date), then text down to its room, then
    # headers over numbers, then text to its floor: one character at a time from the
    # column with the most left to give (a few hundred steps at most)
    for kinds, limit in (((TIME,), 0), ((TEXT,), 1), ((WHOLE, NUMBER), 0), ((TEXT,), 0)):
        while excess > 0:
            room = [(widths[i] - c.widths[limit], i) for i, c in enumerate(kept) if c.kind in kinds]
            most, index = max(room, default=(0, -1))
            if most <= 0:
                break
            widths[index] -= 1
            excess -= 1
    return kept, widths, left_out, gap


def draw(title: Text, columns: Sequence[Column], width: int) -> RichTable:
    """A rich table of `columns` fitted to `width`, with the totals as its footer (under a
    rule) when the columns carry totals."""
    kept, widths, left_out, gap = fit(columns, width)
    if left_out:
        more = f"{left_out} more column{'s' if left_out > 1 else ''}"
        title = title + Text(f"  ({more} in --format json)", style="dim")
    totals = any(c.total is not None for c in kept)
    view = RichTable(
        title=title,
        title_justify="left",
        header_style="bold",
        footer_style="bold",
        box=box.SIMPLE,
        show_edge=False,
        pad_edge=False,
        show_footer=totals,
        padding=(0, gap - 1, 0, 0),  # with the divider, `gap` spaces between two columns
    )
    for column, size in zip(kept, widths, strict=True):
        fits = size >= len(column.header)
        view.add_column(
            column.header if fits else column.header.replace("_", " "),
            footer=column.total or Text(""),
            justify=column.justify,  # type: ignore[arg-type]
            width=size,
            # (a header wider than its values wraps at its underscores; the values never do)
            no_wrap=fits and column.kind in (WHOLE, NUMBER),
            overflow="fold",
        )
    for cells in zip(*(c.cells for c in kept), strict=True):
        view.add_row(*cells)
    return view


def needed(columns: Sequence[Column], width: int) -> int:
    """The width `draw` takes: the console's, or more when even the floors do not fit
    (a terminal then wraps the line: nothing is cut)."""
    kept, widths, _, gap = fit(columns, width)
    return max(width, sum(widths) + _chrome(len(kept), gap))
