"""Alembic migrations for the store (SQLite and PostgreSQL; batch mode on SQLite)."""
