"""One `llmtap proxy` for the whole end-to-end session, and the upstreams behind it.

Listeners: reverse for anthropic (team `team-anthropic`), openai (team `team-openai`) and
gemini (no team), all to a plain local upstream; a regular proxy (for HTTPS through
mitmproxy's CA to a TLS upstream on https://localhost); a `--mode reverse:` listener to a
`websockets` server for Responses WebSocket mode. The proxy gets a temporary LLMTAP_HOME,
SQLite file and mitmproxy confdir, and must exit 0 on SIGTERM with no API key left in
any file it wrote.
"""

from __future__ import annotations

import shutil
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmtap.simulator.upstream import Upstream
from tests.e2e import harness
from tests.e2e.wsupstream import WsUpstream, sse_events
from tests.helpers import free_port

WS_CASE = "b_oai_text_sse"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.timeout(60))


@pytest.fixture(scope="session")
def routes() -> harness.Routes:
    return harness.Routes()


@pytest.fixture(scope="session")
def ws_upstream() -> Iterator[WsUpstream]:
    with WsUpstream(sse_events(harness.case(WS_CASE).response)) as server:
        yield server


@pytest.fixture(scope="session")
def proxy(
    tmp_path_factory: pytest.TempPathFactory, routes: harness.Routes, ws_upstream: WsUpstream
) -> Iterator[harness.Proxy]:
    if shutil.which(harness.CURL) is None:
        pytest.skip("curl is not installed")
    if not harness.LLMTAP.exists():
        pytest.skip(f"the llmtap console script is not at {harness.LLMTAP}")
    root = tmp_path_factory.mktemp("e2e")
    cert, key = harness.self_signed(root)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    with Upstream(routes) as plain, Upstream(routes, tls=tls) as secure:
        ports = {name: free_port() for name in ("anthropic", "openai", "gemini", "regular", "ws")}
        proxy = harness.Proxy(root=root, upstream=plain, tls_upstream=secure, routes=routes, ports=ports)
        proxy.start(ws_upstream.url)
        try:
            yield proxy
        finally:
            code = proxy.stop()
        log = proxy.log.read_text(errors="replace")
        assert code == 0, f"llmtap proxy exited {code}:\n{log[-3000:]}"
        _assert_no_keys(root, proxy.keys)
        for sign in ("Traceback", "has crashed", "tee failure"):
            assert sign not in log, f"{sign!r} in the proxy's log:\n{log[-3000:]}"


@pytest.fixture
def wire() -> Iterator[harness.Wire]:
    tap = harness.Wire()
    yield tap
    tap.close()


def _assert_no_keys(root: Path, keys: list[str]) -> None:
    """No canary key in anything the proxy wrote: store, spool, secrets, log."""
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            leaked = [k for k in keys if k.encode() in data]
            assert not leaked, f"an API key was written to {path}"
