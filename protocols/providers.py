"""Who bills an exchange: its `provider` (SPEC §1) and whether its host may bill (SPEC §4),
for every source alike (the proxy, `llmtap import`, `llmtap decode`, `llmtap reprocess`).

A provider is named, first match wins, by:

1. the reverse listener that served it, when it names one (`--reverse openai=8082`);
2. a `[[providers]]` entry of the config whose hosts take the request's host: the
   operator's own gateway or self-hosted server, named as the entry says;
3. genai-prices' provider list: a host one of its `api_pattern`s covers is named by that
   provider's id (`openrouter`, `mistral`, `groq`, `deepseek`, `x-ai`, `together`, …;
   protocols/provider_list.py), so a provider the package learns is named after an upgrade;
4. the routes (protocols/routing.py): a cloud path on a host that names nobody (`aws`,
   `google`, `azure`), the protocol's maker without a host, else the host's name.

A host may bill when a `[[providers]]` entry takes it (the operator vouched for it) or
when it is a provider's own API host (protocols/hosts.py).

A `[[providers]]` host is an exact name (`llm.acme.internal`, or an IP address), or
`*.DOMAIN`, which takes every name under DOMAIN (not DOMAIN itself). Patterns are not
regular expressions: a config file says which hosts it trusts, it does not compute them.

Not responsible for the config file (cli/config_schema.py checks the table), for the
prices a `[[providers]]` entry names (analytics/pricing.py), or for renaming stored rows
when the names change (storage/renames.py).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from llmtap.protocols import provider_list
from llmtap.protocols.hosts import bare_host, dns_name, provider_host
from llmtap.protocols.routing import provider_for

MAX_NAME = 64  # of a `[[providers]]` name (the stored column takes 255)


def host_pattern(text: str) -> str:
    """A `[[providers]]` host as it is compared (lower case, no trailing dot), or
    ValueError: an exact DNS name or IP address, or `*.` and a domain of two labels or
    more (`*.com` would take a whole top-level domain)."""
    if not isinstance(text, str):
        raise ValueError(f"must be a host name or *.domain, not {text!r}")
    value = text.strip().lower().rstrip(".")
    if value.startswith("*."):
        domain = dns_name(value[2:])
        if domain is None or domain != value[2:] or "." not in domain:
            raise ValueError(f"must be *. and a domain of two labels or more (*.llm.example.com), not {text!r}")
        return value
    if _ip(value.strip("[]")):
        return value.strip("[]")
    if dns_name(value) != value:
        raise ValueError(f"must be a host name (llm.example.com), *.domain or an IP address, not {text!r}")
    return value


def provider_name(text: str) -> str:
    """A `[[providers]]` name as stored in `provider`, or ValueError."""
    value = text.strip() if isinstance(text, str) else ""
    if not value or len(value) > MAX_NAME or not value.isprintable() or any(c.isspace() for c in value):
        raise ValueError(f"must be a name of 1 to {MAX_NAME} characters without spaces, not {text!r}")
    return value


@dataclass(frozen=True, slots=True)
class Configured:
    """One `[[providers]]` entry: its name and the hosts it takes (see `host_pattern`)."""

    name: str
    hosts: tuple[str, ...]

    def takes(self, host: str) -> bool:
        """`host`: a `bare_host`."""
        for pattern in self.hosts:
            if pattern.startswith("*."):
                if host.endswith(pattern[1:]):
                    return True
            elif host == pattern:
                return True
        return False


class ProviderNames:
    """Provider names and billable hosts, with the config's `[[providers]]` entries
    (first entry first). Cheap to call on the proxy's event loop: genai-prices' list is
    read once per host (protocols/provider_list.py)."""

    def __init__(self, configured: Sequence[Configured] = ()) -> None:
        self.configured = tuple(configured)

    def entry(self, host: str | None) -> Configured | None:
        """The `[[providers]]` entry that takes `host`, if any."""
        if not self.configured:
            return None
        name = bare_host(host).strip("[]")
        for entry in self.configured:
            if entry.takes(name):
                return entry
        return None

    def host_name(self, host: str | None) -> str | None:
        """The provider `host` names by itself: a `[[providers]]` entry's, else genai-prices'
        list's; None when neither names it."""
        entry = self.entry(host)
        if entry is not None:
            return entry.name
        name = dns_name(host)
        listed = provider_list.listed(name) if name is not None else None
        return listed.provider if listed is not None else None

    def name(self, protocol: str, host: str | None, path: str = "", listener: str | None = None) -> str:
        """The exchange's `provider` (see the module's docstring)."""
        return listener or self.host_name(host) or provider_for(protocol, host, path)

    def billable(self, host: str | None) -> bool:
        """Traffic to `host` may be priced (SPEC §4)."""
        return self.entry(host) is not None or provider_host(host)


DEFAULT = ProviderNames()  # no `[[providers]]`: genai-prices' list and the routes alone


def provider_of(protocol: str, host: str | None, path: str = "", listener: str | None = None) -> str:
    """`DEFAULT.name`: the provider without any `[[providers]]` entry."""
    return DEFAULT.name(protocol, host, path, listener)


def _ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True
