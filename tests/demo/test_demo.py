"""`llmtap demo` in a temporary folder: the whole job, checked by what it leaves behind,
its scenario traffic's stored verdicts against the window oracle (tests/oracles) included."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sqlalchemy import create_engine, text

from llmtap.analytics.duck import connect
from tests import oracles


def test_demo_records_reports_and_leaves_nothing_running(tmp_path: Path):
    env = dict(os.environ, LLMTAP_HOME=str(tmp_path / "user-home"), COLUMNS="160")
    env.pop("LLMTAP_DB", None)
    result = subprocess.run(
        [sys.executable, "-m", "llmtap.cli.main", "demo", "--dir", str(tmp_path / "demo")],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    for title in ("llmtap report usage", "llmtap report cost", "llmtap report cache"):
        assert title in out
    for team in ("agents", "search", "support"):
        assert team in out
    assert "Traceback" not in out + result.stderr
    folder = tmp_path / "demo"
    # the SDKs' keep-alive connections are still open when the proxy stops: cancelled, quietly
    assert "Traceback" not in (folder / "proxy.log").read_text(errors="replace")
    dashboard = folder / "llmtap-dashboard.html"
    assert dashboard.is_file() and dashboard.stat().st_size > 1_000_000
    assert str(dashboard) in out

    engine = create_engine(f"sqlite:///{folder / 'llmtap.db'}")
    with engine.connect() as connection:

        def scalar(sql: str) -> int:
            return connection.execute(text(sql)).scalar_one()

        assert scalar("SELECT count(DISTINCT team) FROM exchanges") == 3
        assert scalar("SELECT count(DISTINCT protocol) FROM exchanges") == 5
        # the reverse listeners name their provider, though the upstream is 127.0.0.1
        providers = connection.execute(text("SELECT DISTINCT provider FROM exchanges")).scalars().all()
        assert sorted(providers) == ["anthropic", "google", "openai"]
        assert scalar("SELECT count(*) FROM exchanges WHERE streamed") >= 8
        assert scalar("SELECT count(*) FROM exchanges WHERE usage_cache_read_input_tokens > 0") >= 5
        assert scalar("SELECT count(*) FROM exchanges WHERE status >= 400") >= 2
        assert scalar("SELECT count(*) FROM exchanges WHERE price_status = 'unpriced'") >= 1
        assert scalar("SELECT count(*) FROM tool_calls WHERE status = 'invalid_json'") >= 1
        assert scalar("SELECT count(*) FROM tool_calls WHERE status = 'schema_violation'") >= 1
        assert scalar("SELECT count(*) FROM exchanges WHERE decode_error IS NOT NULL") == 0
        keys = connection.execute(text("SELECT DISTINCT key_last4 FROM exchanges")).scalars().all()
        assert set(keys) <= {"0001", "0002", "0003"}
    engine.dispose()
    assert b"sk-ant-api03-demo" not in (folder / "llmtap.db").read_bytes()

    misses = subprocess.run(
        [
            sys.executable,
            "-m",
            "llmtap.cli.main",
            "report",
            "cache",
            "--list",
            "--format",
            "json",
            "--db",
            f"sqlite:///{folder / 'llmtap.db'}",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert '"system_changed"' in misses.stdout and '"tools_changed"' in misses.stdout
    # the scenario traffic's verdicts, decided by the proxy's writer as it recorded, are
    # what the window oracle decides over the whole store
    duck = connect(f"sqlite:///{folder / 'llmtap.db'}")
    try:
        assert oracles.differences(duck) == {}
        held = oracles.counts(duck)
    finally:
        duck.close()
    assert {"system_changed", "tools_changed"} <= set(held["causes"]), held
    # nothing left running: no llmtap proxy started from this folder survives
    survivors = subprocess.run(["pgrep", "-f", str(folder / "mitmproxy")], capture_output=True, text=True)
    assert survivors.stdout.strip() == ""
