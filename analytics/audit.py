"""The audit trail: find, read and follow any recorded exchange.

`log` lists exchanges newest first with filters (DuckDB over the store, `sql/log.sql`
with `audit_log.py`'s parameters); `show` gathers one exchange in full — who, when, the
request's facts and, when bodies were kept, its transcript and raw bodies, the answer,
tool calls with their status, usage with provenance, cost with the price version, its
stored cache verdict and tool problems; `conversation` lists the turns of the
conversation it belongs to (SPEC §5), by the stored conversation_id, with totals.

Every verdict shown is the one stored when the exchange was written (SPEC §5, "Verdicts
are data"; `audit_verdicts.py` reads them): nothing here decides one, and nothing reads
more of the store than the exchanges shown: a conversation is a look-up of the index on
conversation_id. Measured at 1M exchanges on SQLite (workloads/synthetic.fill, 2-core machine,
2026-12-02; 50 random exchanges): `conversation` 2.3 ms median (8 turns; 51 ms the
coldest), 1.5 ms for the largest (17 turns), `show` 0.4 ms; working the verdicts out over
the whole store, as they were before, took 2.7 to 25 s and 3.7 to 4.6 s. (The CLI's own
start and its stale-price check, analytics/reprice.py, come on top: 1.8 s in all.)

Not responsible for rendering (the CLI and the dashboard do) or for storing anything.
`url` (the store's, for DuckDB) is what `log` reads through; `show`, `conversation` and
`details` read through `engine` alone and take `url` for their callers' sake.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from sqlalchemy import Engine, Select, select

from llmtap.analytics import audit_log, audit_verdicts
from llmtap.analytics.audit_log import SORTS, LogFilters
from llmtap.analytics.duck import connect
from llmtap.analytics.render import money
from llmtap.analytics.reports import PICO
from llmtap.protocols.transcript import transcript
from llmtap.storage import bodies as blobs
from llmtap.storage import threads
from llmtap.storage.export import TIMINGS, to_canonical, tool_calls_by_exchange, utc
from llmtap.storage.maintenance import load_blob
from llmtap.storage.schema import exchanges

__all__ = ["SORTS", "LogFilters", "NotFound", "conversation", "details", "log", "resolve", "show"]

RAW_BODY_LIMIT = 256 * 1024  # characters of a raw body shown; the store keeps all of it


class NotFound(LookupError):
    pass


def log(url: str, engine: Engine, filters: LogFilters, limit: int = 50) -> list[dict[str, Any]]:
    """Exchanges newest first. `search` looks in answers (kept unless bodies = none) and in
    prompts (kept with bodies = full); an exchange whose text was not kept is not found."""
    connection = connect(url)
    try:
        query = audit_log.query()
        if not filters.search:
            return audit_log.rows(connection.execute(query, audit_log.params(filters, limit, 0)))
        needle = filters.search.casefold()
        found: list[dict[str, Any]] = []
        offset, page = 0, max(limit * 4, 200)
        while len(found) < limit:
            rows = audit_log.rows(connection.execute(query, audit_log.params(filters, page, offset)))
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


def show(engine: Engine, exchange_id: str) -> dict[str, Any]:
    """One exchange in full (see the module's docstring), by id or unambiguous prefix."""
    exchange_id = resolve(engine, exchange_id)
    with engine.connect() as connection:
        row = connection.execute(select(exchanges).where(exchanges.c.id == exchange_id)).mappings().one()
        calls = tool_calls_by_exchange(connection, [exchange_id]).get(exchange_id, [])
        stored = _stored_bodies(connection, row)
    canonical = to_canonical(row, calls)
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
        "cache": audit_verdicts.cache(row),
        "tool_problems": audit_verdicts.tool_problems(row),
        "conversation_id": row["conversation_id"],
        "bodies": stored.get("bodies"),
    }


def _cost(row: Any) -> dict[str, Any]:
    def usd(pico: int | None) -> Decimal | None:
        return Decimal(pico) / PICO if pico is not None else None

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
                key: Decimal(value) / PICO
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


def turns_query(conversation_id: str) -> Select[Any]:
    """The rows of one conversation, oldest first: a look-up of the index on
    conversation_id (tests/audit check the plan), whatever the store's size."""
    return (
        select(exchanges)
        .where(exchanges.c.conversation_id == conversation_id)
        .order_by(exchanges.c.started_at, exchanges.c.id)
    )


