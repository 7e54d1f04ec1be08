"""Synthetic exchanges for the report benchmark: rows as the writer makes them, fast.

A few templates — wire bodies decoded by the real translators and turned into rows by
`storage.rows.rows_for` — are varied into conversations: teams and keys, providers and
models (one with no price), turns that hit the prompt cache or miss it for each cause
(tools or system changed, a message edited, a pause past the TTL, no breakpoint, a short
prefix), streams and cut streams, tool calls of every status with their results in the
next turn (or not), and 429/5xx/529 errors retried. Rows come out in time order, the way
a live store receives them, priced by the caller, and go in with the driver's
executemany through SQLAlchemy Core, each value in the form SQLAlchemy's column types
would bind it.

Not responsible for timing anything (see `reports.py`).
"""

from __future__ import annotations

import json
import operator
import random
import secrets
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import JSON, Boolean, Engine

from llmtap.analytics.pricing import Pricer
from llmtap.protocols import decode_exchange
from llmtap.storage import schema, verdicts
from llmtap.storage.export import USAGE_COLUMNS
from llmtap.storage.record import Recorded
from llmtap.storage.rows import rows_for

CHUNK = 20_000
T0 = datetime(2026, 10, 4, tzinfo=UTC)  # 30 days of traffic up to 2026-11-03
DAYS = 30

# -- templates: real wire bodies through the real translators --------------------------------

TOOLS = [
    {
        "name": "get_weather",
        "description": "Weather for a city",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
            "required": ["city"],
        },
    },
    {
        "name": "search_docs",
        "description": "Search the documentation index",
        "input_schema": {
            "type": "object",
            "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["query"],
        },
    },
    {
        "name": "run_sql",
        "description": "Run a read-only SQL query",
        "input_schema": {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]},
    },
]
TEXT = (
    "Here is what I found. The report shows steady usage across the week, with a peak on "
    "Tuesday afternoon when the batch jobs ran; cache hits held at about seventy percent. "
) * 2


def _anthropic(model: str, stream: bool) -> tuple[str, str, str, dict[str, Any], bytes, str]:
    request = {
        "model": model,
        "max_tokens": 4096,
        "stream": stream,
        "tools": TOOLS,
        "system": [{"type": "text", "text": "You are a helpful analyst.", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "How did usage go this week?"}],
    }
    usage = {"input_tokens": 20, "cache_creation_input_tokens": 3000, "cache_read_input_tokens": 0, "output_tokens": 80}
    body = {
        "id": "msg_t",
        "type": "message",
        "role": "assistant",
        "model": model,
        "stop_reason": "end_turn",
        "content": [{"type": "text", "text": TEXT}],
        "usage": usage,
    }
    return (
        "anthropic.messages",
        "api.anthropic.com",
        "/v1/messages",
        request,
        json.dumps(body).encode(),
        "application/json",
    )


def _chat(model: str, stream: bool, host: str = "api.openai.com") -> tuple[str, str, str, dict[str, Any], bytes, str]:
    tools = [
        {
            "type": "function",
            "function": {"name": t["name"], "description": t["description"], "parameters": t["input_schema"]},
        }
        for t in TOOLS
    ]
    request = {
        "model": model,
        "stream": stream,
        "tools": tools,
        "stream_options": {"include_usage": True},
        "messages": [
            {"role": "system", "content": "You are a helpful analyst."},
            {"role": "user", "content": "How did usage go this week?"},
        ],
    }
    body = {
        "id": "chatcmpl-t",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": TEXT}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": 3000,
            "completion_tokens": 80,
            "total_tokens": 3080,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
    }
    return ("openai.chat", host, "/v1/chat/completions", request, json.dumps(body).encode(), "application/json")


