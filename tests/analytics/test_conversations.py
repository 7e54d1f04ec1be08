"""`llmtap report conversations`, `log --sort`, `show --conversation` and the cache's
conversation identity, through the CLI over a store written by the real writer (bodies
kept in full for most turns, so the first prompt can be read), on SQLite and PostgreSQL.

The conversations, by hand (SPEC §5: one key or team, one model, the same first message,
each turn at most an hour after the one before ended):
  alpha      team red, Sonnet 4.5, 3 turns from 10:00
  alpha-2    the same team, model and first message at 13:00: a new conversation
  beta       team blue, a model without a price: every turn unpriced
  gamma      team green, one cheap turn at 03:00 UTC the next day (19:00 the day before in
             Los Angeles), its body not kept (metadata): no first prompt
  delta      team red, Sonnet at the priority tier; its second turn reports no usage
  epsilon    team green, gemini-2.5-flash-preview-05-20, 2 turns
The expected costs are each exchange's own price as `log` lists it, added up here.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from llmtap.analytics.pricing import Pricer
from llmtap.analytics.render import money
from llmtap.storage.engine import make_engine
from llmtap.storage.migrate import ensure_current
from llmtap.storage.record import Recorded
from llmtap.storage.writer import Writer
from tests.analytics import wire as w
from tests.analytics.conftest import BACKENDS, blank_database
from tests.helpers import llmtap

SONNET = "claude-sonnet-4-5-20250929"
UNPRICED = "acme-internal-7"
GEMINI = "gemini-2.5-flash-preview-05-20"
DAY = datetime(2026, 11, 2, tzinfo=UTC)


def _anthropic_turns(
    name: str, start: datetime, usages: list[dict[str, Any]], *, team: str, model: str = SONNET
) -> list[Recorded]:
    """Turns of one conversation, a minute apart, each carrying the history before it."""
    out = []
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"{name}: first question about invoices"}]
    for index, usage in enumerate(usages):
        if index:
            messages = [
                *messages,
                {"role": "assistant", "content": f"answer {index}"},
                {"role": "user", "content": f"follow-up {index}"},
            ]
        request = w.anthropic_request(model, [dict(m) for m in messages], system="You are terse. " * 100)
        response = w.anthropic_response(model, usage, msg_id=f"msg_{name}_{start:%H%M}_{index}")
        moment = start + timedelta(minutes=index)
        out.append(w.record(w.ANTHROPIC, request, response, at=moment, team=team))
    return out


def _gemini_turns(start: datetime, team: str) -> list[Recorded]:
    first = w.gemini_request("epsilon: summarise the quarter")
    second = {**first, "contents": [*first["contents"], {"role": "model", "parts": [{"text": "Sure."}]}]}
    return [
        w.record(w.gemini(GEMINI), body, w.gemini_response(GEMINI, prompt=p, candidates=c), at=at, team=team)
        for body, p, c, at in ((first, 1200, 300, start), (second, 1600, 200, start + timedelta(minutes=2)))
    ]


def conversations() -> dict[str, list[Recorded]]:
    usage = w.anthropic_usage
    priority = {**usage(40, 0, 0, 400), "service_tier": "priority"}
    return {
        "alpha": _anthropic_turns(
            "alpha",
            DAY + timedelta(hours=10),
            [usage(20, 3000, 0, 100), usage(30, 150, 3000, 80), usage(25, 120, 3150, 60)],
            team="red",
        ),
        # the same first message, 2h58m after alpha ended: a conversation of its own
        "alpha-2": _anthropic_turns(
            "alpha", DAY + timedelta(hours=13), [usage(20, 3000, 0, 100), usage(30, 150, 3000, 80)], team="red"
        ),
        "beta": _anthropic_turns(
            "beta", DAY + timedelta(hours=11), [usage(500, 0, 0, 50), usage(700, 0, 0, 70)], team="blue", model=UNPRICED
        ),
        "gamma": _anthropic_turns("gamma", DAY + timedelta(days=1, hours=3), [usage(10, 0, 0, 5)], team="green"),
        "delta": _anthropic_turns("delta", DAY + timedelta(hours=14), [priority, {}], team="red"),
        "epsilon": _gemini_turns(DAY + timedelta(hours=12), "green"),
    }


@pytest.fixture(scope="module")
def convs() -> dict[str, list[Recorded]]:
    return conversations()


@pytest.fixture(scope="module", params=BACKENDS)
def store(request: pytest.FixtureRequest, convs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp(f"conversations-{request.param}")
    with blank_database(request.param, folder) as url:
        engine = make_engine(url)
        try:
            ensure_current(engine)
            for mode, names in (("full", [n for n in convs if n != "gamma"]), ("metadata", ["gamma"])):
                writer = Writer(engine, spool_dir=folder / f"spool-{mode}", enrich=Pricer().price_rows, body_mode=mode)
                for name in names:
                    for record in convs[name]:
                        writer.submit(record)
                assert writer.close()
        finally:
            engine.dispose()
        yield url


def run(url: str, *args: str, columns: int | None = None) -> Any:
    result = llmtap(*args, "--db", url, env={"COLUMNS": str(columns) if columns else None})
    assert result.code == 0, result.err
    return result.json() if "json" in args else result.out


def log_costs(url: str) -> dict[str, Decimal | None]:
    return {row["id"]: row["cost_usd"] for row in run(url, "log", "--limit", "100", "--format", "json")}


def expected(convs: dict[str, list[Recorded]], url: str) -> dict[str, dict[str, Any]]:
    """Each conversation's row as worked out here from its turns and their own prices."""
    costs = log_costs(url)
    out = {}
    for name, turns in convs.items():
        usages = [t.exchange.usage for t in turns]
        priced = [costs[t.id] for t in turns if costs[t.id] is not None]
        out[name] = {
            "conversation_id": turns[0].id,
            "team": turns[0].team,
            "model": turns[0].exchange.model,
            "turns": len(turns),
            "input_tokens": sum(u.input_tokens for u in usages if u),
            "cache_read_tokens": sum(u.cache_read_tokens for u in usages if u),
            "output_tokens": sum(u.output_tokens for u in usages if u),
            "cost_usd": sum(priced, Decimal(0)) if priced else None,
            "usage_missing": sum(1 for u in usages if u is None),
        }
    return out


