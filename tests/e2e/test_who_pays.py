"""Who pays, and who may use the proxy (SPEC §4, §6), through a real `llmtap proxy` of
each test's own (its config differs from the session proxy's) in front of local upstreams:

- `[auth]` in the config: wrong or missing proxy credentials get 407 and go nowhere, the
  password is checked (not only the user name), and X-LLMTap-Team names no one;
- every record says which rule named its team (`attribution`), and a key-shaped team name
  is scrubbed like a key;
- only a provider's host or a configured upstream is priced: a reply from anywhere else,
  whatever model and usage it claims, stays `unpriced` (`unverified_host`), also after
  `llmtap reprice`;
- the proxy listens on 127.0.0.1 unless told otherwise, its banner prints the address it
  really listens on, and a non-loopback listener without `[auth]` gets a warning.
"""

from __future__ import annotations

import base64
import contextlib
import json
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from sqlalchemy import select

from llmtap.simulator.upstream import Reply, Upstream
from llmtap.storage import schema
from llmtap.storage.engine import make_engine
from llmtap.storage.secrets import KeyFingerprinter
from tests.e2e import harness
from tests.helpers import free_port, llmtap

ANTHROPIC_REQUEST = json.dumps(
    {"model": "claude-opus-4-1-20250805", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
)


def _forged_reply(model: str = "claude-opus-4-1-20250805") -> Reply:
    """An Anthropic-shaped answer that claims a billion tokens of an expensive model."""
    body = {
        "id": "msg_forged",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1_000_000_000, "output_tokens": 100_000_000},
    }
    return Reply(200, chunks=[json.dumps(body).encode()])


@dataclass
class Running:
    root: Path
    proc: subprocess.Popen[bytes]
    log: Path
    db: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def rows(self, expected: int, timeout: float = 15.0) -> list[dict[str, Any]]:
        engine = make_engine(f"sqlite:///{self.db}")
        try:
            deadline = time.monotonic() + timeout
            while True:
                with engine.connect() as connection:
                    ex = schema.exchanges
                    rows = [dict(r) for r in connection.execute(select(ex).order_by(ex.c.id)).mappings()]
                if len(rows) >= expected or time.monotonic() > deadline:
                    assert len(rows) == expected, f"{len(rows)} rows, not {expected}:\n{self.text()[-3000:]}"
                    return rows
                time.sleep(0.05)
        finally:
            engine.dispose()


@contextlib.contextmanager
def running(tmp: Path, args: list[str], config: str = "", wait: tuple[int, ...] = ()) -> Iterator[Running]:
    """`llmtap proxy ARGS` with a config file of its own; SIGTERM at the end, exit 0 checked."""
    if not harness.LLMTAP.exists():
        pytest.skip(f"the llmtap console script is not at {harness.LLMTAP}")
    (tmp / "config.toml").write_text(config)
    db, log = tmp / "llmtap.db", tmp / "proxy.log"
    command = [
        str(harness.LLMTAP), "proxy", "--db", f"sqlite:///{db}", "--confdir", str(tmp / "mitmproxy"),
        "--config", str(tmp / "config.toml"), *args,
    ]  # fmt: skip
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            command, env=harness.clean_env(LLMTAP_HOME=str(tmp / "home")), stdout=sink, stderr=sink, cwd=tmp
        )
    try:
        for port in wait:
            harness.wait_for_port(port, proc, log)
        deadline = time.monotonic() + 10
        while "Ctrl-C" not in log.read_text(errors="replace") and "--quiet" not in args:
            assert time.monotonic() < deadline and proc.poll() is None, log.read_text(errors="replace")
            time.sleep(0.05)
        yield Running(tmp, proc, log, db)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
    assert code == 0, log.read_text(errors="replace")[-3000:]
    assert "Traceback" not in log.read_text(errors="replace")


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


# -- [auth] ------------------------------------------------------------------------------------


