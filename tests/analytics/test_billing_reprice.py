"""`llmtap reprice --prices FILE` sticks (issue 14): the file is checked and installed in
the store, and every later command on that store — `report`, `log`, `show`, `import`
and the proxy's writer — prices with it without being told, until `reprice
--no-prices` removes it; a file given explicitly still wins. Through the real CLI, on
SQLite and PostgreSQL, with traffic of a fine-tuned model genai-prices does not know,
imported from a HAR."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from llmtap.analytics.pricing import row_pricer
from llmtap.storage import schema, store_settings
from llmtap.storage.engine import make_engine
from llmtap.storage.migrate import ensure_current
from tests.analytics.conftest import BACKENDS, blank_database
from tests.corpus_tools import har_entry
from tests.helpers import llmtap

MODEL = "ft:gpt-4.1-mini-2025-04-14:acme::x1"
PRICES = f"""
# our fine-tune, which genai-prices does not know, and what its searches cost us
[[price]]
provider = "openai"
model = "ft:gpt-4.1-mini-2025-04-14:acme::*"
input_mtok = 0.8
cache_read_mtok = 0.2
output_mtok = 3.2

[[fee]]
model = "{MODEL}"
kind = "web_search"
usd_per_1k = 25
"""
# one exchange: 1,000 in (400 from cache), 200 out, one web search:
# 600 × $0.8 + 400 × $0.2 + 200 × $3.2 per MTok = $0.0012, and $25 / 1,000 = $0.025
ONE = Decimal("0.0262")
CASE = {"protocol": "openai.responses", "host": "api.openai.com", "path": "/v1/responses", "status": 200}
START = datetime(2026, 11, 10, 9, tzinfo=UTC)


def _body(index: int) -> bytes:
    return json.dumps(
        {
            "id": f"resp_{index}",
            "object": "response",
            "status": "completed",
            "model": MODEL,
            "output": [
                {"type": "web_search_call", "id": f"ws_{index}", "status": "completed"},
                {
                    "type": "message",
                    "id": f"msg_{index}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "ok", "annotations": []}],
                },
            ],
            "usage": {
                "input_tokens": 1000,
                "input_tokens_details": {"cached_tokens": 400},
                "output_tokens": 200,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 1200,
            },
        }
    ).encode()


def _har(path: Path, first: int, count: int) -> Path:
    request = json.dumps({"model": MODEL, "input": "find it", "tools": [{"type": "web_search"}]}).encode()
    entries = [
        har_entry(CASE, _body(i), request, "search", START + timedelta(minutes=i)) for i in range(first, first + count)
    ]
    path.write_text(
        json.dumps({"log": {"version": "1.2", "creator": {"name": "t", "version": "1"}, "entries": entries}})
    )
    return path


@pytest.fixture(params=BACKENDS)
def blank(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with blank_database(request.param, tmp_path_factory.mktemp(f"reprice-{request.param}")) as url:
        yield url


def _statuses(url: str) -> list[tuple[str, int | None, int | None]]:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            ex = schema.exchanges
            query = select(ex.c.price_status, ex.c.cost_total_pico, ex.c.cost_fee_pico).order_by(ex.c.started_at)
            return [tuple(row) for row in connection.execute(query)]
    finally:
        engine.dispose()


def _cost_row(url: str, env: dict[str, str], *extra: str) -> dict[str, Any]:
    done = llmtap("report", "cost", "--by", "model", "--format", "json", "--db", url, *extra, env=env)
    assert done.code == 0, done.err
    return next(row for row in json.loads(done.out, parse_float=Decimal) if row["model"] == MODEL)


def test_reprice_installs_the_price_file_and_every_command_uses_it(blank: str, tmp_path: Path):
    env = {"LLMTAP_HOME": str(tmp_path / "home"), "LLMTAP_PRICES": None}
    prices = tmp_path / "f.toml"
    prices.write_text(PRICES)
    assert llmtap("import", str(_har(tmp_path / "a.har", 0, 2)), "--db", blank, env=env).code == 0
    assert [s for s, *_ in _statuses(blank)] == ["unpriced", "unpriced"]  # genai-prices alone

    done = llmtap("reprice", "--prices", str(prices), "--db", blank, env=env)
    assert done.code == 0, done.err
    assert "priced 2 exchanges" in done.out and "f.toml" in done.out

    # report, log and show, none told of the file: the store's file prices the fine-tune
    row = _cost_row(blank, env)
    assert (row["cost_usd"], row["unpriced"], row["priced"]) == (2 * ONE, 0, 2)
    assert "f.toml" in row["price_version"]
    done = llmtap("log", "--format", "json", "--db", blank, env=env)
    assert done.code == 0, done.err
    logged = json.loads(done.out, parse_float=Decimal)
    assert [Decimal(str(r["cost_usd"])) for r in logged] == [ONE, ONE]
    done = llmtap("show", logged[0]["id"], "--format", "json", "--db", blank, env=env)
    assert done.code == 0, done.err
    cost = json.loads(done.out, parse_float=Decimal)["cost"]
    assert cost["status"] == "priced" and Decimal(str(cost["total_usd"])) == ONE
    assert Decimal(str(cost["fee_usd"])) == Decimal("0.025")

    done = llmtap("export", "--format", "jsonl", "--db", blank, env=env)
    assert done.code == 0, done.err
    exported = [json.loads(line, parse_float=Decimal) for line in done.out.splitlines() if line.strip()]
    assert [Decimal(str(r["cost_usd"])) for r in exported] == [ONE, ONE]

    # traffic imported afterwards is priced with it as it is stored, before any report
    assert llmtap("import", str(_har(tmp_path / "b.har", 2, 1)), "--db", blank, env=env).code == 0
    assert _statuses(blank)[-1] == ("priced", int(ONE * 10**12), 25 * 10**9)

    # a file given explicitly wins over the store's; without it, the store's again
    other = tmp_path / "other.toml"
    other.write_text(PRICES.replace("output_mtok = 3.2", "output_mtok = 4.2"))
    assert _cost_row(blank, env, "--prices", str(other))["cost_usd"] == 3 * (ONE + Decimal("0.0002"))
    assert _cost_row(blank, env)["cost_usd"] == 3 * ONE

    done = llmtap("reprice", "--no-prices", "--db", blank, env=env)
    assert done.code == 0, done.err
    row = _cost_row(blank, env)
    assert (row["cost_usd"], row["unpriced"]) == (None, 3)


def test_a_bad_price_file_is_refused_and_nothing_installed(blank: str, tmp_path: Path):
    env = {"LLMTAP_HOME": str(tmp_path / "home"), "LLMTAP_PRICES": None}
    bad = tmp_path / "bad.toml"
    for text, words in (
        ('[[fee]]\nkind = "web_search"\nusd_per_1k = -3\n', "non-negative"),
        ('[[fee]]\nkind = "telepathy"\nusd_per_1k = 3\n', "kind must be one of"),
        ('[[price]]\nmodel = "m"\ninput_mtok = 1\ncache_audio_read_mtok = 1\n', "Missing ancestor price"),
        ('[[price]]\nmodel = "m"\ninput_mtok = 1\nbananas_mtok = 1\n', "Unknown price key"),
        ("[[price]]\nmodel = \n", "cannot read price file"),
    ):
        bad.write_text(text)
        done = llmtap("reprice", "--prices", str(bad), "--db", blank, env=env)
        assert done.code == 2 and done.err.count("\n") == 1 and words in done.err, (text, done.err)
    engine = make_engine(blank)
    try:
        ensure_current(engine)
        assert store_settings.read(engine, store_settings.PRICE_FILE) is None
    finally:
        engine.dispose()


def test_the_writer_of_a_store_prices_with_its_installed_file(blank: str):
    """The proxy's writer (`row_pricer(None, url)` in its own process) prices with the
    store's file, and sees a file installed while it runs."""
    from llmtap.analytics import store_prices
    from llmtap.analytics.price_file import PriceText

    engine = make_engine(blank)
    try:
        ensure_current(engine)
        row = {
            "provider": "openai",
            "model": MODEL,
            "started_at": START,
            "usage_input_tokens": 1000,
            "usage_cache_read_input_tokens": 400,
            "usage_output_tokens": 200,
            "server_tool_uses": {"web_search": 1},
        }
        enrich = row_pricer(None, blank)
        rows = [dict(row)]
        enrich(rows)
        assert rows[0]["price_status"] == "unpriced"
        store_prices.install(engine, PriceText("f.toml", PRICES))
        store_prices.RECHECK_SECONDS, saved = 0.0, store_prices.RECHECK_SECONDS
        try:
            rows = [dict(row)]
            enrich(rows)
        finally:
            store_prices.RECHECK_SECONDS = saved
        assert (rows[0]["price_status"], rows[0]["cost_total_pico"]) == ("priced", int(ONE * 10**12))
    finally:
        engine.dispose()
