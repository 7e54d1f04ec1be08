"""Verdicts are data (issue 27): each exchange's conversation, prompt-cache verdict and
conversation tool problems, decided when it is written (storage/verdicts.py) and stored on
`exchanges` (copied into `exchange_facts`, which the reports read), with the two indexed
keys that find an exchange's neighbours (`line_key`, `conversation_key`).

Rows stored before this revision are walked here, conversation key by conversation key,
by the same rules the writer applies (protocols/rules.py): the upgrade of a large store
takes a while (every row is read once and the changed ones written), and the fact
triggers are made first, so the copies (and a lake synced from them) take the verdicts as
any other change.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04
"""

from __future__ import annotations

import importlib

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from llmtap.storage import verdicts

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

_JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")
_FACTS = importlib.import_module("llmtap.migrations.versions.2026_12_03_0012_chain_prefix")
_BEFORE = _FACTS._AFTER
# 0012's: drops the fact triggers (by table name) and makes them for the copies given
_triggers = _FACTS._triggers
_STORED = (
    ("conversation_id", sa.String(length=26)),
    ("cache_verdict", sa.String(length=16)),
    ("cache_cause", sa.String(length=24)),
    ("cache_message_index", sa.Integer()),
    ("cache_missed_tokens", sa.BigInteger()),
    ("cache_previous_id", sa.String(length=26)),
    ("cache_gap_ms", sa.BigInteger()),
)
_AFTER = tuple(
    (
        table,
        copy,
        [*columns, *(name for name, _ in _STORED), "tool_problems"] if copy == "exchange_facts" else columns,
        key,
    )
    for table, copy, columns, key in _BEFORE
)


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    _triggers(dialect, None)
    # plain ADD COLUMNs: SQLite needs no rebuild for them
    op.add_column("exchanges", sa.Column("line_key", sa.String(length=16), nullable=True))
    op.add_column("exchanges", sa.Column("conversation_key", sa.String(length=32), nullable=True))
    for name, kind in _STORED:
        op.add_column("exchanges", sa.Column(name, kind, nullable=True))
        op.add_column("exchange_facts", sa.Column(name, kind, nullable=True))
    op.add_column("exchanges", sa.Column("tool_problems", _JSON, nullable=True))
    op.add_column("exchange_facts", sa.Column("tool_problems", sa.Text(), nullable=True))
    op.create_index("ix_exchanges_line_key", "exchanges", ["line_key", "started_at"])
    op.create_index("ix_exchanges_conversation_key", "exchanges", ["conversation_key", "started_at"])
    op.create_index("ix_exchanges_conversation_id", "exchanges", ["conversation_id"])
    _triggers(dialect, _AFTER)
    verdicts.recompute_all(op.get_bind())


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    _triggers(dialect, None)  # SQLite checks triggers when a batch renames a table
    op.drop_index("ix_exchanges_conversation_id", table_name="exchanges")
    op.drop_index("ix_exchanges_conversation_key", table_name="exchanges")
    op.drop_index("ix_exchanges_line_key", table_name="exchanges")
    with op.batch_alter_table("exchange_facts", schema=None) as batch_op:
        for name in ("tool_problems", *reversed([name for name, _ in _STORED])):
            batch_op.drop_column(name)
    with op.batch_alter_table("exchanges", schema=None) as batch_op:
        for name in ("tool_problems", *reversed([name for name, _ in _STORED]), "conversation_key", "line_key"):
            batch_op.drop_column(name)
    _triggers(dialect, _BEFORE)
