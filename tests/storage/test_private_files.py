"""Everything llmtap writes is private to its user whatever the umask (SPEC §4): under
`umask 022` the real proxy, `llmtap import`, `export` and `dashboard` make llmtap's home
0700 and every file 0600 — the store and its -wal/-shm, the fingerprint secret, the CA
bundle, spool files, the rejected file, exports in every format, the dashboard.

Not responsible for what those files hold (the writer's and exporters' tests are).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmtap.simulator.upstream import Reply, Upstream
from tests.corpus_tools import CORPUS, make_har
from tests.e2e import harness
from tests.helpers import free_port, llmtap

pytestmark = pytest.mark.slow


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def assert_private(root: Path) -> None:
    """Every folder under `root` (and itself) 0700, every file 0600."""
    wrong = [
        f"{path} is {mode(path):o}"
        for path in [root, *root.rglob("*")]
        if (path.is_dir() and mode(path) != 0o700) or (path.is_file() and mode(path) != 0o600)
    ]
    assert not wrong, "; ".join(wrong)


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The common default, under which open() makes 0644 files: what a user has."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def wait_for(check, what: str, timeout: float = 30.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{what} within {timeout}s")


def test_proxy_home_store_spool_and_rejected_file_are_private(tmp_path: Path, umask_022: None) -> None:
    if shutil.which(harness.CURL) is None or not harness.LLMTAP.exists():
        pytest.skip("needs curl and the llmtap console script")
    home = tmp_path / "home"  # made by the proxy: the default store, secret, bundle, spool
    routes = harness.Routes()
    case = harness.case("a_anth_json_cache_write")
    port = free_port()
    with Upstream(routes) as upstream:
        log = tmp_path / "proxy.log"
        args = [
            str(harness.LLMTAP), "proxy", "--quiet", "--no-regular",
            "--confdir", str(tmp_path / "mitmproxy"),
            "--reverse", f"anthropic={port}", "--upstream", f"anthropic={upstream.url}",
        ]  # fmt: skip
        with log.open("wb") as err:
            proc = subprocess.Popen(
                args,
                env=harness.clean_env(LLMTAP_HOME=str(home)),
                stdout=subprocess.DEVNULL,
                stderr=err,
                cwd=tmp_path,
            )
        try:
            harness.wait_for_port(port, proc, log)
            db = home / "llmtap.db"

            def send(key: str, body: bytes | None = None) -> None:
                token = routes.add(Reply(status=200, content_type="application/json", chunks=[case.response]))
                assert case.request is not None
                harness.curl(
                    [
                        f"http://127.0.0.1:{port}/v1/messages",
                        "-H", "content-type: application/json",
                        "-H", f"{harness.CASE_HEADER}: {token}",
                        "-H", f"x-api-key: {key}",
                        "--data-binary", (body or case.request).decode(),
                    ]
                )  # fmt: skip

            def stored() -> int:
                with sqlite3.connect(db) as conn:
                    return int(conn.execute("SELECT count(*) FROM exchanges").fetchone()[0])

            send(harness.canary(harness.ANTHROPIC_KEY))
            wait_for(lambda: stored() == 1, "the first exchange was not stored")
            # the writer holds the store open: its -wal and -shm exist now
            assert (home / "llmtap.db-wal").exists() and (home / "llmtap.db-shm").exists()
            assert_private(home)

            # The database refuses an exchange for its content: it goes to rejected.jsonl.
            with sqlite3.connect(db, timeout=30) as conn:
                conn.execute(
                    "CREATE TRIGGER refuse BEFORE INSERT ON exchanges "
                    "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
                )
            send(harness.canary(harness.ANTHROPIC_KEY))
            rejected = home / "spool" / "rejected.jsonl"
            wait_for(rejected.exists, "nothing was rejected")
            assert mode(rejected) == 0o600 and mode(rejected.parent) == 0o700

            # The database locked: the next exchange waits in a spool file.
            locker = sqlite3.connect(db, timeout=30, isolation_level=None)
            locker.execute("BEGIN EXCLUSIVE")
            try:
                send(harness.canary(harness.ANTHROPIC_KEY))
                spooled = wait_for(lambda: list((home / "spool").glob("spool-*.jsonl")), "nothing was spooled")
                assert [mode(p) for p in spooled] == [0o600]
                assert_private(home)
            finally:
                locker.execute("ROLLBACK")
                locker.close()
        finally:
            proc.terminate()
            assert proc.wait(30) == 0, log.read_text()[-3000:]
    assert_private(home)


def test_import_export_and_dashboard_files_are_private(tmp_path: Path, umask_022: None) -> None:
    home = tmp_path / "home"
    env = {"LLMTAP_HOME": str(home), "LLMTAP_DB": None, "LLMTAP_CONFIG": None}
    har = tmp_path / "corpus.har"
    make_har(CORPUS, har, teams=("alpha", "beta"))
    assert llmtap("import", str(har), env=env, process=True).code == 0
    assert (home / "llmtap.db").exists()  # the default store, in llmtap's home
    assert_private(home)

    out = tmp_path / "out"
    out.mkdir()
    stale = out / "old.jsonl"  # a file there already, as open() made it: 0644
    stale.write_text("")
    assert mode(stale) == 0o644
    written = []
    for name, args in {
        "rows.jsonl": ["export", "--format", "jsonl"],
        "rows.csv": ["export", "--format", "csv"],
        "rows.parquet": ["export", "--format", "parquet"],
        "old.jsonl": ["export", "--format", "jsonl"],
        "dashboard.html": ["dashboard"],
    }.items():
        result = llmtap(*args, "-o", str(out / name), env=env, process=True)
        assert result.code == 0, result.err
        written.append(out / name)
    assert {p.name: mode(p) for p in written} == {p.name: 0o600 for p in written}
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in written)  # no staging left
    assert json.loads((out / "rows.jsonl").read_text().splitlines()[0])["id"]
    assert (out / "rows.parquet").read_bytes()[:4] == b"PAR1"
    assert_private(home)


def test_an_older_home_is_closed_and_a_shared_store_keeps_its_mode(tmp_path: Path, umask_022: None) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)  # as an older llmtap left it
    shared = tmp_path / "shared.db"  # a store an administrator shares on purpose
    sqlite3.connect(shared).close()
    os.chmod(shared, 0o640)
    env = {"LLMTAP_HOME": str(home), "LLMTAP_DB": None, "LLMTAP_CONFIG": None}
    assert llmtap("db", "upgrade", env=env, process=True).code == 0
    assert mode(home) == 0o700
    assert llmtap("db", "upgrade", "--db", f"sqlite:///{shared}", env=env, process=True).code == 0
    assert mode(shared) == 0o640
    fresh = tmp_path / "elsewhere" / "new.db"  # a new store outside the home: private too
    assert llmtap("db", "upgrade", "--db", f"sqlite:///{fresh}", env=env, process=True).code == 0
    assert mode(fresh) == 0o600 and mode(fresh.parent) == 0o700


def test_demo_folder_is_private(tmp_path: Path, umask_022: None) -> None:
    folder = tmp_path / "demo"
    result = llmtap(
        "demo", "--dir", str(folder), env={"LLMTAP_HOME": str(tmp_path / "home"), "LLMTAP_DB": None},
        process=True, timeout=240,
    )  # fmt: skip
    assert result.code == 0, result.out[-3000:] + result.err[-3000:]
    for name in ("llmtap.db", "proxy.log", "llmtap-dashboard.html"):
        assert mode(folder / name) == 0o600, name
    assert mode(folder) == 0o700
    assert_private(folder / "home")  # the demo proxy's own llmtap home
    # mitmproxy's confdir is mitmproxy's: its CA key is 0600, its certificates are public
    assert mode(folder / "mitmproxy" / "mitmproxy-ca.pem") == 0o600
