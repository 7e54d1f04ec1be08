"""What the real proxy records, and that no key is in it (issue 13; SPEC §1 detection, §4).

A `llmtap proxy --bodies full` of this module's own (the session proxy keeps bodies at
`metadata`, and these tests are about what a full body would carry) in front of a local
upstream that can echo back the credentials and body it received, as real APIs do in
their error messages. Three findings:

- a form post (or a JSON object of another API) to a path that ends like a generation's
  is passed through and not recorded: none of its password or card number is stored,
  spooled or logged;
- a path no URL parser accepts (`//[x/v1/messages`) is recorded, not lost;
- the exact key a request carried, of no known shape, is removed from everything stored
  of its exchange: the error message, the answer, tool arguments, the bodies; so is
  every other credential it carried (issue 24): a header or query parameter whose name
  says it holds one (AWS session tokens, gateways' auth headers, cookies, a presigned
  URL's signature).

Not responsible for the key shapes (tests/storage/test_secrets.py) or routing by path
(tests/protocols/test_routing.py).
"""

from __future__ import annotations

import json
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import pytest
from sqlalchemy import Engine, select

from llmtap.simulator.upstream import Reply, Seen, Upstream
from llmtap.storage import schema
from llmtap.storage.engine import make_engine
from llmtap.storage.secrets import KeyFingerprinter
from tests.e2e import harness
from tests.helpers import free_port

ECHO = "x-e2e-echo"  # the upstream answers with what it received (credentials and body)
CARD = "4111111111111111"


class EchoRoutes(harness.Routes):
    """`harness.Routes`, plus replies that quote the request back: a 401 naming the key
    it was sent (as OpenAI's `Incorrect API key provided: …` does) or a 200 whose answer
    text and tool call repeat the credentials."""

    def __call__(self, seen: Seen) -> Reply:
        kind = seen.headers.get(ECHO)
        if kind is None:
            return super().__call__(seen)
        if kind == "every-header":  # as a gateway's debug error does: every header, the URL decoded
            quoted = " ".join(f"{name}: {value}" for name, value in seen.headers.items() if name != ECHO)
            quoted += " " + seen.path + " " + unquote(seen.path)
            kind = "error"
        else:
            quoted = " ".join(
                seen.headers[name] for name in ("authorization", "x-api-key", "x-goog-api-key") if name in seen.headers
            )
        quoted += " " + seen.path + " " + seen.body.decode("utf-8", "replace")[:400]
        if kind == "error":
            error = {"error": {"message": f"Incorrect API key provided: {quoted}", "type": "invalid_request_error"}}
            return Reply(401, chunks=[json.dumps(error).encode()], chunked=False)
        message = {
            "id": "msg_echo_" + secrets.token_hex(6),
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [
                {"type": "text", "text": f"you sent {quoted}"},
                {"type": "tool_use", "id": "toolu_echo", "name": "login", "input": {"token": quoted}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 12, "output_tokens": 7},
        }
        return Reply(200, chunks=[json.dumps(message).encode()])  # chunked: streamed through the tee


@dataclass
class FullProxy:
    root: Path
    upstream: Upstream
    routes: EchoRoutes
    ports: dict[str, int]
    proc: subprocess.Popen[bytes] | None = None
    engine: Engine | None = None
    secrets: list[str] = field(default_factory=list)  # nothing of these may be written anywhere

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def log(self) -> Path:
        return self.root / "proxy.log"

    def secret(self, prefix: str) -> str:
        value = f"{prefix}{secrets.token_hex(10)}"
        self.secrets.append(value)
        return value

    def start(self) -> None:
        up = self.upstream.url
        args = [
            str(harness.LLMTAP), "proxy", "--quiet", "--bodies", "full",
            "--db", f"sqlite:///{self.root / 'llmtap.db'}",
            "--confdir", str(self.root / "mitmproxy"),
            "--reverse", f"anthropic={self.ports['anthropic']}",
            "--reverse", f"openai={self.ports['openai']}",
            "--reverse", f"gemini={self.ports['gemini']}",
            "--upstream", f"anthropic={up}", "--upstream", f"openai={up}", "--upstream", f"gemini={up}",
            "--port", str(self.ports["regular"]),
        ]  # fmt: skip
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                args,
                env=harness.clean_env(LLMTAP_HOME=str(self.home)),
                stdout=subprocess.DEVNULL,
                stderr=log,
                cwd=self.root,
            )
        for port in self.ports.values():
            harness.wait_for_port(port, self.proc, self.log)
        self.engine = make_engine(f"sqlite:///{self.root / 'llmtap.db'}")

    def stop(self) -> int:
        assert self.proc is not None and self.engine is not None
        self.engine.dispose()
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)

    def rows(self, **where: Any) -> list[dict[str, Any]]:
        assert self.engine is not None
        ex = schema.exchanges
        query = select(ex)
        for name, value in where.items():
            query = query.where(ex.c[name] == value)
        with self.engine.connect() as conn:
            rows = [dict(r._mapping) for r in conn.execute(query.order_by(ex.c.id))]
            for row in rows:
                calls = select(schema.tool_calls).where(schema.tool_calls.c.exchange_id == row["id"])
                row["tool_calls"] = [dict(c._mapping) for c in conn.execute(calls)]
        return rows

    def record(self, key: str, timeout: float = 15.0) -> dict[str, Any]:
        fingerprint = KeyFingerprinter.from_file(self.home / "fingerprint.secret").fingerprint(key)
        deadline = time.monotonic() + timeout
        while True:
            rows = self.rows(key_fingerprint=fingerprint)
            if rows:
                assert len(rows) == 1, rows
                return rows[0]
            if time.monotonic() > deadline:
                raise AssertionError(f"no record within {timeout}s; proxy log:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.05)

    def written(self) -> dict[Path, bytes]:
        """Every file the proxy wrote: the store, spool and rejected file, the log."""
        return {p: p.read_bytes() for p in self.root.rglob("*") if p.is_file() and "mitmproxy" not in p.parts}

    def assert_nowhere(self, *values: str) -> None:
        for path, data in self.written().items():
            found = [v for v in values if v.encode() in data]
            assert not found, f"{found} written to {path}"

    def stored_bodies(self, row: dict[str, Any]) -> bytes:
        from llmtap.storage.bodies import decompress

        assert self.engine is not None
        refs = select(schema.body_refs.c.body_hash).where(schema.body_refs.c.exchange_id == row["id"])
        with self.engine.connect() as conn:
            found = conn.execute(select(schema.bodies).where(schema.bodies.c.hash.in_(refs)))
            return b"".join(decompress(b.data, b.encoding) for b in found)


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FullProxy]:
    if not harness.LLMTAP.exists():
        pytest.skip(f"the llmtap console script is not at {harness.LLMTAP}")
    routes = EchoRoutes()
    with Upstream(routes) as upstream:
        ports = {name: free_port() for name in ("anthropic", "openai", "gemini", "regular")}
        proxy = FullProxy(tmp_path_factory.mktemp("trust"), upstream, routes, ports)
        proxy.start()
        try:
            yield proxy
        finally:
            code = proxy.stop()
        log = proxy.log.read_text(errors="replace")
        assert code == 0, f"llmtap proxy exited {code}:\n{log[-3000:]}"
        for sign in ("Traceback", "has crashed", "tee failure", "could not be stored"):
            assert sign not in log, f"{sign!r} in the proxy's log:\n{log[-3000:]}"
        proxy.assert_nowhere(*proxy.secrets)


