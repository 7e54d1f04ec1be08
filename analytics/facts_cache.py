"""A columnar copy of a SQLite store's facts, kept in a DuckDB file beside the store and
brought up to date at each connection from the store's change counter.

Reports scan every exchange. Through the SQLite scanner that scan costs what SQLite takes
to hand over each value (about 2.4 s for 1M exchanges on 2 cores, bench/reports.py), on
every report and every dashboard refresh, whether the store changed or not. The store's
triggers stamp each fact row they write with a counter (`fact_revision.n`, schema 0008),
so the copy fetches only the rows written since it last looked, through SQLite's own
index on `revision` (`sqlite_query`), and replaces them by key. Deletes set
`fact_revision.deleted`; then the keys the copy holds and the store no longer does are
dropped (a scan of the keys alone). A copy of another store (the file replaced: another
`token`), of an older schema (other columns), or behind by more than `REBUILD_AFTER`
writes is made again from a whole scan.

Exactly the store's rows: the counter is read before the rows, every row written after
it was read is fetched again next time (replacing by key makes that harmless), and the
copy and its counter change in one DuckDB transaction. PostgreSQL stores have no copy
(their transactions commit out of counter order: see storage/schema.py), nor do stores
in a folder llmtap cannot write, nor a second process while another holds the file:
those read the store as before (analytics/duck.py).

Files: `<store folder>/.llmtap-facts/<store file name>.duckdb` (a 0700 folder: the copy
holds what the facts hold). Delete the folder at any time; the next report makes it again.

Not responsible for the views' column types (duck.py hands them in) or for reports.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import duckdb

from llmtap.analytics.sql_quoting import identifier, literal
from llmtap.storage.private import private_dir

log = logging.getLogger("llmtap.analytics")

FOLDER = ".llmtap-facts"
REBUILD_AFTER = 200_000  # writes since the copy's last look: past this, a whole scan is cheaper
INLINE_ROWS = 100_000  # a whole copy of up to this many rows is made while the report waits
FORMAT = 1  # of the copy's own tables; a copy of another format is made again
_BUILDERS: list[subprocess.Popen[bytes]] = []


@dataclass(frozen=True)
class Source:
    """One facts table: its name in the store, the copy's name, its key and the typed
    select list (duck.py's view columns) the copy is made with."""

    store_table: str
    name: str
    key: tuple[str, ...]
    select: str


def path_for(database: str) -> Path:
    store = Path(database).expanduser().resolve()
    return store.parent / FOLDER / f"{store.name}.duckdb"


def attach(connection: duckdb.DuckDBPyConnection, database: str, sources: list[Source], *, build: bool = False) -> bool:
    """Attach the copy as `facts` and bring it up to date; False when there is none to be
    had here (the caller reads the store instead). Never raises for the copy's sake.

    A copy that must be made again from a whole scan of a large store (`INLINE_ROWS`) is
    made by a process of its own in the background (`build=True` there), so no report
    waits for it: this one reads the store as before, the next ones the copy."""
    path = path_for(database)
    # the copy holds what the facts hold: its files are 0600 (DuckDB makes them with the
    # umask, and will not take a file made empty beforehand)
    umask = os.umask(0o077)
    try:
        return _attach(connection, path, database, sources, build)
    finally:
        os.umask(umask)


def _attach(
    connection: duckdb.DuckDBPyConnection, path: Path, database: str, sources: list[Source], build: bool
) -> bool:
    try:
        private_dir(path.parent)
        connection.execute(f"ATTACH {literal(str(path))} AS facts")
        os.chmod(path, 0o600)
    except (OSError, duckdb.Error) as exc:  # a read-only folder, another process holding the file
        log.debug("llmtap: no facts copy at %s: %s", path, exc)
        with contextlib.suppress(duckdb.Error):
            connection.execute("DETACH DATABASE IF EXISTS facts")
        return False
    try:
        if refresh(connection, sources, rebuild=build or _small(connection, sources)) == "behind":
            connection.execute("DETACH facts")
            _build_in_background(database)
            return False
        return True
    except duckdb.Error as exc:
        log.warning("llmtap: the facts copy at %s could not be brought up to date (%s); reading the store", path, exc)
        with contextlib.suppress(duckdb.Error):
            connection.execute("ROLLBACK")
        with contextlib.suppress(duckdb.Error):
            connection.execute("DETACH facts")
        return False


def refresh(connection: duckdb.DuckDBPyConnection, sources: list[Source], *, rebuild: bool = True) -> str:
    """Bring the attached copy up to date with the store; returns what it did
    (`current`, `updated`, `rebuilt`; `behind` when it needed a whole copy and `rebuild`
    was False)."""
    state = connection.execute("SELECT n, deleted, token FROM store.fact_revision WHERE id = 1").fetchone()
    if state is None:
        raise duckdb.InvalidInputException("the store has no fact_revision row")
    n, deleted, token = state
    signature = f"{FORMAT}|" + "|".join(f"{s.name}:{s.select}" for s in sources)
    connection.execute(
        "CREATE TABLE IF NOT EXISTS facts.copy_state (n BIGINT, deleted BIGINT, token VARCHAR, signature VARCHAR)"
    )
    held = connection.execute("SELECT n, deleted, token, signature FROM facts.copy_state").fetchone()
    if held is not None and (held[2], held[3]) == (token, signature) and held[0] == n and held[1] == deleted:
        return "current"
    if held is None or (held[2], held[3]) != (token, signature) or n < held[0] or n - held[0] > REBUILD_AFTER:
        if not rebuild:
            return "behind"
        _rebuild(connection, sources)
        done = "rebuilt"
    else:
        connection.execute("BEGIN")
        try:
            for source in sources:
                _apply_changes(connection, source, held[0])
                if deleted > held[1]:
                    _drop_deleted(connection, source)
            connection.execute("DELETE FROM facts.copy_state")
            connection.execute("INSERT INTO facts.copy_state VALUES (?, ?, ?, ?)", [n, deleted, token, signature])
            connection.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(duckdb.Error):
                connection.execute("ROLLBACK")
            raise
        return "updated"
    connection.execute("INSERT INTO facts.copy_state VALUES (?, ?, ?, ?)", [n, deleted, token, signature])
    return done


def _rebuild(connection: duckdb.DuckDBPyConnection, sources: list[Source]) -> None:
    """Copy every row again. Not one transaction: a large copy written in autocommit goes
    straight to the file, where inside a transaction DuckDB would log it first and write
    it twice. The state row goes first and comes back last, so a copy cut short is made
    again next time. Row order is free (reports sort): kept, it costs twice the CPU."""
    connection.execute("DELETE FROM facts.copy_state")
    connection.execute("SET preserve_insertion_order = false")
    try:
        for source in sources:
            connection.execute(
                f"CREATE OR REPLACE TABLE facts.{source.name} AS "
                f"SELECT {source.select}, revision FROM store.{source.store_table}"
            )
    finally:
        connection.execute("SET preserve_insertion_order = true")


def _small(connection: duckdb.DuckDBPyConnection, sources: list[Source]) -> bool:
    """Few enough rows to copy while a report waits (SQLite's largest rowid: no scan)."""
    for source in sources:
        found = connection.execute(
            f"SELECT CAST(max_rowid AS BIGINT) FROM sqlite_query('store', "
            f"{literal(f'SELECT coalesce(max(rowid), 0) AS max_rowid FROM {source.store_table}')})"
        ).fetchone()
        if found is None or found[0] > INLINE_ROWS:
            return False
    return True


def _build_in_background(database: str) -> None:
    """Start `python -m llmtap.analytics.facts_cache DATABASE`, detached, at low priority;
    while it holds the copy's file, other connections read the store."""
    try:
        builder = subprocess.Popen(
            [sys.executable, "-m", "llmtap.analytics.facts_cache", database],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        _BUILDERS.append(builder)  # never waited for: it outlives a short command
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, builder.pid, 10)
    except OSError as exc:
        log.debug("llmtap: could not start the facts copy's builder: %s", exc)


def _apply_changes(connection: duckdb.DuckDBPyConnection, source: Source, since: int) -> None:
    """Replace by key every row the store wrote after `since` (through its revision index)."""
    query = f"SELECT * FROM {source.store_table} WHERE revision > {int(since)}"
    connection.execute(
        f"CREATE OR REPLACE TEMP TABLE facts_delta AS SELECT {source.select}, revision "
        f"FROM sqlite_query('store', {literal(query)})"
    )
    match = " AND ".join(f"c.{identifier(k)} = d.{identifier(k)}" for k in source.key)
    connection.execute(f"DELETE FROM facts.{source.name} AS c USING facts_delta AS d WHERE {match}")
    connection.execute(f"INSERT INTO facts.{source.name} SELECT * FROM facts_delta")
    connection.execute("DROP TABLE facts_delta")


def _drop_deleted(connection: duckdb.DuckDBPyConnection, source: Source) -> None:
    keys = ", ".join(identifier(k) for k in source.key)
    query = f"SELECT {keys} FROM {source.store_table}"
    match = " AND ".join(f"c.{identifier(k)} = s.{identifier(k)}" for k in source.key)
    connection.execute(
        f"DELETE FROM facts.{source.name} AS c WHERE NOT EXISTS "
        f"(SELECT 1 FROM sqlite_query('store', {literal(query)}) AS s WHERE {match})"
    )


def main(argv: list[str]) -> int:
    """The background builder: make the copy of the store at argv[0] (a SQLite path)."""
    from llmtap.analytics import duck

    if len(argv) != 1:
        print("usage: python -m llmtap.analytics.facts_cache STORE.db", file=sys.stderr)
        return 2
    try:
        connection = duck.connect(f"sqlite:///{argv[0]}", build=True)
        connection.close()
    except Exception as exc:  # noqa: BLE001 - nobody waits on this process: one line, and out
        print(f"llmtap: facts copy of {argv[0]}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
