"""Whether the `lake` extra is installed: pyiceberg, pyarrow and pyiceberg-core, which only
the lake needs (about 300 MB with DuckDB's iceberg, avro and httpfs extensions), are not
in the core install. A lake module imported without them raises `LakeNotInstalled`, a
StoreError, which the command line prints as its one line naming the extra.

Not responsible for the DuckDB extensions reports read a lake with (analytics/lake_views.py
says the same thing for them).
"""

from __future__ import annotations

from llmtap.storage.errors import StoreError

INSTALL = "pip install 'llmtap[lake]' (or in a checkout: uv sync --extra lake)"


class LakeNotInstalled(StoreError):
    def __init__(self, missing: str | None) -> None:
        super().__init__(f"the lake needs the lake extra: {INSTALL}; {missing or 'pyiceberg'} is not installed")