def raw_post(port: int, path: str, body: bytes, *headers: str) -> tuple[int, bytes]:
    """One HTTP/1.1 request with the request-target exactly as given (curl and httpx2
    normalise or refuse paths like `//[x/…`, which a client's bytes can still carry)."""
    head = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", f"Content-Length: {len(body)}", "Connection: close"]
    request = "\r\n".join([*head, *headers]).encode("latin-1") + b"\r\n\r\n" + body
    with socket.create_connection(("127.0.0.1", port), timeout=20) as conn:
        conn.sendall(request)
        data = bytearray()
        while chunk := conn.recv(65536):
            data += chunk
    head_bytes, _, payload = bytes(data).partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" in head_bytes.lower():
        payload = b"".join(harness.dechunk(payload))
    return int(head_bytes.split(b" ", 2)[1]), payload


GENERATION = json.dumps(
    {"model": "claude-sonnet-4-5", "max_tokens": 32, "messages": [{"role": "user", "content": "hi"}]}
).encode()


def _generation_after(full: FullProxy) -> dict[str, Any]:
    """A generation sent last: once it is stored, everything sent before it is settled."""
    key = full.secret("sk-ant-api03-LATER")
    token = full.routes.add(Reply(chunks=[json.dumps(_anthropic_message()).encode()], chunked=False))
    status, _ = raw_post(
        full.ports["anthropic"], "/v1/messages", GENERATION, f"x-api-key: {key}", f"x-e2e-case: {token}"
    )
    assert status == 200
    return full.record(key)


def _anthropic_message() -> dict[str, Any]:
    return {
        "id": "msg_" + secrets.token_hex(8),
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "hello"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 1},
    }


# -- 1. detection by body shape ---------------------------------------------------------------


