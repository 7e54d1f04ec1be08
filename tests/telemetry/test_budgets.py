"""Budgets without the proxy: the `[budgets]` table's checks, UTC periods, spend from the
store (SQLite, and PostgreSQL when LLMTAP_TEST_POSTGRES_URL is set) and from committed
rows, alerts once per period across a restart, the webhook's retries against a real
receiver on 127.0.0.1, the over-limit file, the refusal shapes, and the CLI's errors and
report."""

from __future__ import annotations

import json
import os
import re
import stat
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, insert

from llmtap.storage import schema
from llmtap.storage.engine import make_engine
from llmtap.storage.ids import new_id
from llmtap.storage.migrate import ensure_current
from llmtap.storage.rows import RowSet
from llmtap.telemetry import budget_alerts, budget_refusal, budget_spend, budget_state
from llmtap.telemetry.budget_config import Limit, bounds, parse
from llmtap.telemetry.budgets import BudgetObserver
from tests.helpers import free_port, llmtap
from tests.storage.helpers import POSTGRES_URL, fresh_postgres_database

PICO = 10**12
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)  # a Thursday


# -- the table ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("nope", "[budgets] must be a table, not 'nope'"),
        ({"teams": {}}, "[budgets] sets no limit"),
        ({"team": {"a": {"usd": 1}}}, "[budgets.team] is not a known table (did you mean [budgets.teams]?)"),
        ({"teams": {"a": {"usd": 0}}}, "[budgets.teams] a.usd must be a positive number"),
        ({"teams": {"a": {"usd": "lots"}}}, "[budgets.teams] a.usd must be a positive number"),
        ({"teams": {"a": {"usd": True}}}, "[budgets.teams] a.usd must be a positive number"),
        (
            {"teams": {"a": {"usd": 1, "period": "year"}}},
            "[budgets.teams] a.period must be one of 'day', 'week' or 'month', not 'year'",
        ),
        (
            {"teams": {"a": {"usd": 1, "every": "day"}}},
            "[budgets.teams] a.every is not a known key (known: period, thresholds, usd)",
        ),
        ({"teams": {"a": 5}}, "[budgets.teams] a must be a table, not 5"),
        (
            {"keys": {"f": {"usd": 1, "thresholds": [50, 0]}}},
            "[budgets.keys] f.thresholds must each be a whole percentage from 1 to 1000, not 0",
        ),
        ({"thresholds": "80", "teams": {"a": {"usd": 1}}}, "[budgets] thresholds must be a list"),
        ({"enforce": "yes", "teams": {"a": {"usd": 1}}}, "[budgets] enforce must be true or false"),
        ({"webhook": "ftp://x", "teams": {"a": {"usd": 1}}}, "[budgets] webhook must be an http(s) URL"),
        ({"default_output_tokens": 0, "teams": {"a": {"usd": 1}}}, "[budgets] default_output_tokens must be"),
        ({"default_output_tokens": "4k", "teams": {"a": {"usd": 1}}}, "[budgets] default_output_tokens must be"),
    ],
)
def test_bad_values_name_the_table_and_key(section: Any, message: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(message)) as caught:
        parse(section)
    assert "\n" not in str(caught.value)


def test_a_table_parses_with_defaults() -> None:
    settings = parse(
        {
            "thresholds": [100, 50],
            "teams": {"search": {"usd": 200, "period": "month"}, "infra": {"usd": "20.5", "thresholds": [90]}},
            "keys": {"9f2c": {"usd": 5, "period": "week"}},
        }
    )
    assert settings.enforce is False and settings.webhook is None
    assert settings.default_output_tokens == 32_768
    assert parse({"default_output_tokens": 4096, "teams": {"a": {"usd": 1}}}).default_output_tokens == 4096
    assert settings.limits == (
        Limit("team", "search", Decimal(200), "month", (50, 100)),
        Limit("team", "infra", Decimal("20.5"), "month", (90,)),
        Limit("key", "9f2c", Decimal(5), "week", (50, 100)),
    )


