"""The audit trail: find, read and follow any recorded exchange.

`log` lists exchanges newest first with filters (DuckDB over the store, `sql/log.sql`);
`show` gathers one exchange in full — who, when, the request's facts and, when bodies
were kept, its transcript and raw bodies, the answer, tool calls with their status,
usage with provenance, cost with the price version, the cache verdict; `conversation`
follows the conversation it belongs to (SPEC §5) turn by turn with totals.

Not responsible for rendering (the CLI and the dashboard do) or for storing anything.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from string import Template
from typing import Any

from sqlalchemy import Engine, select

from llmtap.analytics import reports
from llmtap.analytics.duck import connect
from llmtap.analytics.render import money
from llmtap.protocols.transcript import transcript
from llmtap.storage import bodies as blobs
from llmtap.storage import threads
from llmtap.storage.export import TIMINGS, to_canonical, tool_calls_by_exchange, utc
from llmtap.storage.maintenance import load_blob
from llmtap.storage.schema import exchange_facts, exchanges

RAW_BODY_LIMIT = 256 * 1024  # characters of a raw body shown; the store keeps all of it


class NotFound(LookupError):
    pass


@dataclass
class LogFilters:
    team: str | None = None
    model: str | None = None
    provider: str | None = None
    status: str | None = None  # an HTTP status, or "error"
    finish: str | None = None
    tool_problem: str | None = None  # a status, or "any"
    cache_miss: str | None = None  # a cause, or "any"
    search: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    sort: str | None = None  # started (None: newest first), cost (costliest first, unpriced last), tokens


SORTS = ("started", "cost", "tokens")
# Without a thread_key, a longer gap starts a new conversation (SPEC §5, conversation_ids.sql);
# a session or response chain (thread_key) is one conversation whatever its gaps.
CONVERSATION_GAP_S = 3600


def _query(name: str, needs: tuple[str, ...] = ("cache_misses", "tool_problems")) -> str:
    ctes = ", ".join(f"{need} AS ({Template(reports.sql(need)).safe_substitute()})" for need in needs)
    return f"WITH {ctes}\n{reports.sql(name)}"


def _naive(moment: datetime | None) -> datetime | None:
    return moment.astimezone(UTC).replace(tzinfo=None) if moment else None


def _params(filters: LogFilters, limit: int, offset: int, ids: list[str] | None = None) -> dict[str, Any]:
    return {
        "since": _naive(filters.since),
        "until": _naive(filters.until),
        "team": filters.team,
        "model": filters.model,
        "provider": filters.provider,
        "status": filters.status,
        "finish": filters.finish,
        "tool_problem": filters.tool_problem,
        "cache_miss": filters.cache_miss,
        "ids": ids,
        "sort": filters.sort or "started",
        "limit": limit,
        "offset": offset,
    }


def _rows(result: Any) -> list[dict[str, Any]]:
    columns = [d[0] for d in result.description]
    rows = []
    for values in result.fetchall():
        row = dict(zip(columns, values, strict=True))
        if row.get("cost_usd") is not None:
            row["cost_usd"] = Decimal(int(row["cost_usd"])) / reports.PICO
        rows.append(row)
    return rows


def log(url: str, engine: Engine, filters: LogFilters, limit: int = 50) -> list[dict[str, Any]]:
    """Exchanges newest first. `search` looks in answers (kept unless bodies = none) and in
    prompts (kept with bodies = full); an exchange whose text was not kept is not found."""
    connection = connect(url)
    try:
        query = _query("log")
        if not filters.search:
            return _rows(connection.execute(query, _params(filters, limit, 0)))
        needle = filters.search.casefold()
        found: list[dict[str, Any]] = []
        offset, page = 0, max(limit * 4, 200)
        while len(found) < limit:
            rows = _rows(connection.execute(query, _params(filters, page, offset)))
            if not rows:
                break
            found += [row for row in _matching(engine, rows, needle)]
            offset += page
        return found[:limit]
    finally:
        connection.close()


def _matching(engine: Engine, rows: list[dict[str, Any]], needle: str) -> list[dict[str, Any]]:
    ids = [row["id"] for row in rows]
    with engine.connect() as connection:
        texts = dict(connection.execute(select(exchanges.c.id, exchanges.c.text).where(exchanges.c.id.in_(ids))).all())
        refs = dict(
            connection.execute(
                select(exchanges.c.id, exchanges.c.request_body_ref).where(exchanges.c.id.in_(ids))
            ).all()
        )
        matched = []
        for row in rows:
            answer = texts.get(row["id"]) or ""
            if needle in answer.casefold() or _prompt_contains(connection, refs.get(row["id"]), needle):
                matched.append(row)
        return matched


def _prompt_contains(connection: Any, ref: str | None, needle: str) -> bool:
    if not ref:
        return False
    body, _ = blobs.join_request(load_blob(connection, ref), lambda h: load_blob(connection, h))
    return needle in body.decode("utf-8", "replace").casefold()


def resolve(engine: Engine, exchange_id: str) -> str:
    """The full id of an exchange given it or an unambiguous prefix (at least 6 chars)."""
    exchange_id = exchange_id.strip()
    with engine.connect() as connection:
        if connection.execute(select(exchanges.c.id).where(exchanges.c.id == exchange_id)).first():
            return exchange_id
        if len(exchange_id) >= 6:
            matches = (
                connection.execute(
                    select(exchanges.c.id).where(exchanges.c.id.startswith(exchange_id, autoescape=True)).limit(2)
                )
                .scalars()
                .all()
            )
            if len(matches) == 1:
                return matches[0]
            if len(matches) > 1:
                raise NotFound(f"{exchange_id!r} matches more than one exchange; give more of the id")
    raise NotFound(f"no exchange {exchange_id!r} in the store")


def show(url: str, engine: Engine, exchange_id: str) -> dict[str, Any]:
    exchange_id = resolve(engine, exchange_id)
    with engine.connect() as connection:
        row = connection.execute(select(exchanges).where(exchanges.c.id == exchange_id)).mappings().one()
        calls = tool_calls_by_exchange(connection, [exchange_id]).get(exchange_id, [])
        stored = _stored_bodies(connection, row)
    canonical = to_canonical(row, calls)
    verdicts = _verdicts(url, [exchange_id])
    return {
        "id": row["id"],
        "who": {
            "team": row["team"],
            "attribution": row["attribution"],
            "key_fingerprint": row["key_fingerprint"],
            "key_last4": row["key_last4"],
            "client_addr": row["client_addr"],
            "source": row["source"],
            "session_id": row["client_session_id"],  # a client's own session id (storage/threads.py)
        },
        "when": {key: canonical[key] for key in TIMINGS},
        "where": {
            "protocol": row["protocol"],
            "provider": row["provider"],
            "host": row["host"],
            "path": row["path"],
            "status": row["status"],
            "streamed": row["streamed"],
            "complete": row["complete"],
        },
        "request": {**canonical["request"], "model": row["model_requested"], "warmup": canonical["warmup"]},
        "transcript": stored.get("transcript"),
        "answer": {
            "model": row["model"],
            "finish_reason": row["finish_reason"],
            "finish_reason_raw": row["finish_reason_raw"],
            "text": row["text"],
            "text_truncated": row["text_truncated"],
            "refusal": row["refusal"],
            "reasoning_blocks": row["reasoning_blocks"],
            "tool_calls": canonical["tool_calls"],
            "server_tool_calls": canonical["server_tool_calls"],
            "error": canonical["error"],
            "interrupted": row["interrupted"],
            "decode_error": row["decode_error"],
        },
        "usage": {**(canonical["usage"] or {}), "provenance": row["usage_provenance"], "raw": row["usage_raw"]}
        if canonical["usage"]
        else {"provenance": row["usage_provenance"]},
        "cost": _cost(row),
        "cache": verdicts.get(exchange_id) or _verdict_without_miss(row),
        "bodies": stored.get("bodies"),
    }


def _cost(row: Any) -> dict[str, Any]:
    def usd(pico: int | None) -> Decimal | None:
        return Decimal(pico) / reports.PICO if pico is not None else None

    return {
        "status": row["price_status"],
        "reason": row["price_reason"],
        "model": row["price_model"],
        "price_version": row["price_version"],
        "total_usd": usd(row["cost_total_pico"]),
        "input_usd": usd(row["cost_input_pico"]),
        "cache_read_usd": usd(row["cost_cache_read_pico"]),
        "cache_write_usd": usd(row["cost_cache_write_pico"]),
        "output_usd": usd(row["cost_output_pico"]),
        "fee_usd": usd(row.get("cost_fee_pico")),
        # what was served, which the price follows (SPEC §5)
        "service_tier": row.get("service_tier"),
        "inference_geo": row.get("inference_geo"),
        "speed": row.get("service_speed"),
        "server_tool_uses": row.get("server_tool_uses"),
        "detail": _detail(row.get("cost_detail")),
    }


def _detail(detail: Any) -> Any:
    """The pricer's `cost_detail` (context, parts, multiplier) with each pico-dollar
    amount of a part (`input`, `cache_read`, `cache_write`, `output`, `total`) as exact
    dollars; NULL on rows priced before it existed. Whatever else it holds passes as it is."""
    if isinstance(detail, str):
        try:
            detail = json.loads(detail)
        except ValueError:
            return detail
    if not isinstance(detail, dict):
        return detail
    parts = []
    for part in detail.get("parts") or []:
        if isinstance(part, dict):
            part = {
                key: Decimal(value) / reports.PICO
                if key in _PICO_KEYS and isinstance(value, int) and not isinstance(value, bool)
                else value
                for key, value in part.items()
            }
        parts.append(part)
    return {**detail, "parts": parts} if "parts" in detail else detail


_PICO_KEYS = ("input", "cache_read", "cache_write", "output", "total")


def _stored_bodies(connection: Any, row: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not row["request_body_ref"] and not row["response_body_ref"]:
        return out
    request_text: str | None = None
    headers: list[tuple[str, str]] = []
    if row["request_body_ref"]:
        body, headers = blobs.join_request(
            load_blob(connection, row["request_body_ref"]), lambda h: load_blob(connection, h)
        )
        request_text = body.decode("utf-8", "replace")
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            script = transcript(row["protocol"], parsed)
            out["transcript"] = {
                "system": script.system,
                "messages": [{"role": r, "text": t} for r, t in script.messages],
            }
    response_text = None
    if row["response_body_ref"]:
        response_text = load_blob(connection, row["response_body_ref"]).decode("utf-8", "replace")
    out["bodies"] = {
        "request_headers": [list(h) for h in headers],
        "request": _clip(request_text),
        "response": _clip(response_text),
    }
    return out


def _clip(text: str | None) -> str | None:
    if text is None or len(text) <= RAW_BODY_LIMIT:
        return text
    return text[:RAW_BODY_LIMIT] + f"\n… ({len(text) - RAW_BODY_LIMIT} more characters in the store)"


def _verdicts(url: str, ids: list[str]) -> dict[str, dict[str, Any]]:
    connection = connect(url)
    try:
        query = (
            f"WITH cache_misses AS ({Template(reports.sql('cache_misses')).safe_substitute()}) "
            "SELECT exchange_id, cause, message_index, missed_tokens, extra_cost_usd, previous_exchange_id "
            "FROM cache_misses WHERE list_contains($ids, exchange_id)"
        )
        return miss_verdicts(connection.execute(query, {"since": None, "until": None, "ids": ids}).fetchall())
    finally:
        connection.close()


def miss_verdicts(rows: Iterable[tuple[Any, ...]]) -> dict[str, dict[str, Any]]:
    """Cache verdicts by exchange id from `cache_misses` rows of (exchange_id, cause,
    message_index, missed_tokens, extra_cost_usd in pico-dollars, previous_exchange_id)."""
    out = {}
    for exchange_id, cause, index, missed, extra, previous in rows:
        out[exchange_id] = {
            # under the model's minimum: counted apart, never a miss (SPEC §5)
            "verdict": "not_cacheable" if cause == "below_minimum" else "miss",
            "cause": cause,
            "message_index": index,
            "missed_tokens": missed,
            "extra_cost_usd": Decimal(int(extra)) / reports.PICO if extra is not None else None,
            "previous_exchange_id": previous,
        }
    return out


def _verdict_without_miss(row: Any) -> dict[str, Any]:
    read = row["usage_cache_read_input_tokens"]
    if read:
        return {"verdict": "hit", "cache_read_tokens": read}
    if row["usage_input_tokens"] is None:
        return {"verdict": "unknown", "reason": "no usage reported"}
    return {"verdict": "no cache read", "reason": "first request of its conversation, or nothing to continue"}


def conversation(url: str, engine: Engine, exchange_id: str) -> dict[str, Any]:
    """Every exchange of the conversation `exchange_id` belongs to, oldest first: the
    identity of conversation_ids.sql (its thread_key, else the prefix rule)."""
    exchange_id = resolve(engine, exchange_id)
    with engine.connect() as connection:
        row = connection.execute(
            select(
                exchanges.c.first_message_hash,
                exchanges.c.key_fingerprint,
                exchanges.c.team,
                exchanges.c.model,
                exchanges.c.thread_key,
                exchanges.c.client_session_id,
            ).where(exchanges.c.id == exchange_id)
        ).one()
        if row.thread_key is not None:
            # a session or response chain: all of it, whatever the gaps (the scope, key
            # or team, is part of the key). No index names a thread: the narrow copy is
            # scanned (0.7 s at 1M exchanges on SQLite, against 2 s or more for `exchanges`).
            ids = list(
                connection.execute(
                    select(exchange_facts.c.id)
                    .where(exchange_facts.c.thread_key.in_(threads.same_conversation(row.thread_key)))
                    .order_by(exchange_facts.c.started_at, exchange_facts.c.id)
                ).scalars()
            )
        elif row.first_message_hash is None:
            ids = [exchange_id]
        else:
            query = select(exchanges.c.id).where(
                exchanges.c.first_message_hash == row.first_message_hash,
                exchanges.c.model == row.model,
                exchanges.c.thread_key.is_(None),  # the prefix rule leaves sessions and chains out
            )
            if row.key_fingerprint:
                query = query.where(exchanges.c.key_fingerprint == row.key_fingerprint)
            else:
                query = query.where(exchanges.c.key_fingerprint.is_(None), exchanges.c.team == row.team)
            thread = connection.execute(
                query.with_only_columns(exchanges.c.id, exchanges.c.started_at, exchanges.c.ended_at).order_by(
                    exchanges.c.started_at, exchanges.c.id
                )
            ).all()
            ids = _run_of(thread, exchange_id)
    turns = [_turn(canonical) for canonical in _by_ids(engine, ids)]
    verdicts = _verdicts(url, ids)
    for turn in turns:
        turn["cache"] = verdicts.get(turn["id"], {"verdict": "hit" if turn["cache_read_tokens"] else "no cache read"})
    return {"exchange_id": exchange_id, "identity": _identity(row), "turns": turns, "totals": _totals(turns)}


def _identity(row: Any) -> dict[str, Any]:
    """How the conversation was told (SPEC §5): `session` (the id a client sent), `chain`
    (a Responses previous_response_id chain) or `prefix` (key or team, model, first
    message, gaps of at most an hour)."""
    key = row.thread_key
    if key is None:
        return {"rule": "prefix", "session_id": None}
    rule = "chain" if key.startswith(threads.CHAIN_PREFIX) else "session"
    return {"rule": rule, "session_id": row.client_session_id if rule == "session" else None}


def _run_of(thread: Any, exchange_id: str) -> list[str]:
    """The ids of the run of `thread` (id, started_at, ended_at; in time order) that holds
    `exchange_id`: a gap of over an hour after a request ended starts a new run, as in
    conversation_ids.sql."""
    runs: list[list[str]] = []
    previous_end: datetime | None = None
    for exchange, started, ended in thread:
        if previous_end is None or (utc(started) - previous_end).total_seconds() > CONVERSATION_GAP_S:
            runs.append([])
        runs[-1].append(exchange)
        previous_end = utc(ended or started)
    return next((run for run in runs if exchange_id in run), [exchange_id])


def _by_ids(engine: Engine, ids: list[str]) -> list[dict[str, Any]]:
    with engine.connect() as connection:
        rows = connection.execute(select(exchanges).where(exchanges.c.id.in_(ids))).mappings().all()
        calls = tool_calls_by_exchange(connection, ids)
    found = {
        r["id"]: {**to_canonical(r, calls.get(r["id"], [])), "cost_total_pico": r["cost_total_pico"]} for r in rows
    }
    return [found[i] for i in ids if i in found]


def _turn(canonical: dict[str, Any]) -> dict[str, Any]:
    usage = canonical.get("usage") or {}
    pico = canonical.get("cost_total_pico")
    return {
        "id": canonical["id"],
        "started_at": utc(canonical["started_at"]),
        "finish_reason": canonical["finish_reason"],
        "messages": sum((canonical["request"].get("messages_by_role") or {}).values()),
        "input_tokens": usage.get("input_tokens"),
        "cache_read_tokens": usage.get("cache_read_tokens") or 0,
        "output_tokens": usage.get("output_tokens"),
        "cost_usd": Decimal(pico) / reports.PICO if pico is not None else None,
        "tool_calls": [c["name"] for c in canonical["tool_calls"]],
    }


def _totals(turns: list[dict[str, Any]]) -> dict[str, Any]:
    """The conversation's sums. `cost_usd` is the sum of the priced turns, None when no
    turn is priced (a total over unpriced turns is never $0); `unpriced_turns` says how
    many turns it leaves out."""
    priced = [t["cost_usd"] for t in turns if t["cost_usd"] is not None]
    return {
        "turns": len(turns),
        "input_tokens": sum(t["input_tokens"] or 0 for t in turns),
        "cache_read_tokens": sum(t["cache_read_tokens"] or 0 for t in turns),
        "output_tokens": sum(t["output_tokens"] or 0 for t in turns),
        "cost_usd": sum(priced, Decimal(0)) if priced else None,
        "unpriced_turns": sum(1 for t in turns if t["cost_usd"] is None),
        "cost_shown": cost_shown(priced, len(turns) - len(priced)),
        "cache_misses": sum(1 for t in turns if t["cache"].get("verdict") == "miss"),
    }


def cost_shown(priced: list[Decimal], unpriced: int, noun: str = "turn") -> str:
    """A total over turns as text: `$1.23`, `$1.23 + 2 unpriced turns` (`noun` "" leaves
    the noun out), or `unpriced` when no turn has a price (never `$0.00`)."""
    if not priced:
        return "unpriced" if unpriced else money(0)
    shown = money(sum(priced, Decimal(0)))
    if not unpriced:
        return shown
    plural = "s" if unpriced != 1 else ""
    return f"{shown} + {unpriced} unpriced" + (f" {noun}{plural}" if noun else "")


def details(
    url: str,
    engine: Engine,
    ids: list[str],
    text_limit: int = 2000,
    verdicts: dict[str, dict[str, Any]] | None = None,
) -> dict[str, dict[str, Any]]:
    """What the dashboard's inline view shows for each of `ids`, gathered in bulk: the
    request's facts, the answer (text clipped), tool calls, usage, cost, cache verdict
    and the conversation it belongs to. No bodies: `show` has those. `verdicts`: the
    misses among `ids` (`miss_verdicts`) when the caller has listed them already."""
    if not ids:
        return {}
    out: dict[str, dict[str, Any]] = {}
    with engine.connect() as connection:
        rows = connection.execute(select(exchanges).where(exchanges.c.id.in_(ids))).mappings().all()
        calls = tool_calls_by_exchange(connection, ids)
    verdicts = _verdicts(url, ids) if verdicts is None else verdicts
    for row in rows:
        canonical = to_canonical(row, calls.get(row["id"], []))
        text = row["text"] or ""
        who = row["key_fingerprint"] or f"team:{row['team']}"
        out[row["id"]] = {
            "request": canonical["request"],
            "answer": {
                "text": text[:text_limit],
                "text_clipped": len(text) > text_limit,
                "finish_reason_raw": row["finish_reason_raw"],
                "reasoning_blocks": row["reasoning_blocks"],
                "error": canonical["error"],
                "interrupted": row["interrupted"],
                "decode_error": row["decode_error"],
                "tool_calls": canonical["tool_calls"],
            },
            "usage": {**(canonical["usage"] or {}), "provenance": row["usage_provenance"]},
            "cost": {k: (str(v) if isinstance(v, Decimal) else v) for k, v in _cost(row).items()},
            "cache": {
                k: (str(v) if isinstance(v, Decimal) else v)
                for k, v in (verdicts.get(row["id"]) or _verdict_without_miss(row)).items()
            },
            "timing": {k: canonical[k] for k in ("ttfb_ms", "ttft_ms", "duration_ms")},
            # a session's requests and its chains (`s…`, `c…`) share the digits (storage/threads.py)
            "conversation": f"thread:{row['thread_key'][1:]}"
            if row.get("thread_key")
            else (f"{who}|{row['model']}|{row['first_message_hash']}" if row["first_message_hash"] else None),
        }
    return out
