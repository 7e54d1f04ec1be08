"""`llmtap prune` cannot destroy a store by accident (issue 14): a bare `m` is refused, not
read as minutes; `--dry-run` deletes nothing and counts exactly what a real prune then
deletes; more than 1,000 exchanges need `--yes` (or a y at a terminal); `mo` and `y` are
calendar months and years at month ends. Through the CLI on SQLite and PostgreSQL.

Not responsible for what pruning keeps consistent beyond the counts (test_import.py checks
the bodies a prune leaves, test_facts.py the report copies)."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from llmtap.cli.timeargs import before, months_back
from llmtap.storage import schema
from llmtap.storage.writer import Writer
from tests.helpers import CONSOLE_SCRIPT, llmtap
from tests.storage.helpers import count, exchange_ids, make_record

pytestmark = pytest.mark.timeout(300)

NUMBERS = re.compile(r"prune[d]? ([\d,]+) exchanges .* and ([\d,]+) unused bodies")


def fill(engine: Engine, spool: Path, ages: list[timedelta], *, bodies: bool = False) -> list[str]:
    """Store one exchange per age back from now through the real writer; their ids. With
    `bodies`, each keeps its request and response (body mode full): a shared first message
    and one of its own, so a prune leaves some bodies used and frees others."""
    now = datetime.now(UTC)
    writer = Writer(engine, spool_dir=spool, body_mode="full" if bodies else "metadata", max_delay=0.01)
    records = []
    for index, age in enumerate(ages):
        record = make_record(index, started_at=now - age)
        if bodies:
            messages = [{"role": "user", "content": "shared by every age"}, {"role": "user", "content": f"own {index}"}]
            record.request_body = json.dumps({"model": "claude-test", "messages": messages}).encode()
            record.response_body = json.dumps({"id": f"msg_{index}", "content": [{"text": f"own {index}"}]}).encode()
        writer.submit(record)
        records.append(record)
    assert writer.close(), "the writer did not finish"
    return [r.id for r in records]


def numbers(out: str) -> tuple[int, int]:
    """(exchanges, bodies) a prune or dry run reported."""
    found = NUMBERS.search(out)
    assert found, out
    return int(found.group(1).replace(",", "")), int(found.group(2).replace(",", ""))


def one_line_error(result) -> str:
    assert result.code != 0, result.out
    assert len(result.err.strip().splitlines()) == 1, result.err
    return result.err


# -- a bare m ---------------------------------------------------------------------------------


def test_a_bare_m_is_refused_and_nothing_is_deleted(store, db_url, spool_dir):
    # Read as minutes, 1m would delete all three; read as a month, the two oldest.
    fill(store, spool_dir, [timedelta(minutes=5), timedelta(days=40), timedelta(days=400)])
    for value in ("1m", "90m", " 3 m "):
        err = one_line_error(llmtap("prune", "--older-than", value, "--db", db_url))
        assert "mo" in err and "min" in err and "ambiguous" in err, err
    assert count(store) == 3
    for command in (("log",), ("export",), ("report", "usage")):  # an age elsewhere too
        err = one_line_error(llmtap(*command, "--since", "1m", "--db", db_url))
        assert "1mo" in err and "1min" in err, err
    done = llmtap("prune", "--older-than", "1mo", "--db", db_url)
    assert done.code == 0, done.err
    assert numbers(done.out)[0] == 2 and count(store) == 1
    assert llmtap("log", "--since", "10min", "--db", db_url).code == 0  # minutes are `min`


# -- dry run ----------------------------------------------------------------------------------


def test_dry_run_deletes_nothing_and_counts_what_prune_then_deletes(store, db_url, spool_dir):
    ages = [timedelta(days=31 + i) for i in range(7)] + [timedelta(hours=i + 1) for i in range(4)]
    ids = fill(store, spool_dir, ages, bodies=True)
    before_counts = (count(store), count(store, schema.bodies), count(store, schema.body_refs))

    dry = llmtap("prune", "--older-than", "30d", "--dry-run", "--db", db_url)
    assert dry.code == 0, dry.err
    assert dry.out.startswith("would prune") and "nothing deleted" in dry.out
    assert (count(store), count(store, schema.bodies), count(store, schema.body_refs)) == before_counts
    planned = numbers(dry.out)
    assert planned[0] == 7
    with store.connect() as connection:  # the range it names is the oldest and newest of those
        first, last = connection.execute(
            select(func.min(schema.exchanges.c.started_at), func.max(schema.exchanges.c.started_at)).where(
                schema.exchanges.c.id.in_(ids[:7])
            )
        ).one()
    assert f"started {first:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M} UTC" in dry.out

    bodies_before = count(store, schema.bodies)
    real = llmtap("prune", "--older-than", "30d", "--db", db_url)
    assert real.code == 0, real.err
    assert numbers(real.out) == planned
    assert bodies_before - count(store, schema.bodies) == planned[1] > 0
    assert sorted(exchange_ids(store)) == sorted(ids[7:])


# -- more than 1,000 --------------------------------------------------------------------------


@pytest.mark.parametrize("old", [1000, 1001])
def test_over_a_thousand_needs_yes(store, db_url, spool_dir, old):
    fill(store, spool_dir, [timedelta(days=60, seconds=i) for i in range(old)] + [timedelta(hours=1)])
    plain = llmtap("prune", "--older-than", "30d", "--db", db_url)  # stdin is no terminal here
    if old <= 1000:
        assert plain.code == 0, plain.err
        assert numbers(plain.out)[0] == old and count(store) == 1
        return
    err = one_line_error(plain)
    assert "1,001 exchanges" in err and "--yes" in err, err
    assert count(store) == old + 1
    agreed = llmtap("prune", "--older-than", "30d", "--yes", "--db", db_url)
    assert agreed.code == 0, agreed.err
    assert numbers(agreed.out)[0] == old and count(store) == 1


def _at_a_terminal(args: list[str], answer: bytes) -> tuple[int, str]:
    """Run llmtap as a process whose stdin is a terminal (a pty) and type `answer`."""
    controller, terminal = pty.openpty()
    command = [str(CONSOLE_SCRIPT)] if CONSOLE_SCRIPT.exists() else [sys.executable, "-m", "llmtap.cli.main"]
    try:
        pipe = subprocess.PIPE
        with subprocess.Popen([*command, *args], stdin=terminal, stdout=pipe, stderr=pipe) as child:
            os.write(controller, answer)
            out, err = child.communicate(timeout=120)
    finally:
        os.close(controller)
        os.close(terminal)
    return child.returncode, (out + err).decode()


def test_a_terminal_is_asked_and_no_is_no(store, db_url, spool_dir):
    fill(store, spool_dir, [timedelta(days=60, seconds=i) for i in range(1001)])
    code, said = _at_a_terminal(["prune", "--older-than", "30d", "--db", db_url], b"n\n")
    assert code != 0 and "[y/N]" in said and "1,001 exchanges" in said, said
    assert count(store) == 1001
    code, said = _at_a_terminal(["prune", "--older-than", "30d", "--db", db_url], b"y\n")
    assert code == 0, said
    assert count(store) == 0


# -- calendar months and years ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("now", "age", "expected"),
    [
        (datetime(2026, 3, 31, 12, 30, tzinfo=UTC), "1mo", datetime(2026, 2, 28, 12, 30, tzinfo=UTC)),
        (datetime(2024, 3, 31, tzinfo=UTC), "1mo", datetime(2024, 2, 29, tzinfo=UTC)),  # leap year
        (datetime(2026, 5, 31, tzinfo=UTC), "3mo", datetime(2026, 2, 28, tzinfo=UTC)),
        (datetime(2026, 7, 31, tzinfo=UTC), "1mo", datetime(2026, 6, 30, tzinfo=UTC)),
        (datetime(2026, 1, 15, tzinfo=UTC), "13mo", datetime(2024, 12, 15, tzinfo=UTC)),
        (datetime(2024, 2, 29, tzinfo=UTC), "1y", datetime(2023, 2, 28, tzinfo=UTC)),
        (datetime(2028, 2, 29, tzinfo=UTC), "4y", datetime(2024, 2, 29, tzinfo=UTC)),
        (datetime(2026, 12, 1, tzinfo=UTC), "12mo", datetime(2025, 12, 1, tzinfo=UTC)),
        (datetime(2026, 3, 31, tzinfo=UTC), "2w", datetime(2026, 3, 17, tzinfo=UTC)),
        (datetime(2026, 3, 31, tzinfo=UTC), "90min", datetime(2026, 3, 30, 22, 30, tzinfo=UTC)),
    ],
)
def test_months_and_years_are_calendar_ones(now, age, expected):
    assert before(age, now) == expected


def test_month_arithmetic_never_leaves_the_month():
    start = datetime(2023, 1, 31, 8, tzinfo=UTC)
    for months in range(60):
        back = months_back(start, months)
        # the same day, or the last day of a shorter month; the time of day kept
        assert back.day == 31 or (back + timedelta(days=1)).day == 1, back
        assert (back.hour, back.tzinfo) == (8, UTC)
        assert (start.year * 12 + start.month) - (back.year * 12 + back.month) == months


def test_months_back_through_the_cli(store, db_url, spool_dir):
    # One day each side of one calendar month back from now: only the older one goes.
    now = datetime.now(UTC)
    edge = months_back(now, 1)
    ids = fill(store, spool_dir, [now - edge - timedelta(days=1), now - edge + timedelta(days=1)])  # kept, gone
    result = llmtap("prune", "--older-than", "1mo", "--db", db_url)
    assert result.code == 0, result.err
    assert exchange_ids(store) == [ids[0]]
    for value in ("1.5mo", "0.5y"):
        assert "whole numbers" in one_line_error(llmtap("prune", "--older-than", value, "--db", db_url))
