"""Alembic environment: uses the connection `llmtap.storage.migrate` passes in, batch
mode on SQLite, and the store's MetaData (with its naming convention) as the target."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from llmtap.storage.schema import metadata

config = context.config


def run() -> None:
    connection = config.attributes.get("connection")
    if connection is None:  # plain `alembic` CLI use: a URL from the ini or -x url=...
        url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
        if not url:
            raise SystemExit("llmtap migrations need a database: -x url=... or sqlalchemy.url")
        with create_engine(url).begin() as own:
            _configure_and_run(own)
        return
    _configure_and_run(connection)


def _configure_and_run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_name=_ours,
    )
    with context.begin_transaction():
        context.run_migrations()


def _ours(name, type_, _parent_names) -> bool:
    """pyiceberg's SQL catalog (`llmtap lake sync`) keeps its tables in the store's
    database: they are not ours to compare or migrate."""
    return not (type_ == "table" and name is not None and name.startswith("iceberg_"))


if context.is_offline_mode():
    raise SystemExit("llmtap migrations need a live connection (SQLite batch mode)")
run()
