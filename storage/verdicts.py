"""Verdicts decided once and stored (SPEC §5, "Verdicts are data"): each exchange's
conversation, prompt-cache verdict and conversation tool problems, decided by the rules of
protocols/rules.py when the exchange is written, inside the writer's transaction.

Two ways, one walk. An exchange that comes after everything its conversation key already
holds (live traffic, an import in time order) is decided from its neighbours in the store,
found by the indexed `line_key` / `conversation_key`: the previous row of its line, the
previous taking-part row, the conversation's previous row and the earlier uses of its tool
ids; the previous row of its line then learns whether this one answered its calls. An
exchange that lands before rows its key already holds (imports in any order, several
proxies, a late follow-up, a root a chain re-keys) has its whole conversation key walked
again from the start after the insert, and every row whose verdict changed is updated.
`recompute_all` walks every key (migration 0013, `reprocess`).

Not responsible for the rules (protocols/rules.py), the insert (batch_insert.py), nor reading
the verdicts (analytics, telemetry, dashboards read the stored columns).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, bindparam, func, or_, select, update

from llmtap.protocols import rules
from llmtap.storage.schema import exchanges, tool_calls

CACHE_COLUMNS = (
    "cache_verdict",
    "cache_cause",
    "cache_message_index",
    "cache_missed_tokens",
    "cache_previous_id",
    "cache_gap_ms",
)
VERDICT_COLUMNS = ("conversation_id", *CACHE_COLUMNS, "tool_problems")
KEY_COLUMNS = ("line_key", "conversation_key")
# what the rules read of a row, beside what they write
RULE_COLUMNS = (
    "id", "started_at", "ended_at", "team", "key_fingerprint", "thread_key", "model", "protocol", "status",
    "first_message_hash", "usage_input_tokens", "usage_cache_read_input_tokens", "tools_hash", "system_hash",
    "message_hashes", "request_cache_breakpoints", "request_cache_ttl", "previous_exchange_id",
    "request_message_count", "request_tool_result_ids", "request_tool_call_ids",
)  # fmt: skip
_READ = [exchanges.c[name] for name in (*RULE_COLUMNS, *KEY_COLUMNS, *VERDICT_COLUMNS)]
_CALLS = (tool_calls.c.exchange_id, tool_calls.c.position, tool_calls.c.call_id, tool_calls.c.name)
REKEYED = "llmtap_rekeyed"  # connection.info: ids whose thread_key threads.py changed in this transaction
PAGE = 500


ADVISORY_LOCK = 0x6C6C6D746170  # "llmtap": one lock for every writer of a PostgreSQL store


def lock(connection: Any) -> None:
    """Serialize the writers of one store for the rest of this transaction, so each
    decides from what the others committed: several proxies, an import beside a proxy.
    PostgreSQL: a transaction-scoped advisory lock (its reads after it see every commit
    before it, under READ COMMITTED). SQLite: the file's write lock, taken by a write
    that changes nothing, before the first read (the driver starts the transaction at
    it, so the reads that follow see the latest commit and no other writer commits in
    between)."""
    if connection.dialect.name == "postgresql":
        connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({ADVISORY_LOCK})")
    else:
        connection.exec_driver_sql("UPDATE fact_revision SET n = n WHERE 0")


def set_keys(row: dict[str, Any]) -> None:
    row["line_key"] = rules.line_key(row)
    row["conversation_key"] = rules.conversation_key(row)


def _before(row: dict[str, Any]) -> Any:
    started = row["started_at"]
    return or_(exchanges.c.started_at < started, and_(exchanges.c.started_at == started, exchanges.c.id < row["id"]))


class Lookup:
    """What comes before a walk that starts at its key's first row: nothing, except the
    exchanges a follow-up names and the stored tool calls of a row."""

    def __init__(self, connection: Any, batch: dict[str, dict[str, Any]]) -> None:
        self.connection = connection
        self.batch = batch

    def _one(self, query: Any) -> dict[str, Any] | None:
        found = self.connection.execute(query).mappings().first()
        return None if found is None else dict(found)

    def line_before(self, row: dict[str, Any], *, taking_part: bool) -> dict[str, Any] | None:
        return None

    def conversation_before(self, row: dict[str, Any]) -> dict[str, Any] | None:
        return None

    def called_before(self, row: dict[str, Any], call_id: str) -> bool:
        return False

    def named(self, exchange_id: str, walked: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
        found = walked.get(exchange_id) or self.batch.get(exchange_id)
        if found is None:
            found = self._one(select(*_READ).where(exchanges.c.id == exchange_id))
        return found

    def calls(self, exchange_id: str) -> list[dict[str, Any]]:
        query = select(*_CALLS).where(tool_calls.c.exchange_id == exchange_id)
        return [dict(r) for r in self.connection.execute(query).mappings()]


TAIL = 16  # stored rows read per conversation key a batch extends (its latest)


class Prefetched(Lookup):
    """The store's answers for a batch that extends its conversation keys, read in three
    queries for the whole batch: each key's latest TAIL rows, their tool calls, and the
    stored uses of the tool ids the batch's rows carry. A line whose previous row is older
    than a key's tail is looked up by itself."""

    def __init__(
        self,
        connection: Any,
        batch: dict[str, dict[str, Any]],
        keys: Sequence[str],
        calls: Sequence[dict[str, Any]],
    ) -> None:
        super().__init__(connection, batch)
        self.tails: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.tail_calls: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.used: dict[str, set[str]] = defaultdict(set)  # conversation key -> tool ids stored
        for start in range(0, len(keys), PAGE):
            page = keys[start : start + PAGE]
            ranked = (
                select(
                    *_READ,
                    func.row_number()
                    .over(
                        partition_by=exchanges.c.conversation_key,
                        order_by=(exchanges.c.started_at.desc(), exchanges.c.id.desc()),
                    )
                    .label("rank_"),
                )
                .where(exchanges.c.conversation_key.in_(page))
                .subquery()
            )
            query = select(ranked).where(ranked.c.rank_ <= TAIL).order_by(ranked.c.rank_)
            for found in connection.execute(query).mappings():
                row = dict(found)
                row.pop("rank_")
                self.tails[row["conversation_key"]].append(row)
        tail_ids = [str(r["id"]) for rows in self.tails.values() for r in rows]
        self.tail_ids = set(tail_ids)
        for start in range(0, len(tail_ids), PAGE):
            page = tail_ids[start : start + PAGE]
            for call in connection.execute(select(*_CALLS).where(tool_calls.c.exchange_id.in_(page))).mappings():
                self.tail_calls[str(call["exchange_id"])].append(dict(call))
        wanted: set[str] = set()
        for row in batch.values():
            wanted.update(rules.ids(row.get("request_tool_result_ids")))
        wanted.update(str(c["call_id"]) for c in calls if c.get("call_id") is not None)
        ordered = sorted(wanted)
        for start in range(0, len(ordered), PAGE):
            page = ordered[start : start + PAGE]
            query = (
                select(exchanges.c.conversation_key, tool_calls.c.call_id)
                .join(exchanges, exchanges.c.id == tool_calls.c.exchange_id)
                .where(tool_calls.c.call_id.in_(page))
            )
            for key, call_id in connection.execute(query):
                if key is not None:
                    self.used[key].add(call_id)

    def latest(self, key: str) -> dict[str, Any] | None:
        tail = self.tails.get(key)
        return tail[0] if tail else None

    def line_before(self, row: dict[str, Any], *, taking_part: bool) -> dict[str, Any] | None:
        tail = self.tails.get(row["conversation_key"], [])
        cache_line = rules.cache_line(row)
        for stored in tail:
            if stored["line_key"] != row["line_key"]:
                continue
            if not taking_part:
                return stored
            if rules.takes_part(stored) and rules.cache_line(stored) == cache_line:
                return stored
        if len(tail) < TAIL:
            return None  # the tail is the whole key
        query = select(*_READ).where(exchanges.c.line_key == row["line_key"], _before(row))
        if taking_part:  # of its cache line: the same first message
            query = query.where(
                exchanges.c.first_message_hash == row["first_message_hash"],
                exchanges.c.usage_input_tokens.is_not(None),
                or_(exchanges.c.status.is_(None), exchanges.c.status < rules.ERROR_STATUS),
            )
        return self._one(query.order_by(exchanges.c.started_at.desc(), exchanges.c.id.desc()).limit(1))

    def conversation_before(self, row: dict[str, Any]) -> dict[str, Any] | None:
        return self.latest(row["conversation_key"])

    def called_before(self, row: dict[str, Any], call_id: str) -> bool:
        return call_id in self.used.get(row["conversation_key"], ())

    def calls(self, exchange_id: str) -> list[dict[str, Any]]:
        if exchange_id in self.tail_ids:
            return self.tail_calls.get(exchange_id, [])
        return super().calls(exchange_id)


