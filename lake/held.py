"""What the lake holds, for `llmtap prune --synced`: each table's watermark and the ids of
the exchanges in the lake that started before a time (read with a pyiceberg scan of the
`id` column, pruned by the day partitions).

Not responsible for deleting anything from the store (storage/maintenance.py does).
"""

from __future__ import annotations

from datetime import datetime

from llmtap.lake.extra import LakeNotInstalled

try:  # the lake extra (pyproject.toml): a one-line error without it
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
    from pyiceberg.expressions import LessThan
except ImportError as missing:
    raise LakeNotInstalled(missing.name) from None

from llmtap.lake import schema
from llmtap.lake.catalog import LakeError, lake_files, watermark


def marks(catalog: SqlCatalog, store_token: str) -> tuple[int, int]:
    """The exchanges' and tool calls' watermarks; a one-line error when there is no lake
    or it holds another store's facts."""
    found = []
    for name in (schema.EXCHANGES, schema.TOOL_CALLS):
        try:
            with lake_files(catalog):
                table = catalog.load_table(name)
                mark, token = watermark(table)
        except (NoSuchTableError, NoSuchNamespaceError):
            raise LakeError("this store has no lake yet: run `llmtap lake sync` first") from None
        if token is not None and token != store_token:
            raise LakeError(f"the lake holds another store's facts (store token {token})")
        found.append(mark)
    return found[0], found[1]


def exchange_ids_before(catalog: SqlCatalog, before: datetime) -> set[str]:
    with lake_files(catalog):
        table = catalog.load_table(schema.EXCHANGES)
        if table.current_snapshot() is None:
            return set()
        earlier = LessThan("started_at", before.isoformat())  # type: ignore[call-arg,arg-type]
        scan = table.scan(row_filter=earlier, selected_fields=("id",))
        return set(scan.to_arrow().column("id").to_pylist())
