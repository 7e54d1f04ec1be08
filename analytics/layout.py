"""How a terminal table fits its width (issue 26): the one rule of every table llmtap
prints. A cell is either kept whole (an id, a team, a model, money, a number, a time, any
name: never cut, never wrapped, its full width) or free text (a prompt, a detail: it
wraps at its words and folds a word longer than the column). Headers are words and wrap
between them, never inside one.

When the columns do not fit, the fitter takes the columns' own steps in their order,
least needed first: a column is left out, or folded under a neighbour (its cell on a
second line of the neighbour's, each value still whole on its line), until the rest fits;
`left_out` names what went, for the one footer line that says so. A table that cannot fit
even then is printed wider than the terminal (the terminal wraps its lines; nothing is cut).

Not responsible for what a cell says (render.py formats values), nor for which columns a
command shows or in which order they go (the command, or render.py's rule for reports).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rich import box
from rich.table import Table as RichTable
from rich.text import Text

WHOLE, FREE = "whole", "free"
FREE_FLOOR = 12  # the narrowest a free-text column gets
GAP = 2  # spaces between two columns; 1 when that is the last way to fit


def _line_width(text: Text) -> int:
    return max((Text(line).cell_len for line in text.plain.split("\n")), default=0)


def _words(text: str) -> int:
    return max((len(word) for word in text.split()), default=0)


@dataclass
class Column:
    header: str
    cells: list[Text]
    kind: str = WHOLE  # WHOLE or FREE
    justify: str = "left"
    drop: int = 0  # > 0: may go (or fold, with `fold`) when the table does not fit, the highest first
    fold: str | None = None  # the header of the neighbour it folds under instead of going
    total: Text | None = None
    widths: tuple[int, int] = field(default=(0, 0), init=False)  # (floor, natural)

    def measure(self) -> None:
        cells = [_line_width(c) for c in self.cells]
        if self.total is not None:
            cells.append(_line_width(self.total))
        widest = max(cells, default=0)
        header = max((len(line) for line in self.header.split("\n")), default=0)
        natural = max(widest, header, 1)
        words = max(_words(self.header), 1)
        floor = max(widest, words) if self.kind == WHOLE else max(min(widest, FREE_FLOOR), words)
        self.widths = (floor, natural)

    def absorb(self, other: Column) -> None:
        """`other` folded under this column: each cell on a line of its own, below this one's."""

        def under(top: Text | None, bottom: Text | None) -> Text:
            if top is None or not top.plain:
                return bottom.copy() if bottom is not None else Text("")
            if bottom is None or not bottom.plain:
                return top
            return Text.assemble(top, "\n", bottom)

        self.cells = [under(a, b) for a, b in zip(self.cells, other.cells, strict=True)]
        if self.total is not None or other.total is not None:
            self.total = under(self.total, other.total)
        self.header = f"{self.header}\n{other.header}"
        self.kind = WHOLE if WHOLE in (self.kind, other.kind) else FREE


def _chrome(count: int, gap: int) -> int:
    return gap * (count - 1) if count else 0


def _floor(columns: Sequence[Column], gap: int = GAP) -> int:
    return sum(c.widths[0] for c in columns) + _chrome(len(columns), gap)


@dataclass
class Fitted:
    columns: list[Column]
    widths: list[int]
    gap: int
    left_out: list[str]

    @property
    def width(self) -> int:
        return sum(self.widths) + _chrome(len(self.columns), self.gap)


def fit(columns: Sequence[Column], width: int) -> Fitted:
    """The columns kept (some with others folded under them), their widths, the gap, and
    the headers of those left out, in the order they went."""
    kept = [Column(c.header, list(c.cells), c.kind, c.justify, c.drop, c.fold, c.total) for c in columns]
    for column in kept:
        column.measure()
    order = {id(c): i for i, c in enumerate(kept)}
    gone: list[Column] = []
    for step in sorted((c for c in kept if c.drop > 0), key=lambda c: -c.drop):
        if _floor(kept) <= width:
            break
        target = next((c for c in kept if step.fold is not None and c.header.split("\n")[0] == step.fold), None)
        kept.remove(step)
        if target is not None:
            target.absorb(step)
            target.measure()
        else:
            gone.append(step)
    # a fold late in the steps can make room for a column left out before it: those come
    # back, the most needed first, while they fit
    while gone:
        trial = sorted([*kept, gone[-1]], key=lambda c: order[id(c)])
        if _floor(trial) > width:
            break
        kept = trial
        gone.pop()
    left_out = [c.header for c in sorted(gone, key=lambda c: -c.drop)]
    _label_first(kept, columns[0].total if columns else None)
    gap = GAP if _floor(kept) <= width else 1
    widths = [c.widths[0] for c in kept]
    spare = width - sum(widths) - _chrome(len(kept), gap)
    # what is left goes one character at a time to the column furthest from its natural
    # width (a header on one line, free text unwrapped): at most `width` steps
    while spare > 0:
        short, index = max(((c.widths[1] - widths[i], i) for i, c in enumerate(kept)), default=(0, -1))
        if short <= 0:
            break
        widths[index] += 1
        spare -= 1
    return Fitted(kept, widths, gap, left_out)


def _label_first(kept: list[Column], label: Text | None) -> None:
    """The totals row starts with its label (`total`): where the first column went under
    another, the label moves to the column now first, if that one has no total."""
    if not kept or label is None or not label.plain:
        return
    first = kept[0]
    if first.total is not None and first.total.plain:
        return
    for column in kept[1:]:
        if column.total is not None and label.plain in column.total.plain.split("\n"):
            lines = [line for line in column.total.plain.split("\n") if line != label.plain]
            column.total = Text("\n".join(lines))
            first.total = label
            first.measure()
            column.measure()
            return


def draw(title: Text | None, fitted: Fitted) -> RichTable:
    """A rich table of the fitted columns, with the totals as its footer (under a rule)
    when the columns carry totals."""
    totals = any(c.total is not None and c.total.plain for c in fitted.columns)
    view = RichTable(
        title=title if title is not None and title.plain else None,
        title_justify="left",
        header_style="bold",
        footer_style="bold",
        box=box.SIMPLE,
        show_edge=False,
        pad_edge=False,
        show_footer=totals,
        padding=(0, fitted.gap - 1, 0, 0),  # with the divider, `gap` spaces between two columns
    )
    for column, size in zip(fitted.columns, fitted.widths, strict=True):
        view.add_column(
            Text(column.header, justify=column.justify),  # type: ignore[arg-type]
            footer=_kept(column.total or Text(""), column),
            justify=column.justify,  # type: ignore[arg-type]
            width=size,
            overflow="fold",  # free text only: a whole cell is never narrower than its column
        )
    for cells in zip(*(c.cells for c in fitted.columns), strict=True):
        view.add_row(*(_kept(cell, column) for cell, column in zip(cells, fitted.columns, strict=True)))
    return view


def _kept(cell: Text, column: Column) -> Text:
    if column.kind == WHOLE:
        cell = cell.copy()
        cell.no_wrap = True
    return cell
