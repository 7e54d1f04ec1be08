"""`llmtap proxy --set KEY=VALUE`: mitmproxy's own options, refused in one line when bad.
(That a good one takes effect is shown by the session proxy's `ssl_insecure=true`, without
which the regular-mode tests could not reach their self-signed upstream.)"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e import harness
from tests.helpers import free_port


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("no_such_option=1", "Unknown option(s): no_such_option"),
        ("ssl_insecure=maybe", "Failed to parse option ssl_insecure"),
        ("connection_strategy=sometimes", "one of eager, lazy"),
        ("ssl_insecure", "--set wants KEY=VALUE"),
        ("mode=regular@9999", "use --mode"),
    ],
)
def test_bad_set_is_one_line(tmp_path: Path, setting: str, message: str) -> None:
    if not harness.LLMTAP.exists():
        pytest.skip(f"the llmtap console script is not at {harness.LLMTAP}")
    done = subprocess.run(
        [str(harness.LLMTAP), "proxy", "--quiet", "--port", str(free_port()),
         "--db", f"sqlite:///{tmp_path / 'x.db'}", "--confdir", str(tmp_path / "mitm"), "--set", setting],
        env=harness.clean_env(LLMTAP_HOME=str(tmp_path / "home")),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("llmtap: error: --set"), done.stderr
    assert message in lines[0]


def test_a_repeated_sigterm_does_not_cut_the_hand_over_short(tmp_path: Path) -> None:
    """A service manager or script may send SIGTERM again while the proxy hands its records
    over: the proxy still exits 0 (it died with -15 once its event loop had stopped)."""
    port = free_port()
    log = tmp_path / "proxy.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [str(harness.LLMTAP), "proxy", "--quiet", "--port", str(port),
             "--db", f"sqlite:///{tmp_path / 'x.db'}", "--confdir", str(tmp_path / "mitm")],
            env=harness.clean_env(LLMTAP_HOME=str(tmp_path / "home")), stdout=subprocess.DEVNULL, stderr=sink,
        )  # fmt: skip
    harness.wait_for_port(port, proc, log)
    deadline = time.monotonic() + 30
    while proc.poll() is None and time.monotonic() < deadline:
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.05)
    status = proc.wait(30)
    assert status == 0, f"exit {status}: {log.read_text()[-3000:]}"


def test_two_listeners_on_one_port_is_one_line(tmp_path: Path) -> None:
    port = free_port()
    result = subprocess.run(
        [str(harness.LLMTAP), "proxy", "--port", str(port), "--reverse", f"anthropic={port}",
         "--db", f"sqlite:///{tmp_path / 'x.db'}", "--confdir", str(tmp_path / "mitm")],
        env=harness.clean_env(LLMTAP_HOME=str(tmp_path / "home")), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert f"both listen on 127.0.0.1:{port}" in line and "internal error" not in line


@pytest.mark.parametrize("beside", ["", "fixed", "free"], ids=["alone", "beside_a_listener", "beside_a_free_one"])
def test_port_0_listens_on_a_free_port_it_names(tmp_path: Path, beside: str) -> None:
    """`--port 0` is a port the kernel picks, not "no port given": the regular proxy listens
    (beside a reverse listener too, which alone would leave it off, and beside one also on
    port 0: two listeners on 0 are two free ports, not one address twice) and the banner
    names the port it really has."""
    reverse = ["--reverse", f"anthropic={free_port() if beside == 'fixed' else 0}"] if beside else []
    log = tmp_path / "proxy.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [str(harness.LLMTAP), "proxy", "--port", "0", *reverse,
             "--db", f"sqlite:///{tmp_path / 'x.db'}", "--confdir", str(tmp_path / "mitm")],
            env=harness.clean_env(LLMTAP_HOME=str(tmp_path / "home")), stdout=subprocess.DEVNULL, stderr=sink,
        )  # fmt: skip
    try:
        # a bound on the wait, not a timing: the line comes in a second or two, later under load
        deadline = time.monotonic() + 90
        found = None
        while found is None and proc.poll() is None and time.monotonic() < deadline:
            found = re.search(r"Regular proxy listening on 127\.0\.0\.1:(\d+)", log.read_text())
            time.sleep(0.1)
        assert found is not None, log.read_text()[-3000:]
        port = int(found.group(1))
        assert port not in (0, 8080)
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        if beside == "free":
            listener = re.search(r"anthropic listening on 127\.0\.0\.1:(\d+)", log.read_text())
            assert listener is not None, log.read_text()[-3000:]
            assert int(listener.group(1)) not in (0, port)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
