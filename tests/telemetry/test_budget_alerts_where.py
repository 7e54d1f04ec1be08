"""Alerts where people are (`[budgets] webhook_format = "slack"`) and periods in the
operator's zone (`[budgets] tz`): hostile limit names reach a Slack message escaped and
scrubbed, a message stays bounded whatever the limits, periods begin at local midnight
across DST changes (and where a zone's clocks jump over midnight), a zone the config
names wrongly is a one-line error, and the observer sends a Slack message to a real
receiver on 127.0.0.1 for a period that began at midnight in Berlin."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import Engine

from llmtap.storage.engine import make_engine
from llmtap.storage.migrate import ensure_current
from llmtap.storage.rows import RowSet
from llmtap.telemetry import budget_alerts, budget_spend, budget_state
from llmtap.telemetry.budget_config import Limit, bounds, day_start, parse
from llmtap.telemetry.budget_gate import ProxyGate
from llmtap.telemetry.budgets import BudgetObserver
from tests.helpers import llmtap
from tests.telemetry.test_budgets import Receiver, _row, _store, _wait

BERLIN = ZoneInfo("Europe/Berlin")
KEY = "sk-ant-api03-" + "Zq9" * 14  # shaped like an Anthropic key
HOSTILE = f"<!channel> & <@U024BE7LH> <https://evil.example|click here> @here\n{KEY}"


def _standing(name: str, spent_usd: str = "9", usd: int = 10, scope: str = "team") -> budget_spend.Standing:
    limit = Limit(scope, name, Decimal(usd), "day", (50, 80, 100))
    standing = budget_spend.standings([limit], datetime(2026, 12, 3, 12, tzinfo=UTC), BERLIN)[0]
    standing.spent_pico = int(Decimal(spent_usd) * 10**12)
    return standing


def _texts(message: dict[str, Any]) -> list[str]:
    return [message["text"], *(block["text"]["text"] for block in message["blocks"])]


# -- the Slack message ------------------------------------------------------------------------


def test_a_hostile_team_name_is_escaped_and_scrubbed() -> None:
    message = budget_alerts.slack_payload([(_standing(HOSTILE), 80)], BERLIN)
    assert set(message) == {"text", "blocks"}
    for text in _texts(message):
        assert "<" not in text and ">" not in text, text  # no mention, link or command survives
        assert "&lt;!channel&gt; &amp; &lt;@U024BE7LH&gt; &lt;https://evil.example|click here&gt;" in text
        assert KEY not in text and "sk-ant-" not in text
    assert "\n" not in message["blocks"][0]["text"]["text"]  # the name's line break is gone
    for block in message["blocks"]:
        assert block["type"] == "section"
        assert block["text"]["type"] == "mrkdwn" and block["text"]["verbatim"] is True  # no automatic parsing
    assert KEY not in json.dumps(message)


def test_the_escape_is_of_the_three_characters_only() -> None:
    assert budget_alerts.mrkdwn("a&b<c>d *e* &amp;") == "a&amp;b&lt;c&gt;d *e* &amp;amp;"
    assert budget_alerts.shown_name("x" * 500) == "x" * (budget_alerts.SLACK_NAME - 1) + "…"
    assert budget_alerts.shown_name("&" * 500) == "&amp;" * (budget_alerts.SLACK_NAME - 1) + "…"  # cut, then escaped


def test_a_message_says_what_crossed_in_the_zone_of_the_periods() -> None:
    message = budget_alerts.slack_payload([(_standing("search"), 80), (_standing("infra", "12"), 100)], BERLIN)
    first, second = message["blocks"]
    assert first["text"]["text"] == (
        ":warning: *team search* reached *80%* of its day limit: $9.00 of $10.00 (period from 2026-12-03 Europe/Berlin)"
    )
    assert second["text"]["text"].startswith(":rotating_light: *team infra* reached *100%*")
    assert message["text"] == first["text"]["text"] + "\n" + second["text"]["text"]  # Teams shows `text`


@pytest.mark.parametrize(
    "name",
    ["&" * 5000, "<>" * 3000, "\U0001f4b8" * 4000, "é" * 4000, KEY * 100, "ok"],
    ids=["ampersands", "brackets", "astral", "accents", "keys", "short"],
)
def test_a_message_stays_bounded_with_many_limits(name: str) -> None:
    alerts = [(_standing(f"{name}{n}", scope="key" if n % 2 else "team"), 100) for n in range(500)]
    message = budget_alerts.slack_payload(alerts, BERLIN)
    body = json.dumps(message).encode()  # what Webhook posts
    assert len(body) <= budget_alerts.SLACK_MAX_BYTES
    assert len(message["blocks"]) <= budget_alerts.SLACK_LINES + 1 <= 50  # Slack: 50 blocks a message
    assert all(0 < len(block["text"]["text"]) <= 3000 for block in message["blocks"])  # Slack: 3000 a section
    shown = len(message["blocks"]) - 1
    assert re.fullmatch(rf"…and {500 - shown} more: `llmtap report budgets`", message["blocks"][-1]["text"]["text"])
    assert "sk-ant-" not in body.decode()


def test_one_alert_is_one_line_and_no_more() -> None:
    message = budget_alerts.slack_payload([(_standing("search"), 50)])
    assert len(message["blocks"]) == 1 and "more" not in message["text"]


def test_bodies_are_one_object_each_or_one_message() -> None:
    now = datetime(2026, 12, 3, 12, tzinfo=UTC)
    alerts = [(_standing("a"), 50), (_standing("b"), 80)]
    plain = budget_alerts.bodies(alerts, now, BERLIN, "llmtap")
    assert [b["name"] for b in plain] == ["a", "b"]
    assert (plain[0]["period_start"], plain[0]["period_end"], plain[0]["tz"]) == (
        "2026-12-03T00:00:00+01:00",
        "2026-12-04T00:00:00+01:00",
        "Europe/Berlin",
    )
    assert len(budget_alerts.bodies(alerts, now, BERLIN, "slack")) == 1
    assert budget_alerts.bodies([], now, BERLIN, "slack") == []


# -- periods in a zone ------------------------------------------------------------------------


def test_a_day_across_a_dst_change_is_23_or_25_hours() -> None:
    autumn = bounds("day", datetime(2026, 10, 25, 12, tzinfo=UTC), BERLIN)  # CEST -> CET at 03:00
    assert autumn == (datetime(2026, 10, 24, 22, tzinfo=UTC), datetime(2026, 10, 25, 23, tzinfo=UTC))
    assert autumn[1] - autumn[0] == timedelta(hours=25)
    spring = bounds("day", datetime(2026, 3, 29, 12, tzinfo=UTC), BERLIN)  # CET -> CEST at 02:00
    assert spring == (datetime(2026, 3, 28, 23, tzinfo=UTC), datetime(2026, 3, 29, 22, tzinfo=UTC))
    assert spring[1] - spring[0] == timedelta(hours=23)
    # the week and the month that hold the change start and end at local midnight too
    week = bounds("week", datetime(2026, 10, 25, 12, tzinfo=UTC), BERLIN)
    assert week == (datetime(2026, 10, 18, 22, tzinfo=UTC), datetime(2026, 10, 25, 23, tzinfo=UTC))
    month = bounds("month", datetime(2026, 10, 31, 23, 30, tzinfo=UTC), BERLIN)  # 00:30 on Nov 1 in Berlin
    assert month == (datetime(2026, 10, 31, 23, tzinfo=UTC), datetime(2026, 11, 30, 23, tzinfo=UTC))
    # the last second of the long day is in it, the next is the next day's
    assert bounds("day", datetime(2026, 10, 25, 22, 59, 59, tzinfo=UTC), BERLIN) == autumn
    assert bounds("day", datetime(2026, 10, 25, 23, tzinfo=UTC), BERLIN)[0] == autumn[1]


def test_a_day_whose_midnight_the_clocks_skip_starts_when_they_jump() -> None:
    santiago = ZoneInfo("America/Santiago")  # 2026-09-06: 00:00 -04 becomes 01:00 -03
    start, end = bounds("day", datetime(2026, 9, 6, 12, tzinfo=UTC), santiago)
    assert (start, end) == (datetime(2026, 9, 6, 4, tzinfo=UTC), datetime(2026, 9, 7, 3, tzinfo=UTC))
    assert start.astimezone(santiago).hour == 1


@pytest.mark.parametrize(
    "name", ["Europe/Berlin", "America/New_York", "America/Santiago", "Australia/Lord_Howe", "Asia/Kathmandu", "UTC"]
)
def test_each_day_starts_at_its_first_moment(name: str) -> None:
    zone = ZoneInfo(name)
    for offset in range(0, 731):
        day = date(2025, 1, 1) + timedelta(days=offset)
        start = day_start(day, zone)
        assert start.astimezone(zone).date() == day, (name, day)
        assert (start - timedelta(seconds=1)).astimezone(zone).date() < day, (name, day)
        assert timedelta(hours=22) <= day_start(day + timedelta(days=1), zone) - start <= timedelta(hours=26)


def test_the_tracker_rolls_at_midnight_in_its_zone() -> None:
    limit = Limit("team", "search", Decimal(1), "day", (100,))
    tracker = budget_spend.Tracker([limit], datetime(2026, 10, 25, 12, tzinfo=UTC), BERLIN)
    (standing,) = tracker.standings
    tracker.add([_row("search", "0.5", datetime(2026, 10, 24, 22, 30, tzinfo=UTC))])  # 00:30 in Berlin: today
    assert standing.spent_usd == Decimal("0.5")
    assert tracker.roll(datetime(2026, 10, 25, 22, 59, tzinfo=UTC)) == []  # 23:59 CET: still the long day
    assert tracker.roll(datetime(2026, 10, 25, 23, 0, tzinfo=UTC)) == [standing]
    assert standing.start == datetime(2026, 10, 25, 23, tzinfo=UTC) and standing.spent_pico == 0


def test_a_refusal_waits_for_midnight_in_the_zone(tmp_path: Path) -> None:
    """23:00 in Berlin on the long autumn day: the next period is an hour away (two in UTC)."""
    settings = parse({"enforce": True, "tz": "Europe/Berlin", "teams": {"search": {"usd": 1, "period": "day"}}})
    now = datetime(2026, 10, 25, 22, tzinfo=UTC)
    (standing,) = budget_spend.standings(settings.limits, now, settings.zone)
    standing.spent_pico = standing.limit.pico
    state = tmp_path / budget_state.FILE_NAME
    budget_state.write(state, budget_state.encode([standing], now, stamp=1.0))
    gate = ProxyGate(settings, state, estimator=None, writer=None, clock=lambda: now)  # type: ignore[arg-type]
    gate.reader.refresh()
    refusal = gate.over(team="search", fingerprints=(), protocol="openai.chat", path="/v1/chat/completions")
    assert refusal is not None
    assert dict(refusal[1])["retry-after"] == "3600"


# -- the table -------------------------------------------------------------------------------


def test_the_keys_parse() -> None:
    settings = parse({"tz": "Europe/Berlin", "webhook_format": "slack", "teams": {"a": {"usd": 1}}})
    assert (settings.tz, settings.zone, settings.webhook_format) == ("Europe/Berlin", BERLIN, "slack")
    defaults = parse({"teams": {"a": {"usd": 1}}})
    assert (defaults.tz, defaults.webhook_format) == ("UTC", "llmtap")


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"tz": "Mars/Olympus_Mons"}, "[budgets] tz must be an IANA time zone such as Europe/Berlin or UTC, not "),
        ({"tz": "../../etc/passwd"}, "[budgets] tz must be an IANA time zone"),
        ({"tz": ""}, "[budgets] tz must be an IANA time zone"),
        ({"tz": 1}, "[budgets] tz must be text, not 1"),
        ({"webhook_format": "discord"}, "[budgets] webhook_format must be one of 'llmtap' or 'slack', not 'discord'"),
    ],
)
def test_a_bad_zone_or_format_is_one_line(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(message)) as caught:
        parse({**section, "teams": {"a": {"usd": 1}}})
    assert "\n" not in str(caught.value)


def test_the_cli_refuses_an_unknown_zone_in_one_line(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[budgets]\ntz = "Europe/Atlantis"\n[budgets.teams]\nsearch = { usd = 5 }\n')
    env = {"LLMTAP_HOME": str(tmp_path / "home"), "LLMTAP_CONFIG": None}
    result = llmtap("report", "budgets", "--config", str(config), "--db", f"sqlite:///{tmp_path / 's.db'}", env=env)
    assert result.code == 2
    assert result.err == (
        f"llmtap: error: {config}: [budgets] tz must be an IANA time zone such as Europe/Berlin or UTC, "
        "not 'Europe/Atlantis'\n"
    )


# -- end to end ------------------------------------------------------------------------------


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    made = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    ensure_current(made)
    yield made
    made.dispose()


def test_the_observer_posts_one_slack_message_for_a_berlin_day(engine: Engine, tmp_path: Path) -> None:
    receiver = Receiver()
    settings = parse(
        {
            "webhook": receiver.url,
            "webhook_format": "slack",
            "tz": "Europe/Berlin",
            "teams": {HOSTILE: {"usd": 1, "period": "day"}, "infra": {"usd": 1, "period": "day"}},
        }
    )
    state = tmp_path / budget_state.FILE_NAME
    clock = [datetime(2026, 12, 3, 23, 30, tzinfo=UTC)]  # 00:30 on Dec 4 in Berlin: a new day there
    _store(engine, [_row("infra", "5", datetime(2026, 12, 3, 22, 30, tzinfo=UTC))])  # 23:30 Dec 3: yesterday there
    observer = BudgetObserver(settings, engine, state, clock=lambda: clock[0])
    try:
        _wait(lambda: state.exists())
        rows = [_row(HOSTILE, "0.9", clock[0]), _row("infra", "2", clock[0])]
        _store(engine, rows)
        observer.observe(RowSet(exchanges=rows, tool_calls=[], body_refs=[]))
        _wait(lambda: len(receiver.bodies) >= 1)
        rows = [_row(HOSTILE, "0.2", clock[0])]
        _store(engine, rows)
        observer.observe(RowSet(exchanges=rows, tool_calls=[], body_refs=[]))
        _wait(lambda: len(receiver.bodies) >= 2)
    finally:
        observer.close()
        receiver.close()
    first, second = receiver.bodies
    # one message for what one check fired: the hostile team's 50% and 80%, infra's three
    assert len(first["blocks"]) == 5 and set(first) == {"text", "blocks"}
    assert "period from 2026-12-04 Europe/Berlin" in first["text"]
    assert "*team infra* reached *100%*" in first["text"]  # only today's $2 counts: 200 %
    assert [b["text"]["text"].split("reached ")[1][:5] for b in second["blocks"]] == ["*100%"]
    for body in receiver.bodies:
        raw = json.dumps(body)
        assert "<!channel>" not in raw and "<@" not in raw and KEY not in raw


def test_report_budgets_shows_the_configured_zone_and_takes_tz_over_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    made = make_engine(url)
    ensure_current(made)
    made.dispose()
    config = tmp_path / "config.toml"
    config.write_text('[budgets]\ntz = "Europe/Berlin"\n[budgets.teams]\nsearch = { usd = 8, period = "day" }\n')
    env = {"LLMTAP_HOME": str(tmp_path / "home"), "LLMTAP_CONFIG": None}
    base = ("report", "budgets", "--config", str(config), "--db", url)
    now = datetime.now(UTC)

    (row,) = llmtap(*base, "--format", "json", env=env).json()
    start, end = bounds("day", now, BERLIN)
    if datetime.fromisoformat(row["period_start"]) != start:  # the day turned between the two
        start, end = bounds("day", datetime.now(UTC), BERLIN)
    assert datetime.fromisoformat(row["period_start"]) == start
    assert datetime.fromisoformat(row["period_end"]) == end
    assert start.astimezone(BERLIN).hour == 0

    (shown,) = llmtap(*base, "--format", "json", "--tz", "UTC", env=env).json()
    assert datetime.fromisoformat(shown["period_start"]).astimezone(UTC).hour == 0  # the UTC day, as asked

    wide = {**env, "COLUMNS": "200"}
    table = llmtap(*base, env=wide)
    assert table.code == 0, table.err
    assert "periods in Europe/Berlin;" in table.out and "enforces on" not in table.out
    other = llmtap(*base, "--tz", "UTC", env=wide)
    assert "periods in UTC; the proxy alerts and enforces on Europe/Berlin periods" in other.out