@dataclass
class Walk:
    """The rules applied turn by turn over one conversation key, in time order."""

    lookup: Lookup
    calls_of: Callable[[str], list[dict[str, Any]]]
    last_any: dict[str, dict[str, Any]] = field(default_factory=dict)
    last_part: dict[str, dict[str, Any]] = field(default_factory=dict)
    last_row: dict[str, Any] | None = None
    walked: dict[str, dict[str, Any]] = field(default_factory=dict)
    called: set[str] = field(default_factory=set)
    # the problems of earlier rows that a later one changed: id -> tool_problems
    changed: dict[str, list[dict[str, Any]] | None] = field(default_factory=dict)

    def step(self, row: dict[str, Any]) -> dict[str, Any]:
        """The verdict columns of `row`, the next of its key; records what it changes in
        the rows before it (`changed`)."""
        line = row.get("line_key")
        before = self.last_row if self.last_row is not None else self.lookup.conversation_before(row)
        conversation_id = (
            str(row["id"]) if before is None or rules.starts_conversation(row, before) else before["conversation_id"]
        )
        if before is not None and conversation_id is None:
            conversation_id = str(row["id"])  # a stored neighbour without one yet
        line_any = line_part = None
        if line is not None:
            line_any = self.last_any.get(line) or self.lookup.line_before(row, taking_part=False)
            line_part = self.last_part.get(rules.cache_line(row) or "") or self.lookup.line_before(
                row, taking_part=True
            )
        named_id = row.get("previous_exchange_id")
        if named_id is not None:
            named = self.lookup.named(str(named_id), self.walked)
            previous = named if named is not None and rules.takes_part(named) else None
        else:
            previous = line_part
        cache = rules.cache_verdict(row, previous)
        calls = self.calls_of(str(row["id"]))
        key = row.get("conversation_key")

        def used_before(call_id: str) -> bool:
            return call_id in self.called or self.lookup.called_before(row, call_id)

        problems = rules.duplicates(calls, used_before, key)
        problems += rules.orphans(row, line_any, used_before, before is not None)
        if line_any is not None:
            self._answered_by(line_any, row)
        for call in calls:
            if call.get("call_id") is not None:
                self.called.add(call["call_id"])
        columns = {"conversation_id": conversation_id, **cache.columns(), "tool_problems": problems or None}
        current = {**row, **columns}
        self.walked[str(row["id"])] = current
        self.last_row = current
        if line is not None:
            self.last_any[line] = current
            if rules.takes_part(row):
                self.last_part[rules.cache_line(row) or ""] = current
        return columns

    def _answered_by(self, earlier: dict[str, Any], row: dict[str, Any]) -> None:
        """The line's previous row learns what `row`, the next request, answered."""
        earlier_id = str(earlier["id"])
        calls = self.calls_of(earlier_id)
        if not any(c.get("call_id") for c in calls):
            return
        before = _problems(earlier)
        problems = [p for p in before if p["status"] != rules.MISSING_RESULT] + rules.missing_results(
            earlier, calls, row
        )
        if problems != before:
            earlier["tool_problems"] = problems or None
            self.changed[earlier_id] = problems or None


