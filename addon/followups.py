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

from typing import Any

from llmtap.addon.tee import PendingExchange
from llmtap.protocols.followups import CONTINUES, FollowUpRoute
from llmtap.storage.followups import FollowUp


class PendingFollowUp:
    """What the writer's thread finishes for a follow-up: the decode, then a `FollowUp`."""

    __slots__ = ("route", "pending")

    def __init__(self, route: FollowUpRoute, pending: PendingExchange) -> None:
        self.route = route
        self.pending = pending

    def __reduce__(self) -> tuple[Any, ...]:
        return (PendingFollowUp, (self.route, self.pending))  # the pending one flushes its decoder

    def build(self) -> FollowUp:
        return FollowUp(self.route, self.pending.follow_up_record(CONTINUES))
