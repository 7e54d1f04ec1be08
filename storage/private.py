"""Files and folders private to their user, whatever the umask (SPEC §4): every folder
llmtap creates is 0700, every file it creates is 0600, and llmtap's home folder is 0700
even when an older version made it 0755.

Modes are given when the file or folder is made (`os.open`, `os.mkdir`), never by a
process-wide umask: the proxy has threads, and a umask changed in one is changed in all.
A file another program writes (SQLite, DuckDB) is created empty and private first; SQLite
gives its -wal, -shm and -journal files the database file's mode.

Not responsible for what goes into the files, nor for files the user made themselves
(an existing store keeps its mode: an administrator may share one on purpose).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import IO, Any

FILE_MODE = 0o600
DIR_MODE = 0o700

_FLAGS = {
    "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
    "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
    "x": os.O_WRONLY | os.O_CREAT | os.O_EXCL,
}


def private_dir(path: Path) -> Path:
    """`mkdir -p` whose new folders are 0700; llmtap's home is made 0700 if it was not."""
    path = Path(path).expanduser()
    missing = []
    for folder in (path, *path.parents):
        if folder.is_dir():
            break
        missing.append(folder)
    for folder in reversed(missing):
        try:
            os.mkdir(folder, DIR_MODE)
        except FileExistsError:
            pass  # another process made it first; `is_dir` below still checks what it is
    if not path.is_dir():
        raise NotADirectoryError(f"not a folder: {path}")
    _tighten_home(path)
    return path


def _tighten_home(path: Path) -> None:
    """An older llmtap made ~/.llmtap 0755; closing the folder closes everything in it."""
    from llmtap.storage.engine import home  # engine makes its folder with this module

    base = home().expanduser()
    if base == Path.home() or base == Path(base.anchor) or not (path == base or base in path.parents):
        return  # LLMTAP_HOME pointed at the user's own home or the root: not ours to close
    try:
        info = os.stat(base)
        if info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) & 0o077:
            os.chmod(base, stat.S_IMODE(info.st_mode) & DIR_MODE)
    except OSError:
        pass  # a folder we may not change stays as it is; writing into it still works


def open_private(path: Path | str, mode: str = "w", **kwargs: Any) -> IO[Any]:
    """`open(path, mode)` for writing a file that is 0600: created so, or made so if it
    was there already (it is about to hold what this file type holds: prompts, answers).
    `mode` is one of w, a, x with an optional b; the rest is `os.fdopen`'s."""
    kind = mode.replace("b", "").replace("+", "")
    if kind not in _FLAGS:
        raise ValueError(f"open_private writes files; mode {mode!r} is not one of w, a, x")
    flags = _FLAGS[kind] | getattr(os, "O_CLOEXEC", 0)
    if "+" in mode:
        flags = (flags & ~os.O_WRONLY) | os.O_RDWR
    fd = os.open(path, flags, FILE_MODE)
    try:
        _tighten(fd)
        return os.fdopen(fd, mode, **kwargs)
    except BaseException:
        os.close(fd)
        raise


def create_private(path: Path | str, *, tighten: bool = False) -> None:
    """Make `path` an empty 0600 file if it does not exist, for another program to fill.
    An existing file keeps its mode unless `tighten` (llmtap overwrites it anyway)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
    except FileExistsError:
        if not tighten:
            return
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        _tighten(fd)
    finally:
        os.close(fd)


def _tighten(fd: int) -> None:
    # Only a regular file of ours: `-o /dev/stdout` may be a terminal, whose mode is not ours to change.
    info = os.fstat(fd)
    if stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) & 0o077:
        os.fchmod(fd, stat.S_IMODE(info.st_mode) & FILE_MODE)
