"""`[[providers]]` in the one config schema, and `llmtap decode` naming providers as the
proxy does (SPEC §1, §3): genai-prices' ids from `--host`, a configured entry's name with
the config; an entry's hosts are names or `*.domain`, never regular expressions, and the
table refuses what it does not know like every other."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import llmtap

FIXTURES = Path(__file__).resolve().parent.parent / "protocols" / "fixtures"
OPENROUTER = FIXTURES / "chat_stream_openrouter"
MISTRAL = FIXTURES / "chat_json_mistral"


def decode(folder: Path, host: str, *extra: str, env: dict[str, str | None] | None = None) -> dict:
    case = json.loads((folder / "case.json").read_text())
    args = ["decode", "--response", str(folder / "response.body"), "--request", str(folder / "request.json")]
    args += ["--path", case["path"], "--host", host, "--content-type", case["content_type"], *extra]
    result = llmtap(*args, env=env or {"LLMTAP_CONFIG": None})
    assert result.code == 0, result.err
    return json.loads(result.out)


def test_decode_names_openrouter_and_mistral_by_their_genai_prices_ids() -> None:
    assert decode(OPENROUTER, "openrouter.ai")["provider"] == "openrouter"
    assert decode(OPENROUTER, "api.openrouter.ai:443")["provider"] == "openrouter"
    assert decode(MISTRAL, "api.mistral.ai")["provider"] == "mistral"
    assert decode(MISTRAL, "api.mistral.ai.evil.example")["provider"] == "api.mistral.ai.evil.example"


def test_decode_takes_the_configs_providers(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[[providers]]\nname = "acme-gw"\nhosts = ["llm.acme.internal", "*.gw.acme.internal"]\n')
    env: dict[str, str | None] = {"LLMTAP_CONFIG": None, "LLMTAP_HOME": str(tmp_path / "home")}
    assert decode(MISTRAL, "llm.acme.internal", "--config", str(config), env=env)["provider"] == "acme-gw"
    assert decode(MISTRAL, "eu.gw.acme.internal:8443", "--config", str(config), env=env)["provider"] == "acme-gw"
    assert decode(MISTRAL, "gw.acme.internal", "--config", str(config), env=env)["provider"] == "gw.acme.internal"
    assert decode(MISTRAL, "api.mistral.ai", "--config", str(config), env=env)["provider"] == "mistral"


BAD = [
    ('[[providers]]\nname = "acme"\nhosts = "llm.acme"\n', "[[providers]] #1 hosts must be a list, not 'llm.acme'"),
    (
        '[[providers]]\nname = "acme"\nhosts = ["llm.acme.internal"]\nprice = "x.toml"\n',
        "[[providers]] #1 price is not a known key (did you mean prices?)",
    ),
    (
        '[[providers]]\nname = "acme"\nhosts = ["api\\\\.acme\\\\.internal"]\n',
        "[[providers]] #1 hosts must be a host name (llm.example.com), *.domain or an IP address, "
        "not 'api\\\\.acme\\\\.internal'",
    ),
    (
        '[[providers]]\nname = "acme"\nhosts = ["*.internal"]\n',
        "[[providers]] #1 hosts must be *. and a domain of two labels or more (*.llm.example.com), not '*.internal'",
    ),
    ('[[providers]]\nname = "acme"\nhosts = []\n', "[[providers]] #1 hosts must name at least one host"),
    ('[[providers]]\nname = "a b"\nhosts = ["x.example"]\n', "[[providers]] #1 name must be a name of 1 to 64"),
    (
        '[[providers]]\nname = "a"\nhosts = ["x.example"]\n[[providers]]\nname = "b"\nhosts = ["X.example"]\n',
        "host 'x.example' is in two entries",
    ),
]


@pytest.mark.parametrize(("text", "says"), BAD, ids=[says[:40] for _, says in BAD])
def test_a_bad_providers_entry_is_one_line(tmp_path: Path, text: str, says: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(text)
    result = llmtap("config", "check", str(config))
    assert result.code == 2 and result.err.count("\n") == 1, result.err
    assert result.err.startswith(f"llmtap: error: {config}: ") and says in result.err, result.err


def test_config_shows_the_entries_and_their_line(tmp_path: Path) -> None:
    prices = tmp_path / "acme.toml"
    prices.write_text('[[price]]\nmodel = "llama-3.3-70b"\ninput_mtok = 0.1\noutput_mtok = 0.4\n')
    config = tmp_path / "config.toml"
    config.write_text(
        f'bodies = "none"\n[[providers]]\nname = "acme"\nhosts = ["LLM.acme.internal"]\nprices = "{prices}"\n'
    )
    env: dict[str, str | None] = {"LLMTAP_CONFIG": None, "LLMTAP_HOME": str(tmp_path / "home")}
    result = llmtap("config", "--config", str(config), "--format", "json", env=env)
    assert result.code == 0, result.err
    rows = {row["setting"]: row for row in json.loads(result.out)}
    shown = rows["providers"]
    assert shown["value"] == [{"name": "acme", "hosts": ["llm.acme.internal"], "prices": str(prices)}]
    assert shown["source"] == f"file {config}:2"


def test_a_missing_providers_price_file_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        f'[[providers]]\nname = "acme"\nhosts = ["llm.acme.internal"]\nprices = "{tmp_path / "no.toml"}"\n'
    )
    result = llmtap(
        "log", "--config", str(config), "--db", f"sqlite:///{tmp_path / 's.db'}", env={"LLMTAP_CONFIG": None}
    )
    assert result.code == 2 and "does not exist" in result.err, result.err
