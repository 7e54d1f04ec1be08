"""The recorder as a plain mitmdump script (`mitmdump -s …/llmtap/cli/mitmdump_script.py`):
a user's own mitmdump records, prices and attributes like `llmtap proxy` does, reads the
same config file the same way (`[auth]` refuses a request without a team's credentials,
`[budgets]` refuses a team over its limit, `[[providers]]` names, bills and prices its
hosts), and a SIGTERM writes everything before it exits."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx2
from sqlalchemy import select

import llmtap.cli.mitmdump_script as script
from llmtap.simulator.upstream import Reply, Upstream
from llmtap.storage import schema
from llmtap.storage.engine import make_engine
from tests.e2e import harness
from tests.helpers import free_port

MITMDUMP = Path(sys.executable).parent / "mitmdump"


def test_plain_mitmdump_records_and_prices(tmp_path: Path, routes: harness.Routes) -> None:
    case = harness.case("a_anth_json_cache_write")
    token = routes.add(harness.json_reply(case))
    db, port = tmp_path / "store.db", free_port()
    with Upstream(routes) as upstream:
        args = [
            str(MITMDUMP), "-q", "-s", script.__file__,
            "--mode", f"reverse:{upstream.url}@127.0.0.1:{port}",
            "--set", f"confdir={tmp_path / 'mitmproxy'}",
            "--set", f"llmtap_db=sqlite:///{db}",
            "--set", f"llmtap_home={tmp_path / 'home'}",
            "--set", f"llmtap_listener_teams={port}=team-script",
        ]  # fmt: skip
        log = tmp_path / "mitmdump.log"
        with log.open("wb") as sink:
            proc = subprocess.Popen(args, env=harness.clean_env(), stdout=sink, stderr=subprocess.STDOUT)
        try:
            harness.wait_for_port(port, proc, log)
            answer = httpx2.post(
                f"http://127.0.0.1:{port}/v1/messages",
                content=case.request,
                headers={"content-type": "application/json", harness.CASE_HEADER: token, "x-api-key": "sk-ant-x"},
                timeout=10,
            )
            assert answer.content == case.response
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0, log.read_text()[-3000:]

    engine = make_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as connection:
            (row,) = connection.execute(select(schema.exchanges)).mappings()
    finally:
        engine.dispose()
    assert (row["protocol"], row["team"], row["status"]) == ("anthropic.messages", "team-script", 200)
    assert row["usage_input_tokens"] == case.expect["usage"]["input_tokens"]
    assert row["price_status"] == "priced" and row["cost_total_pico"] > 0
    assert "Traceback" not in log.read_text()


def test_mitmdump_honours_auth_and_budgets(tmp_path: Path, routes: harness.Routes) -> None:
    """The script once read only [teams] of the config: a proxy request without proxy
    credentials went through under [auth], and [budgets] refused no one."""
    case = harness.case("a_anth_json_cache_write")
    token = routes.add(harness.json_reply(case))
    secret = harness.canary("pw-")
    config = tmp_path / "config.toml"
    config.write_text(
        f'[auth]\nsearch = "{secret}"\n'
        # beta's limit holds one request's estimate ($0.021: its body and max_tokens at
        # Claude 3.5 Sonnet's prices), not two: the first passes, the next is refused
        '[budgets]\nenforce = true\n[budgets.teams]\nbeta = { usd = 0.025, period = "day" }\n'
    )
    db, regular, reverse = tmp_path / "store.db", free_port(), free_port()
    headers = {"content-type": "application/json", harness.CASE_HEADER: token, "x-api-key": "sk-ant-x"}
    with Upstream(routes) as upstream:
        args = [
            str(MITMDUMP), "-q", "-s", script.__file__,
            "--mode", f"regular@127.0.0.1:{regular}", "--mode", f"reverse:{upstream.url}@127.0.0.1:{reverse}",
            "--set", f"confdir={tmp_path / 'mitmproxy'}",
            "--set", f"llmtap_db=sqlite:///{db}",
            "--set", f"llmtap_home={tmp_path / 'home'}",
            "--set", f"llmtap_config={config}",
            "--set", f"llmtap_listener_teams={reverse}=beta",
        ]  # fmt: skip
        log = tmp_path / "mitmdump.log"
        with log.open("wb") as sink:
            proc = subprocess.Popen(args, env=harness.clean_env(), stdout=sink, stderr=subprocess.STDOUT)
        try:
            harness.wait_for_port(regular, proc, log)
            harness.wait_for_port(reverse, proc, log)
            url = f"{upstream.url}/v1/messages"
            with httpx2.Client(proxy=f"http://127.0.0.1:{regular}", timeout=10, trust_env=False) as client:
                refused = client.post(url, content=case.request, headers=headers)
            assert (refused.status_code, refused.headers.get("proxy-authenticate")) == (407, 'Basic realm="llmtap"')
            through = f"http://search:{secret}@127.0.0.1:{regular}"
            with httpx2.Client(proxy=through, timeout=10, trust_env=False) as client:
                assert client.post(url, content=case.request, headers=headers).status_code == 200
            # beta's first exchange reserves most of its limit, then is stored: refused either way
            statuses = [_post(f"http://127.0.0.1:{reverse}/v1/messages", case.request, headers)]
            deadline = time.monotonic() + 30
            while statuses[-1] != 429 and time.monotonic() < deadline:
                time.sleep(0.2)
                statuses.append(_post(f"http://127.0.0.1:{reverse}/v1/messages", case.request, headers))
            assert statuses[0] == 200 and statuses[-1] == 429, statuses
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0, log.read_text()[-3000:]
    assert "Traceback" not in log.read_text() and secret not in log.read_text()


def test_mitmdump_honours_providers(tmp_path: Path, routes: harness.Routes) -> None:
    """A `[[providers]]` host through a plain mitmdump (upstream mode: the client names the
    host, a local upstream answers for it): named by the entry, billed, priced from its
    file; the same answer from a host anyone can stand up stays unpriced."""
    answer = json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "llama-3.3-70b",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 4_000_000, "completion_tokens": 1_000_000},
        }
    ).encode()
    token = routes.add(Reply(200, chunks=[answer]))
    (tmp_path / "acme.toml").write_text('[[price]]\nmodel = "llama-3.3-70b"\ninput_mtok = 0.25\noutput_mtok = 1\n')
    config = tmp_path / "config.toml"
    config.write_text(
        f'[[providers]]\nname = "acme"\nhosts = ["llm.acme.internal"]\nprices = "{tmp_path / "acme.toml"}"\n'
    )
    db, port = tmp_path / "store.db", free_port()
    request = b'{"model": "llama-3.3-70b", "messages": [{"role": "user", "content": "hi"}]}'
    headers = {"content-type": "application/json", harness.CASE_HEADER: token, "authorization": "Bearer sk-x"}
    with Upstream(routes) as upstream:
        args = [
            str(MITMDUMP), "-q", "-s", script.__file__,
            "--mode", f"upstream:{upstream.url}@127.0.0.1:{port}",
            "--set", f"confdir={tmp_path / 'mitmproxy'}",
            "--set", f"llmtap_db=sqlite:///{db}",
            "--set", f"llmtap_home={tmp_path / 'home'}",
            "--set", f"llmtap_config={config}",
        ]  # fmt: skip
        log = tmp_path / "mitmdump.log"
        with log.open("wb") as sink:
            proc = subprocess.Popen(args, env=harness.clean_env(), stdout=sink, stderr=subprocess.STDOUT)
        try:
            harness.wait_for_port(port, proc, log)
            with httpx2.Client(proxy=f"http://127.0.0.1:{port}", timeout=10, trust_env=False) as client:
                for host in ("llm.acme.internal", "evil.modal.run"):
                    sent = client.post(f"http://{host}/v1/chat/completions", content=request, headers=headers)
                    assert sent.content == answer
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0, log.read_text()[-3000:]
    engine = make_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as connection:
            rows = {row["host"]: row for row in connection.execute(select(schema.exchanges)).mappings()}
    finally:
        engine.dispose()
    acme, modal = rows["llm.acme.internal"], rows["evil.modal.run"]
    assert (acme["provider"], acme["price_reason"], acme["price_status"]) == ("acme", None, "priced")
    assert acme["cost_total_pico"] == 2 * 10**12  # 4M at $0.25 and 1M at $1, from acme.toml
    assert (modal["provider"], modal["price_status"], modal["price_reason"]) == ("modal", "unpriced", "unverified_host")
    assert "Traceback" not in log.read_text()


def _post(url: str, body: bytes, headers: dict[str, str]) -> int:
    return httpx2.post(url, content=body, headers=headers, timeout=10, trust_env=False).status_code


def test_a_bad_config_stops_mitmdump_in_one_line(tmp_path: Path) -> None:
    """It once ran on with a traceback in its log and recorded nothing (a bad file), or
    ignored the misspelt table (this one)."""
    config = tmp_path / "config.toml"
    config.write_text('[auht]\nsearch = "a-long-password"\n')
    args = [
        str(MITMDUMP), "-q", "-s", script.__file__, "--mode", f"regular@127.0.0.1:{free_port()}",
        "--set", f"confdir={tmp_path / 'mitmproxy'}", "--set", f"llmtap_home={tmp_path / 'home'}",
        "--set", f"llmtap_config={config}",
    ]  # fmt: skip
    done = subprocess.run(args, env=harness.clean_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"llmtap: error: {config}: [auht] is not a known table (did you mean [auth]?)\n"