def test_auth_refuses_wrong_credentials_and_ignores_the_team_header(tmp_path: Path, routes: harness.Routes) -> None:
    secret = "pw-alpha-" + "7" * 20
    token = routes.add(Reply(200, chunks=[harness.case("a_anth_json_cache_write").response]))
    with Upstream(routes) as upstream:
        regular, listener = free_port(), free_port()
        config = f'[auth]\nalpha = "{secret}"\nbeta = "pw-beta-other"\n'
        args = [
            "--port", str(regular), "--reverse", f"anthropic={listener},listener-team",
            "--upstream", f"anthropic={upstream.url}",
        ]  # fmt: skip
        with running(tmp_path, args, config, wait=(regular, listener)) as proxy:
            target = f"{upstream.url}/v1/messages"
            headers = {"content-type": "application/json", harness.CASE_HEADER: token, "x-api-key": "sk-ant-x"}
            through = f"http://127.0.0.1:{regular}"
            refused = []
            for credential in (None, _basic("alpha", "wrong"), _basic("beta", secret), _basic("nobody", secret)):
                extra = {"proxy-authorization": credential} if credential else {}
                with httpx2.Client(proxy=through, timeout=10, trust_env=False) as client:
                    answer = client.post(target, content=ANTHROPIC_REQUEST, headers=headers | extra)
                refused.append((answer.status_code, answer.headers.get("proxy-authenticate")))
            assert refused == [(407, 'Basic realm="llmtap"')] * 4
            assert routes.seen(token) == []  # nothing reached the upstream

            # HTTPS: the CONNECT itself is refused, no tunnel is opened
            connect = subprocess.run(
                [harness.CURL, "-sS", "-o", "/dev/null", "-w", "%{http_connect}", "-x",
                 f"http://alpha:wrong@127.0.0.1:{regular}", "https://127.0.0.1:9/v1/messages"],
                capture_output=True, text=True, env=harness.clean_env(), timeout=20, check=False,
            )  # fmt: skip
            assert connect.stdout.strip() == "407", (connect.stdout, connect.stderr)

            # the right password: the team is the proxy-auth user, whatever the header says
            with httpx2.Client(proxy=f"http://alpha:{secret}@127.0.0.1:{regular}", timeout=10, trust_env=False) as c:
                answer = c.post(target, content=ANTHROPIC_REQUEST, headers=headers | {"X-LLMTap-Team": "beta"})
            assert answer.status_code == 200
            (seen,) = routes.done(token)
            assert "proxy-authorization" not in seen.headers and "x-llmtap-team" not in seen.headers

            # a reverse listener: no proxy credentials there; its team stands, the header is off
            answer = httpx2.post(
                f"http://127.0.0.1:{listener}/v1/messages",
                content=ANTHROPIC_REQUEST,
                headers=headers | {"X-LLMTap-Team": "beta"},
                timeout=10,
            )
            assert answer.status_code == 200
            rows = proxy.rows(2)
        assert [(r["team"], r["attribution"]) for r in rows] == [("alpha", "proxy_auth"), ("listener-team", "listener")]
        written = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "config.toml"]  # the operator's
        assert written  # the store, the proxy's log and home
        for path in written:
            assert secret.encode() not in path.read_bytes(), f"the proxy password is in {path}"


