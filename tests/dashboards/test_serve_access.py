"""Who the served dashboard answers (SPEC §6), through a real `llmtap dashboard --serve`
and raw HTTP: it binds 127.0.0.1 only; a request whose `Host` names anything but the
address it serves (a web page that rebound its DNS name to 127.0.0.1) gets a 421 and
no data; with a token, a request without it gets a 401 and the token in the URL becomes
a cookie. Off loopback a token is always required, and on loopback when the store is
private to its user (another local user must not read through the server what the 0600
file keeps from them).

Not responsible for what the pages show (test_dashboard.py).
"""

from __future__ import annotations

import http.client
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote

import pytest

from llmtap.storage.access import admission
from tests.dashboards.conftest import HOSTILE_TEAM

PATHS = ("/", "/index.html", "/data.json", "/log.json?search=Paris", "/exchange/0", "/conversation/0")


@contextmanager
def served(url: str, env: dict[str, str], *args: str) -> Iterator[tuple[int, str]]:
    """A real `llmtap dashboard --serve` on a free port: (port, the lines it printed)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "llmtap.cli.main", "dashboard", "--serve", "--port", "0", "--db", url, *args],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert match, line
        if "?token=" in line:  # and the line that says why
            line += process.stderr.readline()
        yield int(match.group(1)), line
    finally:
        process.terminate()
        process.wait(timeout=20)
        assert process.stderr is not None
        process.stderr.close()


def get(port: int, path: str, host: str | None, headers: dict[str, str] | None = None) -> tuple[int, dict, bytes]:
    """One GET with exactly this Host header (None: none at all), as a browser whose page
    rebound its DNS name to 127.0.0.1 would send it."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
        if host is not None:
            connection.putheader("Host", host)
        for name, value in (headers or {}).items():
            connection.putheader(name, value)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def token_of(line: str) -> dict[str, str]:
    """The headers that carry the token the server printed (Prometheus' way: a bearer)."""
    match = re.search(r"\?token=(\S+)", line)
    assert match, line
    return {"Authorization": f"Bearer {unquote(match.group(1))}"}


def assert_no_data(body: bytes) -> None:
    for secret in (b"totals", b"Paris", b"beta", b"gamma", HOSTILE_TEAM.encode(), b"claude", b"gpt"):
        assert secret not in body, secret


def test_served_on_127_0_0_1_only(filled_store) -> None:
    url, env = filled_store
    with served(url, env) as (port, line):
        assert get(port, "/data.json", f"127.0.0.1:{port}", token_of(line))[0] == 200
        with pytest.raises(OSError):  # not 0.0.0.0: another loopback address finds nobody
            socket.create_connection(("127.0.0.2", port), timeout=5).close()


FOREIGN = (
    "attacker.example:{port}", "attacker.example", "127.0.0.1.nip.io:{port}", "localhost.:{port}", "127.0.0.1",
    "127.0.0.1:1", "localhost:{other}", "[::1]:{port}", "", None,
)  # fmt: skip


def test_a_foreign_host_gets_no_data(filled_store) -> None:
    url, env = filled_store
    with served(url, env) as (port, _):
        for host in FOREIGN:
            forged = None if host is None else host.format(port=port, other=port + 1)
            for path in PATHS:
                status, _, body = get(port, path, forged)
                assert status == 421, (path, forged, status)
                assert_no_data(body)


def test_the_names_it_serves_are_answered(filled_store) -> None:
    url, env = filled_store
    with served(url, env) as (port, line):
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}"):
            status, _, body = get(port, "/data.json", host, token_of(line))
            assert status == 200 and b'"totals"' in body, host


def test_a_token_is_asked_for_and_becomes_a_cookie(filled_store) -> None:
    url, env = filled_store
    token = "t0ken-of-the-test"
    with served(url, {**env, "LLMTAP_DASHBOARD_TOKEN": token}) as (port, line):
        assert f"?token={token}" in line
        host = f"127.0.0.1:{port}"
        for path in PATHS:
            for headers in ({}, {"Cookie": "llmtap_token=wrong"}, {"Authorization": "Bearer wrong"}):
                status, _, body = get(port, path, host, headers)
                assert status == 401, (path, headers)
                assert_no_data(body)
            status, _, body = get(port, path + ("&" if "?" in path else "?") + "token=wrong", host)
            assert status == 401
            assert_no_data(body)
        status, headers, body = get(port, f"/?token={token}", host)
        assert status == 200 and b"<!doctype html>" in body
        cookie = headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        status, _, body = get(port, "/data.json", host, {"Cookie": cookie.split(";")[0]})
        assert status == 200 and b'"totals"' in body
        assert get(port, "/data.json", host, {"Authorization": f"Bearer {token}"})[0] == 200
        # the token does not make a foreign name ours
        assert get(port, f"/data.json?token={token}", f"attacker.example:{port}")[0] == 421


def test_a_private_store_asks_for_a_token_on_loopback_too(filled_store) -> None:
    """The store llmtap made is 0600: another local user cannot open it, so the server on
    127.0.0.1 must not hand it to them either (any local user can connect to it)."""
    url, env = filled_store
    assert stat.S_IMODE(os.stat(url.removeprefix("sqlite:///")).st_mode) == 0o600
    with served(url, env) as (port, line):
        assert "?token=" in line and "private to its user" in line, line
        host = f"127.0.0.1:{port}"
        for path in PATHS:
            status, _, body = get(port, path, host)
            assert status == 401, (path, status)
            assert_no_data(body)
        status, _, body = get(port, "/data.json", host, token_of(line))
        assert status == 200 and b'"totals"' in body


@pytest.fixture
def shared_store(filled_store) -> Iterator[tuple[str, dict[str, str]]]:
    """A copy of the store that every local user may read (0644, in a folder others may
    enter), as an administrator might share one on purpose."""
    url, env = filled_store
    folder = Path(tempfile.mkdtemp(prefix="llmtap-shared-", dir="/tmp"))
    try:
        os.chmod(folder, 0o755)
        copy = folder / "store.db"
        shutil.copyfile(url.removeprefix("sqlite:///"), copy)
        os.chmod(copy, 0o644)
        yield f"sqlite:///{copy}", env
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_store_everyone_may_read_is_served_on_loopback_without_a_token(shared_store) -> None:
    url, env = shared_store
    with served(url, env) as (port, line):
        assert "?token=" not in line, line
        status, _, body = get(port, "/data.json", f"127.0.0.1:{port}")
        assert status == 200 and b'"totals"' in body


def test_off_loopback_a_token_is_always_required() -> None:
    # The rules the server applies once bound (binding 0.0.0.0 itself would leave 127.0.0.1).
    anywhere = admission("0.0.0.0", 8765, "0.0.0.0", None, private=False)
    assert anywhere.token and len(anywhere.token) >= 24 and anywhere.any_address
    assert admission("0.0.0.0", 8765, "0.0.0.0", None, private=False).token != anywhere.token  # made per start
    assert admission("192.0.2.7", 8765, "192.0.2.7", "given", private=False).token == "given"
    assert admission("127.0.0.1", 8765, "localhost", None, private=False).token is None
    assert admission("127.0.0.1", 8765, "localhost", None, private=True).token
    assert admission("::1", 8765, "::1", None, private=False).hosts == {"localhost:8765", "[::1]:8765"}
    assert admission("127.0.0.1", 8765, "127.0.0.1", None, private=False).hosts == {"localhost:8765", "127.0.0.1:8765"}
