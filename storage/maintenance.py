"""Retention and re-decoding: `prune` deletes old exchanges and the blobs nothing uses any
more (`plan_prune` counts what it would delete, for a dry run and a confirmation;
`prune_synced` only those a lake holds, `llmtap prune --synced`);
`reprocess` re-decodes stored raw bodies with the current translators, in place.

Not responsible for parsing command-line durations or asking the user (the CLI does).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, delete, exists, func, select, update

from llmtap.protocols import ExchangeDecoder
from llmtap.protocols.exchange import SERVED_TIER_PROTOCOLS
from llmtap.storage import bodies as blobs
from llmtap.storage import threads, verdicts
from llmtap.storage.export import utc
from llmtap.storage.record import Recorded
from llmtap.storage.rows import rows_for
from llmtap.storage.schema import (
    bodies,
    body_refs,
    exchange_facts,
    exchanges,
    fact_deletions,
    tool_call_facts,
    tool_calls,
)

PAGE = 500


@dataclass(frozen=True)
class PrunePlan:
    """What `prune` would delete: the exchanges started before `before`, the first and last
    of their start times, and the bodies no kept exchange would use any more."""

    before: datetime
    exchanges: int
    first: datetime | None
    last: datetime | None
    bodies: int


class PruneGrew(RuntimeError):
    """More exchanges fell under the cut-off than the caller agreed to delete."""


def _old(before: datetime) -> Any:
    return select(exchanges.c.id).where(exchanges.c.started_at < before)


def _unused_after(before: datetime) -> Any:
    """Bodies no exchange would refer to once those started before `before` are gone (the
    ones already unused too: a prune collects them as well)."""
    doomed = exists().where(exchanges.c.id == body_refs.c.exchange_id, exchanges.c.started_at < before)
    kept_ref = exists().where(body_refs.c.body_hash == bodies.c.hash, ~doomed)
    return ~kept_ref


def plan_prune(engine: Engine, before: datetime) -> PrunePlan:
    """What `prune(engine, before)` would delete now; deletes nothing."""
    with engine.connect() as connection:
        count, first, last = connection.execute(
            select(func.count(), func.min(exchanges.c.started_at), func.max(exchanges.c.started_at)).where(
                exchanges.c.started_at < before
            )
        ).one()
        unused = connection.execute(select(func.count()).select_from(bodies).where(_unused_after(before))).scalar_one()
    return PrunePlan(before, int(count), utc(first), utc(last), int(unused))


def prune(engine: Engine, before: datetime, at_most: int | None = None) -> tuple[int, int]:
    """Delete exchanges started before `before`; returns (exchanges, blobs) deleted. With
    `at_most`, nothing is deleted (PruneGrew) when more than that many would go: what the
    user agreed to after a count stays the bound, whatever was written in between."""
    with engine.begin() as connection:
        if at_most is not None:
            found = connection.execute(
                select(func.count()).select_from(exchanges).where(exchanges.c.started_at < before)
            ).scalar_one()
            if found > at_most:
                raise PruneGrew(f"{found:,} exchanges are older now, more than the {at_most:,} agreed to")
        old = _old(before)
        # Children first: SQLite only cascades with foreign keys on, and not every
        # connection that ever wrote the file had them on.
        connection.execute(delete(tool_calls).where(tool_calls.c.exchange_id.in_(old)))
        connection.execute(delete(body_refs).where(body_refs.c.exchange_id.in_(old)))
        removed = connection.execute(delete(exchanges).where(exchanges.c.started_at < before)).rowcount
        unused = ~exists().where(body_refs.c.body_hash == bodies.c.hash)
        collected = connection.execute(delete(bodies).where(unused)).rowcount
    return removed or 0, collected or 0


def synced_candidates(engine: Engine, before: datetime, exchange_mark: int, tool_call_mark: int) -> list[str]:
    """Exchanges started before `before` whose every fact is below the lake's watermarks
    (`exchange_mark` for the exchange, `tool_call_mark` for its tool calls and their
    tombstones): what a lake synced to those watermarks holds as the store does."""
    query = select(exchange_facts.c.id).where(
        exchange_facts.c.started_at < before, *_below_marks(exchange_mark, tool_call_mark)
    )
    with engine.connect() as connection:
        return list(connection.execute(query.order_by(exchange_facts.c.id)).scalars())


def _below_marks(exchange_mark: int, tool_call_mark: int) -> tuple[Any, ...]:
    """The exchange's facts, its tool calls' and their tombstones' are all below the
    lake's watermarks."""
    newer_call = exists().where(
        tool_call_facts.c.exchange_id == exchange_facts.c.id, tool_call_facts.c.revision >= tool_call_mark
    )
    newer_gone = exists().where(
        fact_deletions.c.exchange_id == exchange_facts.c.id,
        fact_deletions.c.table_name == "tool_call_facts",
        fact_deletions.c.revision >= tool_call_mark,
    )
    return exchange_facts.c.revision < exchange_mark, ~newer_call, ~newer_gone


