"""Where a batch's rows go: the store, in one transaction (storage.batch_insert), or the
spool while the store is away, or memory while even the disk refuses (storage.held), or
the rejected file when the store refuses a row for its content (storage.rejecting: the
batch is written row by row to find the rows at fault). Whatever waits in the spool or in
memory goes first, so order is kept: the spool is replayed (its follow-ups applied after
every spooled row) before a new batch is written.

Not responsible for batching (storage.writer), for the follow-ups of a batch
(storage.followup_apply), or for telling whether the store is away and making a gone one
again (storage.store_guard).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from llmtap.storage import followups
from llmtap.storage.batch_insert import BatchInsert
from llmtap.storage.rows import RowSet
from llmtap.storage.store_guard import first_line, is_unavailable
from llmtap.storage.writer_parts import WriterParts

log = logging.getLogger("llmtap.storage")


class Delivery:
    def __init__(
        self,
        parts: WriterParts,
        insert: BatchInsert,
        *,
        apply_replayed: Callable[[followups.FollowUp], None],
        key_secret_id: str | None,
    ) -> None:
        self.parts = parts
        self.insert = insert
        self.apply_replayed = apply_replayed  # a spooled follow-up, as a replay meets it
        self.key_secret_id = key_secret_id
        self._other_secrets: set[Any] = set()  # ids of other secrets a replay was found to hold

    def deliver(self, rows: RowSet) -> None:
        if not rows.exchanges:
            return
        now = time.monotonic()
        if self.parts.held.rows and now >= self.parts.guard.down_until:
            self.retry_held()  # rows the disk refused go first, while the database takes them
        if now < self.parts.guard.down_until or self.parts.held.rows:
            self._to_spool(rows)
            return
        if self.parts.spool.pending or self.parts.spool.has_files() or self.parts.guard.gone:
            if not self.replay():
                self._to_spool(rows)
                return
        self._write_or_spool(rows, self._isolate)

    def replay(self) -> bool:
        """The spool into the store (a gone store made again first); False when the store
        is not there to take it."""
        if not self.parts.guard.revive():
            return False
        try:
            replayed, applied = self.parts.spool.replay(self._write_replayed, self.apply_replayed)
        except SQLAlchemyError as exc:
            if is_unavailable(exc):
                self.parts.guard.went_down(exc)
            else:
                log.error("llmtap writer: spool replay hit a bad row: %s", first_line(exc))
            return False
        if replayed or applied:
            log.info("llmtap writer: replayed %d spooled exchanges and %d background follow-ups", replayed, applied)
        return True

    def retry_held(self, force: bool = False) -> None:
        """Rows neither the database nor the disk took: try the database (once its backoff
        is over: a writer whose disk refuses has no spool to replay, so this is where the
        database is found back), then the disk."""
        held, self.parts.held.rows = self.parts.held.rows, []
        for rows in held:
            if force or time.monotonic() >= self.parts.guard.down_until:
                try:
                    self.insert(rows)
                    self.parts.guard.came_up()
                    continue
                except SQLAlchemyError as exc:
                    if is_unavailable(exc):
                        self.parts.guard.went_down(exc)
            try:
                self.parts.spool.append(rows)
            except OSError:
                self.parts.held.rows.append(rows)
        self.parts.held.disk_takes_again()

    def _write_replayed(self, rows: RowSet) -> None:
        self._note_other_secrets(rows)
        try:
            inserted = self.insert(rows)
        except SQLAlchemyError as exc:
            if is_unavailable(exc):
                raise
            inserted = self._isolate_quietly(rows)
        self.parts.stats.replayed += inserted
        self.parts.guard.came_up()

    def _note_other_secrets(self, rows: RowSet) -> None:
        """Say once per secret that spooled rows of another secret are stored as they are."""
        named = {row.get("key_secret_id") for row in rows.exchanges if row.get("key_fingerprint")}
        other = named - {None, self.key_secret_id} - self._other_secrets
        if other and self.key_secret_id:
            self._other_secrets |= other
            log.warning(
                "llmtap writer: spooled exchanges fingerprinted with another secret (%s) are stored as they are; "
                "`llmtap fingerprint rekey --from` its file makes them this store's",
                ", ".join(sorted(str(secret_id) for secret_id in other)),
            )

    def _write(self, rows: RowSet) -> None:
        inserted = self.insert(rows)
        self.parts.guard.came_up()
        self.parts.settle(written=inserted, duplicates=len(rows.exchanges) - inserted)

    def _write_or_spool(self, rows: RowSet, refused: Callable[[RowSet, SQLAlchemyError], None]) -> None:
        """`rows` to the store; to the spool when the store is away, to `refused` when it
        refuses them for their content."""
        try:
            self._write(rows)
        except SQLAlchemyError as exc:
            if is_unavailable(exc):
                self.parts.guard.went_down(exc)
                self._to_spool(rows)
            else:
                refused(rows, exc)

    def _isolate(self, rows: RowSet, exc: SQLAlchemyError) -> None:
        """A batch the database refused for its content: find the rows at fault."""
        log.error("llmtap writer: batch refused (%s); writing row by row", first_line(exc))
        for single in _singles(rows):
            self._write_or_spool(single, self.parts.rejecting.rows)

    def _isolate_quietly(self, rows: RowSet) -> int:
        inserted = 0
        for single in _singles(rows):
            try:
                inserted += self.insert(single)
            except SQLAlchemyError as exc:
                if is_unavailable(exc):
                    raise
                self.parts.rejecting.rows(single, exc, count=False)
        return inserted

    def _to_spool(self, rows: RowSet) -> None:
        try:
            self.parts.spool.append(rows)
        except OSError as exc:  # the disk refuses too: keep them in memory and retry
            self.parts.held.rows.append(rows)
            self.parts.held.disk_refused(exc)
        else:
            self.parts.held.disk_takes_again()
        self.parts.settle(spooled=len(rows))


def _singles(rows: RowSet) -> Iterable[RowSet]:
    wanted_bodies = {r["body_hash"] for r in rows.body_refs}
    by_hash = {b["hash"]: b for b in rows.bodies if b["hash"] in wanted_bodies}
    for row in rows.exchanges:
        refs = [r for r in rows.body_refs if r["exchange_id"] == row["id"]]
        yield RowSet(
            [row],
            [c for c in rows.tool_calls if c["exchange_id"] == row["id"]],
            [by_hash[r["body_hash"]] for r in refs if r["body_hash"] in by_hash],
            refs,
        )
