"""The FileIO the lake's catalog writes through (`py-io-impl`): pyiceberg's pyarrow FileIO,
whose local files and folders are private to their user whatever the umask (SPEC §4:
what llmtap writes is 0600, its folders 0700), as storage/private.py makes the store's.

pyiceberg writes every file of a table (data, manifests, manifest lists, metadata) through
`PyArrowFile.create`, which opens its filesystem's `open_output_stream`; a local one makes
the missing folders first and pyarrow then creates the file with the process's umask. So
the folders are made 0700 and the file an empty 0600 one before pyarrow opens it (it keeps
an existing file's mode). Modes are given when a file is made, never by a process-wide
umask (private.py says why).

Not responsible for S3 (objects have no mode: the bucket's policy rules there) or for the
folder the user named as the warehouse when it was already there (it keeps its mode).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llmtap.lake.extra import LakeNotInstalled

try:  # the lake extra (pyproject.toml): a one-line error without it
    import pyarrow  # type: ignore[import-untyped]
    from pyarrow.fs import FileSystem  # type: ignore[import-untyped]
    from pyiceberg.io.pyarrow import PyArrowFileIO, PyArrowLocalFileSystem
except ImportError as missing:
    raise LakeNotInstalled(missing.name) from None

from llmtap.storage.private import create_private, private_dir

PY_IO_IMPL = f"{__name__}.PrivateFileIO"  # the catalog property that picks it


class PrivateLocalFileSystem(PyArrowLocalFileSystem):
    def open_output_stream(self, path: str, *args: Any, **kwargs: Any) -> pyarrow.NativeFile:
        private_dir(Path(path).parent)
        create_private(path, tighten=True)  # pyiceberg overwrites it anyway
        return super().open_output_stream(path, *args, **kwargs)


class PrivateFileIO(PyArrowFileIO):
    def _initialize_local_fs(self) -> FileSystem:
        return PrivateLocalFileSystem()
