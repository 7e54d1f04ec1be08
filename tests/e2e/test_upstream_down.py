"""Nothing silent (issue 26), through a real `llmtap proxy`: an upstream nobody listens on
is a 502 and one that accepts and never answers a 504, each in the error shape of the
request's protocol, recorded with that status and error and said in one line on stderr;
a request that is no LLM exchange gets mitmproxy's own 502 and no record; `--access-log`
prints a line per exchange; and SIGTERM ends with one line of exact counts."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from sqlalchemy import select

from llmtap.simulator.upstream import Upstream
from llmtap.storage import schema
from llmtap.storage.engine import make_engine
from tests.e2e import harness
from tests.e2e.harness import Reply
from tests.helpers import free_port

pytestmark = pytest.mark.slow

TIMEOUT_S = 1  # the proxy's --upstream-timeout here: short, the wait for it bounded below

REQUESTS = {  # listener, path, body, the key's header
    "anthropic": (
        "anthropic",
        "/v1/messages",
        {"model": "claude-sonnet-4-5", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]},
        "x-api-key",
    ),
    "openai_chat": (
        "openai",
        "/v1/chat/completions",
        {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
        "authorization",
    ),
    "openai_responses": ("openai", "/v1/responses", {"model": "gpt-5", "input": "hi"}, "authorization"),
    "gemini": (
        "gemini",
        "/v1beta/models/gemini-2.5-pro:generateContent",
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        "x-goog-api-key",
    ),
}


class Silent:
    """An upstream that accepts every connection and never sends a byte; notes each close."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.closed = threading.Event()
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self._conns.append(conn)
            threading.Thread(target=self._drain, args=(conn,), daemon=True).start()

    def _drain(self, conn: socket.socket) -> None:
        try:
            while conn.recv(65536):
                pass
        except OSError:
            pass
        self.closed.set()  # the proxy gave up on it

    def close(self) -> None:
        self.sock.close()
        for conn in self._conns:
            conn.close()


@dataclass
class Down:
    root: Path
    proc: subprocess.Popen[bytes]
    ports: dict[str, int]
    keys: list[str]

    @property
    def log(self) -> Path:
        return self.root / "proxy.log"

    def base(self, listener: str) -> str:
        return f"http://127.0.0.1:{self.ports[listener]}"

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def rows(self, key: str, timeout: float = 15.0) -> list[dict[str, Any]]:
        """The exchanges sent with this key, once there is one (a bounded wait)."""
        from llmtap.storage.secrets import KeyFingerprinter

        fingerprint = KeyFingerprinter.from_file(self.root / "home" / "fingerprint.secret").fingerprint(key)
        engine = make_engine(f"sqlite:///{self.root / 'llmtap.db'}")
        deadline = time.monotonic() + timeout
        try:
            while True:
                with engine.connect() as conn:
                    ex = schema.exchanges
                    found = [
                        dict(r._mapping) for r in conn.execute(select(ex).where(ex.c.key_fingerprint == fingerprint))
                    ]
                if found or time.monotonic() > deadline:
                    return found
                time.sleep(0.05)
        finally:
            engine.dispose()

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise


def start(root: Path, upstreams: dict[str, str], *extra: str) -> Down:
    if not harness.LLMTAP.exists():
        pytest.skip(f"the llmtap console script is not at {harness.LLMTAP}")
    ports = {name: free_port() for name in upstreams}
    args = [str(harness.LLMTAP), "proxy", "--quiet", "--no-regular", "--db", f"sqlite:///{root / 'llmtap.db'}",
            "--confdir", str(root / "mitmproxy"), "--upstream-timeout", str(TIMEOUT_S), *extra]  # fmt: skip
    for name, url in upstreams.items():
        args += ["--reverse", f"{name}={ports[name]}", "--upstream", f"{name}={url}"]
    with (root / "proxy.log").open("wb") as log:
        proc = subprocess.Popen(
            args, env=harness.clean_env(LLMTAP_HOME=str(root / "home")), stdout=subprocess.DEVNULL, stderr=log
        )
    down = Down(root, proc, ports, [])
    for port in ports.values():
        harness.wait_for_port(port, proc, down.log)
    return down