def test_auth_with_a_mode_that_cannot_authenticate_is_refused(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[auth]\nalpha = "pw"\n')
    done = llmtap(
        "proxy", "--config", str(tmp_path / "config.toml"), "--db", f"sqlite:///{tmp_path / 'x.db'}",
        "--mode", f"socks5@127.0.0.1:{free_port()}",
        env={"LLMTAP_HOME": str(tmp_path / "home")}, process=True, timeout=60,
    )  # fmt: skip
    assert done.code == 2 and len(done.err.strip().splitlines()) == 1, done.err
    assert "[auth]" in done.err and "pw" not in done.err.replace("[auth]", "")


# -- attribution and pricing trust -------------------------------------------------------------


def test_attribution_rules_scrubbed_teams_and_unverified_hosts(tmp_path: Path, routes: harness.Routes) -> None:
    home = tmp_path / "home"
    mapped_key = harness.canary(harness.OPENAI_KEY)
    fingerprint = KeyFingerprinter.from_file(home / "fingerprint.secret").fingerprint(mapped_key)
    config = f'[teams]\n"{fingerprint}" = "mapped-team"\n'
    # three answers of their own (each a distinct response id) for the three Chat requests
    chats = [
        harness.case(name)
        for name in ("a_oai_json_cached_tokens", "a_oai_json_text_basic", "a_oai_json_tool_call_single")
    ]
    tokens = [routes.add(harness.json_reply(c)) for c in chats]
    forged = routes.add(_forged_reply())
    key_team = "sk-ant-api03-" + "K" * 40
    with Upstream(routes) as configured, Upstream(routes) as elsewhere:
        regular, anthropic, openai = free_port(), free_port(), free_port()
        args = [
            "--quiet", "--port", str(regular),
            "--reverse", f"anthropic={anthropic},listener-team", "--reverse", f"openai={openai}",
            "--upstream", f"anthropic={configured.url}", "--upstream", f"openai={configured.url}",
        ]  # fmt: skip
        with running(tmp_path, args, config, wait=(regular, anthropic, openai)) as proxy:
            plain = {"content-type": "application/json"}
            # 1. a host nobody configured, through the regular proxy: recorded, never priced
            with httpx2.Client(proxy=f"http://crafty:x@127.0.0.1:{regular}", timeout=10, trust_env=False) as client:
                client.post(f"{elsewhere.url}/v1/messages", content=ANTHROPIC_REQUEST,
                            headers=plain | {harness.CASE_HEADER: forged})  # fmt: skip
            # 2. the same forged reply from the configured upstream: the operator's choice, priced
            httpx2.post(f"http://127.0.0.1:{anthropic}/v1/messages", content=ANTHROPIC_REQUEST,
                        headers=plain | {harness.CASE_HEADER: forged}, timeout=10)  # fmt: skip
            # 3. a key-shaped team header: scrubbed like a key
            # 3. a key-shaped team header: scrubbed like a key; 4. the key map; 5. no rule at all
            extras = [{"X-LLMTap-Team": key_team}, {"authorization": f"Bearer {mapped_key}"}, {}]
            for c, token, extra in zip(chats, tokens, extras, strict=True):
                assert c.request is not None
                answer = httpx2.post(f"http://127.0.0.1:{openai}/v1/chat/completions", content=c.request,
                                     headers=plain | {harness.CASE_HEADER: token} | extra, timeout=10)  # fmt: skip
                assert answer.status_code == 200
            rows = proxy.rows(5)
    who = [(r["team"], r["attribution"]) for r in rows]
    assert who == [
        ("crafty", "proxy_auth"),
        ("listener-team", "listener"),
        ("[REDACTED]", "header"),
        ("mapped-team", "key_map"),
        ("unattributed", "none"),
    ]
    assert key_team.encode() not in b"".join(p.read_bytes() for p in tmp_path.rglob("llmtap.db*"))
    forged_row, trusted_row = rows[0], rows[1]
    assert (forged_row["price_status"], forged_row["price_reason"], forged_row["cost_total_pico"]) == (
        "unpriced", "unverified_host", None
    )  # fmt: skip
    assert trusted_row["price_status"] == "priced" and trusted_row["price_reason"] is None
    assert all(r["price_status"] == "priced" for r in rows[2:])  # a configured upstream, a known model

    env = {"LLMTAP_HOME": str(home)}
    db = f"sqlite:///{tmp_path / 'llmtap.db'}"
    assert llmtap("reprice", "--db", db, env=env, process=True).code == 0
    cost = llmtap("report", "cost", "--by", "team", "--format", "json", "--db", db, env=env, process=True)
    by_team = {row["team"]: row for row in json.loads(cost.out)}
    assert (by_team["crafty"]["cost_usd"], by_team["crafty"]["unpriced"]) == (None, 1)
    assert by_team["crafty"]["unverified_host"] == 1
    shown = llmtap("show", forged_row["id"], "--db", db, env=env, process=True)
    assert shown.code == 0 and "unverified_host" in shown.out and "proxy_auth" in shown.out
    engine = make_engine(db)
    try:
        with engine.connect() as connection:
            again = connection.execute(
                select(schema.exchanges.c.price_status, schema.exchanges.c.price_reason).where(
                    schema.exchanges.c.id == forged_row["id"]
                )
            ).one()
    finally:
        engine.dispose()
    assert tuple(again) == ("unpriced", "unverified_host")


# -- where it listens ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "config", "shown", "warned"),
    [
        ("regular@0.0.0.0:{port}", "", "0.0.0.0:{port}", True),
        ("regular@{port}", "", "127.0.0.1:{port}", False),  # no address of its own: loopback, not every interface
        ("regular@0.0.0.0:{port}", '[auth]\nalpha = "pw-alpha-long"\n', "0.0.0.0:{port}", False),
    ],
    ids=["exposed", "default-loopback", "exposed-with-auth"],
)
def test_banner_says_where_it_listens_and_warns_when_exposed(
    tmp_path: Path, spec: str, config: str, shown: str, warned: bool
) -> None:
    port = free_port()
    with running(tmp_path, ["--mode", spec.format(port=port)], config, wait=(port,)) as proxy:
        text = proxy.text()
        listening = [line for line in proxy.text().splitlines() if "Regular proxy listening on" in line]
        assert listening and shown.format(port=port) in listening[0], text
        assert ("anyone who can reach it can use it and bill its teams" in text) is warned, text
        if not warned and spec.startswith("regular@{"):
            with pytest.raises(OSError):  # not on an address beyond loopback
                import socket

                outward = socket.gethostbyname(socket.gethostname())
                if outward.startswith("127."):
                    raise OSError("no address beyond loopback to try")
                socket.create_connection((outward, port), 1).close()