def prune_synced(engine: Engine, ids: list[str], exchange_mark: int, tool_call_mark: int) -> tuple[int, int]:
    """Delete the exchanges `ids` (the caller checked the lake holds them) that are still
    below the watermarks (a tool call written since `synced_candidates` keeps its
    exchange too), and the bodies nothing uses any more; returns (exchanges, blobs). The
    tombstones these deletes leave are removed in the same transaction: the lake keeps
    the rows (a later sync must not delete them there)."""
    removed = 0
    with engine.begin() as connection:
        for start in range(0, len(ids), PAGE):
            page = select(exchange_facts.c.id).where(
                exchange_facts.c.id.in_(ids[start : start + PAGE]), *_below_marks(exchange_mark, tool_call_mark)
            )
            still = list(connection.execute(page).scalars())
            connection.execute(delete(tool_calls).where(tool_calls.c.exchange_id.in_(still)))
            connection.execute(delete(body_refs).where(body_refs.c.exchange_id.in_(still)))
            removed += connection.execute(delete(exchanges).where(exchanges.c.id.in_(still))).rowcount or 0
            connection.execute(delete(fact_deletions).where(fact_deletions.c.exchange_id.in_(still)))
        unused = ~exists().where(body_refs.c.body_hash == bodies.c.hash)
        collected = connection.execute(delete(bodies).where(unused)).rowcount
    return removed, collected or 0


def load_blob(connection: Any, digest: str) -> bytes:
    row = connection.execute(select(bodies.c.encoding, bodies.c.data).where(bodies.c.hash == digest)).one()
    return blobs.decompress(row.data, row.encoding)


@dataclass
class ReprocessResult:
    reprocessed: int = 0
    without_bodies: int = 0
    changed: int = 0


def reprocess(engine: Engine, progress: Callable[[int], None] | None = None) -> ReprocessResult:
    """Re-decode every exchange whose raw response body was kept (body mode `full`)."""
    result = ReprocessResult()
    with engine.connect() as connection:
        result.without_bodies = connection.execute(
            select(func.count()).select_from(exchanges).where(exchanges.c.response_body_ref.is_(None))
        ).scalar_one()
    last_id = ""
    while True:
        with engine.begin() as connection:
            rows = (
                connection.execute(
                    select(exchanges)
                    .where(exchanges.c.response_body_ref.is_not(None), exchanges.c.id > last_id)
                    .order_by(exchanges.c.id)
                    .limit(PAGE)
                )
                .mappings()
                .all()
            )
            if not rows:
                break
            for row in rows:
                result.changed += _reprocess_row(connection, row)
                result.reprocessed += 1
            last_id = rows[-1]["id"]
        if progress:
            progress(len(rows))
    # the facts the verdicts read may have changed: every conversation walked again
    with engine.begin() as connection:
        verdicts.recompute_all(connection)
    return result


def _reprocess_row(connection: Any, row: Any) -> int:
    request = None
    headers: list[tuple[str, str]] = []
    if row["request_body_ref"]:
        request, headers = blobs.join_request(
            load_blob(connection, row["request_body_ref"]), lambda h: load_blob(connection, h)
        )
    response = load_blob(connection, row["response_body_ref"])
    # No response headers are stored: a Gemini row's tier may have come from the served-tier
    # header, which the bodies cannot say again. The stored tier stands in for that header.
    served_tier = row["service_tier"] if row["protocol"] in SERVED_TIER_PROTOCOLS else None
    decoder = ExchangeDecoder(
        row["protocol"],
        request=request,
        path=row["path"] or "",
        host=row["host"],
        status=row["status"],
        content_type=row["response_content_type"],
        provider=row["provider"],
        served_tier=served_tier,
    )
    decoder.feed(response)
    exchange = decoder.finish(interrupted=row["interrupted"])
    # who and the kept headers: the session id and the conversation it names (threads.py)
    record = Recorded(
        exchange=exchange,
        started_at=row["started_at"],
        id=row["id"],
        team=row["team"],
        key_fingerprint=row["key_fingerprint"],
        request_headers=headers,
    )
    fresh_rows = rows_for(record, row["body_mode"])
    fresh = fresh_rows.exchanges[0]
    threads.reprocessed(connection, fresh, row["thread_key"])
    keep = {"id", "dedupe_key", "body_mode", "request_body_ref", "response_body_ref"}
    changes = {
        key: value
        for key, value in fresh.items()
        if key in exchanges.c and key not in keep and not _identity_column(key)
    }
    before = {key: row[key] for key in changes}
    connection.execute(update(exchanges).where(exchanges.c.id == row["id"]).values(**changes))
    connection.execute(delete(tool_calls).where(tool_calls.c.exchange_id == row["id"]))
    if fresh_rows.tool_calls:
        connection.execute(tool_calls.insert(), fresh_rows.tool_calls)
    return int(before != changes)


def _identity_column(key: str) -> bool:
    """Who and when stay as recorded; only what decoding yields is recomputed."""
    return key in {
        "team",
        "attribution",
        "price_reason",  # where the traffic went (`unverified_host`) is not in the bodies
        "key_fingerprint",
        "key_last4",
        "key_secret_id",
        "client_addr",
        "tags",  # from a header, not the bodies
        "source",
        "method",
        "host",
        "destination",
        "path",
        "started_at",
        "first_byte_at",
        "first_token_at",
        "ended_at",
        "ttfb_ms",
        "ttft_ms",
        "duration_ms",
        "retry_after_s",
        "response_content_type",
    }