def _problems(row: dict[str, Any]) -> list[dict[str, Any]]:
    value = row.get("tool_problems")
    if isinstance(value, str):
        value = json.loads(value)
    return list(value or [])


@dataclass
class Plan:
    """What `decide` left for after the insert: keys to walk again, stored rows to update."""

    redo: set[str] = field(default_factory=set)
    updates: dict[str, list[dict[str, Any]] | None] = field(default_factory=dict)


def keyed(rows: Iterable[dict[str, Any]]) -> None:
    """Give each row its keys and a place for every verdict column; a row with no key is a
    conversation of its own and takes no part."""
    for row in rows:
        set_keys(row)
        for name in VERDICT_COLUMNS:
            row.setdefault(name, None)
        if row["conversation_key"] is None:
            row.update(rules.NO_PART.columns(), conversation_id=str(row["id"]), tool_problems=None)


def decide(connection: Any, rows: Sequence[dict[str, Any]], calls: Sequence[dict[str, Any]]) -> Plan:
    """Set the verdict columns of a batch about to be inserted (the dicts change in place).
    A key the batch does not simply extend is left to `finish` to walk whole."""
    plan = Plan()
    calls_by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for call in calls:
        calls_by[str(call["exchange_id"])].append(call)
    batch = {str(r["id"]): r for r in rows}
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    keyed(rows)
    for row in rows:
        if row["conversation_key"] is not None:
            groups[row["conversation_key"]].append(row)
    for members in groups.values():
        members.sort(key=rules.order)
    lookup = Prefetched(connection, batch, sorted(groups), calls)
    for key, members in groups.items():
        latest = lookup.latest(key)
        if latest is not None and rules.order(latest) > rules.order(members[0]):
            plan.redo.add(key)  # it lands before rows the key holds: walked whole in `finish`
            for row in members:
                row["conversation_id"] = str(row["id"])
            continue

        def calls_of(exchange_id: str) -> list[dict[str, Any]]:
            return calls_by[exchange_id] if exchange_id in batch else lookup.calls(exchange_id)

        walk = Walk(lookup, calls_of)
        for row in members:
            row.update(walk.step(row))
        for exchange_id, problems in walk.changed.items():
            if exchange_id in batch:
                batch[exchange_id]["tool_problems"] = problems
            else:
                plan.updates[exchange_id] = problems
    return plan


