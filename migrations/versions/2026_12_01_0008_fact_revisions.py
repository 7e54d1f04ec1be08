"""Fact revisions (issue 14, report speed): `revision` on `exchange_facts` and
`tool_call_facts` and the one-row `fact_revision` counter, so a reader that keeps a
columnar copy of the facts (analytics/facts_cache.py) fetches only the rows written since
its last look instead of scanning the store again. On SQLite the triggers count and stamp
every write; on PostgreSQL the columns stay NULL (schema.fact_revision says why).

Rows stored before this revision get revision 1 and the counter starts at 1: a copy
made after the upgrade reads them all once.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

import importlib
import secrets

import sqlalchemy as sa
from alembic import op

from llmtap.storage import facts

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_PREVIOUS = importlib.import_module("llmtap.migrations.versions.2026_12_01_0007_agent_traffic")
_COPIES = (
    ("exchanges", "exchange_facts", _PREVIOUS._AFTER, ("id",)),
    ("tool_calls", "tool_call_facts", _PREVIOUS._TOOLS_AFTER, ("exchange_id", "position")),
)


def _triggers(dialect: str, *, revisions: bool | None) -> None:
    """Drop the fact triggers and (unless `revisions` is None) make them again."""
    for table, copy, columns, key in _COPIES:
        for statement in facts.drop_statements(dialect, table, copy):
            op.execute(statement)
        if revisions is not None:
            for statement in facts.create_statements(dialect, table, copy, columns, key, revisions=revisions):
                op.execute(statement)


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    counter = op.create_table(
        "fact_revision",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.Column("deleted", sa.BigInteger(), nullable=False),
        sa.Column("token", sa.String(length=32), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.bulk_insert(counter, [{"id": 1, "n": 1, "deleted": 0, "token": secrets.token_hex(16)}])
    for _table, copy, _columns, _key in _COPIES:
        # a plain ADD COLUMN (SQLite needs no rebuild for it, so the triggers stay)
        op.add_column(copy, sa.Column("revision", sa.BigInteger(), nullable=True))
        if dialect == "sqlite":
            op.execute(f"UPDATE {copy} SET revision = 1")
        op.create_index(f"ix_{copy}_revision", copy, ["revision"], unique=False)
    _triggers(dialect, revisions=True)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    _triggers(dialect, revisions=None)  # SQLite checks triggers when a batch renames a table
    for _table, copy, _columns, _key in _COPIES:
        op.drop_index(f"ix_{copy}_revision", table_name=copy)
        with op.batch_alter_table(copy, schema=None) as batch_op:
            batch_op.drop_column("revision")
    op.drop_table("fact_revision")
    _triggers(dialect, revisions=False)
