"""Narrow copies of what the reports read, kept by triggers: `exchange_facts` and
`tool_call_facts` (see storage/facts.py). Reports scan these instead of the wide tables.
JSON columns are copied as text: PostgreSQL then hands them over as they are stored
rather than rendering JSONB for every row of every scan.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from llmtap.storage import facts

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


EXCHANGE_COLUMNS: list[sa.Column[Any]] = [
    sa.Column("id", sa.String(length=26), nullable=False),
    sa.Column("team", sa.String(length=200), nullable=False),
    sa.Column("key_fingerprint", sa.String(length=32), nullable=True),
    sa.Column("key_last4", sa.String(length=4), nullable=True),
    sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("ttfb_ms", sa.Float(), nullable=True),
    sa.Column("ttft_ms", sa.Float(), nullable=True),
    sa.Column("duration_ms", sa.Float(), nullable=True),
    sa.Column("protocol", sa.String(length=32), nullable=False),
    sa.Column("provider", sa.String(length=255), nullable=True),
    sa.Column("status", sa.Integer(), nullable=True),
    sa.Column("complete", sa.Boolean(), nullable=False),
    sa.Column("model", sa.String(length=255), nullable=True),
    sa.Column("model_requested", sa.String(length=255), nullable=True),
    sa.Column("finish_reason", sa.String(length=32), nullable=True),
    sa.Column("usage_input_tokens", sa.BigInteger(), nullable=True),
    sa.Column("usage_cache_read_input_tokens", sa.BigInteger(), nullable=True),
    sa.Column("usage_cache_creation_input_tokens", sa.BigInteger(), nullable=True),
    sa.Column("usage_output_tokens", sa.BigInteger(), nullable=True),
    sa.Column("usage_reasoning_output_tokens", sa.BigInteger(), nullable=True),
    sa.Column("error_type", sa.String(length=128), nullable=True),
    sa.Column("error_code", sa.String(length=128), nullable=True),
    sa.Column("retry_after_s", sa.Float(), nullable=True),
    sa.Column("interrupted", sa.Text(), nullable=True),
    sa.Column("decode_error", sa.Text(), nullable=True),
    sa.Column("tool_call_count", sa.Integer(), nullable=False),
    sa.Column("request_cache_breakpoints", sa.Integer(), nullable=True),
    sa.Column("request_cache_ttl", sa.String(length=8), nullable=True),
    sa.Column("request_tool_result_ids", sa.Text(), nullable=True),  # JSON as text
    sa.Column("request_tool_call_ids", sa.Text(), nullable=True),  # JSON as text
    sa.Column("request_message_count", sa.Integer(), nullable=True),
    sa.Column("tools_hash", sa.String(length=16), nullable=True),
    sa.Column("system_hash", sa.String(length=16), nullable=True),
    sa.Column("first_message_hash", sa.String(length=16), nullable=True),
    sa.Column("message_hashes", sa.Text(), nullable=True),  # JSON as text
    sa.Column("request_body_ref", sa.String(length=64), nullable=True),
    sa.Column("price_status", sa.String(length=16), nullable=True),
    sa.Column("price_version", sa.String(length=96), nullable=True),
    sa.Column("cost_input_pico", sa.BigInteger(), nullable=True),
    sa.Column("cost_cache_read_pico", sa.BigInteger(), nullable=True),
    sa.Column("cost_cache_write_pico", sa.BigInteger(), nullable=True),
    sa.Column("cost_output_pico", sa.BigInteger(), nullable=True),
    sa.Column("cost_total_pico", sa.BigInteger(), nullable=True),
    sa.Column("rate_input_pico", sa.BigInteger(), nullable=True),
    sa.Column("rate_cache_read_pico", sa.BigInteger(), nullable=True),
]
TOOL_CALL_COLUMNS: list[sa.Column[Any]] = [
    sa.Column("exchange_id", sa.String(length=26), nullable=False),
    sa.Column("position", sa.Integer(), nullable=False),
    sa.Column("call_id", sa.String(length=255), nullable=True),
    sa.Column("name", sa.String(length=255), nullable=True),
    sa.Column("status", sa.String(length=24), nullable=False),
    sa.Column("status_detail", sa.Text(), nullable=True),
    sa.Column("valid_json", sa.Boolean(), nullable=False),
]
COPIES = (
    ("exchanges", "exchange_facts", EXCHANGE_COLUMNS, ("id",)),
    ("tool_calls", "tool_call_facts", TOOL_CALL_COLUMNS, ("exchange_id", "position")),
)


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    for table, copy, columns, key in COPIES:
        op.create_table(
            copy,
            *(sa.Column(c.name, c.type, nullable=c.nullable) for c in columns),
            sa.PrimaryKeyConstraint(*key, name=op.f(f"pk_{copy}")),
        )
        names = [c.name for c in columns]
        op.execute(facts.backfill_statement(table, copy, names))
        for statement in facts.create_statements(dialect, table, copy, names, key):
            op.execute(statement)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    for table, copy, _, _ in reversed(COPIES):
        for statement in facts.drop_statements(dialect, table, copy):
            op.execute(statement)
        op.drop_table(copy)
