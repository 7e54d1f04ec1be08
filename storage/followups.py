"""Background work completed by its follow-ups (SPEC §1): a poll, a resumed stream or a
cancel of a `background: true` response or interaction changes the exchange its POST
stored; it is never an exchange of its own, so the work is billed once.

The exchange is the latest stored row of that protocol whose `response_id` the follow-up
names and whose `background_state` is set (the POST was background work), one sent with
the same key first, and only one the follow-up may speak for (SPEC §4, trust is never
inherited; `_target`):

- it reached the same destination as the POST (`scheme://host:port`, protocols/hosts.py;
  the same reverse listener's upstream is the same destination; a row, or a spooled
  follow-up, from before destinations were recorded is compared by host);
- it came from the same team, or with the same key, as the POST;
- a follow-up from a host that may not bill (`unverified_host`) never changes an
  exchange that may be billed.

A response id is no secret (it is in logs, URLs, shared transcripts), so a follow-up that
fails these is `unmatched`: it changes nothing, and the real poll that comes later still
completes the work. Then:

- a follow-up that states a running status (`queued`, `in_progress`) only updates
  `background_state`;
- the first that states a terminal one (`completed`, `failed`, `incomplete`, `cancelled`,
  …; a successful cancel without a body that says otherwise is `cancelled`) completes it:
  usage, finish, text, tool calls (checked against the POST's declared tools), errors,
  `complete`, `ended_at` and `duration_ms` (from the POST's start), the price (the writer's
  own pricer), and, in body mode `full`, the response body it was completed from. The
  UPDATE is conditional on the row not being terminal yet, so a second terminal poll,
  a replayed import, or a concurrent writer changes nothing;
- a follow-up whose id the store does not hold (the POST went unrecorded, or the GET was
  of a response that never ran in the background), whose HTTP status is an error, or
  whose body could not be decoded is dropped: counted, logged at debug, never a row.

A follow-up that must wait (the store away, rows before it in the spool) waits in the
spool like rows do, as JSON (`FollowUp.to_json`); one the database refuses goes to the
rejected file, whence `llmtap import` takes it back.

Not responsible for telling a follow-up route (protocols/followups.py), decoding it (the
translators, through the addon or `ingest`), or when it runs (the writer applies a batch's
follow-ups after that batch's rows, and a replay applies spooled follow-ups after every
spooled row, so a poll never overtakes its POST).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, Engine, and_, case, delete, false, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite

from llmtap.protocols.canonical import RequestFacts, ToolSpec
from llmtap.protocols.followups import KINDS, TERMINAL_STATES, FollowUpRoute, is_terminal
from llmtap.protocols.hosts import UNVERIFIED_HOST
from llmtap.protocols.toolcheck import check_tool_calls
from llmtap.storage import record_json, schema, verdicts
from llmtap.storage.export import USAGE_COLUMNS
from llmtap.storage.record import Recorded
from llmtap.storage.rows import PRICE_COLUMNS, RowSet, rows_for

log = logging.getLogger("llmtap.storage")

Enrich = Callable[[list[dict[str, Any]]], None]

# The columns a terminal follow-up brings (rows.py names them): the outcome of the work.
# Who, where, when it started, what was asked, the HTTP status and the protocol's framing
# stay the POST's.
_OUTCOME = (
    "complete",
    "finish_reason",
    "finish_reason_raw",
    *USAGE_COLUMNS.values(),
    "usage_total_tokens_reported",
    "usage_provenance",
    "usage_raw",
    "usage_check",
    "usage_modalities",
    "usage_sub",
    "inference_geo",
    "service_speed",
    "server_tool_uses",
    "text",
    "text_truncated",
    "refusal",
    "reasoning_blocks",
    "tool_call_count",
    "server_tool_calls",
    "error_type",
    "error_code",
    "error_message",
    "interrupted",
)
_KEPT_WHEN_UNSAID = ("model", "service_tier")  # the follow-up's when it names one, else the POST's


@dataclass(slots=True)
class FollowUp:
    """A decoded follow-up: its route and the record of its response (an `Exchange` decoded
    with the protocol's translator, who sent it and when, its secrets already scrubbed).
    Never stored as it is: `apply` changes the exchange it continues."""

    route: FollowUpRoute
    record: Recorded
    # A writer process stamps an id on every record it finishes; a follow-up keeps it
    # for logs only (it is never a row).
    id: str = ""

    @property
    def started_at(self) -> datetime:
        return self.record.started_at

    def build(self) -> FollowUp:
        """Already finished (the writer finishes pending items by calling `build`)."""
        return self

    def kept(self, body_mode: str) -> FollowUp:
        """What a file may keep of this follow-up under the writer's body mode, as rows
        keep it: its response body only in `full`; in `none` no text or refusal either.
        Tool-call arguments stay in every mode: `apply` checks the calls against the tools
        the stored POST declared, which it can read only once the store is back (the rows
        it writes then keep them as the body mode says). A copy; this one is unchanged."""
        if body_mode == "full":
            return self
        record, exchange = self.record, self.record.exchange
        if body_mode == "none":
            exchange = replace(exchange, text="", refusal=None)
        return FollowUp(self.route, replace(record, exchange=exchange, request_body=None, response_body=None), self.id)

    def to_json(self) -> dict[str, Any]:
        """What `apply` needs, as JSON values: the route and the decoded response with who
        sent it and when (`record_json`: an allow-list of the record's fields, its secrets
        already scrubbed from the wire's values; the caller scrubs key shapes from the line
        it writes). For the spool and the rejected file; never a pickle."""
        route = self.route
        return {
            "v": 1,
            "route": {"kind": route.kind, "protocol": route.protocol, "response_id": route.response_id},
            "id": self.id,
            "record": record_json.to_json(self.record),
        }

    @classmethod
    def from_json(cls, data: Any) -> FollowUp:
        """The follow-up `to_json` wrote. Raises ValueError (KeyError, TypeError) for
        anything else, a version this llmtap does not know included."""
        if not isinstance(data, dict) or data.get("v") != 1:
            raise ValueError("not a follow-up this llmtap can load")
        route = data["route"]
        kind, protocol, response_id = route["kind"], route["protocol"], route["response_id"]
        if kind not in KINDS or not isinstance(protocol, str) or not isinstance(response_id, str):
            raise ValueError("a follow-up without its kind, protocol or response id")
        return cls(FollowUpRoute(kind, protocol, response_id), record_json.from_json(data["record"]), str(data["id"]))

    @property
    def state(self) -> str | None:
        """The status this follow-up states, or None when it states none it can be trusted
        for: an HTTP error, or a body that could not be decoded."""
        exchange = self.record.exchange
        if exchange.status is not None and exchange.status >= 400:
            return None
        state = exchange.background_state
        if self.route.kind == "cancel" and not is_terminal(state):
            return "cancelled"  # the cancel was accepted; its body, if any, said nothing final
        if exchange.decode_error is not None and state is None:
            return None
        return state


def apply(engine: Engine, followups: Iterable[FollowUp], enrich: Enrich | None = None) -> Counter[str]:
    """Apply follow-ups in order, each in a transaction of its own; counts by outcome
    (`completed`, `updated`, `unchanged`, `unmatched`, `ignored`). Raises SQLAlchemy's
    errors (the writer tells a store that is away from one that refuses a value)."""
    outcomes: Counter[str] = Counter()
    for followup in followups:
        with engine.begin() as connection:
            outcome = apply_one(connection, followup, enrich)
        outcomes[outcome] += 1
        if outcome in ("unmatched", "ignored"):
            log.debug(
                "llmtap: %s of %s %s %s (not a generation, not recorded)",
                followup.route.kind,
                followup.route.protocol,
                followup.route.response_id,
                outcome,
            )
    return outcomes


def apply_one(connection: Connection, followup: FollowUp, enrich: Enrich | None = None) -> str:
    """One follow-up, inside the caller's transaction."""
    state = followup.state
    if state is None:
        return "ignored"
    row = _target(connection, followup)
    if row is None:
        return "unmatched"
    if is_terminal(row["background_state"]):
        return "unchanged"  # completed once already: billed once
    if not is_terminal(state):
        if row["background_state"] == state or (state, row["background_state"]) == ("queued", "in_progress"):
            return "unchanged"  # no news, or an older poll than the one that said it runs
        _update(connection, row["id"], {"background_state": state})
        return "updated"
    if followup.record.exchange.decode_error is not None:
        # a terminal word in a body that did not decode whole: the state, not the outcome
        return "completed" if _update(connection, row["id"], {"background_state": state}) else "unchanged"
    rows = _completion_rows(row, followup)
    changes = _changes(row, rows.exchanges[0], followup, state, enrich)
    if not _update(connection, row["id"], changes):
        return "unchanged"  # another writer completed it first
    connection.execute(delete(schema.tool_calls).where(schema.tool_calls.c.exchange_id == row["id"]))
    if rows.tool_calls:
        connection.execute(schema.tool_calls.insert(), rows.tool_calls)
    if rows.bodies:
        connection.execute(_insert_ignore(connection, schema.bodies), rows.bodies)
        connection.execute(_insert_ignore(connection, schema.body_refs), rows.body_refs)
    verdicts.changed(connection, [row["id"]])  # its usage and calls are new: its verdicts too
    return "completed"


def _target(connection: Connection, followup: FollowUp) -> dict[str, Any] | None:
    """The stored background exchange the follow-up names and may speak for (see the
    module's docstring); one sent with the same key first (a gateway or a replay may hand
    the same id to more than one request)."""
    ex = schema.exchanges
    route, record = followup.route, followup.record
    same_key = case((ex.c.key_fingerprint == record.key_fingerprint, 0), else_=1)
    found = connection.execute(
        select(ex)
        .where(
            ex.c.response_id == route.response_id,
            ex.c.protocol == route.protocol,
            ex.c.background_state.is_not(None),
            *_may_speak_for(record),
        )
        .order_by(same_key, ex.c.started_at.desc())
        .limit(1)
    ).first()
    return dict(found._mapping) if found is not None else None


def _may_speak_for(record: Recorded) -> list[ColumnElement[bool]]:
    """The conditions on a stored exchange that a follow-up with this record may change:
    the same destination, the same team or key, and no trust it does not have itself."""
    ex = schema.exchanges.c
    if record.host is None:
        return [false()]
    if record.destination is None:  # a follow-up an older llmtap spooled: its host is all it says
        where = ex.host == record.host
    else:  # a row from before destinations: its host is all it says
        where = or_(ex.destination == record.destination, and_(ex.destination.is_(None), ex.host == record.host))
    who = ex.team == (record.team or "unattributed")
    if record.key_fingerprint is not None:
        who = or_(who, ex.key_fingerprint == record.key_fingerprint)
    conditions = [where, who]
    if record.price_reason == UNVERIFIED_HOST:
        conditions.append(ex.price_reason == UNVERIFIED_HOST)
    return conditions


def _completion_rows(row: dict[str, Any], followup: FollowUp) -> RowSet:
    """The follow-up's response as rows of the stored exchange: its tool calls checked
    against the tools the POST declared, content kept as the row's body mode says."""
    exchange = followup.record.exchange
    declared = [
        ToolSpec(name=str(tool.get("name")), schema=tool.get("schema"), type=str(tool.get("type") or "function"))
        for tool in row.get("request_tools") or []
        if isinstance(tool, dict)
    ]
    exchange.request = RequestFacts(tools=declared)
    check_tool_calls(exchange)
    record = Recorded(
        exchange=exchange,
        started_at=row["started_at"],
        id=row["id"],
        response_body=followup.record.response_body,
        response_content_type=followup.record.response_content_type,
    )
    return rows_for(record, row.get("body_mode") or "metadata")


def _changes(
    row: dict[str, Any], completion: dict[str, Any], followup: FollowUp, state: str, enrich: Enrich | None
) -> dict[str, Any]:
    changes = {name: completion[name] for name in _OUTCOME}
    for name in _KEPT_WHEN_UNSAID:
        if completion[name] is not None:
            changes[name] = completion[name]
    changes["background_state"] = state
    ended = followup.record.ended_at
    if ended is not None:
        changes["ended_at"] = ended
        changes["duration_ms"] = round((ended - _aware(row["started_at"], ended)).total_seconds() * 1000.0, 3)
    if completion.get("response_body_ref"):  # body mode `full`: `reprocess` decodes what completed it
        changes["response_body_ref"] = completion["response_body_ref"]
        changes["response_content_type"] = completion["response_content_type"]
    if enrich is not None:
        priced = {**row, **changes, **dict.fromkeys(PRICE_COLUMNS)}
        priced["price_reason"] = row["price_reason"] if row["price_reason"] == UNVERIFIED_HOST else None
        try:
            enrich([priced])
        except Exception:  # noqa: BLE001 - stored unpriced; `reprice` catches up
            log.exception("llmtap: pricing a completed background exchange failed")
        else:
            changes.update({name: priced[name] for name in PRICE_COLUMNS})
    return changes


def _aware(started: datetime, like: datetime) -> datetime:
    """SQLite hands timestamps back naive (they were stored as UTC)."""
    if started.tzinfo is None and like.tzinfo is not None:
        return started.replace(tzinfo=like.tzinfo)
    return started


def _update(connection: Connection, exchange_id: str, values: dict[str, Any]) -> bool:
    """Change the row unless it reached a terminal state meanwhile; whether it changed."""
    ex = schema.exchanges
    result = connection.execute(
        update(ex)
        .where(
            ex.c.id == exchange_id,
            or_(ex.c.background_state.is_(None), ex.c.background_state.not_in(sorted(TERMINAL_STATES))),
        )
        .values(**values)
    )
    return bool(result.rowcount)


def _insert_ignore(connection: Connection, table: Any) -> Any:
    dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
    return dialect.insert(table).on_conflict_do_nothing()