def _responses(model: str, stream: bool) -> tuple[str, str, str, dict[str, Any], bytes, str]:
    tools = [
        {"type": "function", "name": t["name"], "description": t["description"], "parameters": t["input_schema"]}
        for t in TOOLS
    ]
    request = {
        "model": model,
        "stream": stream,
        "tools": tools,
        "instructions": "You are a helpful analyst.",
        "input": [{"role": "user", "content": "How did usage go this week?"}],
        "reasoning": {"effort": "low"},
    }
    body = {
        "id": "resp_t",
        "object": "response",
        "status": "completed",
        "model": model,
        "output": [
            {
                "type": "message",
                "id": "m",
                "role": "assistant",
                "content": [{"type": "output_text", "text": TEXT, "annotations": []}],
            }
        ],
        "usage": {
            "input_tokens": 3000,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 80,
            "output_tokens_details": {"reasoning_tokens": 40},
            "total_tokens": 3080,
        },
    }
    return (
        "openai.responses",
        "api.openai.com",
        "/v1/responses",
        request,
        json.dumps(body).encode(),
        "application/json",
    )


def _gemini(model: str, stream: bool) -> tuple[str, str, str, dict[str, Any], bytes, str]:
    request = {
        "contents": [{"role": "user", "parts": [{"text": "How did usage go this week?"}]}],
        "systemInstruction": {"parts": [{"text": "You are a helpful analyst."}]},
        "tools": [
            {
                "functionDeclarations": [
                    {"name": t["name"], "description": t["description"], "parameters": t["input_schema"]} for t in TOOLS
                ]
            }
        ],
    }
    body = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": TEXT}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 3000, "candidatesTokenCount": 80, "totalTokenCount": 3080},
        "modelVersion": model,
        "responseId": "g",
    }
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return (
        "gemini.generate",
        "generativelanguage.googleapis.com",
        f"/v1beta/models/{model}:{method}",
        request,
        json.dumps(body).encode(),
        "application/json",
    )


# (weight, template maker, model); vllm.internal's model has no price anywhere
MODELS = [
    (30, _anthropic, "claude-sonnet-4-5-20250929"),
    (8, _anthropic, "claude-haiku-4-5-20251001"),
    (4, _anthropic, "claude-opus-4-1-20250805"),
    (18, _chat, "gpt-4o-2024-08-06"),
    (10, _chat, "gpt-4.1-mini-2025-04-14"),
    (10, _responses, "gpt-5-2025-08-07"),
    (10, _gemini, "gemini-2.5-flash"),
    (6, _gemini, "gemini-2.5-pro"),
    (4, lambda m, s: _chat(m, s, "vllm.internal"), "llama-3.1-70b-instruct"),
]
JSON_COLUMNS = {
    c.name
    for t in (schema.exchanges, schema.tool_calls)
    for c in t.columns
    if isinstance(c.type, JSON)
    or isinstance(getattr(c.type, "impl", None), JSON)
    or "JSON" in type(c.type).__name__.upper()
}


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


def template(maker: Callable[..., Any], model: str, stream: bool) -> dict[str, Any]:
    """One exchange row as `rows_for` makes it, JSON columns already JSON text."""
    protocol, host, path, request, body, content_type = maker(model, stream)
    exchange = decode_exchange(
        protocol,
        response=body,
        request=json.dumps(request).encode(),
        path=path,
        host=host,
        status=200,
        content_type=content_type,
    )
    record = Recorded(exchange=exchange, started_at=T0, team="t", host=host, path=path, source="proxy")
    row = rows_for(record).exchanges[0]
    return {k: (_dumps(v) if k in JSON_COLUMNS else v) for k, v in row.items()}


# -- the generator ----------------------------------------------------------------------------


@dataclass
class Stats:
    exchanges: int = 0
    tool_calls: int = 0
    conversations: int = 0
    errors: int = 0
    misses: int = 0


_ERROR_KINDS = {429: "rate_limit_error", 500: "api_error", 529: "overloaded_error", 503: "UNAVAILABLE"}
_NO_USAGE = dict.fromkeys((*USAGE_COLUMNS.values(), "usage_total_tokens_reported", "usage_raw"))


