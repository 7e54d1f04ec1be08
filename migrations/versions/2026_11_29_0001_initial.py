"""The initial store: exchanges, tool calls, content-addressed bodies and their refs.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

JSONType = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "bodies",
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("encoding", sa.String(length=8), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("hash", name=op.f("pk_bodies")),
    )
    op.create_table(
        "exchanges",
        sa.Column("id", sa.String(length=26), nullable=False),
        sa.Column("dedupe_key", sa.String(length=32), nullable=True),
        sa.Column("team", sa.String(length=200), server_default="unattributed", nullable=False),
        sa.Column("key_fingerprint", sa.String(length=32), nullable=True),
        sa.Column("key_last4", sa.String(length=4), nullable=True),
        sa.Column("client_addr", sa.String(length=64), nullable=True),
        sa.Column("source", sa.String(length=16), server_default="proxy", nullable=False),
        sa.Column("method", sa.String(length=10), nullable=True),
        sa.Column("host", sa.String(length=255), nullable=True),
        sa.Column("path", sa.Text(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("first_byte_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("first_token_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ttfb_ms", sa.Float(), nullable=True),
        sa.Column("ttft_ms", sa.Float(), nullable=True),
        sa.Column("duration_ms", sa.Float(), nullable=True),
        sa.Column("protocol", sa.String(length=32), nullable=False),
        sa.Column("provider", sa.String(length=255), nullable=True),
        sa.Column("streamed", sa.Boolean(), nullable=False),
        sa.Column("status", sa.Integer(), nullable=True),
        sa.Column("complete", sa.Boolean(), nullable=False),
        sa.Column("model_requested", sa.String(length=255), nullable=True),
        sa.Column("model", sa.String(length=255), nullable=True),
        sa.Column("response_id", sa.String(length=255), nullable=True),
        sa.Column("finish_reason", sa.String(length=32), nullable=True),
        sa.Column("finish_reason_raw", sa.String(length=64), nullable=True),
        sa.Column("usage_input_tokens", sa.BigInteger(), nullable=True),
        sa.Column("usage_cache_read_input_tokens", sa.BigInteger(), nullable=True),
        sa.Column("usage_cache_creation_input_tokens", sa.BigInteger(), nullable=True),
        sa.Column("usage_cache_creation_5m_input_tokens", sa.BigInteger(), nullable=True),
        sa.Column("usage_cache_creation_1h_input_tokens", sa.BigInteger(), nullable=True),
        sa.Column("usage_output_tokens", sa.BigInteger(), nullable=True),
        sa.Column("usage_reasoning_output_tokens", sa.BigInteger(), nullable=True),
        sa.Column("usage_total_tokens_reported", sa.BigInteger(), nullable=True),
        sa.Column("usage_provenance", sa.String(length=16), nullable=False),
        sa.Column("usage_raw", JSONType, nullable=True),
        sa.Column("usage_check", JSONType, nullable=True),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("text_truncated", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("refusal", sa.Text(), nullable=True),
        sa.Column("reasoning_blocks", sa.Integer(), server_default="0", nullable=False),
        sa.Column("tool_call_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("server_tool_calls", JSONType, nullable=True),
        sa.Column("error_type", sa.String(length=128), nullable=True),
        sa.Column("error_code", sa.String(length=128), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("retry_after_s", sa.Float(), nullable=True),
        sa.Column("events", sa.Integer(), server_default="0", nullable=False),
        sa.Column("interrupted", sa.Text(), nullable=True),
        sa.Column("decode_error", sa.Text(), nullable=True),
        sa.Column("request_stream", sa.Boolean(), nullable=True),
        sa.Column("request_max_tokens", sa.BigInteger(), nullable=True),
        sa.Column("request_tools", JSONType, nullable=True),
        sa.Column("request_server_tools", JSONType, nullable=True),
        sa.Column("request_tool_choice", JSONType, nullable=True),
        sa.Column("request_messages_by_role", JSONType, nullable=True),
        sa.Column("request_message_count", sa.Integer(), nullable=True),
        sa.Column("request_system_chars", sa.Integer(), nullable=True),
        sa.Column("request_images", sa.Integer(), nullable=True),
        sa.Column("request_cache_breakpoints", sa.Integer(), nullable=True),
        sa.Column("request_cache_ttl", sa.String(length=8), nullable=True),
        sa.Column("request_prompt_cache_key", sa.String(length=255), nullable=True),
        sa.Column("request_previous_response_id", sa.String(length=255), nullable=True),
        sa.Column("request_cached_content", sa.String(length=255), nullable=True),
        sa.Column("request_thinking", JSONType, nullable=True),
        sa.Column("request_tool_result_ids", JSONType, nullable=True),
        sa.Column("request_tool_call_ids", JSONType, nullable=True),
        sa.Column("request_params", JSONType, nullable=True),
        sa.Column("tools_hash", sa.String(length=16), nullable=True),
        sa.Column("system_hash", sa.String(length=16), nullable=True),
        sa.Column("first_message_hash", sa.String(length=16), nullable=True),
        sa.Column("message_hashes", JSONType, nullable=True),
        sa.Column("message_chars", JSONType, nullable=True),
        sa.Column("body_mode", sa.String(length=8), server_default="metadata", nullable=False),
        sa.Column("request_body_ref", sa.String(length=64), nullable=True),
        sa.Column("response_body_ref", sa.String(length=64), nullable=True),
        sa.Column("response_content_type", sa.String(length=128), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_exchanges")),
        sa.UniqueConstraint("dedupe_key", name=op.f("uq_exchanges_dedupe_key")),
    )
    with op.batch_alter_table("exchanges", schema=None) as batch_op:
        batch_op.create_index("ix_exchanges_first_message_hash", ["first_message_hash"], unique=False)
        batch_op.create_index("ix_exchanges_model", ["model"], unique=False)
        batch_op.create_index("ix_exchanges_response_id", ["response_id"], unique=False)
        batch_op.create_index("ix_exchanges_started_at", ["started_at"], unique=False)
        batch_op.create_index("ix_exchanges_team_started_at", ["team", "started_at"], unique=False)

    op.create_table(
        "body_refs",
        sa.Column("exchange_id", sa.String(length=26), nullable=False),
        sa.Column("body_hash", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["exchange_id"], ["exchanges.id"], name=op.f("fk_body_refs_exchange_id_exchanges"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("exchange_id", "body_hash", name=op.f("pk_body_refs")),
    )
    with op.batch_alter_table("body_refs", schema=None) as batch_op:
        batch_op.create_index("ix_body_refs_body_hash", ["body_hash"], unique=False)

    op.create_table(
        "tool_calls",
        sa.Column("exchange_id", sa.String(length=26), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("call_id", sa.String(length=255), nullable=True),
        sa.Column("name", sa.String(length=255), nullable=True),
        sa.Column("arguments", JSONType, nullable=True),
        sa.Column("arguments_raw", sa.Text(), nullable=True),
        sa.Column("arguments_chars", sa.Integer(), server_default="0", nullable=False),
        sa.Column("valid_json", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(length=24), nullable=False),
        sa.Column("status_detail", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["exchange_id"], ["exchanges.id"], name=op.f("fk_tool_calls_exchange_id_exchanges"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("exchange_id", "position", name=op.f("pk_tool_calls")),
    )
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        batch_op.create_index("ix_tool_calls_call_id", ["call_id"], unique=False)
        batch_op.create_index("ix_tool_calls_status", ["status"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        batch_op.drop_index("ix_tool_calls_status")
        batch_op.drop_index("ix_tool_calls_call_id")

    op.drop_table("tool_calls")
    with op.batch_alter_table("body_refs", schema=None) as batch_op:
        batch_op.drop_index("ix_body_refs_body_hash")

    op.drop_table("body_refs")
    with op.batch_alter_table("exchanges", schema=None) as batch_op:
        batch_op.drop_index("ix_exchanges_team_started_at")
        batch_op.drop_index("ix_exchanges_started_at")
        batch_op.drop_index("ix_exchanges_response_id")
        batch_op.drop_index("ix_exchanges_model")
        batch_op.drop_index("ix_exchanges_first_message_hash")

    op.drop_table("exchanges")
    op.drop_table("bodies")
