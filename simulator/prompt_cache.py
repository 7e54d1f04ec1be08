"""The simulated prompt cache, shared by every protocol: prefix digest -> (tokens, expiry),
with a 5-minute TTL that a hit refreshes, and the automatic prefix caching of OpenAI and
Gemini (the longest earlier prefix of at least 1,024 tokens, in 128-token blocks).

Not responsible for deciding which prefixes a protocol caches explicitly (Anthropic's
`cache_control` breakpoints are read in `wire_anthropic`) or for reporting usage.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from llmtap.simulator.wire_common import digest, tokens

TTL = 300.0  # seconds


@dataclass
class PromptCache:
    """Prefix digest -> (tokens, expiry), guarded by a lock (the upstream answers in threads)."""

    entries: dict[str, tuple[int, float]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def read(self, key: str, now: float) -> int:
        """The cached prefix's size in tokens, or 0; a hit refreshes the TTL."""
        with self.lock:
            entry = self.entries.get(key)
            if entry is None or entry[1] < now:
                return 0
            self.entries[key] = (entry[0], now + TTL)
            return entry[0]

    def write(self, key: str, size: int, now: float, ttl: float = TTL) -> None:
        with self.lock:
            self.entries[key] = (size, now + ttl)

    def automatic(self, prefixes: list[Any], total: int, minimum: int = 1024) -> int:
        """OpenAI/Gemini-style: the longest earlier prefix of at least `minimum` tokens is
        read from cache, in 128-token blocks; every prefix of this prompt is written.
        Returns the cached tokens."""
        now = time.time()
        cached = 0
        keys = [digest(prefixes[: i + 1]) for i in range(len(prefixes))]
        for key in reversed(keys):
            size = self.read(key, now)
            if size >= minimum:
                cached = min(size, total) // 128 * 128
                break
        running = 0
        for key, part in zip(keys, prefixes, strict=True):
            running += tokens(part)
            self.write(key, running, now)
        return cached