def conversation(engine: Engine, exchange_id: str) -> dict[str, Any]:
    """Every exchange of the conversation `exchange_id` belongs to, oldest first: those
    whose stored conversation_id is its own."""
    exchange_id = resolve(engine, exchange_id)
    with engine.connect() as connection:
        row = connection.execute(
            select(exchanges.c.conversation_id, exchanges.c.thread_key, exchanges.c.client_session_id).where(
                exchanges.c.id == exchange_id
            )
        ).one()
        if row.conversation_id is None:  # never, once verdicts are stored: the exchange alone
            rows = connection.execute(select(exchanges).where(exchanges.c.id == exchange_id)).mappings().all()
        else:
            rows = connection.execute(turns_query(row.conversation_id)).mappings().all()
        calls = tool_calls_by_exchange(connection, [r["id"] for r in rows])
    turns = [_turn(r, calls.get(r["id"], [])) for r in rows]
    return {
        "exchange_id": exchange_id,
        "conversation_id": row.conversation_id,
        "identity": _identity(row),
        "turns": turns,
        "totals": _totals(turns),
    }


def _identity(row: Any) -> dict[str, Any]:
    """How the conversation was told (SPEC §5): `session` (the id a client sent), `chain`
    (a Responses previous_response_id chain) or `prefix` (key or team, model, first
    message, gaps of at most an hour)."""
    key = row.thread_key
    if key is None:
        return {"rule": "prefix", "session_id": None}
    rule = "chain" if key.startswith(threads.CHAIN_PREFIX) else "session"
    return {"rule": rule, "session_id": row.client_session_id if rule == "session" else None}


def _turn(row: Any, calls: list[dict[str, Any]]) -> dict[str, Any]:
    canonical = to_canonical(row, calls)
    usage = canonical.get("usage") or {}
    pico = row["cost_total_pico"]
    return {
        "id": canonical["id"],
        "started_at": utc(canonical["started_at"]),
        "finish_reason": canonical["finish_reason"],
        "messages": sum((canonical["request"].get("messages_by_role") or {}).values()),
        "input_tokens": usage.get("input_tokens"),
        "cache_read_tokens": usage.get("cache_read_tokens") or 0,
        "output_tokens": usage.get("output_tokens"),
        "cost_usd": Decimal(pico) / PICO if pico is not None else None,
        "tool_calls": [c["name"] for c in canonical["tool_calls"]],
        "tool_problems": _problem_statuses(canonical["tool_calls"], row),
        "cache": audit_verdicts.cache(row),
    }


def _problem_statuses(calls: list[dict[str, Any]], row: Any) -> list[str]:
    """A turn's tool problems by status: its calls' stored statuses that are not `valid`,
    then the conversation problems stored on its row."""
    statuses = [str(c["status"]) for c in calls if c.get("status") not in (None, "valid")]
    return statuses + [str(p.get("status")) for p in audit_verdicts.tool_problems(row)]


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
        "tool_problems": sum(len(t["tool_problems"]) for t in turns),
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


def details(engine: Engine, ids: list[str], text_limit: int = 2000) -> dict[str, dict[str, Any]]:
    """What the dashboard's inline view shows for each of `ids`, gathered in bulk: the
    request's facts, the answer (text clipped), tool calls, usage, cost, the stored cache
    verdict and conversation_id. No bodies: `show` has those."""
    if not ids:
        return {}
    out: dict[str, dict[str, Any]] = {}
    with engine.connect() as connection:
        rows = connection.execute(select(exchanges).where(exchanges.c.id.in_(ids))).mappings().all()
        calls = tool_calls_by_exchange(connection, ids)
    for row in rows:
        canonical = to_canonical(row, calls.get(row["id"], []))
        text = row["text"] or ""
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
            "cache": {k: (str(v) if isinstance(v, Decimal) else v) for k, v in audit_verdicts.cache(row).items()},
            "timing": {k: canonical[k] for k in ("ttfb_ms", "ttft_ms", "duration_ms")},
            "conversation": row["conversation_id"],  # the stored id of its first exchange
        }
    return out
