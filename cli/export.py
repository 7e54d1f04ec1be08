"""`llmtap export`: canonical exchange rows with their conversation and money as JSON
Lines, CSV or Parquet (SPEC §3), or as FOCUS 1.2 cost rows in CSV (`--format focus`,
analytics/focus_rows.py), in a file private to its user (0600) in every format; or
`--format otlp --endpoint URL` to send them as OpenTelemetry spans (telemetry/otlp_backfill.py),
the ones `llmtap proxy --otlp-endpoint` sends live.

Rows whose price is stale (stored unpriced, or under another price file) are priced first,
as `report cost` prices them, so an export's `cost_usd` adds up to that report's total for
the same period (and, with `--team`, `--model` or `--provider`, to its row for that name
under `--by team`, `model` or `provider`). Each flag repeats; a name is never split at
commas, as a team name may hold one. Progress is drawn on standard error when it is a
terminal (cli/progress.py), and the count line goes there too: standard output may be
the data. Not responsible for which rows and columns there are (`storage/export.py`,
`analytics/export_rows.py`).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any, TextIO, cast

from llmtap.cli import pricing
from llmtap.cli import settings as settings_module
from llmtap.cli.errors import UsageError
from llmtap.cli.timeargs import moment
from llmtap.storage.private import FILE_MODE, open_private


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "export",
        help="export exchange rows with their cost (jsonl, csv, parquet)",
        description="Export stored exchanges: the canonical fields plus id, conversation, team, key "
        "fingerprint, host, path, timings and the money (cost_usd and its parts in exact dollars, "
        "price_status, price_version). Stale prices are brought up to date first. --format focus writes "
        "FinOps FOCUS 1.2 CSV instead: one row per exchange and token class (or server tool fees), "
        "whose BilledCost adds up to report cost's total.",
    )
    parser.add_argument(
        "--format",
        choices=("jsonl", "csv", "parquet", "focus", "otlp"),
        default="jsonl",
        help="jsonl (default), csv, parquet (needs --output), focus (FOCUS 1.2 CSV) or otlp (spans sent to --endpoint)",
    )
    parser.add_argument("--since", help="ISO date/time or age (7d) — exchanges started at or after")
    parser.add_argument("--until", help="ISO date/time or age — exchanges started before")
    for flag, what in (
        ("--team", "a team's exchanges only"),
        ("--model", "a model's exchanges only (the served model, else the requested one, as report cost --by model)"),
        ("--provider", "a provider's exchanges only (genai-prices' id: anthropic, openai, google, aws, …)"),
    ):
        parser.add_argument(
            flag,
            action="append",
            default=[],
            metavar=flag.removeprefix("--").upper(),
            help=f"{what}; repeat it for several (a name is taken whole, commas and all)",
        )
    parser.add_argument("-o", "--output", metavar="FILE", help="file to write (default stdout; required for parquet)")
    parser.add_argument("--prices", metavar="FILE", help="local price file (TOML) overriding or adding models")
    parser.add_argument(
        "--endpoint", metavar="URL", help="with --format otlp: the OTLP/HTTP traces endpoint (else [otlp] endpoint)"
    )
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="with --format otlp: a header for the endpoint (else [otlp] headers); repeats",
    )
    settings_module.add_common(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    since, until = moment(args.since), moment(args.until)
    if args.format == "parquet" and not args.output:
        raise UsageError("--format parquet needs --output FILE")
    if args.format != "otlp" and (args.endpoint or args.header):
        raise UsageError("--endpoint and --header go with --format otlp")
    if args.format == "otlp" and args.output:
        raise UsageError("--format otlp sends spans to --endpoint; it writes no --output")
    from llmtap.analytics.duck import connect
    from llmtap.analytics.export_rows import export_rows
    from llmtap.cli.progress import Meter
    from llmtap.cli.store import open_store
    from llmtap.storage.export import Only, count_exchanges

    only = Only(tuple(args.team), tuple(args.model), tuple(args.provider))
    settings = settings_module.load(args)
    otlp = _otlp_options(args, settings.config) if args.format == "otlp" else None
    pricing.pricer_for(settings)  # a bad price file fails before the store is opened
    engine = open_store(settings)
    try:
        pricer = pricing.pricer_for(settings, engine)  # the explicit file, else the store's
        duck = connect(engine.url.render_as_string(hide_password=False))
        try:
            pricing.catch_up(engine, pricer, duck, meter=True)
            # rows written to a terminal are their own progress: a bar would be drawn among them
            on_screen = args.output is None and args.format != "otlp" and sys.stdout.isatty()
            total = partial(count_exchanges, engine, since, until, only)  # counted only for a bar
            with Meter("exporting", total=total, show=not on_screen) as meter:
                rows = _metered(export_rows(engine, since, until, only=only), meter)
                if otlp is not None:
                    return _otlp(engine, rows, otlp)
                focus = None
                if args.format == "parquet":
                    _parquet(rows, Path(args.output))
                else:
                    with _open_output(args.output) as out:
                        if args.format == "focus":
                            focus = _focus(rows, out)
                        else:
                            (_jsonl if args.format == "jsonl" else _csv)(rows, out)
        finally:
            duck.close()
    finally:
        engine.dispose()
    print(_exported(meter.done, args.output, focus), file=sys.stderr)
    return 0


def _metered(rows: Iterable[dict[str, Any]], meter: Any) -> Iterator[dict[str, Any]]:
    for row in rows:
        meter.advance()
        yield row


def _exported(count: int, output: str | None, focus: int | None = None) -> str:
    """The final count line (standard error: standard output may be the data)."""
    from rich.filesize import decimal

    from llmtap.cli.progress import counted

    what = counted(count, "exchange") + ("" if focus is None else f" as {counted(focus, 'FOCUS row')}")
    if output is None:
        return f"exported {what} to stdout"
    try:
        size = f" ({decimal(os.path.getsize(output))})"
    except OSError:
        size = ""
    return f"exported {what} to {output}{size}"


def _otlp_options(args: argparse.Namespace, config: Any) -> Any:
    """The endpoint and headers from the flags, else the config file's [otlp]."""
    from llmtap.telemetry.otlp_config import headers_from, settings_from

    section = config.otlp
    if args.endpoint is None and (section is None or section.endpoint is None):
        raise UsageError("--format otlp needs --endpoint URL (or endpoint in the config file's [otlp])")
    try:
        headers = headers_from(args.header) if args.header else None
        found = settings_from(args.endpoint, section or {}, headers)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    assert found is not None
    return found.options


