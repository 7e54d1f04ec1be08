"""`WriterParts`: the parts of the writer (storage/writer.py) that its delivery of rows
(storage.delivery) and of follow-ups (storage.followup_apply) both use, built once by the
writer and handed to each: the store's guard, the spool, what memory holds while even the
disk refuses, the rejected file, the counts, and the writer's `settle`.

Not responsible for what any part does (each module's docstring says so) nor for the order
the writer builds them in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llmtap.storage.held import Held
from llmtap.storage.rejecting import Rejecting
from llmtap.storage.sink import WriterStats
from llmtap.storage.spool import Spool
from llmtap.storage.store_guard import StoreGuard


@dataclass(frozen=True)
class WriterParts:
    guard: StoreGuard
    spool: Spool
    held: Held
    rejecting: Rejecting
    stats: WriterStats
    settle: Callable[..., None]  # the writer's: adds to the counts under its lock, wakes who waits