def walk_again(rows: Sequence[dict[str, Any]], inserted: set[str]) -> Plan:
    """The plan when only `inserted` of a `keyed` batch went in (the rest were stored
    already): every key they belong to is walked whole, which also settles their
    neighbours."""
    return Plan(redo={r["conversation_key"] for r in rows if r["id"] in inserted and r["conversation_key"]})


def finish(connection: Any, plan: Plan, rows: Sequence[dict[str, Any]] = ()) -> None:
    """After the insert: update the stored rows the batch changed, re-key the roots a chain
    re-keyed, and walk every key left over; the batch's dicts take the walked values (the
    observers see what is stored)."""
    if plan.updates:
        statement = update(exchanges).where(exchanges.c.id == bindparam("id_")).values(tool_problems=bindparam("p_"))
        connection.execute(statement, [{"id_": i, "p_": p} for i, p in plan.updates.items()])
    redo = set(plan.redo) | _rekey(connection, connection.info.pop(REKEYED, set()))
    walked: dict[str, dict[str, Any]] = {}
    for key in sorted(redo):
        walked.update(walk_key(connection, key))
    for row in rows:
        fresh = walked.get(str(row["id"]))
        if fresh is not None:
            row.update({name: fresh[name] for name in VERDICT_COLUMNS})


def changed(connection: Any, exchange_ids: Iterable[str]) -> None:
    """Stored rows whose facts changed (a background exchange completed by a poll, a chain
    root re-keyed): their keys set again, and their old and new keys walked whole."""
    lock(connection)
    for key in sorted(_rekey(connection, set(exchange_ids))):
        walk_key(connection, key)


