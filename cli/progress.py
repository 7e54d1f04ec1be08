"""Progress of a long command (import, export, reprice, reprocess, prune, lake sync; SPEC
§3): a rich bar on standard error while the work runs, when standard error is a terminal,
and nothing at all otherwise (a pipe, a file, a cron job's mail). Standard output is never
touched: it may carry the command's data (`llmtap export` to stdout).

The work reports through `Meter.advance(n)`, as often as it likes: the count is kept in a
plain integer and handed to rich at most every UPDATE_EVERY seconds, so a callback per row
costs an addition and a clock read. A total that costs a query to know is asked for only
when a bar is shown.

Not responsible for the final count line (each command words its own), nor for the
import's bar of bytes read per file (cli/importer.py).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

UPDATE_EVERY = 0.2  # seconds between hand-overs of the count to rich
REDRAWS = 5  # a second: rich's drawing thread takes the interpreter's lock from the work


def shown() -> bool:
    """Whether progress is drawn: standard error is a terminal."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced by an object without it, or closed
        return False


class Meter:
    """`with Meter("exporting", total=…) as meter: meter.advance(n)`. `total` is a count,
    a function that counts (called only when the bar is shown), or None for work whose
    size is unknown (a spinner and a running count; no count when `unit` is empty: one
    statement that says nothing until it is done). `show=False`: never a bar (the data
    itself is scrolling past on the same terminal). `done` is the count so far, bar or not."""

    def __init__(
        self, label: str, total: int | Callable[[], int] | None = None, unit: str = "exchanges", *, show: bool = True
    ) -> None:
        self.label, self.unit, self.show = label, unit, show
        self.done = 0
        self._total = total
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._handed = 0.0  # monotonic time of the last hand-over

    def __enter__(self) -> Meter:
        if self.show and shown():
            self._start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._push()
            self._progress.stop()
            self._progress = None

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self._progress is not None:
            now = time.monotonic()
            if now - self._handed >= UPDATE_EVERY:
                self._handed = now
                self._push()

    def update(self, done: int) -> None:
        """The count so far, for work that reports where it is rather than how far it went."""
        self.advance(done - self.done)

    def _push(self) -> None:
        assert self._progress is not None and self._task is not None
        self._progress.update(self._task, completed=self.done)

    def _start(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        total = self._total() if callable(self._total) else self._total
        columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}")]
        if total is None:
            if self.unit:
                columns.append(TextColumn("{task.completed:,.0f} " + self.unit))
            columns.append(TimeElapsedColumn())
        else:
            done = TextColumn("{task.completed:,.0f} of {task.total:,.0f} " + self.unit)
            columns += [BarColumn(), done, TimeRemainingColumn()]
        # transient: the bar goes when the work is done, and the count line takes its place.
        # Nothing redirected: rich would route what the command prints on standard output
        # (an export's data) through the bar's console, onto standard error.
        self._progress = Progress(
            *columns,
            console=Console(stderr=True),
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
            refresh_per_second=REDRAWS,
        )
        self._task = self._progress.add_task(self.label, total=total)
        self._progress.start()


def counted(n: int, noun: str) -> str:
    """`1 exchange`, `100,000 exchanges`."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"
