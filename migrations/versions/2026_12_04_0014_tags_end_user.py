"""Tags and end users (issue 28, SPEC §4): `tags` (the request's `X-LLMTap-Tags` under
the configured ones, a compact JSON object of text) and `end_user` (the end user the
request body names) on exchanges, copied into `exchange_facts` for `--by tag:NAME` and
`--by user`.

Rows stored before this revision keep both NULL: they were recorded without tags, and
`llmtap reprocess` fills `end_user` from a stored request body. The fact triggers are
made again with the new column list.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04
"""

from __future__ import annotations

import importlib

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

_FACTS = importlib.import_module("llmtap.migrations.versions.2026_12_04_0013_stored_verdicts")
_BEFORE = _FACTS._AFTER
_triggers = _FACTS._triggers  # 0012's: drops the fact triggers and makes them for the copies given
_ADDED = (("tags", sa.Text()), ("end_user", sa.String(length=256)))
_AFTER = tuple(
    (table, copy, [*columns, *(name for name, _ in _ADDED)] if copy == "exchange_facts" else columns, key)
    for table, copy, columns, key in _BEFORE
)


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    _triggers(dialect, None)
    for name, kind in _ADDED:  # plain ADD COLUMNs: SQLite needs no rebuild for them
        op.add_column("exchanges", sa.Column(name, kind, nullable=True))
        op.add_column("exchange_facts", sa.Column(name, kind, nullable=True))
    _triggers(dialect, _AFTER)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    _triggers(dialect, None)  # SQLite checks triggers when a batch renames a table
    for table in ("exchange_facts", "exchanges"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            for name, _ in reversed(_ADDED):
                batch_op.drop_column(name)
    _triggers(dialect, _BEFORE)
