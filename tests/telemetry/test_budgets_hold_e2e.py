"""Budgets that hold (SPEC §4, §6), through a real `llmtap proxy` process: spend in flight
counts, WebSocket sessions are refused at the upgrade and per `response.create`, and an
extra credential header changes nothing.

One proxy for the module: an `anthropic` listener of team `streams` (20 concurrent
streams against a tiny limit), `openai` and `gemini` listeners without a team (the key map
and key budgets, with a junk `x-api-key` added), and a `--mode reverse:` listener in front
of a scripted Responses WebSocket server (team `sockets`, named by header).
"""

from __future__ import annotations

import json
import secrets
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx2
import pytest
from sqlalchemy import Engine, select

from llmtap.analytics.pricing import Pricer
from llmtap.simulator.upstream import Reply, Upstream
from llmtap.storage import schema
from llmtap.storage.engine import make_engine
from llmtap.storage.secrets import KeyFingerprinter
from tests.e2e import harness
from tests.e2e.wsupstream import WsUpstream
from tests.helpers import free_port
from tests.telemetry.test_budgets_e2e import wait_for

websockets = pytest.importorskip("websockets", reason="Responses WebSocket mode needs the websockets package")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

PICO = Decimal(10) ** 12
HAIKU = "claude-haiku-4-5-20251001"  # $1 / $5 per million input / output tokens
STREAMS_USD = Decimal("0.002")  # room for three requests' estimates, not four
SOCKETS_USD = Decimal("0.001")  # room for one response.create's estimate; its real cost takes it over
TINY_USD = Decimal("0.000001")  # below any request's estimate: a key with it is always refused
CONCURRENT = 20
MAX_TOKENS = 100
STREAM_USAGE = {"input_tokens": 20, "output_tokens": 90}  # under the estimate: body/4 input, max_tokens output
STREAM_COST = 20 * 1_000_000 + 90 * 5_000_000  # pico-dollars: $1 and $5 per million tokens


def _anthropic_stream() -> Reply:
    """A priced Anthropic stream that lasts about 1.5 s, so the 20 requests overlap."""
    events = [
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_hold", "type": "message", "role": "assistant", "model": HAIKU, "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": STREAM_USAGE["input_tokens"], "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "held "}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "within budget"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                           "usage": {"output_tokens": STREAM_USAGE["output_tokens"]}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip
    chunks = [f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events]
    return Reply(200, content_type="text/event-stream", chunks=chunks, delay=0.25)


OPENAI_BODY = {
    "id": "chatcmpl-hold",
    "object": "chat.completion",
    "created": 1764547200,
    "model": "gpt-4o-2024-08-06",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1000, "completion_tokens": 1, "total_tokens": 1001},
}
GEMINI_BODY = {
    "candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP", "index": 0}],
    "usageMetadata": {"promptTokenCount": 1000, "candidatesTokenCount": 1, "totalTokenCount": 1001},
    "modelVersion": "gemini-2.0-flash",
}


def _ws_frames(create: dict[str, Any]) -> list[str]:
    """A completed Responses answer whose usage costs far more than the create's estimate."""
    response = {
        "id": f"resp_{secrets.token_hex(6)}",
        "object": "response",
        "status": "completed",
        "model": "gpt-4o-mini-2024-07-18",
        "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": "ok", "annotations": []}]}],
        "usage": {"input_tokens": 100000, "output_tokens": 2, "total_tokens": 100002,
                  "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
    }  # fmt: skip
    created = {"type": "response.created", "response": {**response, "status": "in_progress", "usage": None}}
    return [json.dumps(created), json.dumps({"type": "response.completed", "response": response})]


