"""Tags and end users in reports and exports (SPEC §4): `--by tag:NAME` and `--by user` in
every grouped report, the end user read from each provider's own request field, tags and
end user as export columns, on SQLite (and PostgreSQL when set), through the CLI. Not
responsible for the proxy reading `X-LLMTap-Tags` (tests/addon/test_tags_header.py) nor
for the header's grammar (tests/protocols/test_who_asked.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from llmtap.analytics.pricing import Pricer
from llmtap.storage.engine import make_engine
from llmtap.storage.migrate import ensure_current
from llmtap.storage.record import Recorded
from llmtap.storage.writer import Writer
from tests.analytics import wire as w
from tests.analytics.conftest import BACKENDS, blank_database
from tests.analytics.traffic import DAY1, GPT4O, SONNET
from tests.helpers import llmtap

REPORTS = ("usage", "cost", "cache", "finish", "tools", "errors", "latency")


def _records() -> list[tuple[Recorded, str | None, dict[str, str]]]:
    """(record, the end user it names, its tags) for each exchange."""
    out: list[tuple[Recorded, str | None, dict[str, str]]] = []
    plan = [
        ("anthropic", "alice@example.com", {"project": "atlas", "feature": "search"}),
        ("anthropic", "bob", {"project": "atlas"}),
        ("anthropic", None, {"project": "zephyr"}),
        ("chat-user", "carol", {}),
        ("chat-safety", "dave", {"project": "zephyr", "feature": "chat-ui"}),
        ("chat-user", "carol", {"feature": "search"}),
    ]
    for i, (kind, user, tags) in enumerate(plan):
        at = DAY1 + timedelta(hours=1, minutes=i)
        if kind == "anthropic":
            request = w.anthropic_request(SONNET, [{"role": "user", "content": f"q{i}"}], cache=None)
            if user:
                request["metadata"] = {"user_id": user}
            usage = w.anthropic_usage(100 + i, 0, 0, 20)
            rec = w.record(
                w.ANTHROPIC, request, w.anthropic_response(SONNET, usage, msg_id=f"msg_t{i}"), at=at, team="t"
            )
        else:
            request = w.chat_request(GPT4O, f"q{i}")
            request["safety_identifier" if kind == "chat-safety" else "user"] = user
            if kind == "chat-safety":
                request["user"] = "not-this-one"  # the newer field wins
            response = w.chat_response(GPT4O, w.chat_usage(200 + i, 30), cid=f"chatcmpl-t{i}")
            rec = w.record(w.CHAT, request, response, at=at, team="t")
        rec.tags = dict(tags)
        out.append((rec, user, tags))
    return out


@pytest.fixture(scope="module")
def planted() -> list[tuple[Recorded, str | None, dict[str, str]]]:
    return _records()


@pytest.fixture(scope="module", params=BACKENDS)
def store(request: pytest.FixtureRequest, planted, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp(f"tags-{request.param}")
    with blank_database(request.param, folder) as url:
        engine = make_engine(url)
        try:
            ensure_current(engine)
            writer = Writer(engine, spool_dir=folder / "spool", enrich=Pricer().price_rows)
            for rec, _, _ in planted:
                writer.submit(rec)
            assert writer.close()
        finally:
            engine.dispose()
        yield url


def run(url: str, *args: str) -> Any:
    result = llmtap(*args, "--db", url)
    assert result.code == 0, result.err
    return result.json() if "json" in args else result.out


def test_requests_by_user_in_every_report(store, planted):
    want: dict[str, int] = {}
    for _, user, _ in planted:
        want[user or "(none)"] = want.get(user or "(none)", 0) + 1
    rows = run(store, "report", "usage", "--by", "user", "--format", "json")
    assert {r["user"]: r["requests"] for r in rows} == want
    assert "not-this-one" not in want
    for kind in REPORTS:
        rows = run(store, "report", kind, "--by", "user,team", "--format", "json")
        assert all("user" in r and r["team"] == "t" for r in rows), kind


def test_cost_by_tag_adds_up_to_the_total(store, planted):
    by_project = run(store, "report", "cost", "--by", "tag:project", "--format", "json")
    counts = {r["tag:project"]: r["requests"] for r in by_project}
    assert counts == {"atlas": 2, "zephyr": 2, "(none)": 2}
    total = run(store, "report", "cost", "--by", "team", "--format", "json")
    assert sum(Decimal(str(r["cost_usd"])) for r in by_project) == Decimal(str(total[0]["cost_usd"])) > 0
    two = run(store, "report", "usage", "--by", "tag:project,tag:feature", "--format", "json")
    pairs = {(r["tag:project"], r["tag:feature"]): r["requests"] for r in two}
    assert pairs[("atlas", "search")] == 1 and pairs[("zephyr", "chat-ui")] == 1 and pairs[("(none)", "search")] == 1
    for kind in REPORTS:
        rows = run(store, "report", kind, "--by", "tag:feature", "--format", "json")
        assert all("tag:feature" in r for r in rows), kind
    table = run(store, "report", "usage", "--by", "tag:project")
    assert "atlas" in table and "zephyr" in table


@pytest.mark.parametrize("name", ["tag:", "tag:Project!", "tag:x'); DROP TABLE exchanges;--", "tag:" + "a" * 33])
def test_a_tag_name_outside_the_pattern_is_one_line(store, name):
    result = llmtap("report", "usage", "--by", name, "--db", store)
    assert result.code != 0 and "Traceback" not in result.err
    assert len(result.err.strip().splitlines()) == 1 and "tag name" in result.err


def test_export_carries_tags_and_end_user(store, planted, tmp_path):
    lines = run(store, "export", "--format", "jsonl").splitlines()
    got = {row["id"]: row for row in map(json.loads, lines)}
    for rec, user, tags in planted:
        assert got[rec.id]["tags"] == tags
        assert got[rec.id]["end_user"] == user
    csv_text = run(store, "export", "--format", "csv")
    header = csv_text.splitlines()[0].split(",")
    assert "tags" in header and "end_user" in header