def test_a_form_post_to_a_responses_path_is_not_recorded(full: FullProxy) -> None:
    password = full.secret("Hunter2-")
    ok = full.routes.add(Reply(chunks=[b'{"saved": true}'], chunked=False))
    streamed = full.routes.add(Reply(chunks=[b'{"saved": ', b"true}"]))
    posts = [
        # a browser's form post
        ("application/x-www-form-urlencoded", f"email=a%40b.example&password={password}&card={CARD}", ok),
        # another API's JSON object on the same path
        ("application/json", json.dumps({"answers": [1, 2], "password": password, "card": CARD}), streamed),
        # JSON, but not an object
        ("application/json", json.dumps([password, CARD]), ok),
        (
            "multipart/form-data; boundary=b",
            f'--b\r\nContent-Disposition: form-data; name="p"\r\n\r\n{password}\r\n--b--',
            ok,
        ),
    ]
    for content_type, body, token in posts:
        for listener in ("openai", "anthropic"):
            status, answer = raw_post(
                full.ports[listener],
                "/v3/surveys/123/responses",
                body.encode(),
                f"content-type: {content_type}",
                f"x-e2e-case: {token}",
            )
            assert (status, answer) == (200, b'{"saved": true}')  # passed through untouched
    assert len(full.routes.seen(ok)) == 6 and len(full.routes.seen(streamed)) == 2

    _generation_after(full)
    assert [r for r in full.rows() if "surveys" in (r["path"] or "")] == []
    full.assert_nowhere(password, CARD)


# -- 2. odd paths --------------------------------------------------------------------------------

ODD_PATHS = [
    "//[x/v1/messages",
    "//[x/v1/messages?key={key}",
    "/[::1/v1/messages?beta=true&key={key}",
    "//user:pw@host:notaport/v1/messages",
    "/v1/messages?%6Bey={key}&&=&key",
    "/%ZZ/v1/messages?key={key}&x=%ZZ#frag",
    "/v1/messages?q=\xff\xfe&key={key}",  # bytes no UTF-8: lost their batch (UnicodeEncodeError)
]


@pytest.mark.parametrize("template", ODD_PATHS)
def test_odd_paths_are_recorded(full: FullProxy, template: str) -> None:
    key = full.secret("AIzaSyODDPATH")
    token = full.routes.add(Reply(chunks=[json.dumps(_anthropic_message()).encode()], chunked=False))
    path = template.format(key=key)
    headers = [f"x-e2e-case: {token}"] + ([] if "{key}" in template else [f"x-api-key: {key}"])
    status, _ = raw_post(full.ports["anthropic"], path, GENERATION, *headers)
    assert status == 200

    row = full.record(key)
    assert row["protocol"] == "anthropic.messages" and row["text"] == "hello"
    assert key not in row["path"]
    assert row["path"].split("?")[0] == path.split("?")[0]  # the path itself as sent


# -- 3. the exact key, of any shape, scrubbed from its own exchange ------------------------------


def test_an_echoed_bearer_key_of_no_known_shape_is_scrubbed(full: FullProxy) -> None:
    key = full.secret("CUSTOMTOKEN")
    body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": f"my token is {key}"}]})
    status, answer = raw_post(
        full.ports["openai"], "/v1/chat/completions", body.encode(), f"authorization: Bearer {key}", f"{ECHO}: error"
    )
    assert status == 401 and key.encode() in answer  # the client gets the upstream's bytes unchanged

    row = full.record(key)
    assert row["status"] == 401 and row["key_last4"] == key[-4:]
    assert "Incorrect API key provided: Bearer [REDACTED]" in row["error_message"]
    assert key not in json.dumps(row, default=str)
    stored = full.stored_bodies(row)
    assert b"my token is [REDACTED]" in stored and key.encode() not in stored


@pytest.mark.parametrize(
    ("listener", "path", "header"),
    [
        ("anthropic", "/v1/messages", "x-api-key: {key}"),
        ("anthropic", "/v1/messages", "authorization: Bearer {key}"),
        ("gemini", "/v1beta/models/gemini-2.5-flash:generateContent", "x-goog-api-key: {key}"),
        ("gemini", "/v1beta/models/gemini-2.5-flash:generateContent?key={key}", ""),
    ],
)
def test_an_echoed_key_in_answer_and_tool_arguments_is_scrubbed(
    full: FullProxy, listener: str, path: str, header: str
) -> None:
    key = full.secret("weird.Key_")
    if listener == "gemini":
        request = {"contents": [{"role": "user", "parts": [{"text": f"use {key}"}]}]}
        kind = "error"
    else:
        request = json.loads(GENERATION) | {"metadata": {"user_id": key}}
        kind = "answer"
    headers = [f"{ECHO}: {kind}"] + ([header.format(key=key)] if header else [])
    status, answer = raw_post(full.ports[listener], path.format(key=key), json.dumps(request).encode(), *headers)
    assert key.encode() in answer

    row = full.record(key)
    assert key not in json.dumps(row, default=str)
    if kind == "answer":
        assert status == 200 and "[REDACTED]" in row["text"]
        (call,) = row["tool_calls"]
        assert "[REDACTED]" in call["arguments"]["token"] and "[REDACTED]" in call["arguments_raw"]
    else:
        assert "[REDACTED]" in row["error_message"]
    assert key.encode() not in full.stored_bodies(row)


