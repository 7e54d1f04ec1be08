"""One fingerprint per store (issue 24): `key_secret_id` on exchanges, the id of the secret
each row's `key_fingerprint` was made with. The store's own secret is recorded as it is
adopted (`store_settings` key `fingerprint_secret`, storage/store_secret.py), not here.

Rows stored before this revision keep NULL: which secret made them is not known. The
first process that fingerprints after the upgrade makes its secret the store's, unless
those rows were made with more than one (`llmtap fingerprint rekey` then). A plain ADD
COLUMN: SQLite needs no rebuild for it, so the fact triggers stay. Down again drops the
column and forgets the store's secret, so that the rows an older llmtap writes in between
(with whatever secret) are looked at again when the next process adopts one.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

from __future__ import annotations

import importlib

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_PREVIOUS = importlib.import_module("llmtap.migrations.versions.2026_12_01_0009_fact_changes")
SETTING = "fingerprint_secret"  # storage/store_secret.py's, as of this revision


def upgrade() -> None:
    op.add_column("exchanges", sa.Column("key_secret_id", sa.String(length=16), nullable=True))


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    settings = sa.table("store_settings", sa.column("key", sa.String))
    op.execute(settings.delete().where(settings.c.key == SETTING))
    _PREVIOUS._triggers(dialect, tombstones=None)  # SQLite checks triggers when a batch renames a table
    with op.batch_alter_table("exchanges", schema=None) as batch_op:
        batch_op.drop_column("key_secret_id")
    _PREVIOUS._triggers(dialect, tombstones=True)
