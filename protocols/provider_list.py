"""genai-prices' provider list, read as hosts: which provider id a host names, and
whether the provider's `api_pattern` fixes that name (SPEC §1, §4).

genai-prices names a provider by matching its `api_pattern`, a regular expression over
the API's base URL, against a URL's start. Here a host is named when a pattern covers
the whole of `https://HOST`: `api.mistral.ai` is Mistral's, while `api.mistral.ai.evil.com`
and `openrouter.ai.example` (which genai-prices' own prefix match would take) are
nobody's. The first provider in the list's order wins, as in genai-prices (`openai`
before `openai-decisions`, which share api.openai.com). A pattern that ends in a dot
leaves the last label open (`https://api\\.moonshot\\.`, for Moonshot's `.cn` and `.ai`
hosts): it names the provider, never as a fixed name.

A name is *fixed* when nothing else in its place matches the pattern: each label of the
host replaced by probe labels (short, long, with a digit or a hyphen, the label's own
letters shifted), and a label put in front, all fail. The patterns are the package's
data, not a client's: the probes find the wildcards it uses (`[^/]+`, `[a-z0-9-]+`,
`(.*\\.)?`), which is what protocols/hosts.py needs to refuse hosts anyone can stand up.

Patterns that match only with a path (Cloudflare's account paths, Hugging Face's router,
Databricks' serving endpoints) name no host: a host is looked up once, whatever its path.

The list is the snapshot `genai_prices.data_snapshot.get_snapshot()` returns at each
lookup, so a newer package (or a snapshot set with its `set_custom_snapshot`) is read at
the next one. What each host names is kept in a cache per snapshot, bounded to
`MAX_HOSTS`: a client that sends many hosts costs one pass over the list per host and no
more memory than the bound.

The list is the installed package's data, read in memory: no file or network I/O here.

Not responsible for trust (protocols/hosts.py decides which names may bill), for the
config's `[[providers]]` (protocols/providers.py) or for prices (analytics/pricing.py).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

MAX_HOSTS = 4096  # hosts whose lookup is kept, per snapshot
MAX_NAME = 253  # longer is no DNS name: never looked up
# Labels put in place of a host's labels to find a pattern's wildcards (see above).
_PROBES = ("q", "qz", "q0", "0", "q-z", "llmtapprobe")
_SHIFT = str.maketrans(
    "abcdefghijklmnopqrstuvwxyz0123456789",
    "bcdefghijklmnopqrstuvwxyza1234567890",
)


@dataclass(frozen=True, slots=True)
class Listed:
    provider: str  # genai-prices' provider id
    fixed: bool  # the pattern admits this name and no stranger's in its place


class _Catalog:
    """One snapshot's patterns, compiled once, and the hosts looked up in it."""

    def __init__(self, snapshot: Any) -> None:
        self.snapshot = snapshot
        self.patterns: list[tuple[str, re.Pattern[str]]] = []
        for listing in snapshot.providers:
            try:
                self.patterns.append((str(listing.id), re.compile(listing.api_pattern)))
            except (re.error, TypeError):  # a pattern this Python cannot read names nothing
                continue
        self.hosts: OrderedDict[str, Listed | None] = OrderedDict()


_lock = threading.Lock()
_catalog: _Catalog | None = None


def listed(name: str) -> Listed | None:
    """The provider genai-prices' list names for the DNS name `name` (lower case, no
    port: protocols/hosts.py `dns_name`), or None."""
    if not name or len(name) > MAX_NAME:
        return None
    catalog = _current()
    with _lock:
        if name in catalog.hosts:
            catalog.hosts.move_to_end(name)
            return catalog.hosts[name]
    found = _look_up(catalog.patterns, name)
    with _lock:
        catalog.hosts[name] = found
        while len(catalog.hosts) > MAX_HOSTS:
            catalog.hosts.popitem(last=False)
    return found


def cached_hosts() -> int:
    """How many hosts the current snapshot's cache holds (at most `MAX_HOSTS`)."""
    with _lock:
        return len(_catalog.hosts) if _catalog is not None else 0


def _current() -> _Catalog:
    global _catalog
    from genai_prices import data_snapshot

    snapshot = data_snapshot.get_snapshot()
    with _lock:
        if _catalog is not None and _catalog.snapshot is snapshot:
            return _catalog
    catalog = _Catalog(snapshot)  # compiled outside the lock; a race compiles twice, harmlessly
    with _lock:
        if _catalog is None or _catalog.snapshot is not snapshot:
            _catalog = catalog
        return _catalog


def _look_up(patterns: list[tuple[str, re.Pattern[str]]], name: str) -> Listed | None:
    url = "https://" + name
    for provider, pattern in patterns:
        if pattern.fullmatch(url):
            return Listed(provider, _fixed(pattern, name))
        match = pattern.match(url)
        if match and _open_last_label(url, match.end()):
            return Listed(provider, False)
    return None


def _open_last_label(url: str, end: int) -> bool:
    """The match stops right after a dot, before the host's last label."""
    return 0 < end < len(url) and url[end - 1] == "." and "." not in url[end:]


def _fixed(pattern: re.Pattern[str], name: str) -> bool:
    labels = name.split(".")
    for index, label in enumerate(labels):
        for probe in (*_PROBES, label.translate(_SHIFT)):
            if probe == label:
                continue
            other = ".".join((*labels[:index], probe, *labels[index + 1 :]))
            if pattern.fullmatch("https://" + other):
                return False
    return not any(pattern.fullmatch(f"https://{probe}.{name}") for probe in _PROBES)
