"""Cost columns: each exchange priced at its own date, with the price data's version.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_COST = (
    "cost_input_pico",
    "cost_cache_read_pico",
    "cost_cache_write_pico",
    "cost_output_pico",
    "cost_total_pico",
    "rate_input_pico",
    "rate_cache_read_pico",
)


def upgrade() -> None:
    with op.batch_alter_table("exchanges", schema=None) as batch_op:
        batch_op.add_column(sa.Column("price_status", sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column("price_model", sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column("price_version", sa.String(length=96), nullable=True))
        for name in _COST:
            batch_op.add_column(sa.Column(name, sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("exchanges", schema=None) as batch_op:
        for name in reversed(_COST):
            batch_op.drop_column(name)
        batch_op.drop_column("price_version")
        batch_op.drop_column("price_model")
        batch_op.drop_column("price_status")
