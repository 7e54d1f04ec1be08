"""`llmtap export`: canonical exchange rows as JSON Lines, CSV or Parquet (SPEC §3), in a
file private to its user (0600) in every format.

Not responsible for which rows and columns there are (`storage/export.py`)."""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO, cast

from llmtap.cli import settings as settings_module
from llmtap.cli.errors import UsageError
from llmtap.cli.timeargs import moment
from llmtap.storage.private import FILE_MODE, open_private


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "export",
        help="export canonical exchange rows (jsonl, csv, parquet)",
        description="Export stored exchanges: the canonical fields plus id, team, key "
        "fingerprint, host, path and timings.",
    )
    parser.add_argument("--format", choices=("jsonl", "csv", "parquet"), default="jsonl")
    parser.add_argument("--since", help="ISO date/time or age (7d) — exchanges started at or after")
    parser.add_argument("--until", help="ISO date/time or age — exchanges started before")
    parser.add_argument("-o", "--output", metavar="FILE", help="file to write (default stdout; required for parquet)")
    settings_module.add_common(parser)
    parser.set_defaults(run=run)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def flat(row: dict[str, Any]) -> dict[str, Any]:
    """One CSV/Parquet row: usage and error as columns, nested values as JSON text."""
    from llmtap.storage.export import USAGE_COLUMNS

    out = {k: v for k, v in row.items() if k not in ("usage", "error", "tool_calls", "request", "server_tool_calls")}
    usage = row["usage"] or {}
    for name in USAGE_COLUMNS:
        out[f"usage_{name}"] = usage.get(name)
    error = row["error"] or {}
    for name in ("type", "code", "message"):
        out[f"error_{name}"] = error.get(name)
    for name in ("tool_calls", "server_tool_calls", "request"):
        out[name] = json.dumps(row[name], default=_json_default, ensure_ascii=False)
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in out.items()}


def run(args: argparse.Namespace) -> int:
    since, until = moment(args.since), moment(args.until)
    if args.format == "parquet" and not args.output:
        raise UsageError("--format parquet needs --output FILE")
    from llmtap.cli.store import open_store
    from llmtap.storage.export import exchange_dicts

    engine = open_store(settings_module.load(args))
    rows = exchange_dicts(engine, since, until)
    if args.format == "parquet":
        return _parquet(rows, Path(args.output))
    with _open_output(args.output) as out:
        if args.format == "jsonl":
            for row in rows:
                out.write(json.dumps(row, default=_json_default, ensure_ascii=False) + "\n")
        else:
            _csv(rows, out)
    return 0


def _csv(rows: Any, out: TextIO) -> None:
    from llmtap.analytics.render import csv_cell  # a team or model name never becomes a formula

    writer = None
    for row in rows:
        record = flat(row)
        if writer is None:
            writer = csv.DictWriter(out, fieldnames=list(record))
            writer.writeheader()
        writer.writerow({name: csv_cell(value) for name, value in record.items()})


def _parquet(rows: Any, path: Path) -> int:
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
            count = 0
            for row in rows:
                tmp.write(json.dumps(flat(row), default=_json_default, ensure_ascii=False) + "\n")
                count += 1
        staged = folder / "export.parquet"
        jsonl_to_parquet(Path(tmp.name), staged, empty=count == 0)
        os.chmod(staged, FILE_MODE)
        os.replace(staged, path)
    except OSError as exc:
        raise UsageError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


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
