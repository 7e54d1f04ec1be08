"""`llmtap lake sync --warehouse DIR|s3://bucket/prefix`: copy the store's report facts
into the lake's Iceberg tables (lake/sync.py), incrementally, safe to run from cron on
every node at once.

Config (`[lake]` in the config file, lake/settings.py): `warehouse` (used when --warehouse
is not given) and pyiceberg FileIO properties for S3, e.g.

    [lake]
    warehouse = "s3://analytics/llmtap"
    "s3.endpoint" = "http://127.0.0.1:9000"
    "s3.region" = "us-east-1"

S3 credentials come from `s3.access-key-id` / `s3.secret-access-key` there or from the
usual AWS environment; they are never printed.

Progress (rows written so far, after each commit) is drawn on a terminal; each table's
counts end the command.

Not responsible for the sync itself or for reading the lake in reports.
"""

from __future__ import annotations

import argparse
from typing import Any

from llmtap.cli import settings as settings_module
from llmtap.cli.errors import UsageError


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "lake",
        help="copy the report facts into Apache Iceberg tables (a lake)",
        description="The store's history as Apache Iceberg tables, for engines that read Iceberg.",
    )
    actions = parser.add_subparsers(dest="lake_command", metavar="ACTION", parser_class=type(parser))
    actions.required = True
    sync = actions.add_parser(
        "sync",
        help="copy what changed since the last sync into the lake",
        description="Copy the exchanges (costs, verdicts) and tool calls that changed since the lake's "
        "last sync into its Iceberg tables, partitioned by day. Incremental, idempotent, and safe to "
        "run on many nodes at once; the catalog lives in the store's database.",
    )
    sync.add_argument("--warehouse", metavar="DIR|s3://bucket/prefix", help="where the tables' files go")
    settings_module.add_common(sync)
    sync.set_defaults(run=run_sync)


def lake_settings(settings: Any, warehouse: str | None) -> tuple[str, dict[str, str]]:
    """The warehouse (flag, else `[lake] warehouse`) and the FileIO properties of `[lake]`
    (checked with the rest of the file: lake/settings.py)."""
    table = settings.config.lake
    chosen = warehouse or table.warehouse
    if not chosen:
        raise UsageError("no warehouse: give --warehouse DIR|s3://bucket/prefix or set [lake] warehouse")
    return chosen, table.properties()


def run_sync(args: argparse.Namespace) -> int:
    from llmtap.cli.progress import Meter
    from llmtap.cli.store import open_store
    from llmtap.lake.catalog import LakeError, open_catalog
    from llmtap.lake.sync import sync

    settings = settings_module.load(args)
    warehouse, properties = lake_settings(settings, args.warehouse)
    engine = open_store(settings)
    try:
        catalog = open_catalog(engine.url.render_as_string(hide_password=False), warehouse, properties)
        written: dict[str, int] = {}
        with Meter("syncing the lake", unit="rows written") as meter:

            def committed(table: str, rows: int) -> None:
                written[table] = rows
                meter.update(sum(written.values()))

            done = sync(engine, catalog, progress=committed)
    except LakeError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:  # a folder it cannot write, a file gone, an S3 endpoint that does not answer
        raise UsageError(f"cannot use the warehouse {warehouse!r}: {exc}") from None
    finally:
        engine.dispose()
    for table in done:
        print(
            f"{table.table}: {table.written:,} rows written, {table.gone:,} keys deleted, "
            f"{table.commits} commits, watermark {table.watermark}"
            + (f" ({table.restarts} restarts after other syncs' commits)" if table.restarts else "")
        )
    return 0