def test_conversations_ranked_by_cost_unpriced_last(store, convs):
    rows = run(store, "report", "conversations", "--format", "json")
    want = expected(convs, store)
    priced = sorted((n for n in want if want[n]["cost_usd"] is not None), key=lambda n: -want[n]["cost_usd"])
    assert [r["conversation_id"] for r in rows] == [want[n]["conversation_id"] for n in [*priced, "beta"]]
    for row, name in zip(rows, [*priced, "beta"], strict=True):
        for key, value in want[name].items():
            assert row[key] == value, (name, key)
        assert datetime.fromisoformat(row["started_at"]) == convs[name][0].started_at  # zoned (SPEC §3)
        assert datetime.fromisoformat(row["ended_at"]) == convs[name][-1].ended_at
    by_name = dict(zip([*priced, "beta"], rows, strict=True))
    assert by_name["beta"]["cost_usd"] is None and by_name["beta"]["unpriced"] == 2
    assert by_name["delta"]["unpriced"] == 0 and by_name["delta"]["usage_missing"] == 1
    # the first prompt's start where the body was kept; none where it was not
    assert by_name["alpha"]["first_prompt"] == "alpha: first question about invoices"
    assert by_name["epsilon"]["first_prompt"] == "epsilon: summarise the quarter"
    assert by_name["gamma"]["first_prompt"] is None
    assert set(rows[0]) >= {"conversation_id", "team", "model", "turns", "cost_usd", "first_prompt", "ended_at"}


def test_top_and_period(store, convs):
    everything = run(store, "report", "conversations", "--format", "json")
    assert run(store, "report", "conversations", "--top", "2", "--format", "json") == everything[:2]
    # a conversation is selected by any of its turns in the period, and summed whole
    window = run(
        store,
        "report",
        "conversations",
        "--since",
        "2026-11-02T10:01:30Z",
        "--until",
        "2026-11-02T12:00:00Z",
        "--format",
        "json",
    )
    ids = {row["conversation_id"]: row for row in window}
    assert set(ids) == {convs["alpha"][0].id, convs["beta"][0].id}
    assert ids[convs["alpha"][0].id]["turns"] == 3
    bad = llmtap("report", "conversations", "--top", "0", "--db", store)
    assert bad.code != 0 and len(bad.err.strip().splitlines()) == 1
    bad = llmtap("report", "conversations", "--by", "team", "--db", store)
    assert bad.code != 0 and "--top" in bad.err


@pytest.mark.parametrize("columns", [100, 120])
def test_conversations_table_keeps_ids_models_and_costs_whole(store, convs, columns):
    out = run(store, "report", "conversations", columns=columns)
    want = expected(convs, store)
    assert want
    for row in want.values():
        assert row["conversation_id"] in out
        assert row["model"] in out
        if row["cost_usd"] is not None:
            assert money(row["cost_usd"]) in out
    assert "…" not in out.replace("(", "").split("\n", 1)[1]  # nothing ellipsised under the title
    total = sum((r["cost_usd"] for r in want.values() if r["cost_usd"] is not None), Decimal(0))
    assert [line for line in out.splitlines() if line.startswith("total")][0].rstrip().endswith(money(total))
    assert max(len(line.rstrip()) for line in out.splitlines()) <= columns


