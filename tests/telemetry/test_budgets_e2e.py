"""Budgets end to end: a real `llmtap proxy` process with a `[budgets]` config, a local
scripted upstream, the official SDKs, and a webhook receiver on 127.0.0.1.

Spend crosses each threshold; the receiver gets each alert exactly once, also after a
restart of the proxy on the same store; over its limit a team gets its protocol's 429,
which each SDK raises as its rate-limit error, and the refusal is in the store.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from sqlalchemy import Engine, func, select

from llmtap.simulator.upstream import Reply, Upstream
from llmtap.storage import schema
from llmtap.storage.engine import make_engine
from llmtap.storage.secrets import KeyFingerprinter
from tests.e2e import harness
from tests.helpers import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

PICO = Decimal(10) ** 12
ALPHA_USD = Decimal("1")  # alpha crosses its thresholds one request at a time
# One priced request takes beta, gamma and the key over at once: it fits their limit as it
# passes the gate (its estimate: a few input tokens, one output token), yet its reply bills
# more (1000 or 100000 input tokens).
SMALL_USD = Decimal("0.001")

ANTHROPIC_BODY = {
    "id": "msg_budget",
    "type": "message",
    "role": "assistant",
    "model": "claude-haiku-4-5-20251001",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 300000, "output_tokens": 1},
}
OPENAI_BODY = {
    "id": "chatcmpl-budget",
    "object": "chat.completion",
    "created": 1764547200,
    "model": "gpt-4o-2024-08-06",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1000, "completion_tokens": 1, "total_tokens": 1001},
}
GEMINI_BODY = {
    "candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP", "index": 0}],
    "usageMetadata": {"promptTokenCount": 100000, "candidatesTokenCount": 1, "totalTokenCount": 100001},
    "modelVersion": "gemini-2.0-flash",
}


class Receiver:
    """A webhook receiver on 127.0.0.1 that keeps every JSON body it was sent."""

    def __init__(self) -> None:
        self.alerts: list[dict[str, Any]] = []
        received = self.alerts

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("content-length", "0"))
                received.append(json.loads(self.rfile.read(length)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def of(self, name: str) -> list[int]:
        return sorted(a["threshold_percent"] for a in list(self.alerts) if a["name"] == name)


@dataclass
class BudgetProxy:
    root: Path
    upstream: Upstream
    routes: harness.Routes
    receiver: Receiver
    ports: dict[str, int]
    proc: subprocess.Popen[bytes] | None = None
    engine: Engine | None = None
    config: Path | None = None
    limited_key: str = field(default_factory=lambda: harness.canary(harness.OPENAI_KEY))  # [budgets.keys]

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def log(self) -> Path:
        return self.root / "proxy.log"

    def base(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}"

    def write_config(self, key_fingerprint: str) -> Path:
        path = self.root / "config.toml"
        path.write_text(
            f"""
[budgets]
webhook = "{self.receiver.url}"
enforce = true
[budgets.teams]
alpha = {{ usd = {ALPHA_USD}, period = "day" }}
beta = {{ usd = {SMALL_USD}, period = "month", thresholds = [100] }}
gamma = {{ usd = {SMALL_USD}, period = "week", thresholds = [80, 100] }}
[budgets.keys]
"{key_fingerprint}" = {{ usd = {SMALL_USD}, period = "day", thresholds = [100] }}
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
            "--reverse", f"anthropic={self.ports['anthropic']},alpha",
            "--reverse", f"openai={self.ports['openai']},beta",
            "--reverse", f"gemini={self.ports['gemini']},gamma",
            "--upstream", f"anthropic={up}", "--upstream", f"openai={up}", "--upstream", f"gemini={up}",
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

    def rows(self, team: str) -> list[dict[str, Any]]:
        assert self.engine is not None
        ex = schema.exchanges
        with self.engine.connect() as connection:
            found = connection.execute(select(ex).where(ex.c.team == team).order_by(ex.c.id))
            return [dict(r._mapping) for r in found]

    def wait_rows(self, team: str, count: int, timeout: float = 15.0) -> list[dict[str, Any]]:
        return wait_for(lambda: rows if len(rows := self.rows(team)) >= count else None, timeout, self.log)

    def spent(self, team: str) -> Decimal:
        assert self.engine is not None
        ex = schema.exchanges
        with self.engine.connect() as connection:
            total = connection.execute(select(func.sum(ex.c.cost_total_pico)).where(ex.c.team == team)).scalar()
        return Decimal(total or 0) / PICO


