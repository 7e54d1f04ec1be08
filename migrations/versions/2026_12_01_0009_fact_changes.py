"""Fact changes (issue 17, `llmtap lake sync`): the `fact_deletions` tombstones the delete
triggers write, and on PostgreSQL a `revision` on every fact row (the writing
transaction's id), so a copy kept elsewhere can fetch what changed since a watermark on
both dialects. SQLite keeps its `fact_revision` counter as 0008 made it.

PostgreSQL rows stored before this revision get revision 1 (below every transaction id):
a lake's first sync reads them all.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

import importlib

import sqlalchemy as sa
from alembic import op

from llmtap.storage import facts

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_PREVIOUS = importlib.import_module("llmtap.migrations.versions.2026_12_01_0008_fact_revisions")


def _triggers(dialect: str, *, tombstones: bool | None) -> None:
    """Drop the fact triggers and (unless `tombstones` is None) make them again."""
    for table, copy, columns, key in _PREVIOUS._COPIES:
        for statement in facts.drop_statements(dialect, table, copy):
            op.execute(statement)
        if tombstones is not None:
            for statement in facts.create_statements(
                dialect, table, copy, columns, key, revisions=True, tombstones=tombstones
            ):
                op.execute(statement)


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.create_table(
        "fact_deletions",
        sa.Column("table_name", sa.Text(), nullable=False),
        sa.Column("exchange_id", sa.Text(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=True),
        sa.Column("revision", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_fact_deletions_revision", "fact_deletions", ["revision"], unique=False)
    if dialect == "postgresql":
        for _table, copy, _columns, _key in _PREVIOUS._COPIES:
            op.execute(f"UPDATE {copy} SET revision = 1 WHERE revision IS NULL")
    _triggers(dialect, tombstones=True)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    _triggers(dialect, tombstones=False)
    op.drop_index("ix_fact_deletions_revision", table_name="fact_deletions")
    op.drop_table("fact_deletions")
