"""`llmtap db upgrade`: bring the store's schema to the newest migration (Alembic)."""

from __future__ import annotations

import argparse

from llmtap.cli import settings as settings_module


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "db",
        help="manage the store's schema",
        description="The store's schema, kept by Alembic migrations (other commands upgrade a new store themselves).",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    up = actions.add_parser(
        "upgrade",
        help="apply Alembic migrations up to the newest",
        description="Apply the Alembic migrations the store lacks, up to the newest.",
    )
    settings_module.add_common(up)
    up.set_defaults(run=run_upgrade)
    show = actions.add_parser(
        "current",
        help="print the store's schema revision",
        description="Print the Alembic revision the store's schema is at.",
    )
    settings_module.add_common(show)
    show.set_defaults(run=run_current)


def run_upgrade(args: argparse.Namespace) -> int:
    from llmtap.cli.store import open_store
    from llmtap.storage.migrate import current, heads, upgrade

    engine = open_store(settings_module.load(args), migrate=False)
    upgrade(engine)
    print(f"database at revision {current(engine)} (head {', '.join(heads())})")
    return 0


def run_current(args: argparse.Namespace) -> int:
    from llmtap.cli.store import open_store
    from llmtap.storage.migrate import current

    engine = open_store(settings_module.load(args), migrate=False)
    print(current(engine) or "empty (no migrations applied)")
    return 0
