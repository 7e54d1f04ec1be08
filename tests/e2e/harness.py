"""The parts the end-to-end tests share: a real `llmtap proxy` process, the local
upstreams it forwards to, a reader of the store it writes, and a tap on an httpx2
client's raw response bytes.

Everything is real and stays on 127.0.0.1: the proxy is the console script in a
subprocess, the upstream is `llmtap.simulator.upstream.Upstream` (plain and TLS), the clients are
the official SDKs and curl. Each test picks its reply through a request header
(`x-e2e-case`, forwarded upstream like any header) and finds its record by the keyed
fingerprint of a canary API key of its own.

Not responsible for assertions about specific protocols (the test modules are).
"""

from __future__ import annotations

import datetime
import inspect
import ipaddress
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from sqlalchemy import Engine, select

from llmtap.simulator.upstream import Reply, Seen, Upstream, sse_chunks
from llmtap.storage import schema
from llmtap.storage.engine import make_engine
from llmtap.storage.secrets import KeyFingerprinter
from llmtap.workloads.network import wait_listening
from tests.protocols.corpus import Case, differences, load_cases
from tests.records import canonical

CASE_HEADER = "x-e2e-case"
LLMTAP = Path(sys.executable).parent / "llmtap"
CURL = "curl"
DELAY = 0.1  # seconds between upstream chunks: enough to tell streaming from buffering
MAX_CHUNKS = 6  # a long recorded stream is sent as this many spaced chunks


# -- ports and processes -------------------------------------------------------------------


def wait_for_port(port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float = 20.0) -> None:
    """`workloads.network.wait_listening` with the tests' default of 20 s: a RuntimeError
    with the tail of `log` when `proc` exits first or the port has not opened in time."""
    wait_listening(port, proc, log, timeout)


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for child processes: no proxy or llmtap settings from outside."""
    drop = ("proxy", "llmtap_", "ssl_cert", "curl_ca_bundle", "requests_ca_bundle")
    env = {k: v for k, v in os.environ.items() if not k.lower().startswith(drop) and "proxy" not in k.lower()}
    env.update(extra)
    return env


# -- replies -------------------------------------------------------------------------------


class Routes:
    """The upstream's router: each test registers a reply and gets the header value that
    selects it. A request without one gets a 404, as a real API would answer."""

    def __init__(self) -> None:
        self._replies: dict[str, Reply] = {}
        self._seen: dict[str, list[Seen]] = {}
        self._lock = threading.Lock()

    def add(self, reply: Reply) -> str:
        token = secrets.token_hex(8)
        with self._lock:
            self._replies[token] = reply
            self._seen[token] = []
        return token

    def seen(self, token: str) -> list[Seen]:
        with self._lock:
            return list(self._seen[token])

    def done(self, token: str, timeout: float = 10.0) -> list[Seen]:
        """The requests, once the upstream has sent all of each reply. A client may hold
        the last bytes a moment before the upstream's thread notes that it sent them."""
        deadline = time.monotonic() + timeout
        while not all(seen.finished for seen in self.seen(token)):
            if time.monotonic() > deadline:
                raise AssertionError("the upstream did not finish its reply")
            time.sleep(0.01)
        return self.seen(token)

    def __call__(self, seen: Seen) -> Reply:
        token = seen.headers.get(CASE_HEADER, "")
        with self._lock:
            reply = self._replies.get(token)
            if reply is not None:
                self._seen[token].append(seen)
        if reply is None:
            return Reply(404, chunks=[b'{"error": {"type": "not_found", "message": "no e2e case"}}'])
        return reply


