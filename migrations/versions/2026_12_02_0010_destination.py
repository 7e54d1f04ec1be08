"""`destination` on exchanges (issue 24, trust never inherited): `scheme://host:port` of
the server an exchange went to (protocols/hosts.py), so that a poll, resumed stream or
cancel of background work completes only a POST that went to the same server.

Rows stored before this revision keep NULL: a follow-up of one of them is matched by its
host, the part of the destination they recorded. The column is not copied into
`exchange_facts` (no report reads it). On SQLite a batch alter may rebuild the table and
drop its triggers, so the fact triggers are dropped first and made again as 0009 left them.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from __future__ import annotations

import importlib

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_PREVIOUS = importlib.import_module("llmtap.migrations.versions.2026_12_01_0009_fact_changes")


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    _PREVIOUS._triggers(dialect, tombstones=None)
    with op.batch_alter_table("exchanges", schema=None) as batch_op:
        batch_op.add_column(sa.Column("destination", sa.Text(), nullable=True))
    _PREVIOUS._triggers(dialect, tombstones=True)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    _PREVIOUS._triggers(dialect, tombstones=None)
    with op.batch_alter_table("exchanges", schema=None) as batch_op:
        batch_op.drop_column("destination")
    _PREVIOUS._triggers(dialect, tombstones=True)
