"""`llmtap import FILE…`: HAR files and mitmproxy flow files, through the same translators
and writer as live traffic, with a progress bar; and the writer's `rejected.jsonl`, whose
lines are whole records (`storage/rejected.py`), loaded back through the same writer.

An entry that is not an LLM generation is counted and skipped; an entry that cannot be
read is reported in one line and skipped; a file that is neither format is a one-line
error. Not responsible for decoding or storage themselves.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmtap.cli import settings as settings_module
from llmtap.cli.errors import UsageError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from llmtap.storage.followups import FollowUp
    from llmtap.storage.ingest import HttpExchange
    from llmtap.storage.record import Recorded
    from llmtap.storage.rows import RowSet


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "import",
        help="import HAR files and mitmproxy flow files into the store",
        description="Decode the LLM exchanges in HAR files (browser or proxy exports) and "
        "mitmproxy flow files and store them like live traffic.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE")
    parser.add_argument(
        "--bodies", choices=("none", "metadata", "full"), help="what to keep of the bodies (default metadata)"
    )
    settings_module.add_common(parser)
    parser.set_defaults(run=run)


@dataclass
class Counts:
    stored: int = 0
    skipped: int = 0
    unreadable: int = 0
    follow_ups: int = 0  # polls, resumed streams, cancels of background work (SPEC §1)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    from llmtap.cli.pricing import pricer_for
    from llmtap.cli.store import open_store
    from llmtap.storage.followups import FollowUp
    from llmtap.storage.ingest import HttpExchange, to_follow_up, to_record
    from llmtap.storage.secrets import KeyFingerprinter
    from llmtap.storage.writer import Writer

    paths = [Path(p) for p in args.files]
    for path in paths:
        if not path.is_file():
            raise UsageError(f"no such file: {str(path)!r}")
    settings = settings_module.load(args)
    engine = open_store(settings)
    writer = Writer(
        engine,
        spool_dir=settings.spool_dir,
        body_mode=settings.body_mode,
        enrich=pricer_for(settings, engine).price_rows,
    )
    fingerprinter = KeyFingerprinter.from_file(settings.secret_file)
    counts = Counts()
    err = Console(stderr=True)
    try:
        with _progress(err) as progress:
            for path in paths:
                total, items = _open(path)
                task = progress.add_task(path.name, total=total)
                for item, problem in items:
                    progress.advance(task)
                    if problem:
                        counts.unreadable += 1
                        err.print(f"[yellow]skipped[/] {path.name}: {escape(problem)}", highlight=False)
                        continue
                    assert item is not None
                    if isinstance(item, FollowUp):  # a rejected file's follow-up: no row of its own
                        writer.submit(item)
                        counts.follow_ups += 1
                        continue
                    record: Recorded | RowSet | None
                    if isinstance(item, HttpExchange):
                        record = to_record(item, fingerprinter=fingerprinter, key_teams=settings.key_teams)
                    else:
                        record = item  # a rejected file's line: its id says whether it is stored already
                    if record is None:
                        follow = None
                        if isinstance(item, HttpExchange):
                            follow = to_follow_up(item, fingerprinter=fingerprinter)
                        if follow is not None:  # changes the exchange it continues: no row of its own
                            writer.submit(follow)
                            counts.follow_ups += 1
                        else:
                            counts.skipped += 1
                        continue
                    writer.submit(record)
                    counts.stored += 1
    finally:
        writer.close()
    spooled = writer.stats.spooled
    note = f", {spooled} waiting in the spool (database unavailable)" if spooled else ""
    if counts.follow_ups:
        note += f", {counts.follow_ups} polls of background work"
    print(
        f"imported {counts.stored} LLM exchanges ({writer.stats.duplicates} already stored), "
        f"skipped {counts.skipped} other requests and {counts.unreadable} unreadable entries{note}"
    )
    return 0


def _progress(console: Console) -> Progress:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=not sys.stderr.isatty(),
        disable=not console.is_terminal,
    )


def _open(
    path: Path,
) -> tuple[int | None, Iterator[tuple[HttpExchange | Recorded | RowSet | FollowUp | None, str | None]]]:
    from llmtap.storage import rejected
    from llmtap.storage.importers.flows import FlowFileError, looks_like_flows, read_flows
    from llmtap.storage.importers.har import HarError, exchanges, read_har

    try:
        if rejected.looks_like_rejected(path):
            # read whole first: a line refused again is appended to the writer's own
            # rejected file, which may be this one
            lines = list(rejected.read(path))
            return len(lines), iter(lines)
        if looks_like_flows(path):
            handle = open(path, "rb")  # noqa: SIM115 - closed by the generator
            return None, _closing(handle, read_flows(handle))
        entries, total = read_har(path)
        return total, exchanges(entries)
    except (HarError, FlowFileError) as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None


def _closing(handle: Any, items: Any) -> Any:
    from llmtap.storage.importers.flows import FlowFileError

    try:
        try:
            yield from items
        except FlowFileError as exc:
            raise UsageError(str(exc)) from None
    finally:
        handle.close()