@pytest.fixture(scope="module")
def down(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Down]:
    """Every listener's upstream a port nobody listens on."""
    nobody = f"http://127.0.0.1:{free_port()}"
    proxy = start(tmp_path_factory.mktemp("down"), dict.fromkeys(("anthropic", "openai", "gemini"), nobody))
    try:
        yield proxy
    finally:
        code = proxy.stop()
    assert code == 0, proxy.text()[-3000:]
    assert "Traceback" not in proxy.text()
    for key in proxy.keys:
        assert key not in proxy.text(), "an API key reached the proxy's log"


def _post(base: str, name: str, key: str, timeout: float = 20.0) -> httpx2.Response:
    _, path, body, header = REQUESTS[name]
    value = f"Bearer {key}" if header == "authorization" else key
    return httpx2.post(base + path, json=body, headers={header: value}, timeout=timeout)


def _assert_shape(name: str, status: int, body: dict[str, Any], detail: str) -> str:
    """The provider's documented error shape; returns its message."""
    if name == "anthropic":
        assert body["type"] == "error"
        assert body["error"]["type"] == ("timeout_error" if status == 504 else "api_error")
        return str(body["error"]["message"])
    if name.startswith("openai"):
        error = body["error"]
        assert error["type"] == "server_error" and error["code"] == detail and "param" in error
        return str(error["message"])
    assert body["error"]["code"] == status
    assert body["error"]["status"] == ("DEADLINE_EXCEEDED" if status == 504 else "UNAVAILABLE")
    return str(body["error"]["message"])


@pytest.mark.parametrize("name", list(REQUESTS))
def test_an_upstream_nobody_listens_on_is_a_502_in_the_protocols_shape(down: Down, name: str) -> None:
    key = harness.canary(harness.ANTHROPIC_KEY if name == "anthropic" else harness.OPENAI_KEY)
    down.keys.append(key)
    response = _post(down.base(REQUESTS[name][0]), name, key)

    assert response.status_code == 502, response.text
    assert response.headers["content-type"] == "application/json"
    message = _assert_shape(name, 502, response.json(), "upstream_unreachable")
    assert "unreachable: connection refused" in message
    (row,) = down.rows(key)
    assert row["status"] == 502 and row["error_code"] == "upstream_unreachable"
    assert row["error_message"] == message
    assert row["model_requested"] == REQUESTS[name][2].get("model", "gemini-2.5-pro")
    said = [line for line in down.text().splitlines() if row["id"] in line]
    assert len(said) == 1, down.text()[-3000:]
    assert re.fullmatch(
        r"llmtap: upstream 127\.0\.0\.1:\d+ unreachable: connection refused -> 502 to the client, recorded as "
        + row["id"],
        said[0],
    ), said


def test_a_request_that_is_no_llm_exchange_gets_mitmproxys_502_and_no_record(down: Down) -> None:
    before = down.text().count("-> 502 to the client")
    response = httpx2.get(down.base("anthropic") + "/v1/models", timeout=20)
    assert response.status_code == 502
    assert response.headers["content-type"] == "text/html"  # mitmproxy's page, as without llmtap
    assert down.text().count("-> 502 to the client") == before


def test_an_upstream_that_never_answers_is_a_504_and_the_proxy_lets_go_of_it(tmp_path: Path) -> None:
    silent = Silent()
    proxy = start(
        tmp_path, {"anthropic": f"http://127.0.0.1:{silent.port}", "gemini": f"http://127.0.0.1:{silent.port}"}
    )
    try:
        for name in ("anthropic", "gemini"):
            key = harness.canary(harness.ANTHROPIC_KEY)
            response = _post(proxy.base(name), name, key, timeout=TIMEOUT_S + 20)
            assert response.status_code == 504, response.text
            message = _assert_shape(name, 504, response.json(), "upstream_timeout")
            assert f"timed out: no response within {TIMEOUT_S} s" in message
            (row,) = proxy.rows(key)
            assert row["status"] == 504 and row["error_code"] == "upstream_timeout"
            assert f"-> 504 to the client, recorded as {row['id']}" in proxy.text()
        assert silent.closed.wait(10), "the proxy still holds the silent upstream's connection"
    finally:
        code = proxy.stop()
        silent.close()
    assert code == 0, proxy.text()[-3000:]


