"""Keep the lake's daily summary (`llmtap.daily`, analytics/lake_daily.py) as new as its
exchanges table, exactly: after a sync's commits (or a bench's, which makes its lakes as a
sync does), the summary rows of every day whose rows changed are made again from the
lake's rows of that day, and replace that day's summary rows in one commit.

Which days changed: the summary's snapshot names the exchanges snapshot it was made from
(`llmtap.summarized`); every exchanges snapshot since, back along its parents, lists in
the manifests it added the data files it added and deleted, each with its day partition.
Those days are the ones its rows were inserted into, changed in (a row keeps its
`started_at`: its older copy is in the same day's files) or deleted from (a store's delete
or prune). A summary never made (a lake from before it, or a new one), or made from a
snapshot that is not among the current one's ancestors, is made again whole: every day.
A sync killed between its exchanges commits and the summary's leaves the summary at its
older snapshot; readers then read rows (lake_daily.answers) and the next sync catches up.
Two syncs at once: the summary's commit asserts the snapshot it read; the loser starts
over from the new state.

Not responsible for what a summary row holds (analytics/lake_daily.py and its SQL), for
copying the rows (sync.py) or for reading the summary (the reports).
"""

from __future__ import annotations

import logging
import random
import time
import warnings
from datetime import date

from llmtap.lake.extra import LakeNotInstalled

try:  # the lake extra (pyproject.toml): a one-line error without it
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.exceptions import CommitFailedException, ValidationException
    from pyiceberg.expressions import AlwaysTrue, BooleanExpression, In
    from pyiceberg.manifest import ManifestEntryStatus
    from pyiceberg.table import Table
except ImportError as missing:
    raise LakeNotInstalled(missing.name) from None

from llmtap.analytics import lake_daily, lake_views
from llmtap.lake.catalog import STORE_TOKEN, WATERMARK, LakeError, watermark

log = logging.getLogger("llmtap.lake")

ATTEMPTS = 20


def summarized(daily: Table, key: str = lake_daily.SUMMARIZED) -> int | None:
    """The exchanges snapshot the summary was made from (None: never made); with `key`
    lake_daily.SUMMARIZED_TOOL_CALLS, the tool_calls one (None: none, or never made)."""
    snapshot = daily.current_snapshot()
    if snapshot is None or snapshot.summary is None:
        return None
    value = snapshot.summary[key]
    return int(value) if value else None


def shaped(daily: Table) -> bool:
    """Whether the summary's rows are in lake_daily's current shape (lake_daily.SHAPE):
    one made before its columns changed holds NULL in the new ones."""
    snapshot = daily.current_snapshot()
    return bool(
        snapshot is not None
        and snapshot.summary is not None
        and snapshot.summary[lake_daily.SHAPED] == lake_daily.SHAPE
    )


def changed_days(table: Table, since: int | None, *, from_empty: bool = False) -> list[date] | None:
    """The days whose rows changed from snapshot `since` of `table` (exchanges or
    tool_calls: both partitioned by day) to the current one (None: every day, when `since`
    is not among its ancestors or was never made). `from_empty`: `since` None is the
    table before its first snapshot, so every day its history touched."""
    current = table.current_snapshot()
    if current is None:
        return [] if since is None else None
    if since is None and not from_empty:
        return None
    values: set[int] = set()
    snapshot = current
    while snapshot.snapshot_id != since:
        for manifest in snapshot.manifests(table.io):
            if manifest.added_snapshot_id != snapshot.snapshot_id:
                continue
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                if entry.status != ManifestEntryStatus.EXISTING and entry.snapshot_id == snapshot.snapshot_id:
                    day = entry.data_file.partition[0]
                    if day is None:
                        return None  # a row without a day: make everything again
                    values.add(int(day))
        if snapshot.parent_snapshot_id is None:
            if since is None:
                break  # the table's first snapshot: its whole history was read
            return None  # `since` is not an ancestor
        parent = table.snapshot_by_id(snapshot.parent_snapshot_id)
        if parent is None:
            return None  # expired history: make everything again
        snapshot = parent
    return lake_daily.utc_days(values)


def keep(catalog: SqlCatalog, exchanges: Table, tool_calls: Table, daily: Table) -> tuple[int, int, int]:
    """Bring the summary up to the exchanges and tool_calls tables' current snapshots;
    returns (summary rows written, days replaced, commits)."""
    for attempt in range(ATTEMPTS):
        exchanges.refresh()
        tool_calls.refresh()
        daily.refresh()
        current = exchanges.current_snapshot()
        calls = tool_calls.current_snapshot()
        held, held_calls = summarized(daily), summarized(daily, lake_daily.SUMMARIZED_TOOL_CALLS)
        if current is None:
            return 0, 0, 0
        same_shape = shaped(daily)
        if same_shape and held == current.snapshot_id and held_calls == (None if calls is None else calls.snapshot_id):
            return 0, 0, 0
        days = None
        if same_shape:  # else the rows were made in another shape: all of them again
            days = changed_days(exchanges, held)
            # a summary of the same shape named the tool_calls snapshot it read, "" for none
            called = changed_days(tool_calls, held_calls, from_empty=True)
            days = None if days is None or called is None else sorted(set(days) | set(called))
        try:
            written, replaced = _replace(catalog, exchanges, tool_calls, daily, days)
            return written, replaced, 1
        except (CommitFailedException, ValidationException):
            log.info("llmtap: another sync committed to %s first; starting again", lake_daily.TABLE)
            time.sleep(random.uniform(0.05, 0.3) * (attempt + 1))
    raise LakeError(f"{lake_daily.TABLE}: gave up after {ATTEMPTS} commits lost to other syncs; run lake sync again")


def _replace(
    catalog: SqlCatalog, exchanges: Table, tool_calls: Table, daily: Table, days: list[date] | None
) -> tuple[int, int]:
    current = exchanges.current_snapshot()
    assert current is not None
    calls = tool_calls.current_snapshot()
    properties = {k: str(v) for k, v in catalog.properties.items() if k.startswith(("s3.", "client."))}
    try:
        rows = lake_daily.summarize(
            exchanges.metadata_location,
            None if calls is None else tool_calls.metadata_location,
            str(catalog.properties.get("warehouse", "")),
            days,
            properties,
        )
    except lake_views.LakeError as exc:
        raise LakeError(str(exc)) from None
    rows = rows.cast(daily.schema().as_arrow()) if rows.num_rows else daily.schema().as_arrow().empty_table()
    mark, token = watermark(exchanges)
    summary = {
        lake_daily.SUMMARIZED: str(current.snapshot_id),
        lake_daily.SUMMARIZED_TOOL_CALLS: "" if calls is None else str(calls.snapshot_id),
        lake_daily.SHAPED: lake_daily.SHAPE,
        WATERMARK: str(mark),
        STORE_TOKEN: token or "",
    }
    doomed: BooleanExpression = AlwaysTrue() if days is None else In("day", [d.isoformat() for d in days])  # type: ignore[call-arg,arg-type]
    with daily.transaction() as transaction:
        if daily.current_snapshot() is not None and (days is None or days):
            with warnings.catch_warnings():  # a day the summary held no row of
                warnings.filterwarnings("ignore", "Delete operation did not match any records")
                transaction.delete(doomed, snapshot_properties=summary)
        transaction.append(rows, snapshot_properties=summary)  # a snapshot even when empty: it names `current`
    replaced = len(days) if days is not None else len(set(rows.column("day").to_pylist()))
    return rows.num_rows, replaced
