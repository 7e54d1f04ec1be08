"""`llmtap prune --older-than AGE` (retention) and `llmtap reprocess` (re-decode stored raw
bodies with the current translators, in place)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from llmtap.cli import settings as settings_module
from llmtap.cli.timeargs import age


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("prune", help="delete exchanges older than an age, and unused bodies")
    parser.add_argument("--older-than", required=True, metavar="AGE", help="e.g. 30d, 12h")
    settings_module.add_common(parser)
    parser.set_defaults(run=run_prune)
    parser = commands.add_parser(
        "reprocess",
        help="re-decode stored raw bodies with the current translators",
        description="Re-decode every exchange whose raw bodies were kept (bodies = full) "
        "and update its record in place.",
    )
    settings_module.add_common(parser)
    parser.set_defaults(run=run_reprocess)


def run_prune(args: argparse.Namespace) -> int:
    from llmtap.cli.store import open_store
    from llmtap.storage.maintenance import prune

    cutoff = datetime.now(UTC) - age(args.older_than)
    engine = open_store(settings_module.load(args))
    removed, collected = prune(engine, cutoff)
    print(f"pruned {removed} exchanges started before {cutoff:%Y-%m-%d %H:%M} UTC and {collected} unused bodies")
    return 0


def run_reprocess(args: argparse.Namespace) -> int:
    from llmtap.cli.store import open_store
    from llmtap.storage.maintenance import reprocess

    engine = open_store(settings_module.load(args))
    result = reprocess(engine)
    print(
        f"reprocessed {result.reprocessed} exchanges ({result.changed} changed); "
        f"{result.without_bodies} have no stored bodies and were left as they are"
    )
    return 0
