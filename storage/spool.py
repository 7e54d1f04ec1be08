"""The local spool: where rows, and follow-ups of background work, wait while the
database is down or locked.

Each writer appends to a file of its own (`spool-<pid>-<time>.jsonl`, one line a batch of
rows or a follow-up, flushed and fsynced before it counts as acknowledged; 0600 in a 0700
folder: it holds prompts and answers) and holds an exclusive lock on it. Replay takes every
spool file it can lock, including those a dead process left, writes the rows of them all
(duplicates are ignored by the store's keys), then applies their follow-ups in the order
they were spooled (files oldest first), and removes them: a poll never overtakes its POST,
even when the two wait in files of different runs.

A rows line is `{"exchanges": …, "tool_calls": …, "bodies": …, "body_refs": …}` (the only
kind an older llmtap wrote); a follow-up line is `{"followup": …}` (`FollowUp.to_json`,
JSON only, key shapes scrubbed like the rejected file's lines).

Not responsible for SQL: it hands decoded `RowSet`s and `FollowUp`s to callbacks.
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
from typing import TYPE_CHECKING, Any

from llmtap.storage.private import open_private, private_dir
from llmtap.storage.secrets import scrub

if TYPE_CHECKING:
    from llmtap.storage.followups import FollowUp
    from llmtap.storage.rows import RowSet
# The row and follow-up types are imported where lines are decoded: `waiting`, which every
# report runs, only stats the files (followups.py pulls in the tool-call checks, 0.05 s).

_DT = "$llmtap_dt"
_FOLLOWUP = b'{"followup":'
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
    from llmtap.storage.rows import RowSet

    payload = json.loads(line, object_hook=_hook)
    return RowSet(payload["exchanges"], payload["tool_calls"], payload["bodies"], payload["body_refs"])


def encode_followup(followup: FollowUp) -> bytes:
    """A follow-up as one line. Raises ValueError, TypeError or RecursionError for one
    whose values JSON cannot hold."""
    line = json.dumps({"followup": followup.to_json()}, default=str)  # ASCII: escapes hold no key shape
    return scrub(line).encode("ascii") + b"\n"


def decode_line(line: bytes) -> RowSet | FollowUp:
    """A line of either kind. Raises ValueError (KeyError, TypeError) for a line that is
    neither, a torn one included."""
    if line.lstrip().startswith(_FOLLOWUP):
        from llmtap.storage.followups import FollowUp

        # read without the rows' hook: a follow-up's binary body is its own base64 object
        return FollowUp.from_json(json.loads(line)["followup"])
    return decode(line)


class Spool:
    """Append-only, fsynced files of batches and follow-ups in one folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._file: Any = None
        self._path: Path | None = None
        self.pending = 0  # exchanges and follow-ups this process has spooled and not yet replayed

    def append(self, rows: RowSet) -> None:
        """Write one batch durably. Raises OSError when even the disk refuses."""
        self._append(encode(rows))
        self.pending += len(rows)

    def append_followups(self, followups: list[FollowUp]) -> list[tuple[FollowUp, Exception]]:
        """Write follow-ups durably, a line each, in order (one write, one fsync); returns
        those JSON cannot hold, with why (a bug: nothing else would keep them either).
        Raises OSError when the disk refuses, and then wrote none of them."""
        lines: list[bytes] = []
        unkept: list[tuple[FollowUp, Exception]] = []
        for followup in followups:
            try:
                lines.append(encode_followup(followup))
            except (ValueError, TypeError, RecursionError) as exc:
                unkept.append((followup, exc))
        if lines:
            self._append(b"".join(lines))
            self.pending += len(lines)
        return unkept

    def _append(self, data: bytes) -> None:
        if self._file is None:
            self._open()
        fd = self._file.fileno()
        offset = os.lseek(fd, 0, os.SEEK_END)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError:
            # A full disk may take half a line: cut it off, or the next line appended
            # after it would be unreadable too. The caller keeps what it spooled.
            try:
                os.ftruncate(fd, offset)
            except OSError:
                pass
            raise

    def _open(self) -> None:
        private_dir(self.folder)
        self._path = self.folder / f"spool-{os.getpid()}-{time.time_ns()}.jsonl"
        self._file = open_private(self._path, "ab", buffering=0)  # held open for the writer's life
        fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)

    def has_files(self) -> bool:
        return self.folder.is_dir() and any(self.folder.glob("spool-*.jsonl"))

    def replay(self, write: Callable[[RowSet], None], apply: Callable[[FollowUp], None]) -> tuple[int, int]:
        """Write every spooled batch through `write`, then hand every spooled follow-up to
        `apply`; returns (exchanges, follow-ups) replayed.

        The rows of every file go first, then the follow-ups, file by file, oldest file
        first, each file's in the order they were spooled. A file is removed only after
        all its rows and follow-ups were handed over; if a callback raises, the files not
        removed yet stay for the next replay (their rows are ignored then as duplicates,
        and `apply` changes an exchange it completed no more).
        """
        from llmtap.storage.followups import FollowUp
        from llmtap.storage.rows import RowSet

        exchanges = applied = 0
        self._close_own()
        taken: list[tuple[Path, Any]] = []
        try:
            for path in self._files():
                handle = _locked(path)
                if handle is None:
                    continue
                taken.append((path, handle))
                for rows in _items(handle, followups=False):
                    assert isinstance(rows, RowSet)
                    write(rows)
                    exchanges += len(rows)
            for path, handle in taken:
                handle.seek(0)
                for followup in _items(handle, rows=False):
                    assert isinstance(followup, FollowUp)
                    apply(followup)
                    applied += 1
                path.unlink(missing_ok=True)  # a writer that opened it before may have taken it after us
        finally:
            for _, handle in taken:
                handle.close()
        self.pending = 0
        return exchanges, applied

    def count(self) -> int:
        """The exchanges and follow-ups waiting in every spool file of the folder (for the
        exit report)."""
        from llmtap.storage.rows import RowSet

        waiting = 0
        for path in self._files():
            try:
                with open(path, "rb") as handle:
                    waiting += sum(len(item) if isinstance(item, RowSet) else 1 for item in _items(handle))
            except OSError:
                continue
        return waiting

    def _files(self) -> list[Path]:
        """The spool files, oldest first (by the time in their names: names sort by pid)."""
        if not self.folder.is_dir():
            return []
        return sorted(self.folder.glob("spool-*.jsonl"), key=_created)

    def _close_own(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def close(self) -> None:
        self._close_own()


COUNT_LIMIT = 64 << 20  # bytes of spool files a reader counts record by record (each line decoded)


def waiting(folder: Path, count_limit: int = COUNT_LIMIT) -> tuple[int, int | None]:
    """(bytes, records) in the spool files of `folder`, for a command that reads the store
    and should say what is not in it yet; records is None past `count_limit` bytes."""
    pool = Spool(folder)
    files = pool._files()
    size = 0
    for path in files:
        try:
            size += path.stat().st_size
        except OSError:
            continue
    if not size:
        return 0, 0
    return size, pool.count() if size <= count_limit else None


def _created(path: Path) -> tuple[int, str]:
    try:
        return int(path.stem.rsplit("-", 1)[1]), path.name
    except (IndexError, ValueError):
        try:
            return path.stat().st_mtime_ns, path.name
        except OSError:
            return 0, path.name


def _locked(path: Path) -> Any:
    """The file, open and exclusively locked; None when it is gone or a live writer owns it."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed by `replay`
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def _items(handle: Any, *, rows: bool = True, followups: bool = True) -> Iterator[RowSet | FollowUp]:
    """The lines of a spool file, decoded; only the kinds asked for are decoded at all."""
    for line in handle:
        if not line.strip():
            continue
        if not (followups if line.lstrip().startswith(_FOLLOWUP) else rows):
            continue
        try:
            yield decode_line(line)
        except (ValueError, KeyError, TypeError, RecursionError):
            continue  # a torn last line from a crash mid-write: it was never acknowledged
