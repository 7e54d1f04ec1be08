"""The writer's `rejected.jsonl`: rows, records and follow-ups the database refused for
their content (not for being away), kept as lines `llmtap import` loads back
(storage/rejected.py makes the lines), so a refused record goes somewhere, never nowhere.

Not responsible for deciding what is refused (storage.delivery isolates the rows at
fault) nor for the lines' format (storage.rejected).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llmtap.storage import rejected
from llmtap.storage.held import Held
from llmtap.storage.private import open_private, private_dir
from llmtap.storage.record import Recorded
from llmtap.storage.rows import RowSet
from llmtap.storage.store_guard import first_line

log = logging.getLogger("llmtap.storage")


class Rejecting:
    """`settle` counts what was settled (the writer's `_settle`); rows the file cannot take
    either are held in memory with those the disk refused."""

    def __init__(self, path: Path, held: Held, settle: Callable[..., None]) -> None:
        self.path = path
        self.held = held
        self.settle = settle

    def rows(self, rows: RowSet, exc: Exception, count: bool = True) -> None:
        log.error("llmtap writer: exchange %s rejected: %s", rows.exchanges[0]["id"], first_line(exc))
        if not self.keep(rejected.rows_line(rows, first_line(exc))):
            self.held.rows.append(rows)
        if count:
            self.settle(rejected=len(rows))

    def record(self, record: Recorded, exc: Exception) -> None:
        try:  # whole, so `llmtap import rejected.jsonl` can load it back
            line = rejected.record_line(record, repr(exc))
        except Exception as why:  # noqa: BLE001 - values bad enough to fail the rows may fail this too
            log.error("llmtap writer: could not keep the rejected record %s either: %r", record.id, why)
        else:
            if not self.keep(line):
                log.error("llmtap writer: could not keep the rejected record %s either", record.id)
        self.settle(rejected=1)

    def unfinished(self, item: Any, exc: Exception) -> None:
        """Nothing to keep: an item that could neither be finished nor say who it was."""
        log.error("llmtap writer: a %s was lost: %r", type(item).__name__, exc)
        self.settle(rejected=1)

    def keep(self, line: bytes) -> bool:
        try:
            private_dir(self.path.parent)
            with open_private(self.path, "ab") as handle:
                handle.write(line)
        except OSError:
            return False
        return True