def test_the_proxy_auth_password_is_scrubbed(full: FullProxy) -> None:
    """Plain HTTP through the regular proxy: the password rides each request's
    Proxy-Authorization (removed before forwarding); a client that also quotes it in
    its prompt must not get it stored."""
    password = full.secret("proxy-Pass-")
    key = full.secret("sk-ant-api03-PROXYAUTH")
    request = json.loads(GENERATION)
    request["messages"][0]["content"] = f"the proxy password is {password}"
    out, _ = harness.curl(
        [
            "-x", f"http://billing:{password}@127.0.0.1:{full.ports['regular']}",
            f"{full.upstream.url}/v1/messages",
            "-H", "content-type: application/json", "-H", f"x-api-key: {key}", "-H", f"{ECHO}: answer",
            "--data-binary", json.dumps(request),
        ]
    )  # fmt: skip
    assert password.encode() in harness.dechunk(out)[0]

    row = full.record(key)
    assert row["team"] == "billing"
    assert password not in json.dumps(row, default=str)
    assert "[REDACTED]" in row["text"]
    assert password.encode() not in full.stored_bodies(row)


# -- 4. every credential a request carries, not only the key (issue 24) ----------------------

# Headers of AWS, AI gateways (Cloudflare, Portkey, Helicone, LiteLLM) and the like, each
# with a value template: the canary goes where the credential does.
CREDENTIAL_HEADERS = [
    ("X-Amz-Security-Token", "{}"),
    ("cf-aig-authorization", "Bearer {}"),
    ("x-portkey-api-key", "{}"),
    ("helicone-auth", "Bearer {}"),
    ("x-litellm-api-key", "sk-{}"),
    ("x-gateway-token", "{}"),
    ("X-Tenant-Auth-Secret", "{}"),
    ("Cookie", "theme=dark; session={}"),
]
PRESIGNED = ["X-Amz-Credential", "X-Amz-Security-Token", "X-Amz-Signature", "sig"]


def test_every_credential_header_and_presigned_parameter_is_scrubbed(full: FullProxy) -> None:
    """An upstream (a gateway's debug error) quoting every header and the URL it was sent:
    none of the credentials is stored, in the row, the path, the headers, the bodies, or any
    file the proxy writes. Before: only the five key headers' values were removed."""
    key = full.secret("CUSTOMTOKEN")
    values = {name: full.secret(f"cred{index}x") for index, (name, _) in enumerate(CREDENTIAL_HEADERS)}
    headers = [f"{name}: {template.format(values[name])}" for name, template in CREDENTIAL_HEADERS]
    access_key = full.secret("AKIACANARY")
    signed = {name: full.secret(f"q{index}x") for index, name in enumerate(PRESIGNED)}
    signed["X-Amz-Credential"] = f"{access_key}/20261201/us-east-1/bedrock/aws4_request"
    query = "&".join(f"{name}={quote(value, safe='')}" for name, value in signed.items())
    path = f"/v1/chat/completions?X-Amz-Algorithm=AWS4-HMAC-SHA256&{query}&X-Amz-SignedHeaders=host"
    body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hello"}]})
    status, answer = raw_post(
        full.ports["openai"], path, body.encode(), f"authorization: Bearer {key}", f"{ECHO}: every-header", *headers
    )
    canaries = [key, access_key, *values.values(), *signed.values()]
    assert status == 401 and all(c.encode() in answer for c in canaries)  # the client sees what the upstream sent

    row = full.record(key)
    assert row["status"] == 401 and row["error_message"].startswith("Incorrect API key provided:")
    stored = json.dumps(row, default=str) + full.stored_bodies(row).decode("utf-8", "replace")
    assert [c for c in canaries if c in stored] == []
    assert "X-Amz-Signature=[REDACTED]" in row["path"] and "X-Amz-SignedHeaders=host" in row["path"]
    full.assert_nowhere(*canaries)