def _rekey(connection: Any, exchange_ids: set[str]) -> set[str]:
    """Set the keys of these stored rows again; the conversation keys to walk again."""
    keys: set[str] = set()
    for exchange_id in sorted(exchange_ids):
        found = connection.execute(select(*_READ).where(exchanges.c.id == exchange_id)).mappings().first()
        if found is None:
            continue
        row = dict(found)
        old = row["conversation_key"]
        set_keys(row)
        if (row["line_key"], row["conversation_key"]) != (found["line_key"], old):
            connection.execute(
                update(exchanges)
                .where(exchanges.c.id == exchange_id)
                .values(line_key=row["line_key"], conversation_key=row["conversation_key"])
            )
        keys.update(k for k in (old, row["conversation_key"]) if k)
        if row["conversation_key"] is None:
            _alone(connection, [exchange_id])
    return keys


def walk_key(connection: Any, key: str) -> dict[str, dict[str, Any]]:
    """Walk one conversation key from its first row; update the rows whose verdicts
    changed. Returns every row's verdict columns by id."""
    query = select(*_READ).where(exchanges.c.conversation_key == key).order_by(exchanges.c.started_at, exchanges.c.id)
    members = [dict(r) for r in connection.execute(query).mappings()]
    stored = {str(r["id"]): {name: r[name] for name in VERDICT_COLUMNS} for r in members}
    calls_by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    member_ids = list(stored)
    for start in range(0, len(member_ids), PAGE):
        page = member_ids[start : start + PAGE]
        for call in connection.execute(select(*_CALLS).where(tool_calls.c.exchange_id.in_(page))).mappings():
            calls_by[str(call["exchange_id"])].append(dict(call))
    for row in members:
        for name in VERDICT_COLUMNS:
            row[name] = None  # decided afresh
    walk = Walk(Lookup(connection, {}), lambda exchange_id: calls_by.get(exchange_id, []))
    decided: dict[str, dict[str, Any]] = {}
    for row in members:
        decided[str(row["id"])] = walk.step(row)
    for exchange_id, problems in walk.changed.items():
        decided[exchange_id]["tool_problems"] = problems
    for exchange_id, columns in decided.items():
        if _differs(columns, stored[exchange_id]):
            connection.execute(update(exchanges).where(exchanges.c.id == exchange_id).values(**columns))
    return decided


def _differs(new: dict[str, Any], old: dict[str, Any]) -> bool:
    for name in VERDICT_COLUMNS:
        a, b = new.get(name), old.get(name)
        if name == "tool_problems":
            a = a or None
            b = (json.loads(b) if isinstance(b, str) else b) or None
        if a != b:
            return True
    return False


def recompute_all(connection: Any, progress: Callable[[int], None] | None = None) -> int:
    """Set every row's keys and walk every conversation key (a migration's backfill,
    `reprocess`). Returns the number of rows walked."""
    lock(connection)
    names = [exchanges.c[n] for n in ("id", "thread_key", "key_fingerprint", "team", "model", "first_message_hash")]
    keys: set[str] = set()
    alone: list[str] = []
    done = 0
    for found in connection.execute(select(*names, *[exchanges.c[n] for n in KEY_COLUMNS])).mappings().all():
        row = dict(found)
        line, conversation = rules.line_key(row), rules.conversation_key(row)
        if (line, conversation) != (row["line_key"], row["conversation_key"]):
            connection.execute(
                update(exchanges)
                .where(exchanges.c.id == row["id"])
                .values(line_key=line, conversation_key=conversation)
            )
        if conversation is None:
            alone.append(str(row["id"]))
        else:
            keys.add(conversation)
    for start in range(0, len(alone), PAGE):
        _alone(connection, alone[start : start + PAGE])
    done += len(alone)
    for key in sorted(keys):
        done += len(walk_key(connection, key))
        if progress is not None:
            progress(done)
    return done


def _alone(connection: Any, ids: Iterable[str]) -> None:
    """Rows with neither a thread nor a first message: a conversation of their own."""
    for exchange_id in ids:
        connection.execute(
            update(exchanges)
            .where(exchanges.c.id == exchange_id)
            .values(conversation_id=exchange_id, **rules.NO_PART.columns(), tool_problems=None)
        )