def test_periods_are_utc_calendar_periods() -> None:
    late = datetime(2026, 12, 31, 23, 30, tzinfo=UTC)
    assert bounds("day", late) == (datetime(2026, 12, 31, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))
    assert bounds("week", late) == (datetime(2026, 12, 28, tzinfo=UTC), datetime(2027, 1, 4, tzinfo=UTC))
    assert bounds("month", late) == (datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))
    # 01:30 on Monday in UTC+3 is still Sunday in UTC
    east = datetime(2026, 12, 7, 1, 30, tzinfo=timezone(timedelta(hours=3)))
    assert bounds("week", east)[0] == datetime(2026, 11, 30, tzinfo=UTC)


# -- spend ----------------------------------------------------------------------------


def _row(team: str, cost_usd: str | None, started: datetime, fingerprint: str | None = None) -> dict[str, Any]:
    return {
        "id": new_id(),
        "team": team,
        "key_fingerprint": fingerprint,
        "started_at": started,
        "protocol": "openai.chat",
        "streamed": False,
        "complete": True,
        "usage_provenance": "reported",
        "cost_total_pico": None if cost_usd is None else int(Decimal(cost_usd) * PICO),
    }


def _urls() -> list[str]:
    return ["sqlite", "postgresql"] if POSTGRES_URL else ["sqlite"]


@pytest.fixture(params=_urls())
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    if request.param == "sqlite":
        made = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
        ensure_current(made)
        yield made
        made.dispose()
        return
    with fresh_postgres_database() as url:
        made = make_engine(url)
        ensure_current(made)
        yield made
        made.dispose()


def _store(engine: Engine, rows: list[dict[str, Any]]) -> None:
    with engine.begin() as connection:
        connection.execute(insert(schema.exchanges), rows)


LIMITS = (
    Limit("team", "search", Decimal(10), "day", (50, 80, 100)),
    Limit("key", "f1", Decimal(1), "month", (100,)),
)


def test_spend_from_the_store_counts_the_period_and_priced_rows_only(engine: Engine) -> None:
    _store(
        engine,
        [
            _row("search", "2.5", NOW - timedelta(hours=1)),
            _row("search", "1.25", NOW - timedelta(hours=11, minutes=59), "f1"),  # 00:01 today
            _row("search", "100", NOW - timedelta(days=1)),  # yesterday: another day
            _row("search", None, NOW),  # unpriced: adds nothing
            _row("other", "7", NOW, "f1"),  # the key counts whatever the team
            _row("other", "9", NOW),
        ],
    )
    found = budget_spend.standings(LIMITS, NOW)
    assert budget_spend.read(engine, found) == [int(Decimal("3.75") * PICO), int(Decimal("8.25") * PICO)]


def test_tracker_adds_committed_rows_and_rolls_over() -> None:
    tracker = budget_spend.Tracker(LIMITS, NOW)
    assert tracker.add([_row("search", "5", NOW, "f1"), _row("search", None, NOW), _row("x", "1", NOW)])
    assert not tracker.add([_row("search", "4", NOW - timedelta(days=1))])  # before the period
    team, key = tracker.standings
    assert (team.spent_usd, key.spent_usd) == (Decimal(5), Decimal(5))
    assert team.crossed() == (50,) and key.crossed() == (100,) and key.over
    assert [s.limit.name for s in tracker.roll(NOW + timedelta(days=1))] == ["search"]
    assert team.spent_pico == 0 and team.start == datetime(2026, 12, 4, tzinfo=UTC)
    assert key.spent_usd == Decimal(5)


# -- alerts ---------------------------------------------------------------------------


def test_a_threshold_is_claimed_once_per_period(engine: Engine) -> None:
    standing = budget_spend.standings(LIMITS[:1], NOW)[0]
    assert budget_alerts.claim(engine, standing, 50, NOW)
    assert not budget_alerts.claim(engine, standing, 50, NOW)  # another proxy, or a restart
    assert budget_alerts.fired(engine, standing.limit, standing.start) == {50}
    next_day = budget_spend.standings(LIMITS[:1], NOW + timedelta(days=1))[0]
    assert budget_alerts.claim(engine, next_day, 50, NOW)


