"""The writer's follow-ups of background work (polls, resumed streams, cancels:
storage/followups.py): taken with a batch, applied after that batch's rows so a poll never
overtakes its POST, each in a transaction of its own. While the store is away, or rows or
follow-ups wait in the spool before them, they go to the spool too, behind those (a replay
applies them after every spooled row); held in memory only while even the disk refuses
them. One refused for its content goes to the rejected file.

Not responsible for what applying one changes (storage.followups), for the rows of the
batch (storage.delivery), or for the store's being away (storage.store_guard says so).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from llmtap.storage import followups, rejected
from llmtap.storage.store_guard import first_line, is_unavailable
from llmtap.storage.writer_parts import WriterParts

log = logging.getLogger("llmtap.storage")

FOLLOWUPS_WAITING = 10_000  # follow-ups held in memory while even the disk refuses them, at most


class FollowUps:
    def __init__(
        self,
        parts: WriterParts,
        *,
        body_mode: str,
        enrich: Callable[[list[dict[str, Any]]], None] | None,
    ) -> None:
        self.parts = parts
        self.body_mode = body_mode
        self.enrich = enrich
        self.waiting: list[followups.FollowUp] = []  # applied after the rows of their batch
        self._taken = 0  # of those, taken from the queue and not settled yet

    def take(self, followup: followups.FollowUp) -> None:
        """One of the batch being turned into rows: applied after them, by `apply`."""
        self.waiting.append(followup)
        self._taken += 1

    def apply(self) -> None:
        """The batch's follow-ups (and any held in memory before them), after its rows: to
        the store, or to the spool while the store is away or rows wait there. Either way a
        batch's follow-ups are settled with it, so settlement keeps the order of submission."""
        try:
            if not self.waiting:
                return
            waiting, self.waiting = self.waiting, []
            parts = self.parts
            if time.monotonic() < parts.guard.down_until or parts.spool.pending or parts.held.rows or parts.guard.gone:
                self._to_spool(waiting)
                return
            for index, followup in enumerate(waiting):
                try:
                    self._apply_one(followup)
                except SQLAlchemyError as exc:
                    if is_unavailable(exc):
                        self.parts.guard.went_down(exc)
                        self._to_spool(waiting[index:])  # this one too: applying it again changes nothing
                        return
                    self._reject(followup, exc)
                except Exception as exc:  # noqa: BLE001 - a bug in applying it: keep it to import again
                    log.error("llmtap writer: a background follow-up could not be applied: %r", exc)
                    self._reject(followup, exc)
            self.parts.held.followups = 0
        finally:
            if self._taken:
                taken, self._taken = self._taken, 0
                self.parts.settle(followups=taken)

    def apply_replayed(self, followup: followups.FollowUp) -> None:
        """A spooled follow-up, after every spooled row: the store's being away raises (the
        replay stops, the file stays); a refusal of its content goes to the rejected file."""
        try:
            self._apply_one(followup)
        except SQLAlchemyError as exc:
            if is_unavailable(exc):
                raise
            self._reject(followup, exc)
        except Exception as exc:  # noqa: BLE001 - a bug in applying it
            log.error("llmtap writer: a spooled background follow-up could not be applied: %r", exc)
            self._reject(followup, exc)

    def _apply_one(self, followup: followups.FollowUp) -> None:
        """One follow-up, in a transaction of its own; raises the store's errors. A SQLite
        file deleted under the writer counts as the store gone, before and after (the pool's
        connections would apply it to the deleted file)."""
        self.parts.guard.check_file()
        followups.apply(self.parts.guard.engine, [followup], self.enrich)
        self.parts.guard.check_file()

    def _to_spool(self, waiting: list[followups.FollowUp]) -> None:
        try:
            unkept = self.parts.spool.append_followups([followup.kept(self.body_mode) for followup in waiting])
        except OSError as exc:  # the disk refuses too: hold them in memory, retry with the rows
            kept = waiting[-FOLLOWUPS_WAITING:]
            self.parts.held.followups = len(kept)
            self.parts.held.disk_refused(exc)
            if len(waiting) > len(kept):
                log.error("llmtap writer: %d background follow-ups lost (memory full)", len(waiting) - len(kept))
            self.waiting = kept + self.waiting  # none taken since: only this batch's
            return
        spooled = len(waiting) - len(unkept)
        self.parts.held.followups = 0
        self.parts.held.disk_takes_again()
        self.parts.stats.followups_spooled += spooled
        for followup, why in unkept:
            log.error(
                "llmtap writer: the %s of %s %s was lost: %r",
                followup.route.kind,
                followup.route.protocol,
                followup.route.response_id,
                why,
            )

    def _reject(self, followup: followups.FollowUp, exc: Exception) -> None:
        """Refused for its content: to the rejected file, whence `llmtap import` takes it back."""
        route = followup.route
        log.error(
            "llmtap writer: the %s of %s %s was rejected: %s",
            route.kind,
            route.protocol,
            route.response_id,
            first_line(exc),
        )
        try:
            line = rejected.followup_line(followup.kept(self.body_mode), first_line(exc))
        except Exception as why:  # noqa: BLE001 - values bad enough to fail the store may fail this too
            log.error("llmtap writer: could not keep the rejected follow-up either: %r", why)
            return
        if not self.parts.rejecting.keep(line):
            log.error("llmtap writer: could not keep the rejected follow-up of %s either", route.response_id)
