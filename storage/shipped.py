"""What the proxy sends its writer process over the pipe: frames (a header, then a
pickle), and pending records wrapped with what the proxy fixes before they leave it (the
random part of their id, a sequence number for the progress slot) or decides about them
(to be stored undecoded: quarantined, or in the proxy's writer thread).

Not responsible for when to send what (storage.writer_process) or for building records
(the items' own `build`, in the writer process only).
"""

from __future__ import annotations

import itertools
import logging
import os
import pickle
import struct
from typing import IO, Any

from llmtap.storage.ids import new_id
from llmtap.storage.record import Recorded

log = logging.getLogger("llmtap.storage")

_HEADER = struct.Struct("!QQ")  # (records in the frame, payload bytes)
QUARANTINED = "stored undecoded (quarantined)"


def write_frame(stream: IO[bytes], count: int, payload: bytes) -> None:
    stream.write(_HEADER.pack(count, len(payload)))
    stream.write(payload)
    stream.flush()


def read_frame(stream: IO[bytes]) -> tuple[int, bytes] | None:
    """(count, payload), or None at the end of the stream (also a stream cut mid-frame)."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    count, size = _HEADER.unpack(header)
    payload = stream.read(size)
    if len(payload) < size:
        return None
    return count, payload


class Identified:
    """A pending record and the random part of its id, fixed before it first leaves this
    process: a child that dies between committing it and saying so is followed by one
    that builds the same record with the same id, which the store already holds. `seq`
    names it in the progress slot. `undecoded`, when set, is the decode error it is
    stored with instead of being built (quarantined, or in the writer thread)."""

    __slots__ = ("item", "entropy", "seq", "undecoded_as", "bodies")

    def __init__(
        self, item: Any, entropy: bytes, seq: int = 0, undecoded_as: str | None = None, bodies: bool = True
    ) -> None:
        self.item = item
        self.entropy = entropy
        self.seq = seq
        self.undecoded_as = undecoded_as
        self.bodies = bodies

    def __reduce__(self) -> tuple[Any, ...]:
        return (Identified, (self.item, self.entropy, self.seq, self.undecoded_as, self.bodies))

    def build(self) -> Recorded | None:
        if self.undecoded_as is not None:
            return self._salvage(self.undecoded_as, self.bodies)
        return self._identify(self.item.build())

    def salvage(self, error: str) -> Recorded | None:
        """After a failed build, in the writer process: with its bodies, as the mode allows."""
        return self._salvage(error, True)

    def undecoded(self, error: str, *, bodies: bool) -> Identified:
        return Identified(self.item, self.entropy, self.seq, error, bodies)

    def _salvage(self, error: str, bodies: bool) -> Recorded | None:
        salvage = getattr(self.item, "salvage", None)
        if salvage is None:  # a background follow-up: nothing to store of it on its own
            log.error("llmtap writer: a %s was dropped: %s", type(self.item).__name__, error)
            return None
        return self._identify(salvage(error, bodies=True) if bodies else salvage(error))

    def _identify(self, record: Recorded | None) -> Recorded | None:
        if record is not None:
            # an id the recorder made already (it named it in a log line: an upstream failure)
            preset = getattr(getattr(self.item, "meta", None), "record_id", None)
            record.id = preset or new_id(int(record.started_at.timestamp() * 1000), self.entropy)
        return record


_sequence = itertools.count(1)


def identified(items: list[Any]) -> list[Any]:
    """Each pending record wrapped with its id's random part and a sequence number (a
    record already built has its id; one already wrapped keeps its own); one `urandom`
    call a batch."""
    entropy = os.urandom(10 * len(items))
    return [
        item
        if isinstance(item, (Recorded, Identified))
        else Identified(item, entropy[10 * n : 10 * n + 10], next(_sequence))
        for n, item in enumerate(items)
    ]


def quarantined(item: Any, reason: str) -> Any | None:
    """What is resent in place of a record whose build overran its deadline or took its
    child down: the record to be stored undecoded by the next child, with its bodies; if
    it took that one down too, what this process knows of it, no bodies (never a third
    try); None when even that fails (logged)."""
    error = f"{reason}; {QUARANTINED}"
    if not isinstance(item, Identified):
        return None
    if item.undecoded_as is None:
        return item.undecoded(error, bodies=True)
    try:
        return item.undecoded(error, bodies=False).build()
    except Exception as exc:  # noqa: BLE001 - nothing more to try: say so
        log.error("llmtap writer: a quarantined record was lost: %r", exc)
        return None


def pickled(items: list[Any]) -> tuple[bytes, list[Any]]:
    """The batch as one pickle. An item that will not pickle (a bug) is stored from what is
    known without decoding it (never built here: it could be hostile); one that cannot be
    even so is logged and dropped from the batch."""
    try:
        return pickle.dumps(items, protocol=pickle.HIGHEST_PROTOCOL), items
    except Exception:  # noqa: BLE001
        pass
    kept = []
    for item in items:
        try:
            pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
            kept.append(item)
            continue
        except Exception as exc:  # noqa: BLE001
            log.error("llmtap writer: a record would not pickle (%r); storing it undecoded", exc)
            why = exc
        try:
            error = f"the record could not be sent to the writer process ({why!r}); stored undecoded"
            built = item.undecoded(error, bodies=False).build() if isinstance(item, Identified) else None
            if built is not None:
                pickle.dumps(built, protocol=pickle.HIGHEST_PROTOCOL)
                kept.append(built)
        except Exception as exc:  # noqa: BLE001
            log.error("llmtap writer: a record could not be kept: %r", exc)
    return pickle.dumps(kept, protocol=pickle.HIGHEST_PROTOCOL), kept
