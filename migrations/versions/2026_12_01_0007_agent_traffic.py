"""Agent traffic as today's coding agents send it (issue 15): `warmup` (a request that
asks for no generation), `client_session_id` (the session id a client states, such as
Claude Code's `X-Claude-Code-Session-Id`), `thread_key` (a conversation's explicit
identity: the session id, or the `previous_response_id` chain an exchange continues;
NULL where only the prefix rule can tell) and `background_state` (a `background: true`
response's or interaction's last known state) on exchanges; `kind` (`function` or
`custom`) on tool calls. `warmup`, `thread_key` and `background_state` are copied into
`exchange_facts`, `kind` into `tool_call_facts`.

Rows stored before this revision keep the defaults (no warmup, no session, function
tools); `llmtap reprocess` reads them again from kept bodies. On SQLite a batch alter may
rebuild a table and drop its triggers, so the triggers that keep the fact tables are
dropped first and made again with the new column lists.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import importlib

import sqlalchemy as sa
from alembic import op

from llmtap.storage import facts

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_PREVIOUS = importlib.import_module("llmtap.migrations.versions.2026_12_01_0006_billing")
_BEFORE = list(_PREVIOUS._AFTER)
_AFTER = [*_BEFORE, "warmup", "thread_key", "background_state"]
_TOOLS_BEFORE = ["exchange_id", "position", "call_id", "name", "status", "status_detail", "valid_json"]
_TOOLS_AFTER = [*_TOOLS_BEFORE, "kind"]


def _triggers(dialect: str, exchange_columns: list[str] | None, tool_columns: list[str] | None) -> None:
    for table, copy, columns, key in (
        ("exchanges", "exchange_facts", exchange_columns, ("id",)),
        ("tool_calls", "tool_call_facts", tool_columns, ("exchange_id", "position")),
    ):
        for statement in facts.drop_statements(dialect, table, copy):
            op.execute(statement)
        if columns is not None:
            for statement in facts.create_statements(dialect, table, copy, columns, key):
                op.execute(statement)


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    _triggers(dialect, None, None)
    with op.batch_alter_table("exchanges", schema=None) as batch_op:
        batch_op.add_column(sa.Column("warmup", sa.Boolean(), nullable=False, server_default=sa.text("false")))
        batch_op.add_column(sa.Column("client_session_id", sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column("thread_key", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("background_state", sa.String(length=16), nullable=True))
    with op.batch_alter_table("exchange_facts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("warmup", sa.Boolean(), nullable=False, server_default=sa.text("false")))
        batch_op.add_column(sa.Column("thread_key", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("background_state", sa.String(length=16), nullable=True))
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        batch_op.add_column(sa.Column("kind", sa.String(length=16), nullable=False, server_default="function"))
    with op.batch_alter_table("tool_call_facts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("kind", sa.String(length=16), nullable=False, server_default="function"))
    # the copies take their values from the triggers: no defaults of their own (as 0003 made them)
    with op.batch_alter_table("exchange_facts", schema=None) as batch_op:
        batch_op.alter_column("warmup", existing_type=sa.Boolean(), server_default=None)
    with op.batch_alter_table("tool_call_facts", schema=None) as batch_op:
        batch_op.alter_column("kind", existing_type=sa.String(length=16), server_default=None)
    _triggers(dialect, _AFTER, _TOOLS_AFTER)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    _triggers(dialect, None, None)
    with op.batch_alter_table("tool_call_facts", schema=None) as batch_op:
        batch_op.drop_column("kind")
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        batch_op.drop_column("kind")
    with op.batch_alter_table("exchange_facts", schema=None) as batch_op:
        batch_op.drop_column("background_state")
        batch_op.drop_column("thread_key")
        batch_op.drop_column("warmup")
    with op.batch_alter_table("exchanges", schema=None) as batch_op:
        for name in ("background_state", "thread_key", "client_session_id", "warmup"):
            batch_op.drop_column(name)
    _triggers(dialect, _BEFORE, _TOOLS_BEFORE)
