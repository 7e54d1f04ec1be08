"""`[[proxy.reverse]]` entries in the config file: the provider is named the way `--reverse`
names it (any case, aliases), and an entry's `upstream` reaches its listener."""

from __future__ import annotations

import pytest

from llmtap.cli.config_schema import ReverseEntry
from llmtap.cli.proxy import _reverse


@pytest.mark.parametrize(("provider", "name"), [("openai", "openai"), ("OpenAI", "openai"), (" Google ", "gemini")])
def test_config_upstream_reaches_its_listener(provider: str, name: str) -> None:
    config = [ReverseEntry(provider=provider, port=8082, upstream="http://gateway.internal:9000", team="ml")]
    (listener,) = _reverse([], {}, config)
    assert (listener.provider, listener.port, listener.team) == (name, 8082, "ml")
    assert listener.upstream == "http://gateway.internal:9000"


def test_upstream_flag_wins_over_the_config_entry() -> None:
    config = [ReverseEntry(provider="OpenAI", port=8082, upstream="http://from-config")]
    (listener,) = _reverse([], {"openai": "http://from-flag"}, config)
    assert listener.upstream == "http://from-flag"
