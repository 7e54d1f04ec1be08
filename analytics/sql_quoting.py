"""Quoting for the SQL text analytics writes around DuckDB: a string literal (a path, a
metadata file's location, a variable's value) and an identifier (a column or view name).
DuckDB takes bound parameters for values in most places; these are for the places it does
not (ATTACH, a table function's argument in a view, a name).

Not responsible for deciding what may reach SQL text: users' values are bound, and a
name quoted here is one the code chose (a --by name is mapped before it gets this far).
"""

from __future__ import annotations


def literal(text: str) -> str:
    """`text` as an SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def identifier(name: str) -> str:
    """`name` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'