class Conversation:
    """One conversation's running state: what its next request holds, as JSON text ready
    for the row (kept up to date as it changes, not re-serialized per row)."""

    def __init__(self, number: int, r: random.Random) -> None:
        self.number = number
        self.tools = r.randrange(3)
        self.system = f"{r.randrange(40):016x}"
        self.breakpoints = 0
        self.ttl: str | None = None  # 5m | 1h, with breakpoints
        self.prefix = r.choice((600, 900, 2500, 4000, 8000, 15000))
        self.messages = [f"{number:016x}"]
        self.messages_json = json.dumps(self.messages)
        self.prev_input = self.prev_cached = 0
        self.results: list[str] = []
        self.history: list[str] = []
        self.pending: list[str] = []
        self.results_json: str | None = None
        self.history_json: str | None = None
        self.changed = False
        # who asks, with what model: drawn by `Generator.conversation` after the above
        self.team = ""
        self.key: tuple[str, str] | None = None
        self.model = ""

    def next_turn(self, turn: int, r: random.Random) -> None:
        self.messages.append(f"{self.number:08x}{2 * turn:08x}")
        self.messages.append(f"{self.number:08x}{2 * turn + 1:08x}")
        roll = r.random()  # now and then, what breaks a cache
        if roll < 0.015:
            self.tools, self.changed = (self.tools + 1) % 3, True
        elif roll < 0.03:
            self.system, self.changed = f"{r.randrange(1 << 60):016x}", True
        elif roll < 0.05 and len(self.messages) > 3:
            self.messages[r.randrange(1, len(self.messages) - 2)] = f"{r.randrange(1 << 60):016x}"
            self.changed = True
        self.messages_json = json.dumps(self.messages)
        if self.pending:  # this request carries the last turn's calls and (mostly all) their results
            keep = self.pending if r.random() > 0.03 else self.pending[1:]
            self.results += keep
            self.history += self.pending
            self.pending = []
            self.results_json = json.dumps(self.results) if self.results else None
            self.history_json = json.dumps(self.history)


