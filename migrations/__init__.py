"""Alembic migrations for the store (SQLite and PostgreSQL; batch mode on SQLite).

HEAD names the newest revision, so that a command on a store already at head need not
import Alembic or read these scripts to know it (storage/migrate.ensure_current); a test
holds it equal to the scripts' one head."""

HEAD = "0014"