ANSWER = (
    b'{"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",'
    b' "content": [{"type": "text", "text": "hello"}], "stop_reason": "end_turn",'
    b' "usage": {"input_tokens": 1200, "output_tokens": 30}}'
)


def test_access_log_and_the_last_line_count_what_the_run_did(tmp_path: Path) -> None:
    routes = harness.Routes()
    token = routes.add(Reply(chunks=[ANSWER]))
    with Upstream(routes) as up:
        nobody = f"http://127.0.0.1:{free_port()}"
        proxy = start(tmp_path, {"anthropic": up.url, "openai": nobody}, "--access-log")
        try:
            key = harness.canary(harness.ANTHROPIC_KEY)
            headers = {"x-api-key": key, harness.CASE_HEADER: token, "X-LLMTap-Team": "two words"}
            body = json.dumps(REQUESTS["anthropic"][2])
            for _ in range(2):
                ok = httpx2.post(proxy.base("anthropic") + "/v1/messages", content=body, headers=headers, timeout=20)
                assert ok.status_code == 200
            openai_key = harness.canary(harness.OPENAI_KEY)
            assert _post(proxy.base("openai"), "openai_chat", openai_key).status_code == 502
            assert len(proxy.rows(key)) == 2 and proxy.rows(openai_key)
            deadline = time.monotonic() + 15
            while proxy.text().count("llmtap: 20") < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            code = proxy.stop()
    text = proxy.text()
    assert code == 0, text[-3000:]
    lines = [line for line in text.splitlines() if re.match(r"llmtap: \d{4}-\d\d-\d\dT", line)]
    assert len(lines) == 3, text[-3000:]
    answered = r"llmtap: \S+Z team=\"two words\" POST 127\.0\.0\.1/v1/messages 200 model=claude-sonnet-4-5 "
    for line in lines[:2]:
        assert re.fullmatch(answered + r"tokens=1,200/30 cost=\$0\.00405 [\d,]+ ms", line), line
    assert re.fullmatch(
        r"llmtap: \S+Z team=unattributed POST 127\.0\.0\.1/v1/chat/completions 502 model=gpt-4o "
        r"tokens=- cost=unpriced [\d,]+ ms",
        lines[2],
    ), lines[2]
    last = text.strip().splitlines()[-1]
    spool = tmp_path / "home" / "spool"
    assert last == f"llmtap: stopped: 3 records written to the store this run, 0 in the spool at {spool}, 0 rejected"
    for secret in (key, openai_key):
        assert secret not in text


def test_a_tls_upstream_whose_certificate_fails_is_a_502_that_says_so(tmp_path: Path) -> None:
    """A reverse listener to https:// connects when the request comes (not as the client
    connects), so a failed TLS handshake has a request to answer."""
    import ssl

    cert, secret = harness.self_signed(tmp_path)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, secret)
    with Upstream(harness.Routes(), tls=tls) as up:
        proxy = start(tmp_path, {"anthropic": up.url.replace("127.0.0.1", "localhost")})  # no ssl_insecure
        try:
            key = harness.canary(harness.ANTHROPIC_KEY)
            response = _post(proxy.base("anthropic"), "anthropic", key)
            assert response.status_code == 502, response.text
            message = _assert_shape("anthropic", 502, response.json(), "upstream_unreachable")
            assert "unreachable: TLS failed (Certificate verify failed" in message, message
            (row,) = proxy.rows(key)
            assert row["error_code"] == "upstream_unreachable" and row["error_message"] == message
        finally:
            assert proxy.stop() == 0, proxy.text()[-3000:]
