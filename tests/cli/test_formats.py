"""One output vocabulary (SPEC §3): every listing takes `--format table|json|jsonl|csv`,
the three machine formats carry the same rows, every timestamp in them has its offset
(in `--tz`, else `+00:00`), `--list` in a terminal is a table, and a bad `--tz` or an
option of another report is one line and a non-zero exit."""

from __future__ import annotations

import csv
import io
import json
import os
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from llmtap.cli.audit_machine import LOG_FIELDS
from llmtap.storage.engine import make_engine
from llmtap.storage.ingest import to_record
from llmtap.storage.migrate import ensure_current
from llmtap.storage.secrets import KeyFingerprinter
from llmtap.storage.writer import Writer
from tests.audit.test_audit_trail import agent_conversation
from tests.corpus_tools import CORPUS, make_har
from tests.helpers import llmtap

BUDGETS = '[budgets.teams]\nbilling = { usd = 5, period = "day" }\nalpha = { usd = 50, period = "month" }\n'
MOMENT = re.compile(r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d")
ZONED = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?[+-]\d\d:\d\d$")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("formats")
    env = dict(os.environ, LLMTAP_HOME=str(folder / "home"))
    env.pop("LLMTAP_CONFIG", None)
    url = f"sqlite:///{folder / 'store.db'}"
    har = folder / "corpus.har"
    make_har(CORPUS, har)
    assert llmtap("import", str(har), "--db", url, env=env).code == 0
    engine = make_engine(url)
    ensure_current(engine)
    writer = Writer(engine, spool_dir=folder / "spool", body_mode="metadata")
    fingerprinter = KeyFingerprinter.from_file(folder / "home" / "fingerprint.secret")
    for http in agent_conversation():  # a conversation of four turns, team billing
        writer.submit(to_record(http, fingerprinter=fingerprinter))
    assert writer.close()
    engine.dispose()
    config = folder / "config.toml"
    config.write_text(BUDGETS)
    ran = llmtap("log", "--db", url, "--team", "billing", "--format", "jsonl", "--limit", "1", env=env)
    return {"url": url, "env": env, "config": str(config), "id": json.loads(ran.out)["id"]}


def run(store: dict[str, Any], *args: str) -> Any:
    argv = [part.format(**store) for part in args]
    result = llmtap(*argv, "--db", store["url"], env=store["env"])
    assert result.code == 0, (argv, result.err)
    return result


LISTINGS = (
    ("log",),
    *(("report", kind) for kind in ("usage", "cost", "cache", "finish", "tools", "errors", "latency")),
    ("report", "cost", "--by", "team,day"),
    ("report", "conversations"),
    ("report", "cache", "--list"),
    ("report", "tools", "--list"),
    ("report", "budgets", "--config", "{config}"),
    ("show", "{id}", "--conversation"),
    ("config",),
)


@pytest.mark.parametrize("command", LISTINGS, ids=" ".join)
def test_every_listing_takes_every_format_and_they_agree(store, command):
    rows = json.loads(run(store, *command, "--format", "json").out)
    if command[0] == "show":
        rows = json.loads(json.dumps(rows["turns"]))
    assert isinstance(rows, list) and rows, command
    lines = run(store, *command, "--format", "jsonl").out.splitlines()
    assert [json.loads(line) for line in lines] == rows
    table = list(csv.DictReader(io.StringIO(run(store, *command, "--format", "csv").out)))
    assert len(table) == len(rows)
    assert list(table[0]) == list(rows[0]) or command[0] == "show"  # show's csv flattens a turn's cache
    terminal = run(store, *command, "--format", "table").out
    assert terminal.strip() and not terminal.lstrip().startswith(("[", "{"))


def _moments(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [m for item in value.values() for m in _moments(item)]
    if isinstance(value, list):
        return [m for item in value for m in _moments(item)]
    return [value] if isinstance(value, str) and MOMENT.match(value) else []


ZONED_COMMANDS = (
    ("log",),
    ("report", "cache", "--list"),
    ("report", "tools", "--list"),
    ("report", "conversations"),
    ("report", "budgets", "--config", "{config}"),
    ("show", "{id}"),
    ("show", "{id}", "--conversation"),
)


@pytest.mark.parametrize("command", ZONED_COMMANDS, ids=" ".join)
def test_every_timestamp_in_machine_output_carries_its_zone(store, command):
    utc = json.loads(run(store, *command, "--format", "json").out)
    kolkata = json.loads(run(store, *command, "--format", "json", "--tz", "Asia/Kolkata").out)
    found = _moments(utc)
    assert found, command
    assert all(ZONED.match(m) and m.endswith("+00:00") for m in found), found
    there = _moments(kolkata)
    assert there, command
    assert all(ZONED.match(m) and m.endswith("+05:30") for m in there), there
    if "budgets" not in command:  # a budget's period is the zone's calendar day: other instants
        assert [datetime.fromisoformat(m) for m in there] == [datetime.fromisoformat(m) for m in found]
    for form in ("jsonl", "csv") if command[-1] != "{id}" else ("jsonl",):  # one exchange: no csv
        text = run(store, *command, "--format", form, "--tz", "Asia/Kolkata").out
        stamps = re.findall(r'\d{4}-\d\d-\d\d[T ]\d\d:\d\d[^",\s]*', text)
        assert stamps and all(ZONED.match(s) and s.endswith("+05:30") for s in stamps), (form, stamps)


@pytest.mark.parametrize("kind", ("cache", "tools"))
def test_list_in_a_terminal_is_a_table(store, kind):
    items = json.loads(run(store, "report", kind, "--list", "--format", "json").out)
    table = run(store, "report", kind, "--list").out
    assert not table.lstrip().startswith(("[", "{"))
    assert "exchange id" in table and "team" in table  # headers in words (issue 26)
    assert items and all(item["exchange_id"] in table for item in items)


def test_log_csv_columns_are_the_log_query_s(store):
    rows = json.loads(run(store, "log", "--format", "json").out)
    assert list(rows[0]) == list(LOG_FIELDS)
    empty = run(store, "log", "--team", "nobody", "--format", "csv").out
    assert empty.splitlines() == [",".join(LOG_FIELDS)]


def test_show_text_is_still_the_table_view(store):
    assert run(store, "show", "{id}", "--format", "text").out == run(store, "show", "{id}").out
    one = run(store, "show", "{id}", "--format", "jsonl").out.splitlines()
    assert len(one) == 1 and json.loads(one[0]) == json.loads(run(store, "show", "{id}", "--format", "json").out)


def one_line_error(store: dict[str, Any], *args: str) -> str:
    argv = [part.format(**store) for part in args]
    result = llmtap(*argv, "--db", store["url"], env=store["env"])
    assert result.code == 2 and result.out == "", (argv, result.out)
    assert len(result.err.strip().splitlines()) == 1, result.err
    return result.err


TZ_COMMANDS = (
    ("log",),
    ("show", "{id}"),
    *(("report", kind) for kind in ("usage", "cost", "cache", "finish", "tools", "errors", "latency")),
    ("report", "conversations"),
    ("report", "budgets", "--config", "{config}"),
    ("report", "whatif", "--model", "gpt-5"),
)


@pytest.mark.parametrize("command", TZ_COMMANDS, ids=" ".join)
@pytest.mark.parametrize("zone", ("Mars/Olympus_Mons", "../../etc/passwd", "+05:00"))
def test_a_bad_tz_is_one_line(store, command, zone):
    assert "is not a time zone" in one_line_error(store, *command, "--tz", zone)


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (("report", "cost", "--list"), "has no --list"),
        (("report", "usage", "--top", "3"), "--top is for report conversations"),
        (("report", "conversations", "--by", "team"), "it takes --top, not --by"),
        (("report", "cost", "--model", "gpt-5"), "--model is for report whatif"),
        (("report", "budgets", "--since", "7d"), "current period"),
        (("report", "budgets", "--lake", "x"), "not a lake"),
        (("report", "finish", "--prices", "x.toml"), "reads no prices"),
        (("show", "{id}", "--format", "csv"), "add --conversation"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else "",
)
def test_an_option_of_another_report_says_why(store, command, said):
    assert said in one_line_error(store, *command)


# -- budget periods in --tz -------------------------------------------------------------------


def test_budget_periods_follow_the_zone(store):
    """The conversation's turns start 2026-11-03 10:00 UTC. At 23:30 UTC that day the UTC
    day holds them; in Kolkata it is already 05:00 on the 4th (its day began 18:30 UTC), in
    New York 18:30 on the 3rd (from 05:00 UTC)."""
    from llmtap.telemetry import budget_config, budget_report

    limits = budget_config.parse({"teams": {"billing": {"usd": 5, "period": "day"}}}).limits
    now = datetime(2026, 11, 3, 23, 30, tzinfo=UTC)
    engine = make_engine(store["url"])
    try:
        spent = {
            zone: budget_report.rows(engine, limits, now, zone_info(zone))[0]
            for zone in ("UTC", "Asia/Kolkata", "America/New_York")
        }
    finally:
        engine.dispose()
    assert spent["UTC"]["spent_usd"] > 0
    assert spent["America/New_York"]["spent_usd"] == spent["UTC"]["spent_usd"]
    assert spent["Asia/Kolkata"]["spent_usd"] == 0
    assert spent["Asia/Kolkata"]["period_start"] == datetime(2026, 11, 3, 18, 30, tzinfo=UTC)
    assert spent["America/New_York"]["period_start"] == datetime(2026, 11, 3, 5, 0, tzinfo=UTC)


def zone_info(name: str) -> Any:
    from zoneinfo import ZoneInfo

    return ZoneInfo(name)


@pytest.mark.parametrize(
    ("period", "now", "start", "hours"),
    [
        ("day", datetime(2026, 10, 25, 12, 0, tzinfo=UTC), datetime(2026, 10, 24, 22, 0, tzinfo=UTC), 25),  # DST ends
        ("day", datetime(2026, 3, 29, 12, 0, tzinfo=UTC), datetime(2026, 3, 28, 23, 0, tzinfo=UTC), 23),  # DST starts
        ("week", datetime(2026, 11, 1, 23, 30, tzinfo=UTC), datetime(2026, 11, 1, 23, 0, tzinfo=UTC), 7 * 24),
        ("month", datetime(2026, 10, 31, 23, 30, tzinfo=UTC), datetime(2026, 10, 31, 23, 0, tzinfo=UTC), 30 * 24),
    ],
)
def test_budget_bounds_are_the_zone_s_calendar(period, now, start, hours):
    """In Paris: the days DST ends and starts are 25 and 23 hours; 23:30 UTC on Sunday
    Nov 1 is Monday 00:30 there (a new week), on Oct 31 it is Nov 1 (a new month)."""
    from llmtap.telemetry.budget_config import bounds

    got = bounds(period, now, zone_info("Europe/Paris"))
    assert got == (start, start + timedelta(hours=hours))
    assert bounds(period, now) == bounds(period, now, UTC)