class Receiver:
    """A webhook receiver on 127.0.0.1 that answers 500 to its first `failures` POSTs."""

    def __init__(self, failures: int = 0) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.attempts = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                outer.attempts += 1
                if outer.attempts <= failures:
                    self.send_response(500)
                else:
                    outer.bodies.append(json.loads(body))
                    self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_the_webhook_retries_then_delivers_once() -> None:
    receiver = Receiver(failures=2)
    try:
        hook = budget_alerts.Webhook(receiver.url, attempts=4, first_pause=0.05)
        hook.send({"n": 1})
        hook.close()
        assert (receiver.attempts, receiver.bodies) == (3, [{"n": 1}])
    finally:
        receiver.close()


def test_the_webhook_gives_up_after_its_attempts(caplog: pytest.LogCaptureFixture) -> None:
    receiver = Receiver(failures=100)  # answers 500 to every try
    try:
        hook = budget_alerts.Webhook(receiver.url, attempts=3, first_pause=0.01)
        hook.send({"n": 1})
        hook.close()
        assert (receiver.attempts, receiver.bodies) == (3, [])  # its attempts, then no more
    finally:
        receiver.close()
    assert caplog.text.count("not delivered (HTTP 500)") == 1


def test_the_webhook_says_why_when_nothing_listens(caplog: pytest.LogCaptureFixture) -> None:
    hook = budget_alerts.Webhook(f"http://127.0.0.1:{free_port()}/", attempts=2, first_pause=0.01)
    hook.send({"n": 1})
    hook.close()
    assert "not delivered (ConnectionRefusedError" in caplog.text or "not delivered (URLError" in caplog.text


def _wait(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.02)


def test_the_observer_alerts_once_writes_the_state_and_remembers_across_a_restart(
    engine: Engine, tmp_path: Path
) -> None:
    receiver = Receiver()
    settings = parse({"webhook": receiver.url, "teams": {"search": {"usd": 10, "period": "day"}}})
    state = tmp_path / "spool" / budget_state.FILE_NAME
    now = datetime.now(UTC)
    _store(engine, [_row("search", "4", now)])  # before the start: read from the store
    try:
        observer = BudgetObserver(settings, engine, state)
        _wait(lambda: state.exists())
        assert budget_state.over_of(state.read_bytes(), settings.limits) == {}
        for cost in ("1.5", "3"):  # 55 %, then 85 %
            rows = [_row("search", cost, now)]
            _store(engine, rows)
            observer.observe(RowSet(exchanges=rows, tool_calls=[], body_refs=[]))
        _wait(lambda: [b["threshold_percent"] for b in receiver.bodies] == [50, 80])
        rows = [_row("search", "2", now)]  # 105 %
        _store(engine, rows)
        observer.observe(RowSet(exchanges=rows, tool_calls=[], body_refs=[]))
        _wait(lambda: len(receiver.bodies) == 3)
        _wait(lambda: budget_state.over_of(state.read_bytes(), settings.limits) != {})
        observer.close()
        alert = receiver.bodies[-1]
        assert (alert["threshold_percent"], alert["spent_usd"], alert["over"]) == (100, "10.500000", True)

        again = BudgetObserver(settings, make_engine(engine.url.render_as_string(hide_password=False)), state)
        time.sleep(1.5)  # its first check has run
        again.close()
        assert [b["threshold_percent"] for b in receiver.bodies] == [50, 80, 100]
    finally:
        receiver.close()


# -- the proxy's side -----------------------------------------------------------------


def test_the_state_reader_honours_the_period_and_the_current_config(tmp_path: Path) -> None:
    limit = LIMITS[0]
    path = tmp_path / budget_state.FILE_NAME
    standing = budget_spend.standings([limit], NOW)[0]
    standing.spent_pico = limit.pico + 1
    budget_state.write(path, budget_state.encode([standing], NOW, stamp=12.5))
    reader = budget_state.StateReader(path, [limit])
    reader.refresh()
    assert reader.spent(limit, NOW) == limit.pico + 1 and reader.stamp == 12.5
    assert reader.spent(LIMITS[1], NOW) == 0  # the file says nothing of it
    assert reader.spent(limit, standing.end) == 0  # the period is over: the next starts from nothing
    raised = Limit("team", "search", Decimal(50), "day", (100,))  # the operator raised it: the spend stands
    assert budget_state.over_of(path.read_bytes(), [raised]) == {}
    assert budget_state.over_of(path.read_bytes(), [limit]) == {("team", "search"): (limit, standing.end)}
    weekly = Limit("team", "search", Decimal(50), "week", (100,))  # another period: not this spend
    assert budget_state.decode(path.read_bytes(), [weekly]) == ({}, 12.5)
    assert budget_state.decode(b"not json", [limit]) == ({}, None)
    path.unlink()
    reader.refresh()
    assert reader.spent(limit, NOW) == 0


