"""Background work survives a proxy stopped while the store is away (SPEC §6), through the
real `llmtap proxy` (its writer process included): the POST is stored, then the SQLite
file is locked, the poll that finds the work done passes through, and the proxy gets
SIGTERM. The poll waits in the spool, counted in the exit report; the next start applies
it, so the one exchange ends completed with the poll's usage and price."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from sqlalchemy import select

from llmtap.analytics.pricing import Pricer
from llmtap.simulator.upstream import Upstream
from llmtap.storage import schema, spool
from llmtap.storage.engine import make_engine
from llmtap.storage.followups import FollowUp
from tests.e2e import harness
from tests.e2e.harness import Reply
from tests.helpers import free_port
from tests.storage.helpers import sqlite_exclusive, wait_until

pytestmark = pytest.mark.timeout(180)

MODEL = "gpt-4o-mini"
USAGE = {
    "input_tokens": 2048,
    "input_tokens_details": {"cached_tokens": 1024},
    "output_tokens": 512,
    "output_tokens_details": {"reasoning_tokens": 128},
    "total_tokens": 2560,
}


def _response(rid: str, status: str, **extra: Any) -> bytes:
    body = {"id": rid, "object": "response", "status": status, "background": True, "model": MODEL, "output": []}
    return json.dumps(body | extra).encode()


@pytest.fixture
def routes() -> harness.Routes:
    return harness.Routes()


@pytest.fixture
def upstream(routes: harness.Routes) -> Iterator[Upstream]:
    with Upstream(routes) as up:
        yield up


class Running:
    def __init__(self, root: Path, url: str, upstream: Upstream) -> None:
        if not harness.LLMTAP.exists():
            pytest.skip(f"the llmtap console script is not at {harness.LLMTAP}")
        self.root, self.port = root, free_port()
        self.log = root / f"proxy-{self.port}.log"
        args = [
            str(harness.LLMTAP), "proxy", "--quiet", "--db", url, "--confdir", str(root / "mitmproxy"),
            "--reverse", f"openai={self.port}", "--upstream", f"openai={upstream.url}",
        ]  # fmt: skip
        with self.log.open("wb") as sink:
            self.proc = subprocess.Popen(
                args, env=harness.clean_env(LLMTAP_HOME=str(root / "home")), stdout=subprocess.DEVNULL, stderr=sink
            )
        harness.wait_for_port(self.port, self.proc, self.log)

    def send(self, method: str, path: str, key: str, token: str, body: dict[str, Any] | None = None) -> str:
        headers = {"authorization": f"Bearer {key}", "content-type": "application/json", harness.CASE_HEADER: token}
        content = json.dumps(body).encode() if body is not None else None
        answer = httpx2.request(
            method, f"http://127.0.0.1:{self.port}{path}", content=content, headers=headers, timeout=20
        )
        assert answer.status_code == 200, answer.text
        return answer.text

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise

    def text(self) -> str:
        return self.log.read_text(errors="replace")


def test_a_poll_survives_a_proxy_stopped_while_the_store_is_away(
    tmp_path: Path, routes: harness.Routes, upstream: Upstream
) -> None:
    url = f"sqlite:///{tmp_path / 'llmtap.db'}"
    key = harness.canary(harness.OPENAI_KEY)
    rid = "resp_e2espooledpoll0001"
    queued = routes.add(Reply(status=200, content_type="application/json", chunks=[_response(rid, "queued")]))
    done_body = _response(
        rid,
        "completed",
        usage=USAGE,
        output=[{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]}],
    )
    done = routes.add(Reply(status=200, content_type="application/json", chunks=[done_body]))
    engine = make_engine(url)

    def rows() -> list[dict[str, Any]]:
        try:
            with engine.connect() as connection:
                return [dict(r._mapping) for r in connection.execute(select(schema.exchanges))]
        except Exception:  # noqa: BLE001 - not made yet
            return []

    try:
        first = Running(tmp_path, url, upstream)
        create = {"model": MODEL, "input": "Research this.", "background": True}
        first.send("POST", "/v1/responses", key, queued, create)
        assert wait_until(lambda: len(rows()) == 1, 20), first.text()
        assert rows()[0]["background_state"] == "queued"
        engine.dispose()
        with sqlite_exclusive(url):  # away until after the proxy exits
            assert "Done." in first.send("GET", f"/v1/responses/{rid}", key, done)
            code = first.stop()
        log = first.text()
        assert code == 0, log
        spool_dir = tmp_path / "home" / "spool"
        [last] = [line for line in log.splitlines() if line.startswith("llmtap: stopped: ")]
        assert f", 1 in the spool at {spool_dir} (written when the database is back)" in last, log
        (path,) = sorted(spool_dir.glob("spool-*.jsonl"))
        (waiting,) = [spool.decode_line(line) for line in path.read_bytes().splitlines() if line.strip()]
        assert isinstance(waiting, FollowUp) and waiting.route.response_id == rid
        assert key.encode() not in path.read_bytes()
        (row,) = rows()
        assert (row["background_state"], row["usage_input_tokens"]) == ("queued", None)

        second = Running(tmp_path, url, upstream)  # the store is back: the start replays
        try:
            assert wait_until(lambda: rows()[0]["background_state"] == "completed", 20), second.text()
        finally:
            assert second.stop() == 0, second.text()
        assert ", 0 in the spool at " in second.text(), second.text()  # the replay emptied it
        (row,) = rows()
        assert (row["usage_input_tokens"], row["usage_cache_read_input_tokens"], row["usage_output_tokens"]) == (
            2048,
            1024,
            512,
        )
        assert row["text"] == "Done." and row["method"] == "POST"
        alone = {**row, "price_status": None, "cost_total_pico": None, "price_reason": None}
        Pricer().price_rows([alone])
        assert row["price_status"] == "priced" and row["cost_total_pico"] == alone["cost_total_pico"] > 0
        assert not list(spool_dir.glob("spool-*.jsonl"))
    finally:
        engine.dispose()