def test_show_conversation_follows_the_same_identity(store, convs):
    data = run(store, "show", convs["alpha"][1].id, "--conversation", "--format", "json")
    assert [t["id"] for t in data["turns"]] == [t.id for t in convs["alpha"]]  # not alpha-2's turns
    later = run(store, "show", convs["alpha-2"][0].id, "--conversation", "--format", "json")
    assert [t["id"] for t in later["turns"]] == [t.id for t in convs["alpha-2"]]


def test_show_conversation_total_never_reads_zero_for_unpriced(store, convs):
    costs = log_costs(store)
    beta = run(store, "show", convs["beta"][0].id, "--conversation", "--format", "json")
    assert beta["totals"]["cost_usd"] is None and beta["totals"]["cost_shown"] == "unpriced"
    text = run(store, "show", convs["beta"][0].id, "--conversation", columns=120)
    total_line = next(line for line in text.splitlines() if "total" in line)
    assert "unpriced" in total_line and "$" not in total_line
    delta_cost = costs[convs["delta"][0].id]
    text = run(store, "show", convs["delta"][0].id, "--conversation", columns=120)
    total_line = next(line for line in text.splitlines() if "total" in line)
    assert money(delta_cost) in total_line  # the unpriced turn under the table (issue 26: the column stays narrow)
    assert f"cost total: {money(delta_cost)} + 1 unpriced turn" in text


def test_a_gap_over_an_hour_is_no_cache_miss(store, convs):
    """alpha-2's first turn reads nothing and follows alpha's last turn with the same first
    message: within an hour it would be a miss, after 2h58m it starts a conversation."""
    listed = {item["exchange_id"] for item in run(store, "report", "cache", "--list", "--format", "json")}
    assert convs["alpha-2"][0].id not in listed
    red = next(r for r in run(store, "report", "cache", "--by", "team", "--format", "json") if r["team"] == "red")
    assert red["misses"] == 0 and red["not_cacheable"] == 0


@pytest.mark.parametrize(
    "sort,key",
    [
        ("cost", lambda r: (r["cost_usd"] is None, -(r["cost_usd"] or 0))),
        ("tokens", lambda r: -((r["input_tokens"] or 0) + (r["output_tokens"] or 0))),
        ("started", lambda r: r["started_at"]),
    ],
)
def test_log_sort(store, sort, key):
    rows = run(store, "log", "--sort", sort, "--limit", "100", "--format", "json")
    assert len(rows) == sum(len(t) for t in conversations().values())
    if sort == "started":
        assert [key(r) for r in rows] == sorted((key(r) for r in rows), reverse=True)  # newest first
    else:
        assert [key(r) for r in rows] == sorted(key(r) for r in rows)
    if sort == "cost":
        assert rows[-1]["cost_usd"] is None and rows[0]["cost_usd"] == max(r["cost_usd"] or 0 for r in rows)


@pytest.mark.parametrize("columns", [100, 120])
def test_log_table_keeps_ids_models_and_costs_whole(store, columns):
    rows = run(store, "log", "--sort", "cost", "--limit", "100", "--format", "json")
    out = run(store, "log", "--sort", "cost", "--limit", "100", columns=columns)
    assert "$…" not in out and "time (UTC)" in out
    for row in rows:
        assert row["id"] in out and row["model"] in out
        assert (money(row["cost_usd"]) if row["cost_usd"] is not None else row["price_status"]) in out
    priced = [r["cost_usd"] for r in rows if r["cost_usd"] is not None]
    total = next(line for line in out.splitlines() if line.startswith("total"))
    assert money(sum(priced)) in total  # the unpriced under the table (issue 26: the column stays narrow)
    assert f"cost total: {money(sum(priced))} + {len(rows) - len(priced)} unpriced exchanges" in out


def test_show_names_the_cost_parts_the_tier_and_the_detail(store, convs):
    turn = convs["delta"][0]  # served at the priority tier
    data = run(store, "show", turn.id, "--format", "json")
    cost = data["cost"]
    assert cost["service_tier"] == "priority" and cost["status"] == "priced"
    text = run(store, "show", turn.id, columns=160)
    section = text[text.index("\ncost\n") : text.index("\ncache\n")]
    assert "priority" in section
    for name in ("total_usd", "input_usd", "output_usd"):  # labelled in words (issue 26)
        assert f"\n{name.removesuffix('_usd')}  " in section and money(Decimal(str(cost[name]))) in section
    assert "$0.000000" not in section
    detail = cost["detail"]  # the pricer's parts (NULL only on rows priced before it kept them)
    assert detail is not None and detail["parts"], cost
    for part in detail["parts"]:
        line = next(line for line in section.splitlines() if line.strip().startswith(str(part["what"])))
        assert line.rstrip().endswith(money(Decimal(str(part["total"]))))
