"""Time-ordered record ids (26 characters, Crockford base32, ULID layout).

A record's id is its identity in the store (SPEC §6, exactly once): made by the recorder
for live traffic, so a record keeps it through the spool and a writer process's resend
and a replayed batch is recognised; made from what was captured for an imported entry
(`capture_id`), so a file imported twice is recognised. A provider's response id is never
part of it: different requests may share one. Not responsible for storing or comparing.
"""

from __future__ import annotations

import hashlib
import os
import time
from datetime import datetime

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_id(at_ms: int | None = None, entropy: bytes | None = None) -> str:
    """48 bits of milliseconds since the epoch, then 80 random bits (or `entropy`'s first 80)."""
    ms = int(time.time() * 1000) if at_ms is None else at_ms
    tail = int.from_bytes((entropy or os.urandom(10))[:10], "big")
    value = (ms & ((1 << 48) - 1)) << 80 | tail
    chars = []
    for _ in range(26):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def capture_id(
    started_at: datetime,
    *,
    method: str,
    host: str,
    path: str,
    status: int | None,
    request: bytes | None,
    response: bytes | None,
) -> str:
    """The id of an exchange read from a file: the same entry always gets the same one.

    Made of what was captured (when it started, where it went, the bytes both ways, the
    status), never of what was decoded from it, nor of the team (a config change must not
    make an old entry new).
    """
    digest = hashlib.blake2b(digest_size=10)
    for part in (started_at.isoformat(), method.upper(), host, path, str(status)):
        digest.update(part.encode("utf-8", "surrogateescape") + b"\x1f")
    for body in (request, response):
        digest.update(b"-" if body is None else hashlib.blake2b(body, digest_size=16).digest())
    return new_id(int(started_at.timestamp() * 1000), digest.digest())