def spaced(body: bytes, n: int = MAX_CHUNKS) -> list[bytes]:
    """A stream body as at most `n` chunks: on event boundaries for LF-framed SSE, else
    (CRLF framing, JSON arrays) at arbitrary byte offsets, which the tee must take too."""
    events = sse_chunks(body)
    if b"".join(events) == body and len(events) > 1:
        size = -(-len(events) // n)
        return [b"".join(events[i : i + size]) for i in range(0, len(events), size)]
    size = -(-len(body) // n)
    return [body[i : i + size] for i in range(0, len(body), size)]


def stream_reply(case: Case, **kw: Any) -> Reply:
    return Reply(
        status=case.case["status"],
        content_type=case.case["content_type"],
        chunks=spaced(case.response),
        delay=DELAY,
        **kw,
    )


def json_reply(case: Case, **kw: Any) -> Reply:
    return Reply(status=case.case["status"], content_type=case.case["content_type"], chunks=[case.response], **kw)


_CASES: dict[str, Case] | None = None


def case(name: str) -> Case:
    global _CASES
    if _CASES is None:
        _CASES = {c.id: c for c in load_cases()}
    return _CASES[name]


# -- keys ----------------------------------------------------------------------------------


def canary(prefix: str) -> str:
    """A fake API key shaped like the provider's, unique to one test."""
    return f"{prefix}E2ECANARY{secrets.token_hex(12)}"


ANTHROPIC_KEY = "sk-ant-api03-"
OPENAI_KEY = "sk-proj-"
GOOGLE_KEY = "AIzaSy"


# -- the proxy -----------------------------------------------------------------------------


@dataclass
class Proxy:
    root: Path
    upstream: Upstream
    tls_upstream: Upstream
    routes: Routes
    ports: dict[str, int]  # anthropic, openai, gemini, regular, ws
    proc: subprocess.Popen[bytes] | None = None
    engine: Engine | None = None
    keys: list[str] = field(default_factory=list)  # every canary handed out

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def db(self) -> Path:
        return self.root / "llmtap.db"

    @property
    def confdir(self) -> Path:
        return self.root / "mitmproxy"

    @property
    def ca(self) -> Path:
        return self.confdir / "mitmproxy-ca-cert.pem"

    @property
    def log(self) -> Path:
        return self.root / "proxy.log"

    def base(self, listener: str) -> str:
        return f"http://127.0.0.1:{self.ports[listener]}"

    def key(self, prefix: str) -> str:
        key = canary(prefix)
        self.keys.append(key)
        return key

    def start(self, ws_upstream: str) -> None:
        up = self.upstream.url
        args = [
            str(LLMTAP), "proxy", "--quiet",
            "--db", f"sqlite:///{self.db}",
            "--confdir", str(self.confdir),
            "--reverse", f"anthropic={self.ports['anthropic']},team-anthropic",
            "--reverse", f"openai={self.ports['openai']},team-openai",
            "--reverse", f"gemini={self.ports['gemini']}",
            "--upstream", f"anthropic={up}", "--upstream", f"openai={up}", "--upstream", f"gemini={up}",
            "--port", str(self.ports["regular"]),
            "--mode", f"reverse:{ws_upstream}@127.0.0.1:{self.ports['ws']}",
            "--set", "ssl_insecure=true",  # the TLS upstream's certificate is self-signed
        ]  # fmt: skip
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                args, env=clean_env(LLMTAP_HOME=str(self.home)), stdout=subprocess.DEVNULL, stderr=log, cwd=self.root
            )
        for port in self.ports.values():
            wait_for_port(port, self.proc, self.log)
        self.engine = make_engine(f"sqlite:///{self.db}")

    def stop(self) -> int:
        assert self.proc is not None
        if self.engine is not None:
            self.engine.dispose()
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            raise

    # -- the store ---------------------------------------------------------------------

    def fingerprint(self, key: str) -> str:
        return KeyFingerprinter.from_file(self.home / "fingerprint.secret").fingerprint(key)

    def rows(self, key: str) -> list[dict[str, Any]]:
        assert self.engine is not None
        ex = schema.exchanges
        with self.engine.connect() as conn:
            found = conn.execute(select(ex).where(ex.c.key_fingerprint == self.fingerprint(key)).order_by(ex.c.id))
            rows = [dict(r._mapping) for r in found]
            for row in rows:
                calls = conn.execute(
                    select(schema.tool_calls)
                    .where(schema.tool_calls.c.exchange_id == row["id"])
                    .order_by(schema.tool_calls.c.position)
                )
                row["tool_calls"] = [dict(c._mapping) for c in calls]
        return rows

    def record(self, key: str, timeout: float = 15.0) -> dict[str, Any]:
        """The one stored exchange sent with this key, once the writer has flushed it."""
        deadline = time.monotonic() + timeout
        while True:
            rows = self.rows(key)
            if rows:
                assert len(rows) == 1, f"expected one record, got {len(rows)}"
                self.assert_key_absent(key)
                return rows[0]
            if time.monotonic() > deadline:
                raise AssertionError(f"no record within {timeout}s; proxy log:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.05)

    def store_bytes(self) -> bytes:
        return b"".join(p.read_bytes() for p in self.root.glob("llmtap.db*") if p.is_file())

    def assert_key_absent(self, key: str) -> None:
        assert key.encode() not in self.store_bytes(), "an API key reached the database file"


# -- the upstream's TLS certificate ----------------------------------------------------------


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for localhost and 127.0.0.1, made here with `cryptography`."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "upstream-cert.pem", folder / "upstream-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


# -- the client's side of the wire ---------------------------------------------------------


@dataclass
class WireResponse:
    url: str
    status: int
    headers: httpx2.Headers
    chunks: list[tuple[float, bytes]] = field(default_factory=list)

    @property
    def raw(self) -> bytes:
        return b"".join(chunk for _, chunk in self.chunks)

    @property
    def first_at(self) -> float:
        return self.chunks[0][0]


class _Tap(httpx2.SyncByteStream):
    def __init__(self, inner: Any, into: WireResponse) -> None:
        self.inner = inner
        self.into = into

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.inner:
            self.into.chunks.append((time.time(), chunk))
            yield chunk

    def close(self) -> None:
        self.inner.close()


class Wire:
    """An httpx2 client whose responses' raw bytes (before content decoding) are kept
    with the time each arrived. A response hook swaps in a tapped stream; the transport,
    the environment's proxy settings and CA files stay the client's own."""

    def __init__(self) -> None:
        self.responses: list[WireResponse] = []
        self.clients: list[httpx2.Client] = []

    def _hook(self, response: httpx2.Response) -> None:
        seen = WireResponse(str(response.request.url), response.status_code, response.headers)
        response.stream = _Tap(response.stream, seen)
        self.responses.append(seen)

    def client(self, **kw: Any) -> httpx2.Client:
        client = httpx2.Client(event_hooks={"response": [self._hook]}, timeout=30, **kw)
        self.clients.append(client)
        return client

    def close(self) -> None:
        for client in self.clients:
            client.close()

    @property
    def last(self) -> WireResponse:
        return self.responses[-1]


def curl(args: list[str], env: dict[str, str] | None = None, timeout: float = 20.0) -> tuple[bytes, list[float]]:
    """Run curl, reading its stdout as it comes: the bytes and when each read returned."""
    out, times = bytearray(), []
    with subprocess.Popen(
        [CURL, "-sS", "-N", "--raw", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env or clean_env()
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            data = os.read(proc.stdout.fileno(), 65536)
            if not data:
                break
            times.append(time.time())
            out += data
        proc.wait(max(deadline - time.monotonic(), 1))
        err = proc.stderr.read()
    assert proc.returncode == 0, f"curl failed ({proc.returncode}): {err.decode(errors='replace')}"
    return bytes(out), times


def curl_status(args: list[str], timeout: float = 20.0) -> int:
    """Run curl for its exit status only (60: the peer's certificate was not trusted)."""
    done = subprocess.run(
        [CURL, "-sS", "-o", os.devnull, *args], capture_output=True, env=clean_env(), timeout=timeout, check=False
    )
    return done.returncode


def dechunk(raw: bytes) -> list[bytes]:
    """HTTP/1.1 chunked framing, as `curl --raw` prints it, undone: the chunks."""
    chunks, pos = [], 0
    while True:
        end = raw.index(b"\r\n", pos)
        size = int(raw[pos:end].split(b";")[0], 16)
        if size == 0:
            assert raw[end + 2 :] == b"\r\n", "trailing bytes after the last chunk"
            return chunks
        chunks.append(raw[end + 2 : end + 2 + size])
        assert raw[end + 2 + size : end + 4 + size] == b"\r\n"
        pos = end + 4 + size


# -- checks --------------------------------------------------------------------------------


def sent_bytes(seen: Seen) -> bytes:
    return b"".join(chunk for _, chunk in seen.sent)


def assert_matches_case(row: dict[str, Any], c: Case, **status: int | None) -> None:
    diffs = differences(c.expect, canonical(row))
    assert not diffs, f"{c.id}: " + "; ".join(diffs)
    assert row["protocol"] == c.case["protocol"]
    assert row["status"] == status.get("status", c.case["status"])
    assert row["streamed"] == c.case["streamed"]
    assert row["decode_error"] is None, row["decode_error"]
    assert row["complete"] is True
    assert row["interrupted"] is None


def assert_timings(row: dict[str, Any], *, token: bool = True) -> None:
    """started <= first byte <= first token <= ended. A JSON (non-streamed) body has no
    first-token time of its own: it arrives whole, so `token=False` lets it be null."""
    started, first_byte, first_token, ended = (
        row["started_at"], row["first_byte_at"], row["first_token_at"], row["ended_at"]
    )  # fmt: skip
    assert started is not None and first_byte is not None and ended is not None
    assert started <= first_byte <= ended, (started, first_byte, ended)
    assert first_token is not None or not token
    if first_token is not None:
        assert first_byte <= first_token <= ended, (first_byte, first_token, ended)


def assert_key_fields(row: dict[str, Any], proxy: Proxy, key: str) -> None:
    assert row["key_fingerprint"] == proxy.fingerprint(key)
    assert row["key_last4"] == key[-4:]


def assert_streamed(first_client_chunk_at: float, seen: Seen) -> None:
    """No buffering: the client had its first bytes before the upstream sent its last."""
    assert len(seen.sent) >= 3, "too few upstream chunks to tell streaming from buffering"
    last_sent = seen.sent[-1][0]
    assert first_client_chunk_at < last_sent, (
        f"the client's first chunk came {first_client_chunk_at - last_sent:+.3f}s after the upstream's last"
    )


def sdk_kwargs(method: Any, body: dict[str, Any]) -> dict[str, Any]:
    """A recorded request body as SDK keyword arguments; keys the SDK does not name ride
    `extra_body`, so the request on the wire says what the recording said."""
    names = set(inspect.signature(method).parameters)
    known = {k: v for k, v in body.items() if k in names}
    extra = {k: v for k, v in body.items() if k not in names}
    return known | ({"extra_body": extra} if extra else {})


def sdk_body(c: Case) -> dict[str, Any]:
    assert c.request is not None
    body = json.loads(c.request)
    assert isinstance(body, dict)
    return body