@dataclass
class HoldProxy:
    root: Path
    upstream: Upstream
    ws: WsUpstream
    routes: harness.Routes
    ports: dict[str, int]
    keys: dict[str, str]  # role -> canary key
    proc: subprocess.Popen[bytes] | None = None
    engine: Engine | None = None

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def log(self) -> Path:
        return self.root / "proxy.log"

    def base(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}"

    def fingerprint(self, key: str) -> str:
        return KeyFingerprinter.from_file(self.home / "fingerprint.secret").fingerprint(key)

    def write_config(self) -> Path:
        fp = {role: self.fingerprint(key) for role, key in self.keys.items()}
        path = self.root / "config.toml"
        path.write_text(
            f"""
[teams]
"{fp["openai_mapped"]}" = "mapped"
"{fp["gemini_mapped"]}" = "mapped"
[budgets]
enforce = true
[budgets.teams]
streams = {{ usd = {STREAMS_USD}, period = "day" }}
sockets = {{ usd = {SOCKETS_USD}, period = "day" }}
[budgets.keys]
"{fp["openai_limited"]}" = {{ usd = {TINY_USD}, period = "day" }}
"{fp["gemini_limited"]}" = {{ usd = {TINY_USD}, period = "day" }}
"""
        )
        return path

    def start(self, config: Path) -> None:
        up = self.upstream.url
        args = [
            str(harness.LLMTAP), "proxy", "--quiet", "--no-regular",
            "--config", str(config),
            "--db", f"sqlite:///{self.root / 'llmtap.db'}",
            "--confdir", str(self.root / "mitmproxy"),
            "--reverse", f"anthropic={self.ports['anthropic']},streams",
            "--reverse", f"openai={self.ports['openai']}",
            "--reverse", f"gemini={self.ports['gemini']}",
            "--upstream", f"anthropic={up}", "--upstream", f"openai={up}", "--upstream", f"gemini={up}",
            "--mode", f"reverse:{self.ws.url}@127.0.0.1:{self.ports['ws']}",
        ]  # fmt: skip
        with self.log.open("ab") as log:
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

    def rows(self, **where: str) -> list[dict[str, Any]]:
        assert self.engine is not None
        ex = schema.exchanges
        query = select(ex).order_by(ex.c.id)
        for column, value in where.items():
            query = query.where(ex.c[column] == value)
        with self.engine.connect() as connection:
            return [dict(r._mapping) for r in connection.execute(query)]


@pytest.fixture(scope="module")
def hold(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HoldProxy]:
    if not harness.LLMTAP.exists():
        pytest.skip(f"the llmtap console script is not at {harness.LLMTAP}")
    root = tmp_path_factory.mktemp("budgets-hold")
    routes = harness.Routes()
    roles = ("openai_mapped", "openai_limited", "openai_fresh")
    keys = {role: harness.canary(harness.OPENAI_KEY) for role in roles}
    keys |= {role: harness.canary(harness.GOOGLE_KEY) for role in ("gemini_mapped", "gemini_limited")}
    with Upstream(routes) as upstream, WsUpstream(_ws_frames, delay=0.05) as ws:
        ports = {name: free_port() for name in ("anthropic", "openai", "gemini", "ws")}
        proxy = HoldProxy(root, upstream, ws, routes, ports, keys)
        proxy.home.mkdir(parents=True)  # the config names fingerprints of this home's secret
        proxy.start(proxy.write_config())
        try:
            yield proxy
        finally:
            code = proxy.stop() if proxy.proc is not None and proxy.proc.poll() is None else proxy.proc.returncode
    log = proxy.log.read_text(errors="replace")
    assert code == 0, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    for key in keys.values():
        assert key.encode() not in b"".join(p.read_bytes() for p in root.glob("llmtap.db*")), "a key was stored"
    shutil.rmtree(root / "mitmproxy", ignore_errors=True)