def wait_for(check: Callable[[], Any], timeout: float, log: Path | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-3000:] if log is not None else ""
            raise AssertionError(f"not within {timeout}s; proxy log:\n{tail}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def budget_proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BudgetProxy]:
    if not harness.LLMTAP.exists():
        pytest.skip(f"the llmtap console script is not at {harness.LLMTAP}")
    root = tmp_path_factory.mktemp("budgets")
    routes = harness.Routes()
    with Upstream(routes) as upstream, Receiver() as receiver:
        ports = {name: free_port() for name in ("anthropic", "openai", "gemini")}
        proxy = BudgetProxy(root, upstream, routes, receiver, ports)
        # the key budget names a fingerprint of this home's secret: made before the proxy starts
        proxy.home.mkdir(parents=True)
        fingerprinter = KeyFingerprinter.from_file(proxy.home / "fingerprint.secret")
        proxy.config = proxy.write_config(fingerprinter.fingerprint(proxy.limited_key))
        proxy.start(proxy.config)
        yield proxy
        if proxy.proc is not None and proxy.proc.poll() is None:
            assert proxy.stop() == 0
        log = proxy.log.read_text(errors="replace")
        assert "Traceback" not in log, log[-3000:]
        shutil.rmtree(root / "mitmproxy", ignore_errors=True)


@pytest.fixture
def opened() -> Iterator[list[Any]]:
    """The SDK clients a test made, closed after it (their keep-alive sockets)."""
    clients: list[Any] = []
    yield clients
    for client in clients:
        client.close()


def _json(body: dict[str, Any]) -> Reply:
    return Reply(200, chunks=[json.dumps(body).encode()])


def _anthropic(proxy: BudgetProxy, token: str, key: str, opened: list[Any]) -> Any:
    client = anthropic.Anthropic(
        api_key=key, base_url=proxy.base("anthropic"), max_retries=0, default_headers={harness.CASE_HEADER: token}
    )
    opened.append(client)
    return client


def _ask_anthropic(client: Any) -> Any:
    return client.messages.create(
        model="claude-haiku-4-5-20251001", max_tokens=16, messages=[{"role": "user", "content": "hi"}]
    )


def test_thresholds_once_enforcement_and_restart(budget_proxy: BudgetProxy, opened: list[Any]) -> None:
    proxy, receiver = budget_proxy, budget_proxy.receiver
    key = harness.canary(harness.ANTHROPIC_KEY)
    token = proxy.routes.add(_json(ANTHROPIC_BODY))
    client = _anthropic(proxy, token, key, opened)
    sent = 0
    refused = None
    for _ in range(10):  # bounded: alpha is over after four requests at $0.30 (haiku 4.5 input)
        try:
            _ask_anthropic(client)
        except anthropic.RateLimitError as exc:
            refused = exc
            break
        sent += 1
        proxy.wait_rows("alpha", sent)
        spent = proxy.spent("alpha")
        assert spent > 0, "the upstream's reply was not priced"
        due = [t for t in (50, 80, 100) if spent * 100 >= ALPHA_USD * t]
        # each threshold reached so far, each exactly once (let a late duplicate show up)
        wait_for(lambda due=due: receiver.of("alpha") == due, 10, proxy.log)
        if due and due[-1] == 100:
            # the over-limit state reaches the proxy's gate within about a second
            time.sleep(1.5)
    assert refused is not None, f"alpha was never refused after {sent} requests"
    assert 100 in receiver.of("alpha")
    assert refused.status_code == 429
    assert refused.response.headers["x-llmtap-refused"] == "budget"
    assert 1 <= int(refused.response.headers["retry-after"]) <= 86_400
    body = refused.response.json()
    assert body["type"] == "error" and body["error"]["type"] == "rate_limit_error"
    assert len(proxy.routes.seen(token)) == sent, "the refused request reached the upstream"

    # the refusal is an exchange in the store: status 429, the protocol's error type, no cost
    rows = proxy.wait_rows("alpha", sent + 1)
    refusal = rows[-1]
    assert (refusal["status"], refusal["error_type"]) == (429, "rate_limit_error")
    assert not refusal["cost_total_pico"]
    alert = next(a for a in receiver.alerts if a["name"] == "alpha" and a["threshold_percent"] == 100)
    assert alert["scope"] == "team" and alert["period"] == "day" and alert["over"] is True
    assert Decimal(alert["spent_usd"]) >= ALPHA_USD
    assert "llmtap budgets: team alpha reached 100% of its day limit" in proxy.log.read_text()

    # a restart on the same store: still refused, and no threshold fires again
    assert proxy.stop() == 0
    state = proxy.home / "spool" / "budgets-over.json"
    before = state.stat().st_mtime_ns
    assert proxy.config is not None
    proxy.start(proxy.config)
    wait_for(lambda: state.stat().st_mtime_ns != before, 15, proxy.log)  # the new writer has checked
    with pytest.raises(anthropic.RateLimitError):
        _ask_anthropic(_anthropic(proxy, token, key, opened))
    with pytest.raises(anthropic.RateLimitError):  # a streamed request gets the same JSON 429
        _anthropic(proxy, token, key, opened).messages.create(
            model="claude-haiku-4-5-20251001", max_tokens=16, messages=[{"role": "user", "content": "hi"}], stream=True
        )
    time.sleep(1.5)
    assert receiver.of("alpha") == [50, 80, 100]
    assert len(proxy.routes.seen(token)) == sent
    refusals = wait_for(lambda: [r for r in proxy.rows("alpha") if r["status"] == 429][2:], 10, proxy.log)
    assert [(r["error_type"], r["decode_error"]) for r in refusals] == [("rate_limit_error", None)]


def test_openai_gemini_and_key_budgets(budget_proxy: BudgetProxy, opened: list[Any]) -> None:
    """Runs after the test above, on its proxy (module scope, file order)."""
    proxy, receiver = budget_proxy, budget_proxy.receiver
    assert proxy.proc is not None and proxy.proc.poll() is None, "the first test did not leave a proxy running"
    openai_token = proxy.routes.add(_json(OPENAI_BODY))
    gemini_token = proxy.routes.add(_json(GEMINI_BODY))
    oai = openai.OpenAI(
        api_key=harness.canary(harness.OPENAI_KEY),
        base_url=proxy.base("openai") + "/v1",
        max_retries=0,
        default_headers={harness.CASE_HEADER: openai_token},
    )
    gem = genai.Client(
        api_key=harness.canary(harness.GOOGLE_KEY),
        http_options=genai.types.HttpOptions(
            base_url=proxy.base("gemini"),
            headers={harness.CASE_HEADER: gemini_token},
            retry_options=genai.types.HttpRetryOptions(attempts=1),
        ),
    )

    opened.extend((oai, gem))

    def ask_openai(client: Any = oai) -> Any:
        return client.chat.completions.create(
            model="gpt-4o-2024-08-06", messages=[{"role": "user", "content": "hi"}], max_tokens=1
        )

    def ask_gemini() -> Any:
        config = genai.types.GenerateContentConfig(max_output_tokens=1)
        return gem.models.generate_content(model="gemini-2.0-flash", contents="hi", config=config)

    ask_openai()  # one priced request each takes beta and gamma over their small limits
    ask_gemini()
    wait_for(lambda: receiver.of("beta") == [100] and receiver.of("gamma") == [80, 100], 10, proxy.log)

    refused_openai = wait_for(lambda: _refused(ask_openai, openai.RateLimitError), 10, proxy.log)
    assert refused_openai.status_code == 429
    assert refused_openai.body["type"] == "insufficient_quota"
    refused_gemini = wait_for(lambda: _refused(ask_gemini, genai.errors.ClientError), 10, proxy.log)
    assert refused_gemini.code == 429 and refused_gemini.status == "RESOURCE_EXHAUSTED"
    # once refused, refused again, and nothing more reaches the upstream (before the refusal
    # a request may pass: the gate learns of the spend within a second)
    passed = len(proxy.routes.seen(openai_token)), len(proxy.routes.seen(gemini_token))
    assert _refused(ask_openai, openai.RateLimitError) and _refused(ask_gemini, genai.errors.ClientError)
    assert (len(proxy.routes.seen(openai_token)), len(proxy.routes.seen(gemini_token))) == passed
    assert receiver.of("beta") == [100] and receiver.of("gamma") == [80, 100]
    refusals = wait_for(lambda: [r for r in proxy.rows("gamma") if r["status"] == 429], 10, proxy.log)
    assert {r["error_type"] for r in refusals} == {"RESOURCE_EXHAUSTED"}
    refusals = wait_for(lambda: [r for r in proxy.rows("beta") if r["status"] == 429], 10, proxy.log)
    assert {r["error_type"] for r in refusals} == {"insufficient_quota"}

    # a key's own budget, whatever team it is sent for (X-LLMTap-Team: delta has no limit)
    def client_for(key: str) -> Any:
        headers = {harness.CASE_HEADER: openai_token, "X-LLMTap-Team": "delta"}
        client = openai.OpenAI(
            api_key=key, base_url=proxy.base("openai") + "/v1", max_retries=0, default_headers=headers
        )
        opened.append(client)
        return client

    ask_openai(client_for(proxy.limited_key))
    wait_for(lambda: [a["threshold_percent"] for a in receiver.alerts if a["scope"] == "key"] == [100], 10, proxy.log)
    refused_key = wait_for(
        lambda: _refused(lambda: ask_openai(client_for(proxy.limited_key)), openai.RateLimitError), 10
    )
    assert "key " in refused_key.body["message"]
    answer = ask_openai(client_for(harness.canary(harness.OPENAI_KEY)))  # another key of team delta goes through
    assert answer.choices[0].message.content == "ok"
    assert [a["threshold_percent"] for a in receiver.alerts if a["scope"] == "key"] == [100]


def _refused(ask: Callable[[], Any], error: type[Exception]) -> Exception | None:
    try:
        ask()
    except error as exc:
        if getattr(exc, "status_code", None) == 429 or getattr(exc, "code", None) == 429:
            return exc
        raise
    return None
