"""A writer that one record cannot stop (SPEC §6, issue 24), through the real `llmtap proxy`.

A record whose build overruns its deadline (a legitimately slow request, with the deadline
set low), and one whose build takes the writer process down (a request that swells to
~400 MB while it is built, on a machine whose OOM killer is played by `MemoryCeiling`), are
each stored quarantined: a decode error that says what happened, with what is known without
decoding (team, host, path, key fingerprint, status, timings). Every request behind them
is stored, the proxy never builds them in its own process and stays up, and SIGTERM says
only what is true.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from sqlalchemy import create_engine, select

from llmtap.simulator.upstream import Reply, Seen, Upstream
from llmtap.storage import schema
from llmtap.storage.secrets import KeyFingerprinter
from llmtap.workloads.costly_requests import bloating_request, slow_request
from llmtap.workloads.procfs import MemoryCeiling, rss_kb
from llmtap.workloads.proxy import Proxy
from tests.e2e import harness
from tests.storage.helpers import wait_until

BEHIND = 20  # ordinary requests sent after the bad one
REQUEST = b'{"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "hi %d"}]}'
ANSWER = (
    b'{"id": "msg_watchdog", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",'
    b' "content": [{"type": "text", "text": "hello"}], "stop_reason": "end_turn",'
    b' "usage": {"input_tokens": 12, "output_tokens": 3}}'
)
CEILING_MB = 300  # the writer process idles at ~60 MB, the proxy at ~120 MB


def reply(seen: Seen) -> Reply:
    return Reply(chunks=[ANSWER], chunked=False)  # held whole by mitmproxy: decoded in the writer


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    with Upstream(reply) as up:
        yield up


def send(proxy: Proxy, key: str, team: str, body: bytes) -> None:
    headers = {"x-api-key": key, "content-type": "application/json", "X-LLMTap-Team": team}
    url = f"http://127.0.0.1:{proxy.ports['anthropic']}/v1/messages"
    response = httpx2.post(url, content=body, headers=headers, timeout=60)
    assert response.status_code == 200 and b"msg_watchdog" in response.content


def stored(url: str) -> list[dict[str, Any]]:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return [dict(row._mapping) for row in connection.execute(select(schema.exchanges))]
    except Exception:  # noqa: BLE001 - not made yet
        return []
    finally:
        engine.dispose()


def assert_quarantined(rows: list[dict[str, Any]], folder: Path, key: str, team: str, *phrases: str) -> None:
    """Stored once, with a decode error naming what happened, and what is known without
    decoding: who, where (as the requests behind it), when, and the status."""
    (row,) = [row for row in rows if row["team"] == team]
    error = row["decode_error"] or ""
    assert "stored undecoded (quarantined)" in error, error
    for phrase in phrases:
        assert phrase in error, error
    fingerprint = KeyFingerprinter.from_file(folder / "home" / "fingerprint.secret").fingerprint(key)
    assert (row["key_fingerprint"], row["key_last4"]) == (fingerprint, key[-4:])
    behind = next(row for row in rows if row["team"] == "behind")
    assert (row["host"], row["path"], row["protocol"], row["status"]) == (
        behind["host"], "/v1/messages", "anthropic.messages", 200
    )  # fmt: skip
    assert row["started_at"] is not None and row["ended_at"] is not None


def assert_behind_all_decoded(rows: list[dict[str, Any]]) -> None:
    behind = [row for row in rows if row["team"] == "behind"]
    assert len(behind) == BEHIND
    assert {row["decode_error"] for row in behind} == {None}
    assert {row["usage_input_tokens"] for row in behind} == {12}


def assert_truthful_exit(code: int, log: str) -> None:
    assert code == 0, log[-3000:]
    assert "rows are in the spool" not in log, log[-3000:]
    assert "records are still in the spool" not in log, log[-3000:]
    assert ", 0 in the spool at " in log, log[-3000:]  # the last line: nothing waits there
    assert "Traceback" not in log, log[-3000:]


def test_a_record_that_stalls_the_writer_is_quarantined_and_the_rest_are_stored(
    tmp_path: Path, upstream: Upstream
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    proxy = Proxy(tmp_path, url, upstream.url, env={"LLMTAP_RECORD_DEADLINE": "0.5"})
    bad, good = harness.canary(harness.ANTHROPIC_KEY), harness.canary(harness.ANTHROPIC_KEY)
    try:
        send(proxy, bad, "stalls", slow_request(100_000))  # seconds of CPU to build
        for n in range(BEHIND):
            send(proxy, good, "behind", REQUEST % n)
        assert wait_until(lambda: len(stored(url)) == BEHIND + 1, 60), proxy.path.read_text()[-3000:]
    finally:
        code = proxy.stop()
    log = proxy.path.read_text(errors="replace")
    rows = stored(url)
    assert_quarantined(rows, tmp_path, bad, "stalls", "record build exceeded 0.5 s")
    assert_behind_all_decoded(rows)
    assert_truthful_exit(code, log)
    assert "quarantined" in log  # the operator is told, once
    store = b"".join(path.read_bytes() for path in tmp_path.glob("store.db*"))
    assert bad.encode() not in store and good.encode() not in store


def test_a_record_that_takes_the_writer_down_is_quarantined_and_never_built_by_the_proxy(
    tmp_path: Path, upstream: Upstream
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    proxy = Proxy(tmp_path, url, upstream.url)
    bad, good = harness.canary(harness.ANTHROPIC_KEY), harness.canary(harness.ANTHROPIC_KEY)
    pid = proxy.process.pid
    try:
        with MemoryCeiling(pid, CEILING_MB) as ceiling:
            send(proxy, bad, "bloats", bloating_request(15))
            for n in range(BEHIND):
                send(proxy, good, "behind", REQUEST % n)
            assert wait_until(lambda: len(stored(url)) == BEHIND + 1 or proxy.process.poll() is not None, 60), (
                proxy.path.read_text()[-3000:]
            )
            assert proxy.process.poll() is None, f"the proxy died:\n{proxy.path.read_text()[-3000:]}"
            peak_mb = rss_kb(pid, "VmHWM") / 1024
        assert ceiling.killed and pid not in ceiling.killed  # the writer process went down, the proxy did not
        assert peak_mb < CEILING_MB  # the proxy never built it
    finally:
        code = proxy.stop()
    log = proxy.path.read_text(errors="replace")
    rows = stored(url)
    assert_quarantined(rows, tmp_path, bad, "bloats", "SIGKILL")
    assert_behind_all_decoded(rows)
    assert_truthful_exit(code, log)
