"""`llmtap prune --older-than AGE` (retention) and `llmtap reprocess` (re-decode stored raw
bodies with the current translators, in place, after renaming the providers of rows their
hosts name now: storage/renames.py; then price what changed).

A prune that would delete more than CONFIRM_OVER exchanges asks first: `--yes` agrees in
advance; without it, a terminal is asked y/N and anything else is refused. `--dry-run`
says what would go and deletes nothing.

Both draw progress on a terminal (cli/progress.py: a spinner for a prune, whose deletes are
a few set-wise statements in one transaction; a bar for reprocess, page by page) and end
with their counts on standard output, which carries nothing else.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from llmtap.cli import settings as settings_module
from llmtap.cli.errors import UsageError
from llmtap.cli.timeargs import before

CONFIRM_OVER = 1000


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "prune",
        help="delete exchanges older than an age, and unused bodies",
        description="Delete the exchanges that started before an age back from now (UTC), and "
        f"the stored bodies nothing uses any more. More than {CONFIRM_OVER:,} exchanges need --yes "
        "(a terminal is asked instead).",
    )
    parser.add_argument(
        "--older-than",
        required=True,
        metavar="AGE",
        help="e.g. 12h, 30d, 2w, 3mo (calendar months), 1y; a bare m is refused (mo or min)",
    )
    parser.add_argument("--dry-run", action="store_true", help="say what would be deleted; delete nothing")
    parser.add_argument("--yes", action="store_true", help=f"agree to delete more than {CONFIRM_OVER:,} exchanges")
    parser.add_argument(
        "--synced",
        action="store_true",
        help="delete only what the lake holds (`llmtap lake sync`): exchanges and tool calls synced as they are",
    )
    parser.add_argument("--warehouse", metavar="DIR|s3://bucket/prefix", help="the lake, with --synced")
    settings_module.add_common(parser)
    parser.set_defaults(run=run_prune)
    parser = commands.add_parser(
        "reprocess",
        help="re-decode stored raw bodies with the current translators, and rename providers",
        description="Re-decode every exchange whose raw bodies were kept (bodies = full) "
        "and update its record in place. Every exchange recorded under its host's name (or as "
        "an unverified host) whose host now names a provider (genai-prices' list, the "
        "config's [[providers]]) is renamed (and may bill) first; what changed is priced again.",
    )
    settings_module.add_common(parser)
    parser.set_defaults(run=run_reprocess)


def run_prune(args: argparse.Namespace) -> int:
    from llmtap.cli.progress import Meter
    from llmtap.cli.store import open_store
    from llmtap.storage.maintenance import PruneGrew, plan_prune, prune

    cutoff = before(args.older_than)
    if args.synced:
        return _run_prune_synced(args, cutoff)
    engine = open_store(settings_module.load(args))
    try:
        plan = plan_prune(engine, cutoff)
        if args.dry_run:
            print(f"would prune {_described(plan)}; nothing deleted (dry run)")
            return 0
        at_most = None if args.yes else _agreed(plan)
        try:
            # one transaction of a few set-wise deletes: a spinner while it runs, no count
            with Meter(f"pruning {plan.exchanges:,} exchanges and {plan.bodies:,} unused bodies", unit=""):
                removed, collected = prune(engine, cutoff, at_most=at_most)
        except PruneGrew as exc:
            raise UsageError(f"nothing deleted: {exc}; run prune again") from None
    finally:
        engine.dispose()
    print(f"pruned {removed:,} exchanges started before {cutoff:%Y-%m-%d %H:%M} UTC and {collected:,} unused bodies")
    return 0


def _run_prune_synced(args: argparse.Namespace, cutoff: Any) -> int:
    """`prune --synced`: the exchanges older than the cut-off that the lake holds as the
    store does (below its watermarks, and present in it)."""
    from llmtap.cli.lake import lake_settings
    from llmtap.cli.progress import Meter
    from llmtap.cli.store import open_store
    from llmtap.lake.catalog import LakeError, open_catalog
    from llmtap.lake.held import exchange_ids_before, marks
    from llmtap.storage.maintenance import prune_synced, synced_candidates

    settings = settings_module.load(args)
    warehouse, properties = lake_settings(settings, args.warehouse)
    engine = open_store(settings)
    try:
        catalog = open_catalog(engine.url.render_as_string(hide_password=False), warehouse, properties)
        with engine.connect() as connection:
            token = connection.exec_driver_sql("SELECT token FROM fact_revision WHERE id = 1").scalar_one()
        exchange_mark, tool_call_mark = marks(catalog, str(token))
        held = exchange_ids_before(catalog, cutoff)
        ids = [i for i in synced_candidates(engine, cutoff, exchange_mark, tool_call_mark) if i in held]
        if args.dry_run:
            print(f"would prune {len(ids):,} synced exchanges started before {cutoff:%Y-%m-%d %H:%M} UTC (dry run)")
            return 0
        if len(ids) > CONFIRM_OVER and not args.yes:
            raise UsageError(f"prune --synced would delete {len(ids):,} exchanges (over {CONFIRM_OVER:,}): add --yes")
        with Meter(f"pruning {len(ids):,} synced exchanges", unit=""):
            removed, collected = prune_synced(engine, ids, exchange_mark, tool_call_mark)
    except LakeError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:  # a lake file gone, an S3 endpoint that does not answer
        raise UsageError(f"cannot read the warehouse {warehouse!r}: {exc}") from None
    finally:
        engine.dispose()
    print(
        f"pruned {removed:,} synced exchanges started before {cutoff:%Y-%m-%d %H:%M} UTC "
        f"and {collected:,} unused bodies; the lake keeps them"
    )
    return 0


def _described(plan: Any) -> str:
    span = ""
    if plan.exchanges:
        span = f" (started {plan.first:%Y-%m-%d %H:%M} to {plan.last:%Y-%m-%d %H:%M} UTC)"
    return (
        f"{plan.exchanges:,} exchanges started before {plan.before:%Y-%m-%d %H:%M} UTC{span} "
        f"and {plan.bodies:,} unused bodies"
    )


def _agreed(plan: Any) -> int:
    """How many exchanges the user agreed to delete: all of a small prune; of a large one,
    what a terminal said yes to. Anything else is refused."""
    if plan.exchanges <= CONFIRM_OVER:
        return CONFIRM_OVER
    if not sys.stdin.isatty():
        raise UsageError(
            f"prune would delete {plan.exchanges:,} exchanges (more than {CONFIRM_OVER:,}): "
            "add --yes to delete them, or --dry-run to see what would go"
        )
    answer = input(f"delete {_described(plan)}? [y/N] ")
    if answer.strip().lower() not in ("y", "yes"):
        raise UsageError("nothing deleted")
    return plan.exchanges


def run_reprocess(args: argparse.Namespace) -> int:
    """Rename providers (storage/renames.py), re-decode, then price what either changed."""
    from llmtap.cli.pricing import catch_up, pricer_for
    from llmtap.cli.progress import Meter
    from llmtap.cli.store import open_store
    from llmtap.storage.maintenance import reprocess
    from llmtap.storage.renames import rename_providers

    settings = settings_module.load(args)
    engine = open_store(settings)
    try:
        pricer = pricer_for(settings, engine)
        with Meter("renaming providers", unit=""):
            renamed = rename_providers(engine, settings.provider_names())
        with Meter("reprocessing", total=lambda: _with_bodies(engine)) as meter:
            result = reprocess(engine, meter.advance)
        priced = catch_up(engine, pricer, meter=True)
    finally:
        engine.dispose()
    print(
        f"reprocessed {result.reprocessed:,} exchanges ({result.changed:,} changed); "
        f"{result.without_bodies:,} have no stored bodies and were left as they are"
    )
    print(
        f"renamed the provider of {renamed.renamed:,} exchanges, {renamed.trusted:,} no longer unverified; "
        f"priced {priced:,} with {pricer.file_version}"
    )
    return 0


def _with_bodies(engine: Any) -> int:
    """How many exchanges `reprocess` re-decodes: those whose response body was kept."""
    from sqlalchemy import func, select

    from llmtap.storage.schema import exchanges

    with engine.connect() as connection:
        query = select(func.count()).select_from(exchanges).where(exchanges.c.response_body_ref.is_not(None))
        return int(connection.execute(query).scalar_one())
