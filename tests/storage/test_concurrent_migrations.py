"""Several processes migrating one store at the same moment (a fleet of proxies starting
together): every process succeeds, each migration step ran exactly once, and the store is
at head. Real processes on a real SQLite file and a real PostgreSQL database, released
together by a start time a moment ahead.

Before `migrate.py` serialised them, the same race failed on both databases ("table
bodies already exists" on SQLite, "duplicate key value violates unique constraint
pg_type_typname_nsp_index" on PostgreSQL)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter

from llmtap.storage import migrate
from tests.storage.test_migrations import revisions

PROCESSES = 4

# One process of the race: waits for the common start time, runs `ensure_current` (what
# `llmtap proxy` and every command do on start), and prints the steps it ran itself,
# from Alembic's own log lines.
CHILD = r"""
import json, logging, sys, time
from llmtap.storage.engine import make_engine
from llmtap.storage.migrate import current, ensure_current

steps = []

class Steps(logging.Handler):
    def emit(self, record):
        message = record.getMessage()
        if message.startswith("Running upgrade"):
            steps.append(message.split("->")[-1].split(",")[0].strip())

logger = logging.getLogger("alembic.runtime.migration")
logger.setLevel(logging.INFO)
logger.addHandler(Steps())
engine = make_engine(sys.argv[1])
start = float(sys.argv[2])
while time.time() < start:
    time.sleep(0.001)
ensure_current(engine)
print(json.dumps({"steps": steps, "current": current(engine)}))
"""


def race(url: str, processes: int = PROCESSES) -> list[dict]:
    start = time.time() + 2.5  # every interpreter has imported llmtap by then
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, url, repr(start)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(processes)
    ]
    results = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err.decode()[-2000:]
        results.append(json.loads(out.decode().strip().splitlines()[-1]))
    return results


def assert_one_migration(results: list[dict], expected_steps: list[str]) -> None:
    head = migrate.heads()[0]
    assert [r["current"] for r in results] == [head] * len(results)
    ran = Counter(step for r in results for step in r["steps"])
    assert sorted(ran) == sorted(expected_steps), ran
    assert set(ran.values()) == {1}, f"a step ran more than once: {ran}"
    migrators = [r for r in results if r["steps"]]
    assert len(migrators) == 1, f"{len(migrators)} processes migrated"


def test_processes_starting_together_on_a_blank_store_migrate_it_once(db_url):
    assert_one_migration(race(db_url), revisions())
    again = race(db_url)  # now current: nobody migrates, nobody fails
    assert all(not r["steps"] for r in again)
    assert {r["current"] for r in again} == {migrate.heads()[0]}


def test_processes_starting_together_on_an_older_store_upgrade_it_once(db_url, engines):
    history = revisions()
    engine = engines(db_url)
    migrate.upgrade(engine, history[-3])
    engine.dispose()
    results = race(db_url)
    assert_one_migration(results, history[-2:])
