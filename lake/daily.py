"""Keep the lake's daily summary (`llmtap.daily`, analytics/lake_daily.py) as new as its
exchanges table, exactly: after a sync's commits (or a bench's, which makes its lakes as a
sync does), the summary rows of every day whose rows changed are made again from the
lake's rows of that day; the summary is a file a month (and grain), so each month that
holds such a day is written again whole, its other days taken from the summary's own
rows, and every touched month replaced in one commit. A rebuild goes a month at a time
(one aggregate over a year of 100M rows held 7 GB; a month's, under 3).

Which days changed: the summary's snapshot names the exchanges snapshot it was made from
(`llmtap.summarized`); every exchanges snapshot since, back along its parents, lists in
the manifests it added the data files it added and deleted, each with its day partition.
Those days are the ones its rows were inserted into, changed in (a row keeps its
`started_at`: its older copy is in the same day's files) or deleted from (a store's delete
or prune). A summary never made (a lake from before it, or a new one), or made from a
snapshot that is not among the current one's ancestors, or in another shape or layout,
is made again whole: every day.
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
from collections.abc import Sequence
from datetime import date

from llmtap.lake.extra import LakeNotInstalled

try:  # the lake extra (pyproject.toml): a one-line error without it
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.exceptions import CommitFailedException, ValidationException
    from pyiceberg.expressions import (
        AlwaysFalse,
        AlwaysTrue,
        And,
        BooleanExpression,
        GreaterThanOrEqual,
        LessThan,
        Or,
    )
    from pyiceberg.manifest import ManifestEntryStatus
    from pyiceberg.table import Table
    from pyiceberg.transforms import VoidTransform
except ImportError as missing:
    raise LakeNotInstalled(missing.name) from None

from llmtap.analytics import lake_daily, lake_views
from llmtap.lake import schema
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
        layout = laid_out(daily)
        whole = not shaped(daily) or not layout  # else its rows were made in another shape or layout
        if not whole and held == current.snapshot_id and held_calls == (None if calls is None else calls.snapshot_id):
            return 0, 0, 0
        days = None
        if not whole:
            days = changed_days(exchanges, held)
            # a summary of the same shape named the tool_calls snapshot it read, "" for none
            called = changed_days(tool_calls, held_calls, from_empty=True)
            days = None if days is None or called is None else sorted(set(days) | set(called))
        try:
            if not layout:
                _lay_out(daily)
            written, replaced = _replace(catalog, exchanges, tool_calls, daily, days)
            return written, replaced, 1
        except (CommitFailedException, ValidationException):
            log.info("llmtap: another sync committed to %s first; starting again", lake_daily.TABLE)
            time.sleep(random.uniform(0.05, 0.3) * (attempt + 1))
    raise LakeError(f"{lake_daily.TABLE}: gave up after {ATTEMPTS} commits lost to other syncs; run lake sync again")


def laid_out(daily: Table) -> bool:
    """Whether the summary is partitioned as schema.DAILY_PARTITIONS says (by month and
    grain): one made before (a file a day) is laid out again, and made again whole."""
    wanted = [
        (schema.DAILY_SCHEMA.find_column_name(field.source_id), field.transform)
        for field in schema.DAILY_PARTITIONS.fields
    ]
    held = [
        (daily.schema().find_column_name(field.source_id), field.transform)
        for field in daily.spec().fields
        if field.transform != VoidTransform()
    ]
    return held == wanted


def _lay_out(daily: Table) -> None:
    """Partition the summary as schema.DAILY_PARTITIONS says: its old partitions give way
    (their files are read until the rebuild's commit replaces them)."""
    with daily.update_spec() as update:
        for field in daily.spec().fields:
            if field.transform != VoidTransform():
                update.remove_field(field.name)
        for field in schema.DAILY_PARTITIONS.fields:
            column = schema.DAILY_SCHEMA.find_column_name(field.source_id)
            assert column is not None
            update.add_field(column, field.transform, field.name)
    daily.refresh()


def months(days: Sequence[date]) -> dict[date, list[date]]:
    """`days` by the month they are in (its first day)."""
    by_month: dict[date, list[date]] = {}
    for day in sorted(days):
        by_month.setdefault(day.replace(day=1), []).append(day)
    return by_month


def _month_of(first: date) -> BooleanExpression:
    """The summary's rows of the month that starts on `first`."""
    low = GreaterThanOrEqual("day", first.isoformat())  # type: ignore[call-arg,arg-type]
    high = LessThan("day", _next_month(first).isoformat())  # type: ignore[call-arg,arg-type]
    return And(low, high)


def _next_month(first: date) -> date:
    return date(first.year + first.month // 12, first.month % 12 + 1, 1)


def _replace(
    catalog: SqlCatalog, exchanges: Table, tool_calls: Table, daily: Table, days: list[date] | None
) -> tuple[int, int]:
    """Make every month that holds a changed day (`days`; None: every day the lake's rows
    are in) again as one file: its changed days from the lake's rows, its other days from
    the summary's own rows; one month at a time (a whole year at 100M rows would hold the
    whole aggregate in memory), in one commit."""
    current = exchanges.current_snapshot()
    assert current is not None
    calls = tool_calls.current_snapshot()
    properties = {k: str(v) for k, v in catalog.properties.items() if k.startswith(("s3.", "client."))}
    held = None if days is None or daily.current_snapshot() is None else daily.metadata_location
    if days is None:
        days = held_days(exchanges)  # None: a file of rows without a day; all of them at once
    mark, token = watermark(exchanges)
    summary = {
        lake_daily.SUMMARIZED: str(current.snapshot_id),
        lake_daily.SUMMARIZED_TOOL_CALLS: "" if calls is None else str(calls.snapshot_id),
        lake_daily.SHAPED: lake_daily.SHAPE,
        WATERMARK: str(mark),
        STORE_TOKEN: token or "",
    }
    arrow_schema = daily.schema().as_arrow()  # its columns in the table's order (added ones last)
    written = 0
    made: set[date] = set()  # the days of the rows written
    try:
        with (
            lake_daily.Summarizer(
                exchanges.metadata_location,
                None if calls is None else tool_calls.metadata_location,
                str(catalog.properties.get("warehouse", "")),
                properties,
            ) as summarizer,
            daily.transaction() as transaction,
        ):
            if daily.current_snapshot() is not None and (days is None or days):
                doomed: BooleanExpression = AlwaysTrue()
                if held is not None and days is not None:  # the touched months' files, whole: a month is a partition
                    doomed = Or(AlwaysFalse(), *(_month_of(first) for first in months(days)))
                with warnings.catch_warnings():  # a month the summary held no row of
                    warnings.filterwarnings("ignore", "Delete operation did not match any records")
                    transaction.delete(doomed, snapshot_properties=summary)
            parts = [(None, None)] if days is None else list(months(days).items())
            for first, changed in parts:
                span = None if first is None else (first, _next_month(first))
                rows = summarizer.rows(changed, held, span)
                if rows.num_rows:
                    transaction.append(rows.select(arrow_schema.names).cast(arrow_schema), snapshot_properties=summary)
                    written += rows.num_rows
                    made.update(rows.column("day").unique().to_pylist())
            if not written:  # a snapshot even when nothing changed: it names `current`
                transaction.append(arrow_schema.empty_table(), snapshot_properties=summary)
    except lake_views.LakeError as exc:
        raise LakeError(str(exc)) from None
    return written, len(days) if days is not None else len(made)


def held_days(table: Table) -> list[date] | None:
    """The days of the data files in `table`'s current snapshot (None: a file of rows
    without a day)."""
    current = table.current_snapshot()
    if current is None:
        return []
    values: set[int] = set()
    for manifest in current.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            day = entry.data_file.partition[0]
            if day is None:
                return None
            values.add(int(day))
    return lake_daily.utc_days(values)
