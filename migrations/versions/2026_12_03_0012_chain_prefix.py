"""Cache causes across a response chain (issue 25): `previous_exchange_id` (the exchange
whose response a `previous_response_id` follow-up names, copied into `exchange_facts`:
the turn its cache verdict compares it with) and `request_prefix` (the request's prompt
prefix in parts, protocols/prefix.py, which a follow-up extends) on exchanges.

Rows stored before this revision get `previous_exchange_id` from the response they name
(the earliest stored exchange of that response id and the same key, else team, as
storage/threads.py finds it); their `request_prefix` stays NULL, so a follow-up of them
keeps the tools and system hashes of its own body until `llmtap reprocess` reads them
again. The fact triggers are made again with the new column list.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03
"""

from __future__ import annotations

import importlib

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from llmtap.storage import facts

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")
_FACTS = importlib.import_module("llmtap.migrations.versions.2026_12_01_0008_fact_revisions")
_BEFORE = _FACTS._COPIES
_AFTER = tuple(
    (table, copy, [*columns, "previous_exchange_id"] if copy == "exchange_facts" else columns, key)
    for table, copy, columns, key in _BEFORE
)
# the named exchange, as storage/threads.py finds it: same response id and scope, earliest first
_BACKFILL = """
UPDATE exchanges SET previous_exchange_id = (
    SELECT named.id FROM exchanges AS named
    WHERE named.response_id = exchanges.request_previous_response_id
      AND coalesce(named.key_fingerprint, 'team:' || named.team)
          = coalesce(exchanges.key_fingerprint, 'team:' || exchanges.team)
    ORDER BY named.started_at, named.id
    LIMIT 1
)
WHERE request_previous_response_id IS NOT NULL
"""


def _triggers(dialect: str, copies: tuple[tuple[str, str, list[str], tuple[str, ...]], ...] | None) -> None:
    """Drop the fact triggers and (unless `copies` is None) make them for these columns."""
    for table, copy, columns, key in copies or _BEFORE:
        for statement in facts.drop_statements(dialect, table, copy):
            op.execute(statement)
        if copies is not None:
            for statement in facts.create_statements(
                dialect, table, copy, columns, key, revisions=True, tombstones=True
            ):
                op.execute(statement)


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    _triggers(dialect, None)
    # plain ADD COLUMNs: SQLite needs no rebuild for them
    op.add_column("exchanges", sa.Column("previous_exchange_id", sa.String(length=26), nullable=True))
    op.add_column("exchanges", sa.Column("request_prefix", _JSON, nullable=True))
    op.add_column("exchange_facts", sa.Column("previous_exchange_id", sa.String(length=26), nullable=True))
    op.execute(_BACKFILL)
    op.execute(
        "UPDATE exchange_facts SET previous_exchange_id = "
        "(SELECT e.previous_exchange_id FROM exchanges AS e WHERE e.id = exchange_facts.id) "
        "WHERE id IN (SELECT id FROM exchanges WHERE previous_exchange_id IS NOT NULL)"
    )
    _triggers(dialect, _AFTER)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    _triggers(dialect, None)  # SQLite checks triggers when a batch renames a table
    with op.batch_alter_table("exchange_facts", schema=None) as batch_op:
        batch_op.drop_column("previous_exchange_id")
    with op.batch_alter_table("exchanges", schema=None) as batch_op:
        batch_op.drop_column("request_prefix")
        batch_op.drop_column("previous_exchange_id")
    _triggers(dialect, _BEFORE)
