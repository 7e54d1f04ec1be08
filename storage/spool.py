"""The local spool: where rows wait while the database is down or locked.

Each writer appends to a file of its own (`spool-<pid>-<time>.jsonl`, one batch a line,
flushed and fsynced before the batch counts as acknowledged; 0600 in a 0700 folder: it
holds prompts and answers) and holds an exclusive lock on it. Replay takes every spool
file it can lock, including those a dead process left, writes them (duplicates are
ignored by the store's keys) and removes them.

Not responsible for SQL: it hands decoded `RowSet`s to a callback.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from llmtap.storage.private import open_private, private_dir
from llmtap.storage.rows import RowSet

_DT = "$llmtap_dt"
_B64 = "$llmtap_b64"


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return {_DT: value.isoformat()}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {_B64: base64.b64encode(bytes(value)).decode("ascii")}
    raise TypeError(f"cannot spool a {type(value).__name__}")


def _hook(obj: dict[str, Any]) -> Any:
    if len(obj) == 1:
        if _DT in obj:
            return datetime.fromisoformat(obj[_DT])
        if _B64 in obj:
            return base64.b64decode(obj[_B64])
    return obj


def encode(rows: RowSet) -> bytes:
    payload = {
        "exchanges": rows.exchanges,
        "tool_calls": rows.tool_calls,
        "bodies": rows.bodies,
        "body_refs": rows.body_refs,
    }
    return json.dumps(payload, default=_default, ensure_ascii=False).encode("utf-8") + b"\n"


def decode(line: bytes) -> RowSet:
    payload = json.loads(line, object_hook=_hook)
    return RowSet(payload["exchanges"], payload["tool_calls"], payload["bodies"], payload["body_refs"])


class Spool:
    """Append-only, fsynced batch files in one folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._file: Any = None
        self._path: Path | None = None
        self.pending = 0  # exchanges this process has spooled and not yet replayed

    def append(self, rows: RowSet) -> None:
        """Write one batch durably. Raises OSError when even the disk refuses."""
        if self._file is None:
            self._open()
        data = encode(rows)
        fd = self._file.fileno()
        offset = os.lseek(fd, 0, os.SEEK_END)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError:
            # A full disk may take half a line: cut it off, or the next batch appended
            # after it would be unreadable too. The caller keeps the rows.
            try:
                os.ftruncate(fd, offset)
            except OSError:
                pass
            raise
        self.pending += len(rows)

    def _open(self) -> None:
        private_dir(self.folder)
        self._path = self.folder / f"spool-{os.getpid()}-{time.time_ns()}.jsonl"
        self._file = open_private(self._path, "ab", buffering=0)  # held open for the writer's life
        fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)

    def has_files(self) -> bool:
        return self.folder.is_dir() and any(self.folder.glob("spool-*.jsonl"))

    def replay(self, write: Callable[[RowSet], None]) -> int:
        """Write every spooled batch through `write`; returns the exchanges replayed.

        A file is removed only after all its batches were written; if `write` raises, the
        file stays for the next replay (already-written batches are ignored then).
        """
        replayed = 0
        self._close_own()
        for path in sorted(self.folder.glob("spool-*.jsonl")) if self.folder.is_dir() else []:
            replayed += self._replay_file(path, write)
        self.pending = 0
        return replayed

    def count(self) -> int:
        """The exchanges waiting in every spool file of the folder (for the exit report)."""
        waiting = 0
        for path in sorted(self.folder.glob("spool-*.jsonl")) if self.folder.is_dir() else []:
            try:
                with open(path, "rb") as handle:
                    waiting += sum(len(rows) for rows in _batches(handle))
            except OSError:
                continue
        return waiting

    def _replay_file(self, path: Path, write: Callable[[RowSet], None]) -> int:
        try:
            handle = open(path, "rb")  # noqa: SIM115
        except FileNotFoundError:
            return 0
        with handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return 0  # another live writer owns it
            count = 0
            for rows in _batches(handle):
                write(rows)
                count += len(rows)
            path.unlink()
            return count

    def _close_own(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def close(self) -> None:
        self._close_own()


def _batches(handle: Any) -> Iterator[RowSet]:
    for line in handle:
        if not line.strip():
            continue
        try:
            yield decode(line)
        except (ValueError, KeyError):
            continue  # a torn last line from a crash mid-write: it was never acknowledged