def test_a_state_file_from_before_the_reader_started_releases_nothing(tmp_path: Path) -> None:
    """Its spend counts; its stamp (a monotonic clock that restarts with the machine) not."""
    limit = LIMITS[0]
    path = tmp_path / budget_state.FILE_NAME
    budget_state.write(path, budget_state.encode(budget_spend.standings([limit], NOW), NOW, stamp=1e12))
    old = time.time() - 3600
    os.utime(path, (old, old))
    reader = budget_state.StateReader(path, [limit])
    reader.refresh()
    assert (limit.scope, limit.name) in reader.state and reader.stamp is None
    budget_state.write(path, budget_state.encode(budget_spend.standings([limit], NOW), NOW, stamp=7.0))
    reader.refresh()
    assert reader.stamp == 7.0


@pytest.mark.parametrize(
    ("protocol", "path", "check"),
    [
        ("anthropic.messages", "/v1/messages", lambda b, h: b["error"]["type"] == "rate_limit_error"),
        ("openai.chat", "/v1/chat/completions", lambda b, h: b["error"]["code"] == "insufficient_quota"),
        ("openai.responses", "/v1/responses", lambda b, h: b["error"]["type"] == "insufficient_quota"),
        (
            "gemini.generate",
            "/v1beta/models/g:generateContent",
            lambda b, h: (b["error"]["code"], b["error"]["status"]) == (429, "RESOURCE_EXHAUSTED"),
        ),
        (
            "bedrock.converse",
            "/model/m/converse",
            lambda b, h: "message" in b and h["x-amzn-errortype"] == "ThrottlingException",
        ),
    ],
)
def test_refusals_speak_the_protocol(protocol: str, path: str, check: Any) -> None:
    limit = LIMITS[0]
    end = NOW + timedelta(seconds=90.2)
    status, headers, body = budget_refusal.refusal(protocol, path, limit, end, NOW)
    named = dict(headers)
    assert status == 429 and named["retry-after"] == "91" and named["content-type"] == "application/json"
    assert check(json.loads(body), named)
    assert budget_refusal.retry_after(NOW + timedelta(days=20), NOW) == budget_refusal.RETRY_CAP


# -- the CLI --------------------------------------------------------------------------


