"""The recorder as a plain mitmdump script (`mitmdump -s …/llmtap/cli/mitmdump_script.py`):
a user's own mitmdump records, prices and attributes like `llmtap proxy` does, and a
SIGTERM writes everything before it exits."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx2
from sqlalchemy import select

import llmtap.cli.mitmdump_script as script
from llmtap.simulator.upstream import Upstream
from llmtap.storage import schema
from llmtap.storage.engine import make_engine
from tests.e2e import harness
from tests.helpers import free_port

MITMDUMP = Path(sys.executable).parent / "mitmdump"


def test_plain_mitmdump_records_and_prices(tmp_path: Path, routes: harness.Routes) -> None:
    case = harness.case("a_anth_json_cache_write")
    token = routes.add(harness.json_reply(case))
    db, port = tmp_path / "store.db", free_port()
    with Upstream(routes) as upstream:
        args = [
            str(MITMDUMP), "-q", "-s", script.__file__,
            "--mode", f"reverse:{upstream.url}@127.0.0.1:{port}",
            "--set", f"confdir={tmp_path / 'mitmproxy'}",
            "--set", f"llmtap_db=sqlite:///{db}",
            "--set", f"llmtap_home={tmp_path / 'home'}",
            "--set", f"llmtap_listener_teams={port}=team-script",
        ]  # fmt: skip
        log = tmp_path / "mitmdump.log"
        with log.open("wb") as sink:
            proc = subprocess.Popen(args, env=harness.clean_env(), stdout=sink, stderr=subprocess.STDOUT)
        try:
            harness.wait_for_port(port, proc, log)
            answer = httpx2.post(
                f"http://127.0.0.1:{port}/v1/messages",
                content=case.request,
                headers={"content-type": "application/json", harness.CASE_HEADER: token, "x-api-key": "sk-ant-x"},
                timeout=10,
            )
            assert answer.content == case.response
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0, log.read_text()[-3000:]

    engine = make_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as connection:
            (row,) = connection.execute(select(schema.exchanges)).mappings()
    finally:
        engine.dispose()
    assert (row["protocol"], row["team"], row["status"]) == ("anthropic.messages", "team-script", 200)
    assert row["usage_input_tokens"] == case.expect["usage"]["input_tokens"]
    assert row["price_status"] == "priced" and row["cost_total_pico"] > 0
    assert "Traceback" not in log.read_text()
