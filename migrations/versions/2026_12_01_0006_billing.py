"""Billing-grade pricing (issue 14): what was served (`service_tier`, `inference_geo`,
`service_speed`, `server_tool_uses`), usage by modality and other models' usage
(`usage_modalities`, `usage_sub`), the per-use fees and how a total was made
(`cost_fee_pico`, `cost_detail`) on exchanges; `service_tier` and `cost_fee_pico` copied
into `exchange_facts`; `store_settings` for the price file a store prices with.

Rows stored before this revision keep NULL in the new columns: what was served was not
read then. `llmtap reprocess` reads it again from kept bodies, and `llmtap reprice`
prices every row again. On SQLite a batch alter may rebuild `exchanges` and drop its
triggers, so the triggers that keep `exchange_facts` are dropped first and made again
with the new column list.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import importlib

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from llmtap.storage import facts

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_PREVIOUS = importlib.import_module("llmtap.migrations.versions.2026_12_01_0005_attribution")
_BEFORE = list(_PREVIOUS._AFTER)
_AFTER = [*_BEFORE, "service_tier", "cost_fee_pico"]
_JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


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
        batch_op.add_column(sa.Column("usage_modalities", _JSON, nullable=True))
        batch_op.add_column(sa.Column("usage_sub", _JSON, nullable=True))
        batch_op.add_column(sa.Column("service_tier", sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column("inference_geo", sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column("service_speed", sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column("server_tool_uses", _JSON, nullable=True))
        batch_op.add_column(sa.Column("cost_fee_pico", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("cost_detail", _JSON, nullable=True))
    with op.batch_alter_table("exchange_facts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("service_tier", sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column("cost_fee_pico", sa.BigInteger(), nullable=True))
    op.create_table(
        "store_settings",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("value", _JSON, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_store_settings")),
    )
    _triggers(dialect, _AFTER)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    _triggers(dialect, None)
    op.drop_table("store_settings")
    with op.batch_alter_table("exchange_facts", schema=None) as batch_op:
        batch_op.drop_column("cost_fee_pico")
        batch_op.drop_column("service_tier")
    with op.batch_alter_table("exchanges", schema=None) as batch_op:
        for name in (
            "cost_detail",
            "cost_fee_pico",
            "server_tool_uses",
            "service_speed",
            "inference_geo",
            "service_tier",
            "usage_sub",
            "usage_modalities",
        ):
            batch_op.drop_column(name)
    _triggers(dialect, _BEFORE)