@pytest.mark.slow  # `llmtap proxy` in a process of its own
def test_a_bad_budgets_table_is_a_one_line_usage_error(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[budgets.teams]\nsearch = { usd = -3, period = "day" }\n')
    env = {"LLMTAP_HOME": str(tmp_path / "home"), "LLMTAP_CONFIG": None}
    args = ("--config", str(config), "--db", f"sqlite:///{tmp_path / 's.db'}")
    for command in (("proxy", "--no-regular", "--reverse", f"anthropic={free_port()}"), ("report", "budgets")):
        result = llmtap(*command, *args, env=env, process=command[0] == "proxy")  # mitmproxy: its own process
        assert result.code == 2
        assert result.err.strip().splitlines() == [
            f"llmtap: error: {config}: [budgets.teams] search.usd must be a positive number of dollars, not -3"
        ]


def test_report_budgets(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    engine = make_engine(url)
    ensure_current(engine)
    now = datetime.now(UTC)
    _store(engine, [_row("search", "3", now), _row("search", "2", now), _row("other", "50", now)])
    engine.dispose()
    config = tmp_path / "config.toml"
    config.write_text('[budgets.teams]\nsearch = { usd = 8, period = "month" }\nidle = { usd = 1, period = "day" }\n')
    env = {"LLMTAP_HOME": str(tmp_path / "home"), "LLMTAP_CONFIG": None}
    result = llmtap("report", "budgets", "--config", str(config), "--db", url, "--format", "json", env=env)
    assert result.code == 0, result.err
    search, idle = result.json()
    start, end = bounds("month", now)
    assert (search["name"], search["spent_usd"], search["limit_usd"]) == ("search", Decimal(5), Decimal(8))
    assert search["percent"] == Decimal("0.625") and search["crossed"] == "50%" and search["alerted"] == ""
    elapsed = (now - start).total_seconds()
    expected = Decimal(5) * Decimal((end - start).total_seconds()) / Decimal(elapsed)
    assert abs(search["forecast_usd"] - expected) / expected < Decimal("0.01")
    assert (idle["spent_usd"], idle["forecast_usd"], idle["crossed"]) == (0, 0, "")
    table = llmtap("report", "budgets", "--config", str(config), "--db", url, env=env)
    assert table.code == 0 and "$5.00" in table.out and "62.5%" in table.out and "$8.00" in table.out
    no_table = llmtap("report", "budgets", "--db", url, env=env)
    assert no_table.code == 2 and "no [budgets] table" in no_table.err


def test_a_store_that_is_away_is_one_line_and_no_state(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    away = make_engine(f"postgresql+psycopg://llmtap@127.0.0.1:{free_port()}/none?connect_timeout=2")
    settings = parse({"enforce": True, "teams": {"search": {"usd": 1, "period": "day"}}})
    state = tmp_path / budget_state.FILE_NAME
    observer = BudgetObserver(settings, away, state)
    try:
        rows = [_row("search", "5", datetime.now(UTC))]
        observer.observe(RowSet(exchanges=rows, tool_calls=[], body_refs=[]))  # never raises into the writer
        time.sleep(1.5)
        assert not state.exists(), "a state from part of the spend"
    finally:
        observer.close()
    lines = [r.getMessage() for r in caplog.records if "cannot use the store" in r.getMessage()]
    assert lines == ["llmtap budgets: cannot use the store (OperationalError); retrying"]


def test_a_new_period_starts_from_nothing_and_alerts_again(engine: Engine, tmp_path: Path) -> None:
    receiver = Receiver()
    settings = parse({"webhook": receiver.url, "teams": {"search": {"usd": 1, "period": "day", "thresholds": [100]}}})
    state = tmp_path / budget_state.FILE_NAME
    clock = [datetime(2026, 12, 3, 23, 59, 58, tzinfo=UTC)]
    observer = BudgetObserver(settings, engine, state, clock=lambda: clock[0])
    try:
        _wait(lambda: state.exists())
        for day, after_midnight in enumerate(
            (datetime(2026, 12, 4, 0, 0, 1, tzinfo=UTC), datetime(2026, 12, 5, tzinfo=UTC))
        ):
            rows = [_row("search", "1.5", clock[0])]
            _store(engine, rows)
            observer.observe(RowSet(exchanges=rows, tool_calls=[], body_refs=[]))
            _wait(lambda day=day: len(receiver.bodies) == day + 1)
            _wait(lambda: budget_state.over_of(state.read_bytes(), settings.limits) != {})
            clock[0] = after_midnight  # a new UTC day: nothing spent yet, no one over
            _wait(lambda: budget_state.over_of(state.read_bytes(), settings.limits) == {})
    finally:
        observer.close()
        receiver.close()
    assert [(b["period_start"], b["threshold_percent"]) for b in receiver.bodies] == [
        ("2026-12-03T00:00:00+00:00", 100),
        ("2026-12-04T00:00:00+00:00", 100),
    ]


def test_the_state_file_is_private_whatever_the_umask(tmp_path: Path) -> None:
    """It tells each limit's spend (a review found it 0644 in a 0755 folder)."""
    path = tmp_path / "spool" / budget_state.FILE_NAME
    standing = budget_spend.standings([LIMITS[0]], NOW)[0]
    previous = os.umask(0o022)
    try:
        budget_state.write(path, budget_state.encode([standing], NOW, stamp=1.0))
        budget_state.write(path, budget_state.encode([standing], NOW, stamp=2.0))  # replaced, still private
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
