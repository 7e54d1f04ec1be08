"""One fingerprint per store (SPEC §4), through real `llmtap proxy` processes with homes of
their own on one store: a SQLite file, and PostgreSQL too when LLMTAP_TEST_POSTGRES_URL is
set.

`llmtap fingerprint` in the first home computes the key map's entry (and so makes that
home's secret the store's); the first proxy uses it; a second proxy in a home of its own
(its own secret) is refused in one line that names the fix; once it follows it (the store's
secret file copied where the line says), the same key through either proxy has one
fingerprint, the config's key map names its team on both, and `report --by key` shows the
key once.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import pytest
from sqlalchemy import select

from llmtap.simulator.upstream import Reply, Upstream
from llmtap.storage import schema
from llmtap.storage.engine import make_engine
from tests.e2e import harness
from tests.helpers import free_port, llmtap
from tests.storage.helpers import POSTGRES_URL, fresh_postgres_database

REQUEST = json.dumps(
    {"model": "claude-sonnet-4-5-20250929", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
)


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param(
            "postgresql",
            id="postgresql",
            marks=pytest.mark.skipif(not POSTGRES_URL, reason="LLMTAP_TEST_POSTGRES_URL is not set"),
        ),
    ]
)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fleet.db'}"
        return
    with fresh_postgres_database() as url:
        yield url


@dataclass
class Node:
    """One `llmtap proxy` of the fleet: an Anthropic reverse listener, a home of its own."""

    root: Path
    url: str
    upstream: str
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def config(self) -> Path:
        return self.root / "config.toml"

    @property
    def log(self) -> Path:
        return self.root / "proxy.log"

    def env(self) -> dict[str, str]:
        return harness.clean_env(LLMTAP_HOME=str(self.home), LLMTAP_SPOOL=str(self.root / "spool"))

    def start(self) -> int | None:
        """Start it; None once it listens, else the status it exited with."""
        self.root.mkdir(parents=True, exist_ok=True)
        command = [
            str(harness.LLMTAP), "proxy", "--no-regular", "--quiet", "--db", self.url,
            "--config", str(self.config), "--confdir", str(self.root / "mitmproxy"),
            "--reverse", f"anthropic={self.port}", "--upstream", f"anthropic={self.upstream}",
        ]  # fmt: skip
        with self.log.open("wb") as sink:
            self.proc = subprocess.Popen(command, env=self.env(), stdout=sink, stderr=sink, cwd=self.root)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return self.proc.returncode
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return None
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"the proxy neither listened nor exited:\n{self.text()}")

    def send(self, key: str, token: str) -> None:
        headers = {"content-type": "application/json", "x-api-key": key, harness.CASE_HEADER: token}
        answer = httpx2.post(f"http://127.0.0.1:{self.port}/v1/messages", content=REQUEST, headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(60)

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def rows_of(url: str, last4: str, expected: int, timeout: float = 20.0) -> list[dict[str, object]]:
    engine = make_engine(url)
    ex = schema.exchanges
    try:
        deadline = time.monotonic() + timeout
        while True:
            with engine.connect() as connection:
                found = connection.execute(select(ex).where(ex.c.key_last4 == last4).order_by(ex.c.id)).mappings()
                rows = [dict(row) for row in found]
            if len(rows) >= expected or time.monotonic() > deadline:
                assert len(rows) == expected, rows
                return rows
            time.sleep(0.05)
    finally:
        engine.dispose()


@pytest.mark.timeout(240)
def test_a_fleet_on_one_store_fingerprints_a_key_once(store_url: str, tmp_path: Path, routes: harness.Routes) -> None:
    if not harness.LLMTAP.exists():
        pytest.skip(f"the llmtap console script is not at {harness.LLMTAP}")
    key = harness.canary(harness.ANTHROPIC_KEY)
    token = routes.add(Reply(200, chunks=[harness.case("a_anth_json_cache_write").response]))
    with Upstream(routes) as upstream:
        first = Node(tmp_path / "a", store_url, upstream.url)
        second = Node(tmp_path / "b", store_url, upstream.url)
        # the key map's entry, computed where the first proxy runs (README: One fingerprint per store)
        printed = llmtap("fingerprint", "--db", store_url, env={"LLMTAP_HOME": str(first.home)}, stdin=key + "\n")
        assert printed.code == 0, printed.err
        assert key not in printed.out + printed.err
        fingerprint = printed.out.split('"')[1]
        for node in (first, second):
            node.root.mkdir(parents=True, exist_ok=True)
            node.config.write_text(f'[teams]\n"{fingerprint}" = "search"\n')
        try:
            assert first.start() is None, first.text()
            first.send(key, token)

            # a second home, its own secret: refused in one line that says what to do
            code = second.start()
            assert code == 2, f"a proxy with a secret of its own wrote to the store:\n{second.text()}"
            lines = second.text().strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("llmtap: error:"), lines
            named = second.home / "fingerprint.secret"
            assert str(named) in lines[0] and "secret_file" in lines[0], lines[0]
            assert rows_of(store_url, key[-4:], 1)

            # the fix it names: the store's secret file, copied to that path
            named.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            shutil.copyfile(first.home / "fingerprint.secret", named)
            assert second.start() is None, second.text()
            second.send(key, token)
            rows = rows_of(store_url, key[-4:], 2)
        finally:
            codes = [node.stop() for node in (first, second) if node.proc is not None]
    assert {row["key_fingerprint"] for row in rows} == {fingerprint}
    assert [(row["team"], row["attribution"]) for row in rows] == [("search", "key_map")] * 2
    assert codes[0] == 0 and codes[-1] == 0, first.text() + second.text()
    report = llmtap("report", "usage", "--by", "key", "--format", "json", "--db", store_url)
    assert report.code == 0, report.err
    groups = [row for row in report.json() if key[-4:] in str(row["key"])]
    assert groups and fingerprint[:8] in groups[0]["key"], report.out
    assert len(groups) == 1 and groups[0]["requests"] == 2, report.out
