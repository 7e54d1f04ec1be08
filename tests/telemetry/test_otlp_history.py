"""Live spans and backfilled spans of the same store, both received by a real OTLP/HTTP
receiver, against `llmtap export`'s rows: every exchange arrives once in each; ids,
times and every attribute of a live span equal its backfilled twin's; the values equal
export's (tokens, cost to the pico-dollar, team, finish, conversation); the cache
verdicts and conversations the spans say are the stored ones (storage/verdicts.py).

Traffic: agent conversations answered by the simulated provider (its prompt cache hits
and misses for real reasons), written by the real Writer (SQLite, and PostgreSQL when
LLMTAP_TEST_POSTGRES_URL is set) with the span observer attached, priced as the proxy's
writer prices.

Not responsible for the proxy (test_otlp_proxy.py) or the pipeline's outages
(test_otlp_export.py).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import create_engine, select, text

from llmtap.analytics.pricing import row_pricer
from llmtap.simulator.provider import SimulatedProvider
from llmtap.simulator.upstream import Seen
from llmtap.storage.engine import make_engine
from llmtap.storage.ingest import HttpExchange, to_record
from llmtap.storage.migrate import ensure_current
from llmtap.storage.schema import exchanges as exchanges_table
from llmtap.storage.secrets import KeyFingerprinter
from llmtap.storage.writer import Writer
from llmtap.telemetry.otlp import SpanObserver, settings_from
from tests.helpers import llmtap
from tests.telemetry import genai_conventions as semconv
from tests.telemetry.otlp_receiver import Received, Receiver

pytestmark = pytest.mark.timeout(180)

KEYS = ("sk-ant-api03-OTLPCANARY00000000000000000000000000000000000001", "sk-proj-OTLPCANARY000000000000000000002")
SYSTEM = "You maintain the billing service and answer in short sentences. " * 120
TOOLS = [{"name": "read_file", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}]
START = datetime(2026, 11, 3, 10, 0, tzinfo=UTC)


def _anthropic(
    provider: SimulatedProvider, body: dict[str, Any], key: str, at: datetime, **headers: str
) -> HttpExchange:
    raw = json.dumps(body).encode()
    reply = provider(Seen("POST", "/v1/messages", {}, raw, 0.0))
    return HttpExchange(
        method="POST",
        host="api.anthropic.com",
        path="/v1/messages",
        request_headers=[("x-api-key", key), ("content-type", "application/json"), *headers.items()],
        request_body=raw,
        status=reply.status,
        response_headers=[("content-type", reply.content_type)],
        response_body=b"".join(reply.chunks),
        response_encoded=False,
        started_at=at,
        first_byte_at=at + timedelta(milliseconds=700),
        ended_at=at + timedelta(seconds=2, microseconds=123457),
    )


def _chat(provider: SimulatedProvider, messages: list[dict[str, Any]], key: str, at: datetime) -> HttpExchange:
    raw = json.dumps({"model": "gpt-4.1-mini", "messages": messages}).encode()
    reply = provider(Seen("POST", "/v1/chat/completions", {}, raw, 0.0))
    return HttpExchange(
        method="POST",
        host="api.openai.com",
        path="/v1/chat/completions",
        request_headers=[("authorization", f"Bearer {key}"), ("content-type", "application/json")],
        request_body=raw,
        status=reply.status,
        response_headers=[("content-type", reply.content_type)],
        response_body=b"".join(reply.chunks),
        response_encoded=False,
        started_at=at,
        ended_at=at + timedelta(seconds=1),
    )


def traffic() -> list[HttpExchange]:
    """Conversations with hits, misses for a changed system prompt and changed tools, a
    tool call, a malformed one, a 429, a session header, and a line an hour apart."""
    provider = SimulatedProvider()
    out = []
    for conversation, (offset, variant) in enumerate(
        [(0, "plain"), (30, "system"), (60, "tools"), (90, "session"), (200, "plain")]
    ):
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": f"Why did invoice {conversation % 4} fail? [tool:read_file]"}
        ]
        for turn in range(4):
            system = SYSTEM + (" Be brief." if variant == "system" and turn >= 2 else "")
            tools = TOOLS + (
                [{"name": "grep", "input_schema": {"type": "object"}}] if variant == "tools" and turn >= 2 else []
            )
            body = {
                "model": "claude-sonnet-4-5-20250929",
                "max_tokens": 512,
                "tools": tools,
                "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
                "messages": json.loads(json.dumps(messages)),
            }
            headers = {"x-llmtap-team": "billing", "x-llmtap-tags": f"project=invoice-{conversation % 2}"}
            if variant == "session":
                headers["x-claude-code-session-id"] = "session-0123456789"
            at = START + timedelta(minutes=offset, seconds=20 * turn)
            exchange = _anthropic(provider, body, KEYS[0], at, **headers)
            out.append(exchange)
            answer = json.loads(exchange.response_body or b"{}")
            messages.append({"role": "assistant", "content": answer.get("content", [])})
            calls = [b for b in answer.get("content", []) if b.get("type") == "tool_use"]
            if calls:
                results = [{"type": "tool_result", "tool_use_id": c["id"], "content": "ok"} for c in calls]
                messages.append({"role": "user", "content": results})
            else:
                messages.append(
                    {"role": "user", "content": "Thanks. Again, please. [malformed]" if turn == 1 else "More."}
                )
    chat = [{"role": "user", "content": "Summarise the ticket."}]
    out.append(_chat(provider, chat, KEYS[1], START + timedelta(minutes=5)))
    out.append(
        _chat(provider, [{"role": "user", "content": "Too fast [error:429]"}], KEYS[1], START + timedelta(minutes=6))
    )
    return sorted(out, key=lambda e: e.started_at)


def _urls() -> Iterator[str]:
    yield "sqlite"
    if os.environ.get("LLMTAP_TEST_POSTGRES_URL"):
        yield "postgresql"


@pytest.fixture(scope="module", params=list(_urls()))
def recorded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("otlp-history")
    env = {"LLMTAP_HOME": str(folder / "home"), "LLMTAP_CONFIG": None}
    if request.param == "sqlite":
        url, drop = f"sqlite:///{folder / 'store.db'}", None
    else:
        base = os.environ["LLMTAP_TEST_POSTGRES_URL"]
        name = f"otlp_{uuid.uuid4().hex[:12]}"
        admin = create_engine(base, isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        url = base.rsplit("/", 1)[0] + f"/{name}"

        def drop() -> None:
            with admin.connect() as connection:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            admin.dispose()

    engine = make_engine(url)
    ensure_current(engine)
    fingerprinter = KeyFingerprinter.from_file(folder / "home" / "fingerprint.secret")
    exchanges = traffic()
    with Receiver() as live:
        settings = settings_from(live.url, None)
        assert settings is not None
        observer = SpanObserver(settings.options)
        writer = Writer(engine, spool_dir=folder / "spool", enrich=row_pricer(None, url), observers=[observer])
        for exchange in exchanges:
            writer.submit(to_record(exchange, fingerprinter=fingerprinter))
            assert writer.flush(30)  # one commit per exchange, as live traffic mostly comes
        assert writer.close()
        live_spans = live.wait_for(len(exchanges))
    names = ("id", "conversation_id", "cache_verdict", "cache_cause", "cache_missed_tokens")
    with engine.connect() as connection:
        stored = {
            str(r["id"]): dict(r) for r in connection.execute(select(*[exchanges_table.c[n] for n in names])).mappings()
        }
    engine.dispose()
    exported = llmtap("export", "--db", url, env=env)
    assert exported.code == 0, exported.err
    rows = [json.loads(line, parse_float=Decimal) for line in exported.out.splitlines()]
    with Receiver() as later:
        backfill = llmtap("export", "--db", url, "--format", "otlp", "--endpoint", later.url, env=env)
        assert backfill.code == 0, backfill.err
        backfilled = later.taken()
    yield {
        "count": len(exchanges),
        "live": live_spans,
        "backfilled": backfilled,
        "rows": rows,
        "stored": stored,
        "stderr": backfill.err,
        "folder": folder,
    }
    if drop is not None:
        drop()


def _by_exchange(spans: list[Received]) -> dict[str, Received]:
    found: dict[str, Received] = {}
    for span in spans:
        exchange = span.attributes["llmtap.exchange.id"]
        assert exchange not in found, f"{exchange} arrived twice"
        found[exchange] = span
    return found


def test_every_exchange_arrives_once_live_and_backfilled(recorded: dict[str, Any]) -> None:
    live, backfilled = _by_exchange(recorded["live"]), _by_exchange(recorded["backfilled"])
    ids = {row["id"] for row in recorded["rows"]}
    assert len(ids) == recorded["count"]
    assert set(live) == set(backfilled) == ids
    assert f"{len(ids)} spans sent" in recorded["stderr"]


def test_a_live_span_equals_its_backfilled_twin(recorded: dict[str, Any]) -> None:
    live, backfilled = _by_exchange(recorded["live"]), _by_exchange(recorded["backfilled"])
    assert live
    for exchange, span in live.items():
        twin = backfilled[exchange]
        assert (span.trace_id, span.span_id, span.name) == (twin.trace_id, twin.span_id, twin.name)
        assert (span.start_ns, span.end_ns, span.kind, span.status_code) == (
            twin.start_ns,
            twin.end_ns,
            twin.kind,
            twin.status_code,
        )
        assert span.attributes == twin.attributes, exchange


def check_against_export(span: Received, row: dict[str, Any]) -> None:
    """A span's attributes, times and status against its exchange's export row."""
    a = span.attributes
    assert all(key.startswith("llmtap.") or semconv.known(key) for key in a), sorted(a)
    usage = row["usage"] or {}
    operation = "generate_content" if row["protocol"] == "gemini.generate" else "chat"
    assert a["gen_ai.operation.name"] == operation
    provider = {"anthropic": "anthropic", "openai": "openai", "google": "gcp.gemini", "aws": "aws.bedrock"}
    assert a["gen_ai.provider.name"] == provider.get(row["provider"], row["provider"])
    model = row["model_requested"] or row["model"]
    assert span.name == (f"{operation} {model}" if model else operation)
    assert a.get("gen_ai.request.model") == row["model_requested"]
    assert a.get("gen_ai.response.model") == row["model"]
    assert a.get("gen_ai.response.id") == row["response_id"]
    reason = row["finish_reason_raw"] or row["finish_reason"]
    assert a["gen_ai.response.finish_reasons"] == [reason or "error"]
    assert a.get("llmtap.finish_reason") == row["finish_reason"]
    assert a.get("gen_ai.usage.input_tokens") == usage.get("input_tokens")
    assert a.get("gen_ai.usage.output_tokens") == usage.get("output_tokens")
    assert a.get("gen_ai.usage.cache_read.input_tokens") == usage.get("cache_read_tokens")
    assert a.get("gen_ai.usage.cache_write.input_tokens") == usage.get("cache_write_tokens")
    assert a.get("gen_ai.usage.reasoning.output_tokens") == usage.get("reasoning_tokens")
    assert a["server.address"] == row["host"].rsplit(":", 1)[0]
    assert a["llmtap.conversation.id"] == row["conversation_id"]
    assert a.get("gen_ai.conversation.id", row["conversation_id"]) == row["conversation_id"]
    assert a["llmtap.team"] == row["team"]
    assert {k.removeprefix("llmtap.tag."): v for k, v in a.items() if k.startswith("llmtap.tag.")} == row["tags"]
    assert a.get("llmtap.attribution") == row["attribution"]
    assert a.get("http.response.status_code") == row["status"]
    assert a.get("llmtap.price.status") == row["price_status"]
    if row["cost_usd"] is None:
        assert "llmtap.cost_usd" not in a
    else:
        assert Decimal(a["llmtap.cost_usd.exact"]) == row["cost_usd"]
        assert a["llmtap.cost_usd"] == float(row["cost_usd"])
    assert a.get("llmtap.tool_calls.statuses", []) == [c["status"] for c in row["tool_calls"]]
    started = datetime.fromisoformat(row["started_at"])
    assert span.start_ns == (started - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) * 1000
    assert span.status_code == (2 if (row["status"] or 0) >= 400 or row["error"] else 0)
    assert span.kind == 3  # CLIENT
    # metadata only: no answer text and no key fingerprint's key in any attribute
    assert not row["text"] or row["text"] not in json.dumps(a)


def test_values_equal_export_and_conventions(recorded: dict[str, Any]) -> None:
    live = _by_exchange(recorded["live"])
    traces: dict[str, set[str]] = {}
    for row in recorded["rows"]:
        span = live[row["id"]]
        check_against_export(span, row)
        assert not any(key in json.dumps(span.attributes) for key in KEYS)
        traces.setdefault(row["conversation_id"], set()).add(span.trace_id)
    assert all(len(found) == 1 for found in traces.values())  # one trace per conversation
    # a gen_ai conversation only where the client named it: the one session's four turns
    named = [s.attributes["gen_ai.conversation.id"] for s in live.values() if "gen_ai.conversation.id" in s.attributes]
    assert len(named) == 4 and len(set(named)) == 1
    assert len(traces) >= 5
    assert sum(1 for row in recorded["rows"] if row["cost_usd"] is not None) >= 20, "the traffic is priced"
    assert any(row["status"] == 429 for row in recorded["rows"])
    assert any(c["status"] != "ok" for row in recorded["rows"] for c in row["tool_calls"])


def test_spans_say_the_stored_cache_verdicts(recorded: dict[str, Any]) -> None:
    live = _by_exchange(recorded["live"])
    stored = recorded["stored"]
    causes = {r["cache_cause"] for r in stored.values() if r["cache_verdict"] == "miss"}
    assert causes >= {"system_changed", "tools_changed"}, causes
    for exchange, span in live.items():
        row = stored[exchange]
        a = span.attributes
        assert a["llmtap.conversation.id"] == row["conversation_id"], exchange
        if row["cache_verdict"] is None:  # takes no part: the span says nothing of the cache
            assert not any(key.startswith("llmtap.cache.") for key in a), exchange
        else:
            said = (a["llmtap.cache.verdict"], a.get("llmtap.cache.cause"), a.get("llmtap.cache.missed_tokens"))
            assert said == (row["cache_verdict"], row["cache_cause"], row["cache_missed_tokens"]), exchange
    assert {s.attributes.get("llmtap.cache.verdict") for s in live.values()} >= {"first", "hit", "miss"}