def _estimate_usd(body: bytes, max_tokens: int) -> Decimal:
    """One request's estimate as the gate makes it: a token per four bytes of body and its
    `max_tokens`, at the model's genai-prices prices."""
    row = {
        "provider": "anthropic",
        "protocol": "anthropic.messages",
        "model": HAIKU,
        "started_at": datetime.now(UTC),
        "usage_input_tokens": -(-len(body) // 4),
        "usage_output_tokens": max_tokens,
    }
    cost = Pricer().price_row(row)
    assert cost.total is not None
    return Decimal(cost.total) / PICO


def test_concurrent_streams_stay_within_the_limit(hold: HoldProxy) -> None:
    """Before: every stream passed the gate (only committed spend counted), 20 x $0.00047."""
    token = hold.routes.add(_anthropic_stream())
    body = json.dumps(
        {"model": HAIKU, "max_tokens": MAX_TOKENS, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    ).encode()
    headers = {
        "x-api-key": harness.canary(harness.ANTHROPIC_KEY),
        "anthropic-version": "2023-06-01",
        "content-type": "application/json",
        harness.CASE_HEADER: token,
    }
    start = threading.Barrier(CONCURRENT)
    statuses: list[int] = []

    def one() -> None:
        with httpx2.Client(timeout=30) as client:
            start.wait()
            with client.stream("POST", hold.base("anthropic") + "/v1/messages", content=body, headers=headers) as r:
                r.read()
                statuses.append(r.status_code)
                if r.status_code == 429:
                    assert r.headers["x-llmtap-refused"] == "budget"
                    assert r.json()["error"]["type"] == "rate_limit_error"

    threads = [threading.Thread(target=one) for _ in range(CONCURRENT)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(statuses) == CONCURRENT
    passed = statuses.count(200)
    assert passed >= 1 and statuses.count(429) == CONCURRENT - passed, statuses
    assert len(hold.routes.done(token)) == passed, "a refused request reached the upstream"

    wait_for(lambda: len(hold.rows(team="streams")) >= CONCURRENT, 20, hold.log)

    # what the streams reserved is released once their cost is committed: while the rest
    # of the limit holds another estimate, one more request passes
    estimate = _estimate_usd(body, MAX_TOKENS)
    room = STREAMS_USD - passed * Decimal(STREAM_COST) / PICO
    if room >= estimate:

        def one_more() -> bool:
            with httpx2.Client(timeout=30) as client:
                response = client.post(hold.base("anthropic") + "/v1/messages", content=body, headers=headers)
                response.read()
                return response.status_code == 200

        wait_for(one_more, 20, hold.log)
        passed += 1

    def spent_once_stored() -> Decimal | None:
        priced = [r for r in hold.rows(team="streams") if r["cost_total_pico"]]
        return sum(Decimal(r["cost_total_pico"]) for r in priced) / PICO if len(priced) == passed else None

    spent = wait_for(spent_once_stored, 20, hold.log)
    assert spent == passed * Decimal(STREAM_COST) / PICO
    # The bound: the limit plus one request's estimate (each stream costs less than its
    # estimate, so in fact the limit alone holds).
    assert spent <= STREAMS_USD + estimate, (spent, passed, estimate)
    assert spent <= STREAMS_USD


def _ws_connect(hold: HoldProxy, key: str) -> Any:
    from websockets.sync.client import connect

    return connect(
        f"ws://127.0.0.1:{hold.ports['ws']}/v1/responses",
        additional_headers={"Authorization": f"Bearer {key}", "X-LLMTap-Team": "sockets"},
        open_timeout=10,
    )


def _create(connection: Any) -> dict[str, Any]:
    """Send a response.create and return its terminal event (or the error)."""
    create = {"type": "response.create", "model": "gpt-4o-mini", "input": "hi", "max_output_tokens": 1000}
    connection.send(json.dumps(create))
    while True:
        event = json.loads(connection.recv(timeout=10))
        if event.get("type") in ("response.completed", "response.failed", "response.incomplete", "error"):
            return event


def _upgrade_refused(hold: HoldProxy, key: str) -> Any:
    """The handshake's refusal, or None when the session opened (it is closed at once)."""
    from websockets.exceptions import InvalidStatus

    try:
        with _ws_connect(hold, key):
            return None
    except InvalidStatus as refused:
        return refused.response


def test_websocket_refused_at_the_upgrade_and_mid_session(hold: HoldProxy) -> None:
    """Before: a WebSocket session was never refused, neither its upgrade nor a message."""
    key = harness.canary(harness.OPENAI_KEY)
    before = sum(1 for e in hold.ws.received if e.get("type") == "response.create")
    with _ws_connect(hold, key) as connection:
        event = _create(connection)  # the first fits the limit; its real cost takes team sockets over
        assert event["type"] == "response.completed", event

        # once the gate knows of the spend (within a second or so), no new session opens
        response = wait_for(lambda: _upgrade_refused(hold, key), 20, hold.log)
        assert response.status_code == 429
        assert response.headers["x-llmtap-refused"] == "budget"
        assert json.loads(response.body)["error"]["code"] == "insufficient_quota"

        # and the session already open gets a Responses `error` event for each create
        for _ in range(2):  # the session stays open: a refused message is answered, not the socket closed
            event = _create(connection)
            assert event["type"] == "error" and event["status"] == 429, event
            assert event["error"]["type"] == "insufficient_quota"
            assert "team sockets is over its day budget" in event["error"]["message"]
    forwarded = sum(1 for e in hold.ws.received if e.get("type") == "response.create") - before
    assert forwarded == 1, "a refused response.create reached the upstream"

    # the refused messages are in the store beside the admitted response
    rows = wait_for(lambda: r if len(r := hold.rows(team="sockets")) >= 3 else None, 15, hold.log)
    assert sorted((r["status"], r["error_type"]) for r in rows) == [
        (101, None),
        (429, "insufficient_quota"),
        (429, "insufficient_quota"),
    ]


def _openai(hold: HoldProxy, key: str, token: str, junk: bool) -> httpx2.Response:
    headers = {"authorization": f"Bearer {key}", harness.CASE_HEADER: token}
    if junk:
        headers["x-api-key"] = harness.canary("junk-")
    body = {"model": "gpt-4o-2024-08-06", "messages": [{"role": "user", "content": "hi"}]}
    return httpx2.post(hold.base("openai") + "/v1/chat/completions", json=body, headers=headers, timeout=30)


def _gemini(hold: HoldProxy, key: str, token: str, junk: bool) -> httpx2.Response:
    headers = {"x-goog-api-key": key, harness.CASE_HEADER: token}
    if junk:
        headers["x-api-key"] = harness.canary("junk-")
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    url = hold.base("gemini") + "/v1beta/models/gemini-2.0-flash:generateContent"
    return httpx2.post(url, json=body, headers=headers, timeout=30)


def test_a_junk_key_header_changes_nothing(hold: HoldProxy) -> None:
    """Before: an extra `x-api-key` became the request's key, so the key map and the key's
    budget no longer applied."""
    openai_token = hold.routes.add(Reply(200, chunks=[json.dumps(OPENAI_BODY).encode()]))
    gemini_token = hold.routes.add(Reply(200, chunks=[json.dumps(GEMINI_BODY).encode()]))
    keys = hold.keys

    # the key map: the destination's credential names the team, junk or not
    for ask, role, token in ((_openai, "openai_mapped", openai_token), (_gemini, "gemini_mapped", gemini_token)):
        assert ask(hold, keys[role], token, junk=True).status_code == 200
        row = wait_for(lambda role=role: hold.rows(key_fingerprint=hold.fingerprint(keys[role])), 15, hold.log)[0]
        assert (row["team"], row["attribution"]) == ("mapped", "key_map"), role

    # a key budget: refused (its limit is below any estimate), and a junk header does not
    # make the request another key's
    for ask, role, token in ((_openai, "openai_limited", openai_token), (_gemini, "gemini_limited", gemini_token)):
        passed = len(hold.routes.seen(token))
        for _ in range(40):  # before the fix the first passed; once its spend is known, refused
            if ask(hold, keys[role], token, junk=False).status_code == 429:
                break
        assert ask(hold, keys[role], token, junk=False).status_code == 429, role
        refused = ask(hold, keys[role], token, junk=True)
        assert refused.status_code == 429, role
        assert refused.headers["x-llmtap-refused"] == "budget"
        assert len(hold.routes.seen(token)) <= passed + 1

    # every credential a request carries counts: an over-budget key in a header the
    # destination does not read refuses it too
    headers = {
        "authorization": f"Bearer {keys['openai_fresh']}",
        "x-api-key": keys["openai_limited"],
        harness.CASE_HEADER: openai_token,
    }
    body = {"model": "gpt-4o-2024-08-06", "messages": [{"role": "user", "content": "hi"}]}
    refused = httpx2.post(hold.base("openai") + "/v1/chat/completions", json=body, headers=headers, timeout=30)
    assert refused.status_code == 429 and "key " in refused.json()["error"]["message"]