def _otlp(engine: Any, rows: Iterable[dict[str, Any]], options: Any) -> int:
    from llmtap.telemetry.otlp_backfill import send_history

    stats = send_history(engine, rows, options)
    print(f"llmtap export: {stats.sent} spans sent to {options.shown}", file=sys.stderr)
    if stats.given_up or stats.dropped:
        print(
            f"llmtap export: {options.shown} did not take spans for {options.hold_s:g} s; "
            "stopped (send the rest again: a span sent twice has the same ids)",
            file=sys.stderr,
        )
        return 1
    return 0


def _jsonl(rows: Iterable[dict[str, Any]], out: TextIO) -> None:
    from llmtap.analytics.export_rows import jsonl_line

    for row in rows:
        out.write(jsonl_line(row) + "\n")


def _csv(rows: Iterable[dict[str, Any]], out: TextIO) -> None:
    from llmtap.analytics.export_rows import COLUMNS, decimal_text, flat
    from llmtap.analytics.render import csv_cell  # a team or model name never becomes a formula

    writer = csv.writer(out)
    writer.writerow([name for name, _ in COLUMNS])
    for row in rows:
        writer.writerow(
            [csv_cell(decimal_text(value) if isinstance(value, Decimal) else value) for value in flat(row).values()]
        )


def _focus(rows: Iterable[dict[str, Any]], out: TextIO) -> int:
    """FOCUS rows as CSV, the form focus-validator reads; returns how many."""
    from llmtap.analytics.focus_rows import COLUMNS, csv_line, focus_rows

    writer = csv.writer(out)
    writer.writerow(COLUMNS)
    written = 0
    for row in rows:
        for line in focus_rows(row):
            writer.writerow(csv_line(line))
            written += 1
    return written


def _parquet(rows: Iterable[dict[str, Any]], path: Path) -> None:
    from llmtap.analytics.export_rows import COLUMNS, decimal_text, flat, json_default
    from llmtap.analytics.files import jsonl_to_parquet

    # DuckDB writes a file of its own and renames it over the target, with the umask's mode:
    # it writes inside a 0700 folder beside the target instead, and the file is made 0600
    # there, before anyone else can reach it, then moved into place.
    try:
        folder = Path(tempfile.mkdtemp(prefix=".llmtap-export-", dir=path.parent))
    except OSError as exc:
        raise UsageError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    try:
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", dir=folder, delete=False) as tmp:
            for row in rows:
                # money as the text of its number: DuckDB casts it to a decimal, no float between
                record = {k: decimal_text(v) if isinstance(v, Decimal) else v for k, v in flat(row).items()}
                tmp.write(json.dumps(record, default=json_default, ensure_ascii=False) + "\n")
        staged = folder / "export.parquet"
        jsonl_to_parquet(Path(tmp.name), staged, COLUMNS)
        os.chmod(staged, FILE_MODE)
        os.replace(staged, path)
    except OSError as exc:
        raise UsageError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class _open_output:
    def __init__(self, path: str | None) -> None:
        self.path = path
        self.handle: TextIO | None = None

    def __enter__(self) -> TextIO:
        if self.path is None:
            return sys.stdout
        try:
            self.handle = cast(TextIO, open_private(self.path, "w", newline="", encoding="utf-8"))
        except OSError as exc:
            raise UsageError(f"cannot write {self.path!r}: {exc.strerror or exc}") from None
        return self.handle

    def __exit__(self, *exc: object) -> None:
        if self.handle is not None:
            self.handle.close()
