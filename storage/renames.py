"""Stored rows' providers brought up to date (`llmtap reprocess`): rows recorded before
their host named a provider (an older llmtap called OpenRouter `openrouter.ai`, Mistral
`api.mistral.ai`), or before genai-prices' list or the config's `[[providers]]` knew it.

A row whose `provider` is its host's own name (what a host nobody named was called) is
renamed to what the host names now (protocols/providers.py: a `[[providers]]` entry's name,
else genai-prices' provider id). A row named otherwise keeps its name: a reverse
listener's provider, a cloud route's, a provider id.

A row recorded `unverified_host` whose host may bill now (a fixed name the list gained,
a `[[providers]]` host) is trusted: the stored host is the server the proxy sent it to,
the same host an import decides trust by. Never the other way: a row trusted when it was
recorded (a reverse listener, a configured upstream: nothing in the row says which)
stays trusted.

A row that changes has its price cleared, so the next report (or `llmtap reprice`)
prices it at its provider's prices. Done by host in a few statements, not row by row:
rows without stored bodies are renamed too (re-decoding needs the bodies; this does not).

Not responsible for naming (protocols/providers.py) or for re-decoding (maintenance.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine, and_, select, update

from llmtap.protocols.hosts import UNVERIFIED_HOST, bare_host
from llmtap.protocols.providers import ProviderNames
from llmtap.storage.rows import PRICE_COLUMNS
from llmtap.storage.schema import exchanges


@dataclass
class Renamed:
    renamed: int = 0  # rows whose provider changed
    trusted: int = 0  # rows no longer `unverified_host`


def rename_providers(engine: Engine, providers: ProviderNames) -> Renamed:
    """Rename and trust stored rows as the module's docstring says; returns the counts."""
    result = Renamed()
    c = exchanges.c
    with engine.connect() as connection:
        groups = connection.execute(select(c.host, c.provider, c.price_reason).distinct()).all()
    for host, provider, reason in groups:
        if not host:
            continue
        values: dict[str, object] = {}
        named = providers.host_name(host)
        if named and provider != named and provider == bare_host(host):
            values["provider"] = named
        if reason == UNVERIFIED_HOST and providers.billable(host):
            values["price_reason"] = None
        if not values:
            continue
        values.update({column: None for column in PRICE_COLUMNS if column != "price_reason"})
        same_reason = c.price_reason.is_(None) if reason is None else c.price_reason == reason
        match = and_(c.host == host, c.provider.is_(None) if provider is None else c.provider == provider, same_reason)
        with engine.begin() as connection:
            count = connection.execute(update(exchanges).where(match).values(**values)).rowcount or 0
        if "provider" in values:
            result.renamed += count
        if "price_reason" in values:
            result.trusted += count
    return result
