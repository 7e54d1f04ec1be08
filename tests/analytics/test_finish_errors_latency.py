"""`llmtap report finish`, `errors` and `latency` over the known traffic."""

from __future__ import annotations

from decimal import Decimal

from tests.analytics import traffic
from tests.analytics.conftest import by_key, report


def test_finish_by_team(store):
    rows = [r for r in report(store, "finish", "--by", "team") if r["team"] == "ops"]
    got = {r["finish_reason"]: (r["requests"], r["share"], r["incomplete"]) for r in rows}
    assert got == {
        "error": (6, Decimal("0.375"), 1),  # o5-o7, o9, o10 error bodies; o8 a mid-stream error (cut short)
        "end_turn": (5, Decimal("0.3125"), 0),  # the five gemini-2.5-flash calls
        "max_tokens": (1, Decimal("0.0625"), 0),
        "stop_sequence": (1, Decimal("0.0625"), 0),
        "refusal": (1, Decimal("0.0625"), 0),
        "content_filter": (1, Decimal("0.0625"), 0),
        "unknown": (1, Decimal("0.0625"), 1),  # o11: the client hung up mid-stream
    }
    assert [r["requests"] for r in rows] == sorted((r["requests"] for r in rows), reverse=True)


def test_finish_by_provider(store):
    rows = by_key(report(store, "finish"), "provider", "finish_reason")
    anthropic = {reason: row["requests"] for (provider, reason), row in rows.items() if provider == "anthropic"}
    # end_turn: s1, s4, the 20 cache turns, cv/2, the 4 hostile; tool_use: t1, t2, t5, cv/0, cv/1
    assert anthropic == {
        "end_turn": 27,
        "tool_use": 5,
        "error": 4,
        "max_tokens": 1,
        "stop_sequence": 1,
        "refusal": 1,
        "unknown": 1,
    }
    assert rows["anthropic", "end_turn"]["share"] == round(Decimal(27) / 40, 4)
    assert abs(sum(r["share"] for (p, _), r in rows.items() if p == "anthropic") - 1) < Decimal("0.001")
    assert rows["openai", "max_tokens"]["requests"] == 1  # t4: finish_reason "length"


def test_errors_by_team(store):
    ops = by_key(report(store, "errors", "--by", "team"), "team")["ops"]
    assert (ops["requests"], ops["errors"], ops["error_rate"]) == (16, 6, Decimal("0.375"))
    assert ops["rate_limited"] == 2  # o5 (Anthropic 429), o9 (OpenAI 429)
    # o6 500, o7 529, o10 503, and o8: its overloaded_error event stands for a 529
    assert ops["server_errors"] == 4
    assert ops["overloaded"] == 3  # o7 529, o8 an overloaded_error event mid-stream, o10 UNAVAILABLE
    assert ops["stream_errors"] == 1 and ops["interrupted"] == 1  # o8; o11
    assert ops["retry_after_max_s"] == 30  # retry-after: 30
    assert ops["retry_after_avg_s"] == Decimal("15.75")  # and retry-after-ms: 1500
    others = {t: r for t, r in by_key(report(store, "errors", "--by", "team"), "team").items() if t != "ops"}
    assert others and all(r["errors"] == 0 for r in others.values()), others


def test_errors_by_provider_and_status(store):
    rows = by_key(report(store, "errors"), "provider")
    anthropic = rows["anthropic"]
    assert (anthropic["errors"], anthropic["rate_limited"], anthropic["overloaded"]) == (4, 1, 2)
    assert (rows["openai"]["requests"], rows["openai"]["errors"], rows["openai"]["retry_after_max_s"]) == (
        11,
        1,
        Decimal("1.5"),
    )
    assert (rows["google"]["requests"], rows["google"]["server_errors"], rows["google"]["overloaded"]) == (8, 1, 1)
    assert rows["llm.internal.example"]["errors"] == 0 and rows["llm.internal.example"]["retry_after_max_s"] is None
    statuses = by_key(report(store, "errors", "--by", "status"), "status")
    assert {s: r["requests"] for s, r in statuses.items() if s != "200"} == {"429": 2, "500": 1, "503": 1, "529": 1}


def test_latency_percentiles(store):
    rows = by_key(report(store, "latency"), "model", "provider")
    flash = rows[traffic.FLASH, "google"]
    # ttfb 50..90, ttft 100..500, total 1, 2, 3, 4, 10 s; p95 interpolates 80% of the way
    # from the 4th to the 5th value
    assert flash["requests"] == 5
    assert (flash["ttfb_p50_ms"], flash["ttfb_p95_ms"]) == (70, 88)
    assert (flash["ttft_p50_ms"], flash["ttft_p95_ms"]) == (300, 480)
    assert (flash["total_p50_ms"], flash["total_p95_ms"]) == (3000, 8800)
    sonnet = rows[traffic.SONNET, "anthropic"]
    assert sonnet["requests"] == 33  # the 36 Sonnet exchanges less the three error responses
    assert (sonnet["ttfb_p50_ms"], sonnet["ttft_p95_ms"], sonnet["total_p95_ms"]) == (300, 400, 2000)


def test_latency_window_and_team(store):
    rows = report(
        store, "latency", "--by", "team", "--since", "2026-11-02T19:01:00Z", "--until", "2026-11-02T19:04:00Z"
    )
    assert rows == [
        {
            "team": "ops",
            "requests": 3,
            "ttfb_p50_ms": 70,
            "ttfb_p95_ms": 79,
            "ttft_p50_ms": 300,
            "ttft_p95_ms": 390,
            "total_p50_ms": 3000,
            "total_p95_ms": 3900,
        }
    ]
