"""File conversions done with DuckDB (the only place besides reports that uses it here)."""

from __future__ import annotations

from pathlib import Path

import duckdb


def jsonl_to_parquet(source: Path, target: Path, *, empty: bool = False) -> None:
    """Write a Parquet file from a JSON Lines file of flat rows."""
    connection = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    try:
        if empty:
            connection.execute("COPY (SELECT NULL::VARCHAR AS id WHERE false) TO ? (FORMAT parquet)", [str(target)])
            return
        # Numbered, not `?`: DuckDB binds a COPY's target before its query's parameters.
        connection.execute(
            "COPY (SELECT * FROM read_json($1, format='newline_delimited', sample_size=-1)) TO $2 (FORMAT parquet)",
            [str(source), str(target)],
        )
    finally:
        connection.close()
