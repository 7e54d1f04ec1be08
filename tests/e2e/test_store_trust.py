"""Exactly once, and store faults told to somebody, through the real `llmtap proxy` (SPEC §6,
issue 13): three teams' requests that an upstream answers with one response id are three
records; a SQLite file deleted, or a PostgreSQL database dropped and made again, under a
running proxy gets the later records (spooled, then written into the store made again),
with a line in the log; a proxy stopped with records in the spool says how many and where;
a database away while the spool's disk refuses too is a line when it goes and one when it
is back, not a traceback nor a line per batch (issue 24).
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest
from sqlalchemy import Engine, create_engine, func, select, text
from sqlalchemy.engine import make_url

from llmtap.simulator.upstream import Upstream
from llmtap.storage import schema
from llmtap.storage.engine import make_engine
from llmtap.workloads.network import Forwarder
from tests.e2e import harness
from tests.e2e.harness import Proxy, Reply
from tests.helpers import free_port
from tests.storage.helpers import POSTGRES_URL, fresh_postgres_database, sqlite_exclusive, wait_until

SAME_ID = "msg_01E2ESAMEIDFROMAGATEWAY"
REQUEST = '{"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "hi %s"}]}'


def answer(n: int) -> bytes:
    return (
        b'{"id": "' + SAME_ID.encode() + b'", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",'
        b' "content": [{"type": "text", "text": "hello %d"}], "stop_reason": "end_turn",'
        b' "usage": {"input_tokens": 12, "output_tokens": 3}}' % n
    )


def send(base: str, token: str, key: str, team: str, n: int) -> None:
    headers = {"x-api-key": key, "content-type": "application/json", harness.CASE_HEADER: token, "X-LLMTap-Team": team}
    response = httpx2.post(f"{base}/v1/messages", content=REQUEST % n, headers=headers, timeout=20)
    assert response.status_code == 200 and SAME_ID in response.text


def test_three_teams_answered_with_one_response_id_are_three_records(proxy: Proxy) -> None:
    key = proxy.key(harness.ANTHROPIC_KEY)
    token = proxy.routes.add(Reply(chunks=[answer(0)]))
    for n, team in enumerate(("search", "agents", "support")):
        send(proxy.base("anthropic"), token, key, team, n)
    assert wait_until(lambda: len(proxy.rows(key)) >= 3, 15)
    rows = proxy.rows(key)
    assert sorted(r["team"] for r in rows) == ["agents", "search", "support"]
    assert {r["response_id"] for r in rows} == {SAME_ID}


# -- a proxy of its own per test --------------------------------------------------------------


@dataclass
class OwnProxy:
    root: Path
    url: str
    port: int
    proc: subprocess.Popen[bytes]

    @property
    def log(self) -> Path:
        return self.root / "proxy.log"

    @property
    def spool(self) -> Path:
        return self.root / "home" / "spool"

    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise

    def text(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture
def own_routes() -> harness.Routes:
    return harness.Routes()


@pytest.fixture
def own_upstream(own_routes: harness.Routes) -> Iterator[Upstream]:
    with Upstream(own_routes) as up:
        yield up


def start(root: Path, url: str, upstream: Upstream, **env: str) -> OwnProxy:
    if not harness.LLMTAP.exists():
        pytest.skip(f"the llmtap console script is not at {harness.LLMTAP}")
    port = free_port()
    args = [
        str(harness.LLMTAP), "proxy", "--quiet", "--db", url, "--confdir", str(root / "mitmproxy"),
        "--reverse", f"anthropic={port}", "--upstream", f"anthropic={upstream.url}",
    ]  # fmt: skip
    with (root / "proxy.log").open("wb") as log:
        proc = subprocess.Popen(
            args, env=harness.clean_env(LLMTAP_HOME=str(root / "home"), **env), stdout=subprocess.DEVNULL, stderr=log
        )
    own = OwnProxy(root, url, port, proc)
    harness.wait_for_port(port, proc, own.log)
    return own


def ids(engine: Engine) -> list[str]:
    try:
        with engine.connect() as connection:
            return list(connection.execute(select(schema.exchanges.c.id)).scalars())
    except Exception:  # noqa: BLE001 - the store is being made again
        return []


def teams(engine: Engine) -> list[str]:
    with engine.connect() as connection:
        return sorted(connection.execute(select(schema.exchanges.c.team)).scalars())


def test_a_sqlite_file_deleted_under_the_proxy_is_made_again(tmp_path: Path, own_routes, own_upstream) -> None:
    db = tmp_path / "llmtap.db"
    own = start(tmp_path, f"sqlite:///{db}", own_upstream)
    token = own_routes.add(Reply(chunks=[answer(0)]))
    key = harness.canary(harness.ANTHROPIC_KEY)
    engine = make_engine(f"sqlite:///{db}")
    try:
        send(own.base(), token, key, "before", 0)
        assert wait_until(lambda: len(ids(engine)) == 1, 15), own.text()
        engine.dispose()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        for n in range(1, 4):
            send(own.base(), token, key, "after", n)
        assert wait_until(lambda: db.exists() and len(ids(engine)) == 3, 20), own.text()
        assert teams(engine) == ["after"] * 3
    finally:
        engine.dispose()
        code = own.stop()
    log = own.text()
    assert code == 0, log
    assert "the store is gone" in log and "made the store again" in log, log
    assert "Traceback" not in log
    assert not (own.spool / "rejected.jsonl").exists()


@pytest.mark.skipif(not POSTGRES_URL, reason="LLMTAP_TEST_POSTGRES_URL is not set")
def test_a_postgres_database_dropped_and_made_again_under_the_proxy_is_migrated(
    tmp_path: Path, own_routes, own_upstream
) -> None:
    with fresh_postgres_database() as url:
        name = make_url(url).database
        own = start(tmp_path, url, own_upstream)
        token = own_routes.add(Reply(chunks=[answer(0)]))
        key = harness.canary(harness.ANTHROPIC_KEY)
        engine = make_engine(url)
        admin = create_engine(make_url(url).set(database="postgres"), isolation_level="AUTOCOMMIT")
        try:
            send(own.base(), token, key, "before", 0)
            assert wait_until(lambda: len(ids(engine)) == 1, 15), own.text()
            engine.dispose()
            with admin.connect() as connection:
                connection.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
                connection.execute(text(f'CREATE DATABASE "{name}"'))
            for n in range(1, 4):
                send(own.base(), token, key, "after", n)
            assert wait_until(lambda: len(ids(engine)) == 3, 30), own.text()
            assert teams(engine) == ["after"] * 3
        finally:
            engine.dispose()
            admin.dispose()
            code = own.stop()
        log = own.text()
        assert code == 0, log
        assert "the store is gone" in log, log
        assert not (own.spool / "rejected.jsonl").exists(), (own.spool / "rejected.jsonl").read_text()


def test_a_proxy_stopped_with_records_in_the_spool_says_so(tmp_path: Path, own_routes, own_upstream) -> None:
    db = tmp_path / "llmtap.db"
    url = f"sqlite:///{db}"
    own = start(tmp_path, url, own_upstream)
    token = own_routes.add(Reply(chunks=[answer(0)]))
    key = harness.canary(harness.ANTHROPIC_KEY)
    with sqlite_exclusive(url):  # the database stays away until after the proxy exits
        for n in range(4):
            send(own.base(), token, key, "spooled", n)
        code = own.stop()
    log = own.text()
    assert code == 0, log
    # the proxy's last line, in exact counts (issue 26)
    line = (
        f"llmtap: stopped: 0 records written to the store this run, 4 in the spool at {own.spool} "
        "(written when the database is back), 0 rejected"
    )
    assert log.strip().splitlines()[-1] == line, log
    # and they are: the next start writes them
    again = start(tmp_path, url, own_upstream)
    engine = make_engine(url)
    try:
        assert wait_until(lambda: len(ids(engine)) == 4, 20), again.text()
    finally:
        engine.dispose()
        assert again.stop() == 0
    last = again.text().strip().splitlines()[-1]
    assert (
        last == f"llmtap: stopped: 4 records written to the store this run, 0 in the spool at {own.spool}, 0 rejected"
    )
    with create_engine(url).connect() as connection:
        assert connection.execute(select(func.count()).select_from(schema.exchanges)).scalar_one() == 4


@pytest.mark.skipif(not POSTGRES_URL, reason="LLMTAP_TEST_POSTGRES_URL is not set")
def test_a_database_outage_with_the_spool_refusing_too_is_a_line_each_way(
    tmp_path: Path, own_routes, own_upstream
) -> None:
    """PostgreSQL behind a TCP forwarder that refuses every connection for a while, and a
    spool the disk refuses (its folder under a regular file: any OSError is the same path as
    a full disk's). Before: the pricer's 100-line traceback and a "cannot spool" line per
    batch. Now: one line as the store goes (with the reason), one as the spool refuses (with
    how many records are held in memory), one as it is back; every record stored."""
    (tmp_path / "afile").write_text("not a folder\n")
    with fresh_postgres_database() as url:
        forwarder = Forwarder(("127.0.0.1", make_url(url).port or 5432))
        proxied = make_url(url).set(host="127.0.0.1", port=forwarder.port).render_as_string(hide_password=False)
        own = start(tmp_path, proxied, own_upstream, LLMTAP_SPOOL=str(tmp_path / "afile" / "spool"))
        token = own_routes.add(Reply(chunks=[answer(0)]))
        key = harness.canary(harness.ANTHROPIC_KEY)
        engine = make_engine(url)
        try:
            forwarder.stop()
            send(own.base(), token, key, "away", 0)
            assert wait_until(lambda: "database unavailable" in own.text(), 30), own.text()  # the writer is up
            for n in range(1, 6):  # a batch each, while the store is away and the disk refuses
                send(own.base(), token, key, "away", n)
                time.sleep(0.3)
            forwarder.start()
            send(own.base(), token, key, "back", 6)
            assert wait_until(lambda: len(ids(engine)) == 7, 30), own.text()
        finally:
            engine.dispose()
            code = own.stop()
            forwarder.stop()
    log = own.text()
    assert code == 0, log
    assert "Traceback" not in log, log
    lines = [line for line in log.splitlines() if line.strip()]
    assert len([line for line in lines if "database unavailable" in line]) == 1, log
    assert len([line for line in lines if "cannot spool" in line]) == 1, log
    assert len([line for line in lines if "database is back" in line]) == 1, log
    assert len(lines) <= 6, log
