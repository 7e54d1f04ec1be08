"""What a report's terminal table shows (issue 14): a totals row with ratios recomputed
from the summed parts, money and percentages in one format, the price footer under
`report cost`, `--by tier`, times and days in `--tz`, and ids, models and costs whole at
100 and 120 columns. JSON and CSV stay row-only. Over the store of test_conversations.py
(SQLite, and PostgreSQL when set), through the CLI.
"""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest

from llmtap.analytics.render import money, percent
from tests.analytics.test_conversations import GEMINI, SONNET, UNPRICED, convs, run, store
from tests.helpers import llmtap

__all__ = ["convs", "store"]  # the fixtures, shared with test_conversations.py

KINDS = ("usage", "cost", "cache", "finish", "errors", "latency")  # (tools: no tool calls here)


def total_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("total"))


@pytest.mark.parametrize("kind", KINDS)
def test_every_table_ends_with_totals_and_json_csv_do_not(store, kind):
    rows = run(store, "report", kind, "--format", "json")
    out = run(store, "report", kind)
    line = total_line(out)
    if kind in ("usage", "cost", "cache"):
        assert f"{sum(r['requests'] for r in rows):,}" in line
        assert f"{sum(r['input_tokens'] for r in rows):,}" in line
    assert not any(r.get("team") == "total" for r in rows)
    text = llmtap("report", kind, "--format", "csv", "--db", store).out
    assert len(list(csv.DictReader(io.StringIO(text)))) == len(rows)


def test_cost_totals_and_footer(store, convs):
    rows = run(store, "report", "cost", "--format", "json")
    out = run(store, "report", "cost", columns=120)
    line = total_line(out)
    priced = [r["cost_usd"] for r in rows if r["cost_usd"] is not None]
    assert line.split()[-3] == money(sum(priced))  # cost, unpriced, usage_missing
    assert line.split()[-2:] == [str(sum(r["unpriced"] for r in rows)), str(sum(r["usage_missing"] for r in rows))]
    versions = {v for r in rows if r["price_version"] for v in r["price_version"].split("; ")}
    footer = out[out.index(line) + len(line) :]
    assert f"prices: {'; '.join(sorted(versions))}" in footer and "genai-prices" in footer
    beta = convs["beta"]
    tokens_in = sum(t.exchange.usage.input_tokens for t in beta)
    tokens_out = sum(t.exchange.usage.output_tokens for t in beta)
    assert f"unpriced: {UNPRICED} — 2 requests, {tokens_in:,} input and {tokens_out:,} output tokens" in footer
    assert "usage missing: 1 exchange without usage" in footer


def test_cache_table_shows_percentages_and_recomputes_the_total_rate(store):
    rows = run(store, "report", "cache", "--format", "json")
    out = run(store, "report", "cache", columns=120)
    read, inp = sum(r["cache_read_tokens"] for r in rows), sum(r["input_tokens"] for r in rows)
    assert percent(Decimal(read) / inp) in total_line(out)
    assert percent(Decimal(read) / inp) != percent(sum(r["hit_rate"] for r in rows) / len(rows))  # not an average
    for row in rows:
        assert percent(row["hit_rate"]) in out
        if row["hit_rate"] not in (0, 1):
            assert str(row["hit_rate"]) not in out  # the ratio itself is JSON's
    assert "not cacheable" in run(store, "report", "cache", columns=200)  # headers in words (issue 26)


def test_by_tier(store, convs):
    rows = run(store, "report", "cost", "--by", "tier", "--format", "json")
    tiers = {r["tier"]: r for r in rows}
    assert set(tiers) == {"priority", "(not stated)"}
    assert tiers["priority"]["requests"] == 1  # delta's first turn said service_tier priority
    assert sum(r["requests"] for r in rows) == sum(len(t) for t in convs.values())
    assert "(not stated)" in run(store, "report", "usage", "--by", "team,tier")


def test_days_in_the_zone_asked_for(store, convs):
    gamma = convs["gamma"][0]  # 03:00 UTC on 3 November: 19:00 on the 2nd in Los Angeles
    utc = {r["day"]: r["requests"] for r in run(store, "report", "usage", "--by", "day", "--format", "json")}
    local = {
        r["day"]: r["requests"]
        for r in run(store, "report", "usage", "--by", "day", "--tz", "America/Los_Angeles", "--format", "json")
    }
    assert gamma.started_at.date().isoformat() == "2026-11-03" == max(utc)
    assert utc["2026-11-03"] == 1 and "2026-11-03" not in local
    assert local["2026-11-02"] == utc["2026-11-02"] + 1
    table = run(store, "report", "usage", "--by", "day", "--tz", "America/Los_Angeles")
    assert "days in America/Los_Angeles" in table.splitlines()[0]


def test_times_are_labelled_with_their_zone(store, convs):
    gamma = convs["gamma"][0]
    out = run(store, "log", "--tz", "America/Los_Angeles", "--limit", "100", columns=240)
    assert "time (America/Los_Angeles)" in out and "2026-11-02 19:00:00" in out
    shown = run(store, "show", gamma.id, "--tz", "Asia/Tokyo")
    assert "Asia/Tokyo" in shown and "2026-11-03 12:00:00" in shown
    out = run(store, "report", "conversations", columns=240)
    assert "started (UTC)" in out


@pytest.mark.parametrize("args", [("report", "usage"), ("log",), ("show", "x" * 26)], ids=["report", "log", "show"])
def test_a_bad_zone_is_one_line(store, args):
    result = llmtap(*args, "--tz", "Mars/Olympus_Mons", "--db", store)
    assert result.code != 0 and result.out == ""
    assert len(result.err.strip().splitlines()) == 1 and "Mars/Olympus_Mons" in result.err


@pytest.mark.parametrize("columns", [100, 120])
@pytest.mark.parametrize("kind", ["cost", "cache", "usage", "latency"])
def test_long_models_and_costs_are_never_cut(store, kind, columns):
    rows = run(store, "report", kind, "--by", "team,model", "--format", "json")
    out = run(store, "report", kind, "--by", "team,model", columns=columns)
    assert {GEMINI, SONNET} <= {r["model"] for r in rows}
    for row in rows:
        assert row["model"] in out
        for name in ("cost_usd", "extra_cost_usd"):
            if row.get(name) is not None and kind in ("cost", "cache"):
                assert money(row[name]) in out
    assert "…" not in out.split("\n", 1)[1]
    assert max(len(line.rstrip()) for line in out.splitlines()) <= columns
