"""`attribution` (which rule named the team) and `price_reason` (why unpriced) on
exchanges; `price_reason` copied into `exchange_facts` for the reports.

Rows stored before this revision keep NULL in both: which rule named their team was not
kept, and writing `none` would claim that no rule did; their hosts were not checked
either (`reprice` leaves them as they are, it prices by the reason a row carries).
On SQLite a batch alter may rebuild `exchanges` and drop its triggers, so the triggers
that keep `exchange_facts` are dropped first and made again with the new column list.

Revision ID: 0005
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import importlib

import sqlalchemy as sa
from alembic import op

from llmtap.storage import facts

revision = "0005"
down_revision = "0003"
branch_labels = None
depends_on = None

_FACTS = importlib.import_module("llmtap.migrations.versions.2026_11_30_0003_report_facts")
_BEFORE = [column.name for column in _FACTS.EXCHANGE_COLUMNS]
_AFTER = [*_BEFORE, "price_reason"]


def _triggers(dialect: str, columns: list[str] | None) -> None:
    for statement in facts.drop_statements(dialect, "exchanges", "exchange_facts"):
        op.execute(statement)
    if columns is not None:
        for statement in facts.create_statements(dialect, "exchanges", "exchange_facts", columns, ("id",)):
            op.execute(statement)


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    _triggers(dialect, None)
    with op.batch_alter_table("exchanges", schema=None) as batch_op:
        batch_op.add_column(sa.Column("attribution", sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column("price_reason", sa.String(length=32), nullable=True))
    with op.batch_alter_table("exchange_facts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("price_reason", sa.String(length=32), nullable=True))
    _triggers(dialect, _AFTER)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    _triggers(dialect, None)
    with op.batch_alter_table("exchange_facts", schema=None) as batch_op:
        batch_op.drop_column("price_reason")
    with op.batch_alter_table("exchanges", schema=None) as batch_op:
        batch_op.drop_column("price_reason")
        batch_op.drop_column("attribution")
    _triggers(dialect, _BEFORE)
