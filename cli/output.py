"""The output vocabulary every listing command shares (SPEC §3): `--format
table|json|jsonl|csv`, and a table's rows written as JSON (an array of row objects), JSONL
(one object a line) or CSV, each time with its offset in the zone asked for
(analytics/timestamps.py). `export` has its own formats (cli/export.py).

Not responsible for terminal tables (analytics/render.py) nor for what a command lists.
"""

from __future__ import annotations

import argparse
import sys
from datetime import tzinfo
from typing import Any

FORMATS = ("table", "json", "jsonl", "csv")
MACHINE = FORMATS[1:]


def add_format(parser: argparse.ArgumentParser, table: str = "a table for the terminal") -> None:
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        help=f"table: {table} (default); json: an array of objects; jsonl: an object a line; csv",
    )


def write(table: Any, form: str, zone: tzinfo) -> None:
    """`table` (analytics.reports.Table) on stdout as `form`, one of MACHINE."""
    from llmtap.analytics import render

    if form == "json":
        sys.stdout.write(render.as_json(table, zone) + "\n")
    elif form == "jsonl":
        sys.stdout.write(render.as_jsonl(table, zone))
    elif form == "csv":
        sys.stdout.write(render.as_csv(table, zone))
    else:
        raise ValueError(f"not a machine format: {form!r}")
