"""Rows stored before their host named a provider (SPEC §1, an older llmtap called
OpenRouter `openrouter.ai` and Mistral `api.mistral.ai`) are renamed by `llmtap reprocess`,
stored bodies or not, and priced again at that provider's prices; a row that went to a host
which may bill now (a fixed name genai-prices' list gained, a host of a `[[providers]]`
entry added since) is trusted; a host anyone can stand up stays unverified; a row named
otherwise (a reverse listener's provider) keeps its name."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from llmtap.protocols import decode_exchange
from llmtap.protocols.hosts import UNVERIFIED_HOST
from llmtap.storage import schema
from llmtap.storage.engine import make_engine
from llmtap.storage.record import Recorded
from tests.analytics.conftest import BACKENDS, blank_database, fill
from tests.helpers import llmtap

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
PATH = "/v1/chat/completions"

# (host, provider as an older llmtap stored it, its price_reason, model)
OLD = [
    ("openrouter.ai", "openrouter.ai", None, "anthropic/claude-sonnet-4"),
    ("api.mistral.ai", "api.mistral.ai", None, "mistral-large-latest"),
    ("api.together.xyz", "api.together.xyz", UNVERIFIED_HOST, "meta-llama/Llama-3.3-70B-Instruct-Turbo"),
    ("evil.modal.run", "evil.modal.run", UNVERIFIED_HOST, "gpt-4o"),
    ("llm.acme.internal", "llm.acme.internal", UNVERIFIED_HOST, "llama-3.3-70b"),
    ("127.0.0.1", "openai", None, "gpt-4o"),  # a reverse listener named it
]


def _record(index: int, host: str, provider: str, reason: str | None, model: str) -> Recorded:
    body = {
        "id": f"r{index}",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1_000_000, "completion_tokens": 100_000},
    }
    request = {"model": model, "messages": [{"role": "user", "content": f"question {index}"}]}
    exchange = decode_exchange(
        "openai.chat",
        response=json.dumps(body).encode(),
        request=json.dumps(request).encode(),
        path=PATH,
        host=host,
        status=200,
        content_type="application/json",
        provider=provider,
    )
    return Recorded(
        exchange=exchange,
        started_at=START + timedelta(minutes=index),
        host=host,
        path=PATH,
        price_reason=reason,
        team="t",
    )


def _rows(url: str) -> dict[str, dict[str, Any]]:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            ex = schema.exchanges
            found = connection.execute(
                select(ex.c.host, ex.c.provider, ex.c.price_reason, ex.c.price_status, ex.c.price_model)
            )
            return {row.host: dict(row._mapping) for row in found}
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", BACKENDS)
def test_reprocess_renames_and_retrusts_old_rows(backend: str, tmp_path: Path) -> None:
    prices = tmp_path / "acme.toml"
    prices.write_text('[[price]]\nmodel = "llama-3.3-70b"\ninput_mtok = 0.1\noutput_mtok = 0.4\n')
    config = tmp_path / "config.toml"
    config.write_text(f'[[providers]]\nname = "acme"\nhosts = ["llm.acme.internal"]\nprices = "{prices}"\n')
    with blank_database(backend, tmp_path) as url:
        fill(url, [_record(i, *old) for i, old in enumerate(OLD)], tmp_path / "spool")  # bodies: metadata
        before = _rows(url)
        assert before["openrouter.ai"]["provider"] == "openrouter.ai"
        assert before["api.together.xyz"]["price_status"] == "unpriced"
        env = {"LLMTAP_CONFIG": None, "LLMTAP_HOME": str(tmp_path / "home")}
        result = llmtap("reprocess", "--db", url, "--config", str(config), env=env)
        assert result.code == 0, result.err
        assert "renamed the provider of 5 exchanges, 2 no longer unverified" in result.out, result.out
        after = _rows(url)
        assert after["openrouter.ai"] == {
            "host": "openrouter.ai",
            "provider": "openrouter",
            "price_reason": None,
            "price_status": "priced",
            "price_model": "anthropic/claude-sonnet-4",  # OpenRouter's own listing
        }
        assert (after["api.mistral.ai"]["provider"], after["api.mistral.ai"]["price_model"]) == (
            "mistral",
            "mistral-large",
        )
        assert after["api.together.xyz"]["provider"] == "together"
        assert (after["api.together.xyz"]["price_reason"], after["api.together.xyz"]["price_status"]) == (
            None,
            "priced",
        )
        assert after["llm.acme.internal"]["provider"] == "acme"
        assert (after["llm.acme.internal"]["price_status"], after["llm.acme.internal"]["price_reason"]) == (
            "priced",
            None,
        )
        # named now, and still never billed: anyone can deploy on modal.run
        assert after["evil.modal.run"]["provider"] == "modal"
        assert (after["evil.modal.run"]["price_status"], after["evil.modal.run"]["price_reason"]) == (
            "unpriced",
            UNVERIFIED_HOST,
        )
        assert after["127.0.0.1"] == before["127.0.0.1"]  # a listener's name stands
        report = ("report", "cost", "--by", "provider", "--format", "json", "--db", url, "--config", str(config))
        cost = llmtap(*report, env=env)
        assert cost.code == 0, cost.err
        by = {row["provider"]: row for row in json.loads(cost.out) if row.get("provider")}
        assert {"openrouter", "mistral", "together", "acme", "modal", "openai"} <= set(by), by
        assert by["acme"]["cost_usd"] == pytest.approx(0.1 + 0.04)  # from acme's own file
        assert by["modal"]["unpriced"] == 1
        again = llmtap("reprocess", "--db", url, "--config", str(config), env=env)
        assert "renamed the provider of 0 exchanges, 0 no longer unverified" in again.out, again.out
