"""Time-ordered record ids (26 characters, Crockford base32, ULID layout).

Made by the recorder, not the database, so a record keeps its id through the spool and
a replayed batch is recognised. Not responsible for deduplicating retried exchanges.
"""

from __future__ import annotations

import os
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_id(at_ms: int | None = None) -> str:
    """48 bits of milliseconds since the epoch, then 80 random bits."""
    ms = int(time.time() * 1000) if at_ms is None else at_ms
    value = (ms & ((1 << 48) - 1)) << 80 | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))
