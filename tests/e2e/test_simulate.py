"""`llmtap simulate` as the README's "try it without keys" path runs it: the simulator, the
proxy command it prints (its reverse ports swapped for free ones), curl and the official
SDKs pointed at the proxy through the environment variables it prints, and the records in
the store, cache hits and writes included. Then SIGTERM stops both cleanly."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from google import genai

from tests.e2e import harness
from tests.e2e.simulate_run import start_proxy, start_simulator
from tests.helpers import llmtap

pytestmark = pytest.mark.slow

LONG = "You are a careful assistant. Answer in two sentences, cite the documentation, never guess. " * 60


def _curl(url: str, body: dict[str, Any], *headers: str) -> str:
    args = [harness.CURL, "-sS", "--noproxy", "*", "-X", "POST", url, "-H", "content-type: application/json"]
    for header in headers:
        args += ["-H", header]
    done = subprocess.run([*args, "-d", json.dumps(body)], capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


def _drive(ports: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> int:
    """curl and the three SDKs, configured as `llmtap simulate` says; returns the requests sent."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    base = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
    answer = _curl(
        f"{base['anthropic']}/v1/messages",
        {"model": "claude-sonnet-4-6", "max_tokens": 200, "messages": [{"role": "user", "content": "Hello"}]},
        "x-api-key: sk-ant-test",
        "anthropic-version: 2023-06-01",
    )
    assert json.loads(answer)["type"] == "message"
    streamed = _curl(
        f"{base['openai']}/v1/chat/completions",
        {"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "Hello"}]},
        "authorization: Bearer sk-test",
    )
    assert streamed.rstrip().endswith("data: [DONE]")

    monkeypatch.setenv("ANTHROPIC_BASE_URL", base["anthropic"])
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("OPENAI_BASE_URL", base["openai"] + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", base["gemini"])
    monkeypatch.setenv("GEMINI_API_KEY", "test")
    system: Any = [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}]
    # each client closed when done: an open one's socket, collected later, warns (an error here)
    with anthropic.Anthropic(max_retries=0) as claude:
        for _ in range(2):  # a cache write, then a read
            with claude.messages.stream(
                model="claude-sonnet-4-6", max_tokens=200, system=system, messages=[{"role": "user", "content": "Hi"}]
            ) as stream:
                assert stream.get_final_message().content
    with openai.OpenAI(max_retries=0) as gpt:
        for _ in range(2):  # the automatic prefix cache: the second one hits
            reply = gpt.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "system", "content": LONG}, {"role": "user", "content": "Hi"}]
            )
            assert reply.choices[0].message.content
    with genai.Client() as gemini:
        chunks = list(gemini.models.generate_content_stream(model="gemini-2.5-flash", contents="Hello"))
    assert chunks
    return 2 + 2 + 2 + 1


def test_simulate_proxy_curl_and_sdks_record_into_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = f"sqlite:///{tmp_path / 'store.db'}"
    simulator, url, printed = start_simulator(tmp_path)
    try:
        proxy, ports = start_proxy(tmp_path, printed, db, "--bodies", "full")
        try:
            sent = _drive(ports, monkeypatch)
        finally:
            proxy.send_signal(signal.SIGTERM)
            assert proxy.wait(60) == 0, (tmp_path / "proxy.log").read_text()[-3000:]
    finally:
        simulator.send_signal(signal.SIGTERM)
        out, _ = simulator.communicate(timeout=30)
    assert simulator.returncode == 0, (tmp_path / "simulate.err").read_text()
    assert f"stopped after {sent:,} requests" in out
    assert "Traceback" not in (tmp_path / "simulate.err").read_text()

    report = llmtap("report", "usage", "--by", "provider", "--format", "json", "--db", db)
    assert report.code == 0, report.err
    rows = {row["provider"]: row for row in report.json()}
    assert set(rows) == {"anthropic", "openai", "google"}
    assert sum(row["requests"] for row in rows.values()) == sent
    assert rows["anthropic"]["cache_write_tokens"] > 0 and rows["anthropic"]["cache_read_tokens"] > 0
    assert rows["openai"]["cache_read_tokens"] > 0


def test_a_taken_port_is_one_line() -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = llmtap("simulate", "--port", str(port), process=True, timeout=60)
    assert result.code == 2
    assert result.err.strip() == (
        f"llmtap: error: cannot listen on 127.0.0.1:{port}: Address already in use (--port 0 takes a free one)"
    )
