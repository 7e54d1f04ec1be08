"""Providers named by genai-prices' provider list, through a real `llmtap proxy` (SPEC §1,
§4, §5): OpenRouter and Mistral Chat exchanges are stored as `openrouter` and `mistral`
and priced at those providers' prices; a client pointed at a host anyone can stand up
under a provider's pattern (`evil.modal.run`) or at a look-alike of a provider's host
(`api.mistral.ai.evil.com`, `openrouter.ai.example`) is recorded and never priced,
whatever it claims; a `[[providers]]` entry's host is named by the entry, billed, and
priced from its own price file.

The clients speak plain HTTP to those hosts through the proxy's upstream mode
(`--mode upstream:URL`, mitmproxy's own), whose next hop is a local upstream standing in
for all of them: the proxy sees and records the hosts the clients named, with no DNS and
no network, as it would in front of the real ones.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2

from llmtap.simulator.upstream import Reply, Upstream
from tests.e2e import harness
from tests.e2e.test_who_pays import running
from tests.helpers import free_port, llmtap

FIXTURES = Path(__file__).resolve().parent.parent / "protocols" / "fixtures"
ACME_PRICES = """
[[price]]
model = "llama-3.3-70b"
input_mtok = 0.25
output_mtok = 1
"""


def _fixture(name: str) -> tuple[dict[str, Any], bytes, bytes]:
    folder = FIXTURES / name
    return (
        json.loads((folder / "case.json").read_text()),
        (folder / "request.json").read_bytes(),
        (folder / "response.body").read_bytes(),
    )


def _chat(model: str, prompt: int, completion: int) -> bytes:
    """A Chat answer claiming `prompt` and `completion` tokens of `model`."""
    body = {
        "id": f"chatcmpl-{model}-{prompt}",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }
    return json.dumps(body).encode()


def test_providers_are_named_priced_and_trusted_by_genai_prices_list(tmp_path: Path, routes: harness.Routes) -> None:
    openrouter, openrouter_request, openrouter_body = _fixture("chat_stream_openrouter")
    mistral, mistral_request, mistral_body = _fixture("chat_json_mistral")
    (tmp_path / "acme.toml").write_text(ACME_PRICES)
    config = f'[[providers]]\nname = "acme-gw"\nhosts = ["*.gw.acme.internal"]\nprices = "{tmp_path / "acme.toml"}"\n'
    forged = _chat("claude-opus-4-1-20250805", 1_000_000_000, 100_000_000)
    sends = [
        # (host, path, request, reply)
        ("openrouter.ai", openrouter["path"], openrouter_request,
         Reply(200, content_type="text/event-stream", chunks=harness.spaced(openrouter_body), delay=0.02)),
        ("api.mistral.ai", mistral["path"], mistral_request, Reply(200, chunks=[mistral_body])),
        ("evil.modal.run", "/v1/chat/completions", mistral_request, Reply(200, chunks=[forged])),
        ("api.mistral.ai.evil.com", "/v1/chat/completions", mistral_request, Reply(200, chunks=[forged])),
        ("openrouter.ai.example", "/api/v1/chat/completions", mistral_request, Reply(200, chunks=[forged])),
        ("eu.gw.acme.internal", "/v1/chat/completions", b'{"model": "llama-3.3-70b", "messages": []}',
         Reply(200, chunks=[_chat("llama-3.3-70b", 2_000_000, 1_000_000)])),
    ]  # fmt: skip
    with Upstream(routes) as upstream:
        port = free_port()
        args = ["--quiet", "--mode", f"upstream:{upstream.url}@127.0.0.1:{port}"]
        with running(tmp_path, args, config, wait=(port,)) as proxy:
            with httpx2.Client(proxy=f"http://127.0.0.1:{port}", timeout=10, trust_env=False) as client:
                for index, (host, path, request, reply) in enumerate(sends):
                    token = routes.add(reply)
                    headers = {
                        "content-type": "application/json",
                        "authorization": f"Bearer sk-e2e-{index}-{'x' * 24}",
                        harness.CASE_HEADER: token,
                    }
                    answer = client.post(f"http://{host}{path}", content=request, headers=headers)
                    assert answer.status_code == 200, answer.text
                    assert answer.content == b"".join(reply.chunks)  # every byte, untouched
                    (seen,) = routes.done(token)
                    assert seen.headers.get("host") == host
            rows = {row["host"]: row for row in proxy.rows(len(sends))}

    row = rows["openrouter.ai"]
    assert (row["provider"], row["price_reason"], row["price_status"]) == ("openrouter", None, "priced")
    assert row["model"] == openrouter["expect"]["model"] and row["price_model"] == "anthropic/claude-sonnet-4"
    assert (row["usage_input_tokens"], row["usage_cache_read_input_tokens"]) == (1240, 1024)
    row = rows["api.mistral.ai"]
    assert (row["provider"], row["price_status"], row["price_model"]) == ("mistral", "priced", "mistral-large")
    for host, named in (
        ("evil.modal.run", "modal"),
        ("api.mistral.ai.evil.com", "api.mistral.ai.evil.com"),
        ("openrouter.ai.example", "openrouter.ai.example"),
    ):
        row = rows[host]
        assert (row["provider"], row["price_status"], row["price_reason"]) == (named, "unpriced", "unverified_host")
        assert row["cost_total_pico"] is None and row["usage_input_tokens"] == 1_000_000_000  # what it claimed, kept
    row = rows["eu.gw.acme.internal"]
    assert (row["provider"], row["price_reason"], row["price_status"]) == ("acme-gw", None, "priced")
    assert row["cost_total_pico"] == (2 * 250_000 + 1 * 1_000_000) * 10**6  # $0.50 + $1.00, from acme.toml

    env = {"LLMTAP_HOME": str(tmp_path / "home")}
    db = f"sqlite:///{tmp_path / 'llmtap.db'}"
    cost = llmtap(
        "report", "cost", "--by", "provider", "--format", "json", "--db", db,
        "--config", str(tmp_path / "config.toml"), env=env, process=True,
    )  # fmt: skip
    assert cost.code == 0, cost.err
    by = {r["provider"]: r for r in json.loads(cost.out) if r.get("provider")}
    assert by["acme-gw"]["cost_usd"] == 1.5 and by["openrouter"]["unpriced"] == 0
    assert by["modal"]["unpriced"] == 1 and by["modal"]["cost_usd"] is None
