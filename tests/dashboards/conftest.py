"""A store filled from a HAR of the recorded corpus, one of whose teams is named
`<script>alert(1)</script>`, and a real headless Chromium to look at the dashboard."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import quote, unquote

import pytest

from tests.corpus_tools import CORPUS, make_har
from tests.helpers import llmtap

HOSTILE_TEAM = "<script>alert(1)</script>"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
BROWSER_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="session")
def filled_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, str]]:
    folder = tmp_path_factory.mktemp("dashboard")
    har = folder / "corpus.har"
    make_har(CORPUS, har, teams=(HOSTILE_TEAM, "beta", "gamma"))
    env = dict(os.environ, LLMTAP_HOME=str(folder / "home"))
    env.pop("LLMTAP_CONFIG", None)
    url = f"sqlite:///{folder / 'store.db'}"
    assert llmtap("import", str(har), "--db", url, env=env, process=True).code == 0
    return url, env


@dataclass(frozen=True)
class Served:
    """A running `llmtap dashboard --serve`: its address and the token it printed (the
    stores here are 0600, so a loopback server asks for one)."""

    base: str
    token: str | None

    @property
    def first(self) -> str:
        """The URL to open first: with the token, which the server turns into a cookie."""
        return self.base + (f"?token={quote(self.token)}" if self.token else "")

    def fetch(self, path: str, timeout: float = 60) -> bytes:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        with urllib.request.urlopen(urllib.request.Request(self.base + path, headers=headers), timeout=timeout) as r:
            return r.read()


@contextmanager
def serving(url: str, env: dict[str, str]) -> Iterator[Served]:
    """A real `llmtap dashboard --serve` on a free port of 127.0.0.1."""
    process = subprocess.Popen(
        [sys.executable, "-m", "llmtap.cli.main", "dashboard", "--serve", "--port", "0", "--db", url],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+/)(?:\?token=(\S+))?", line)
        assert match, line
        yield Served(match.group(1), unquote(match.group(2)) if match.group(2) else None)
    finally:
        process.terminate()
        process.wait(timeout=20)
        if process.stderr is not None:
            process.stderr.close()


@pytest.fixture(scope="module")
def browser():
    """Chromium for one test file. Not for the session: playwright's sync API keeps its
    event loop marked running on this thread while it is open, so every later file on
    the same worker that runs asyncio (mitmproxy's test context, asyncio.run) would find
    a loop "already running"."""
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (.ci/run installs Debian's chromium package)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        yield instance
        instance.close()


SYNTHETIC_ROWS = 3000  # a test-size store: the 1M one is bench/reports.py's


@pytest.fixture(scope="session")
def synthetic_store(tmp_path_factory: pytest.TempPathFactory):
    """make(days) -> (url, env): SYNTHETIC_ROWS exchanges of workloads/synthetic.py's 25 teams
    spread over `days`, priced, at the schema's head; one store per span per session."""
    from llmtap.analytics.pricing import Pricer
    from llmtap.storage.engine import make_engine
    from llmtap.storage.migrate import upgrade
    from llmtap.workloads.synthetic import fill

    made: dict[float, tuple[str, dict[str, str]]] = {}

    def make(days: float) -> tuple[str, dict[str, str]]:
        if days not in made:
            folder = tmp_path_factory.mktemp(f"synthetic-{days:g}d")
            url = f"sqlite:///{folder / 'store.db'}"
            engine = make_engine(url)
            try:
                upgrade(engine)
                fill([engine], SYNTHETIC_ROWS, Pricer(), days=days)
            finally:
                engine.dispose()
            env = dict(os.environ, LLMTAP_HOME=str(folder / "home"))
            env.pop("LLMTAP_CONFIG", None)
            made[days] = (url, env)
        return made[days]

    return make