@dataclass
class Generator:
    """Conversations, turn by turn, as exchange rows (and their tool-call rows), in the
    order a recorder would store them: by time, conversations overlapping."""

    n: int
    seed: int = 7
    stats: Stats = field(default_factory=Stats)
    days: float = DAYS  # the span the conversations start in, from T0

    def __post_init__(self) -> None:
        self.random = random.Random(self.seed)
        self.templates = {(m, s): template(f, m, s) for _, f, m in MODELS for s in (False, True)}
        self.models = [m for _, _, m in MODELS]
        self.weights = [w for w, _, _ in MODELS]
        self.teams = [f"team-{i:02d}" for i in range(25)]
        self.keys = {t: [(secrets.token_hex(16), f"k{i}{t[-2:]}") for i in range(3)] for t in self.teams}
        self.sequence = 0
        self.tools_json = [
            _dumps([{"name": t["name"], "schema": t["input_schema"], "type": "custom"} for t in TOOLS[:n]])
            for n in (1, 2, 3)
        ]
        self.step = self.days * 86400 / max(self.n / 4.75, 1)  # seconds between conversation starts

    def rows(self) -> Iterator[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
        """Chunks of (exchange rows, tool-call rows), n exchanges in all, sorted by time
        within a chunk as a live store receives them."""
        exchanges: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        while self.stats.exchanges < self.n:
            for row, row_calls in self.conversation():
                exchanges.append(row)
                calls += row_calls
            if len(exchanges) >= CHUNK:
                exchanges.sort(key=_started)
                yield exchanges, calls
                exchanges, calls = [], []
        if exchanges:
            exchanges.sort(key=_started)
            yield exchanges, calls

    def conversation(self) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
        r = self.random
        self.stats.conversations += 1
        c = Conversation(self.stats.conversations, r)
        c.team = r.choice(self.teams)
        c.key = r.choice(self.keys[c.team]) if r.random() < 0.8 else None
        c.model = r.choices(self.models, self.weights)[0]
        if c.model.startswith("claude") and r.random() < 0.9:
            c.breakpoints, c.ttl = r.choice((1, 2, 3)), "1h" if r.random() < 0.1 else "5m"
        turns = min(self.n - self.stats.exchanges, r.choice((1, 1, 1, 2, 2, 3, 4, 5, 6, 8, 10, 12)))
        moment = T0 + timedelta(seconds=self.stats.conversations * self.step + r.uniform(0, self.step))
        for turn in range(turns):
            if turn:
                moment += timedelta(seconds=r.uniform(900, 1800) if r.random() < 0.04 else r.uniform(5, 90))
                c.next_turn(turn, r)
            status = self._status(c.model)
            if status != 200 and self.stats.exchanges < self.n - 1:  # a failed attempt, retried shortly after
                yield self._failed(c, moment, status), []
                moment += timedelta(seconds=r.uniform(1, 30))
            yield self._turn(c, moment, turn)

    def _status(self, model: str) -> int:
        roll = self.random.random()
        if roll < 0.025:
            return 429
        if roll < 0.032:
            return 500
        if roll < 0.037:
            return 529 if model.startswith("claude") else 503
        return 200

    def _base(self, c: Conversation, moment: datetime, stream: bool) -> dict[str, Any]:
        r = self.random
        row = dict(self.templates[c.model, stream])
        self.sequence += 1
        self.stats.exchanges += 1
        ttfb = r.uniform(150, 900)
        ttft = ttfb + r.uniform(10, 400) if stream else None
        total = (ttft or ttfb) + r.uniform(200, 20000)
        count = len(c.messages)
        row.update(
            {
                "id": f"{int(moment.timestamp() * 1000):013d}{self.sequence:013d}",
                "dedupe_key": f"{self.sequence:032x}",
                "team": c.team,
                "key_fingerprint": c.key[0] if c.key else None,
                "key_last4": c.key[1] if c.key else None,
                "started_at": moment,
                "first_byte_at": moment + timedelta(milliseconds=ttfb),
                "first_token_at": moment + timedelta(milliseconds=ttft) if ttft else None,
                "ended_at": moment + timedelta(milliseconds=total),
                "ttfb_ms": round(ttfb, 3),
                "ttft_ms": round(ttft, 3) if ttft else None,
                "duration_ms": round(total, 3),
                "response_id": f"r{self.sequence:012d}",
                "request_tools": self.tools_json[c.tools],
                "tools_hash": f"{c.tools:016x}",
                "system_hash": c.system,
                "first_message_hash": c.messages[0],
                "message_hashes": c.messages_json,
                "message_chars": f"[{', '.join(['120'] * count)}]",
                "request_message_count": count,
                "request_messages_by_role": f'{{"user": {(count + 1) // 2}, "assistant": {count // 2}}}',
                "request_cache_breakpoints": c.breakpoints,
                "request_cache_ttl": c.ttl,
                "request_tool_result_ids": c.results_json,
                "request_tool_call_ids": c.history_json,
            }
        )
        return row

    def _failed(self, c: Conversation, moment: datetime, status: int) -> dict[str, Any]:
        """A failed attempt: an error body, no usage."""
        row = self._base(c, moment, False)
        self.stats.errors += 1
        row.update(_NO_USAGE)
        row.update(
            {
                "status": status,
                "finish_reason": "error",
                "finish_reason_raw": None,
                "text": "",
                "error_type": _ERROR_KINDS[status],
                "error_code": str(status),
                "error_message": "please retry",
                "usage_provenance": "missing",
                "tool_call_count": 0,
                "retry_after_s": float(self.random.randrange(1, 60)) if status == 429 else None,
            }
        )
        return row

    def _turn(self, c: Conversation, moment: datetime, turn: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        r = self.random
        stream = r.random() < 0.55
        row = self._base(c, moment, stream)
        model = c.model
        anthropic, openai = model.startswith("claude"), model.startswith("gpt")
        total_input = c.prefix + 300 * len(c.messages) + r.randrange(20, 400)
        hit = turn > 0 and not c.changed and c.prev_input >= 1024
        c.changed = False
        if anthropic:
            hit = hit and c.breakpoints > 0
        elif not openai:
            hit = hit and r.random() < 0.6  # Gemini's implicit cache, sometimes
        read = max(min(c.prev_cached, total_input), c.prev_input // 20 + 1) if hit else 0
        write = max(total_input - read - r.randrange(10, 200), 0) if anthropic and c.breakpoints else 0
        if turn and not hit:
            self.stats.misses += 1
        output = r.randrange(20, 1500)
        reasoning = r.randrange(0, output) if model.startswith(("gpt-5", "gemini-2.5")) else None
        calls, finish = self._calls(row, c)
        cut = stream and r.random() < 0.003
        row.update(
            {
                "status": 200,
                "complete": not cut,
                "finish_reason": None if cut else finish,
                "interrupted": "client disconnected" if cut else None,
                "tool_call_count": len(calls),
                "usage_input_tokens": total_input,
                "usage_cache_read_input_tokens": read,
                "usage_cache_creation_input_tokens": write,
                "usage_cache_creation_5m_input_tokens": write if anthropic and c.ttl != "1h" else None,
                "usage_cache_creation_1h_input_tokens": write if anthropic and c.ttl == "1h" else None,
                "usage_output_tokens": output,
                "usage_reasoning_output_tokens": reasoning,
                "usage_provenance": "partial" if cut else "reported",
                "usage_raw": f'{{"input_tokens": {total_input - read - write}, "cache_read_input_tokens": {read}, '
                f'"cache_creation_input_tokens": {write}, "output_tokens": {output}}}',
                "request_stream": stream,
                "streamed": stream,
                "events": r.randrange(5, 200) if stream else 0,
            }
        )
        c.prev_input = total_input
        c.prev_cached = (read + write) if anthropic else (total_input // 128) * 128
        return row, calls

    def _calls(self, row: dict[str, Any], c: Conversation) -> tuple[list[dict[str, Any]], str]:
        """Tool calls of this turn, their statuses mostly valid."""
        r = self.random
        if r.random() > 0.3:
            return [], "end_turn" if r.random() > 0.02 else "max_tokens"
        calls = []
        for position in range(r.choice((1, 1, 1, 2))):
            roll = r.random()
            status = (
                "invalid_json"
                if roll < 0.02
                else "schema_violation"
                if roll < 0.04
                else "unknown_tool"
                if roll < 0.05
                else "args_lost"
                if roll < 0.06
                else "valid"
            )
            if status == "valid" and c.history and r.random() < 0.005:
                call_id = c.history[-1]  # a repeated id
            else:
                call_id = f"call_{row['id'][-10:]}_{position}"
            raw = {"invalid_json": '{"city": "Par', "args_lost": "{}"}.get(status, '{"city": "Paris"}')
            calls.append(
                {
                    "exchange_id": row["id"],
                    "position": position,
                    "call_id": call_id,
                    "name": "launch" if status == "unknown_tool" else TOOLS[0]["name"],
                    "arguments": None if status == "invalid_json" else raw,
                    "arguments_raw": raw,
                    "arguments_chars": len(raw),
                    "valid_json": status != "invalid_json",
                    "status": status,
                    "status_detail": None if status == "valid" else f"synthetic {status}",
                    "kind": "function",
                }
            )
            c.pending.append(call_id)
        self.stats.tool_calls += len(calls)
        if r.random() < 0.01:
            calls[-1].update(status="truncated", status_detail="synthetic truncated")
            return calls, "max_tokens"
        return calls, "tool_use"


def _started(row: dict[str, Any]) -> datetime:
    return row["started_at"]


# -- the stores ---------------------------------------------------------------------------------


def with_sessions(n: int, *, days: float, seed: int) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """n exchanges, each beside its tool-call rows, with every fourth conversation (by its
    first message) in a client's session (a thread_key): both conversation identities take
    part (bench/verdicts.py, tests/storage/test_verdicts.py). The rows are in the writer's
    form: JSON columns as values (the generator's JSON text would be encoded again)."""
    return [pair for chunk in sessions_in_chunks(n, days=days, seed=seed) for pair in chunk]


def sessions_in_chunks(
    n: int, *, days: float, seed: int
) -> Iterator[list[tuple[dict[str, Any], list[dict[str, Any]]]]]:
    """`with_sessions`, a chunk of the generator's at a time (in time order), for a store
    too large to hold in memory at once."""
    for exchanges, calls in Generator(n, days=days, seed=seed).rows():
        by_id: dict[str, list[dict[str, Any]]] = {}
        for row in (*exchanges, *calls):
            for name in JSON_COLUMNS.intersection(row):
                if isinstance(row[name], str):
                    row[name] = json.loads(row[name])
        for call in calls:
            by_id.setdefault(call["exchange_id"], []).append(call)
        chunk = []
        for row in exchanges:
            if int(row["first_message_hash"] or "0", 16) % 4 == 0:
                row["thread_key"] = "s" + row["first_message_hash"][:31].rjust(31, "0")
            chunk.append((row, by_id.get(row["id"], [])))
        yield chunk


class Inserter:
    """Rows into one store with the driver's executemany through SQLAlchemy Core
    (`exec_driver_sql`): values already in the form SQLAlchemy's types would bind — JSON
    as text, and on SQLite timestamps as its naive UTC text and booleans as 0/1."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.sqlite = engine.dialect.name == "sqlite"
        self.statements = {}
        self.getters = {}
        for table in (schema.exchanges, schema.tool_calls):
            names = [c.name for c in table.columns]
            marks = ", ".join("?" if self.sqlite else "%s" for _ in names)
            self.statements[table.name] = f"INSERT INTO {table.name} ({', '.join(names)}) VALUES ({marks})"
            self.getters[table.name] = (names, operator.itemgetter(*names))
        times = [i for i, n in enumerate(self.getters["exchanges"][0]) if n.endswith("_at")]
        flags = [i for i, c in enumerate(schema.exchanges.columns) if isinstance(c.type, Boolean)]
        self.exchange_fix = [(i, _sqlite_time) for i in times] + [(i, _sqlite_bool) for i in flags]
        call_flags = [i for i, c in enumerate(schema.tool_calls.columns) if isinstance(c.type, Boolean)]
        # JSON the pricer leaves as a dict (cost_detail), and the writer's form of with_sessions'
        # rows: text, as SQLAlchemy's JSON type binds it
        self.json_fix = [(i, _json_text) for i, c in enumerate(schema.exchanges.columns) if c.name in JSON_COLUMNS]
        self.call_json_fix = [
            (i, _json_text) for i, c in enumerate(schema.tool_calls.columns) if c.name in JSON_COLUMNS
        ]
        self.call_fix = [(i, _sqlite_bool) for i in call_flags] + self.call_json_fix
        self.exchange_fix += self.json_fix

    def insert(self, exchanges: list[dict[str, Any]], calls: list[dict[str, Any]]) -> None:
        with self.engine.begin() as connection:
            if self.sqlite:
                connection.exec_driver_sql("PRAGMA cache_size = -1000000")
            # the verdicts, as the writer decides them (storage/verdicts.py)
            verdicts.lock(connection)
            plan = verdicts.decide(connection, exchanges, calls)
            connection.exec_driver_sql(self.statements["exchanges"], self._tuples("exchanges", exchanges))
            if calls:
                connection.exec_driver_sql(self.statements["tool_calls"], self._tuples("tool_calls", calls))
            verdicts.finish(connection, plan, exchanges)

    def _tuples(self, table: str, rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        getter = self.getters[table][1]
        values = [getter(row) for row in rows]
        if not self.sqlite:
            fixes = self.json_fix if table == "exchanges" else self.call_json_fix
        else:
            fixes = self.exchange_fix if table == "exchanges" else self.call_fix
        out = []
        for value in values:
            value = list(value)
            for index, fix in fixes:
                value[index] = fix(value[index])
            out.append(tuple(value))
        return out


def _sqlite_time(value: datetime | None) -> str | None:
    """SQLAlchemy's SQLite DateTime text: naive, microseconds (the writer's rows are UTC)."""
    return None if value is None else value.strftime("%Y-%m-%d %H:%M:%S.%f")


def _json_text(value: Any) -> Any:
    return value if value is None or isinstance(value, str) else json.dumps(value, default=str)


def _sqlite_bool(value: bool | None) -> int | None:
    return None if value is None else int(value)


def fill(engines: list[Engine], n: int, pricer: Pricer, days: float = DAYS) -> tuple[Stats, float, float]:
    """n exchanges over `days` into every engine; returns the stats, generate+price
    seconds, insert seconds."""
    inserters = [Inserter(engine) for engine in engines]
    generator = Generator(n, days=days)
    making = inserting = 0.0
    clock = time.perf_counter()
    for exchanges, calls in generator.rows():
        pricer.price_rows(exchanges)
        now = time.perf_counter()
        making += now - clock
        for inserter in inserters:
            inserter.insert(exchanges, calls)
        clock = time.perf_counter()
        inserting += clock - now
        print(f"\r  {generator.stats.exchanges:,} exchanges", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return generator.stats, making, inserting
