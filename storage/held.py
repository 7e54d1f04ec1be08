"""What the writer holds in memory while even the disk refuses the spool (a full disk):
the rows, the count of follow-ups held, and one log line when the disk starts refusing and
one when nothing is held any more (with how many records were, at most).

Not responsible for retrying them (storage.delivery does, with the rows; the follow-ups
wait in storage.followup_apply), nor for the spool itself (storage.spool).
"""

from __future__ import annotations

import logging

from llmtap.storage.rows import RowSet

log = logging.getLogger("llmtap.storage")


class Held:
    def __init__(self) -> None:
        self.rows: list[RowSet] = []  # rows neither the database nor the disk would take
        self.followups = 0  # follow-ups the disk refused (in memory, not durable)
        self._spool_refused: str | None = None  # why the disk refuses the spool (one line each way)
        self._held_most = 0  # records in memory at most while it does, for the line when it ends

    def disk_refused(self, exc: OSError) -> None:
        """One line when the disk starts refusing the spool (a full disk), not one per batch."""
        held = sum(len(rows) for rows in self.rows) + self.followups
        self._held_most = max(self._held_most, held)
        if self._spool_refused is None:
            self._spool_refused = str(exc)
            log.error(
                "llmtap writer: cannot spool (%s); holding records in memory until the database or the disk takes them",
                exc,
            )

    def disk_takes_again(self) -> None:
        """And one when nothing is held in memory any more, with how many were at most."""
        if self._spool_refused is not None and not self.rows and not self.followups:
            log.warning(
                "llmtap writer: nothing is held in memory any more (at most %d records were, while the disk "
                "refused the spool: %s)",
                self._held_most,
                self._spool_refused,
            )
            self._spool_refused, self._held_most = None, 0
