"""A follow-up of background work seen by the proxy (a poll, a resumed stream, a cancel:
protocols/followups.py), finished on the writer's thread like an exchange is.

The recorder tees or holds its response exactly as an exchange's (the bytes pass
untouched, nothing is decoded on the event loop) and hands the writer a
`PendingFollowUp` rather than a `PendingExchange`: its `build` decodes the response with
the protocol's translator and returns a `storage.followups.FollowUp`, which the writer
applies to the exchange it continues instead of storing a row.

Not responsible for routing (the recorder asks `protocols.followups.follow_up`) or for
what the follow-up changes (storage/followups.py).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from llmtap.addon.tee import PendingExchange
from llmtap.protocols.content import ContentDecoder
from llmtap.protocols.errors import DecodeError
from llmtap.protocols.followups import CONTINUES, FollowUpRoute
from llmtap.storage.followups import FollowUp
from llmtap.storage.record import Recorded
from llmtap.storage.secrets import redact_query, scrub_record


def _moment(timestamp: float | None) -> datetime | None:
    return datetime.fromtimestamp(timestamp, UTC) if timestamp else None


class PendingFollowUp:
    """What the writer's thread finishes for a follow-up: the decode, then a `FollowUp`."""

    __slots__ = ("route", "pending")

    def __init__(self, route: FollowUpRoute, pending: PendingExchange) -> None:
        self.route = route
        self.pending = pending

    def __reduce__(self) -> tuple[Any, ...]:
        return (PendingFollowUp, (self.route, self.pending))  # the pending one flushes its decoder

    def build(self) -> FollowUp:
        pending, meta = self.pending, self.pending.meta
        decoder = pending.decoder
        if decoder is None:  # a body mitmproxy held whole
            decoder = meta.new_decoder(meta.request_body or CONTINUES)
            if pending.body:
                decoder.feed(pending.body)
        exchange = decoder.finish(pending.interrupted)
        record = Recorded(
            exchange=exchange,
            started_at=_moment(meta.started) or datetime.now(UTC),
            ended_at=_moment(meta.ended),
            team=meta.team,
            attribution=meta.attribution,
            key_fingerprint=meta.key_fingerprint,
            key_last4=meta.key_last4,
            client_addr=meta.client_addr,
            source=meta.source,
            method=meta.method,
            host=meta.host,
            path=redact_query(meta.path),
            response_body=_response_body(meta.raw_chunks, meta.content_encoding),
            response_content_type=meta.content_type,
        )
        return FollowUp(self.route, scrub_record(record, meta.secrets))


def _response_body(chunks: list[bytes] | None, encoding: str | None) -> bytes | None:
    """The raw body kept for body mode `full`, without its content coding."""
    if chunks is None:
        return None
    try:
        decoder = ContentDecoder(encoding)
        return decoder.decode(b"".join(chunks)) + decoder.flush()
    except DecodeError:
        return None
