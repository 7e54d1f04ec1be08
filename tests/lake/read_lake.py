"""For the lake readers' tests: a store's lake made by the real `llmtap lake sync`
(llmtap.lake.sync, its catalog in the store's database), as a cron job would leave it.

Not responsible for testing the sync itself (tests/lake/test_sync*.py do).
"""

from __future__ import annotations

from pathlib import Path

from llmtap.lake.catalog import open_catalog
from llmtap.lake.sync import TableSync
from llmtap.lake.sync import sync as lake_sync
from llmtap.storage.engine import make_engine


def sync(url: str, warehouse: Path) -> list[TableSync]:
    """One `lake sync` of the store at `url` into `warehouse`."""
    engine = make_engine(url)
    catalog = open_catalog(url, str(warehouse))
    try:
        return lake_sync(engine, catalog)
    finally:
        catalog.engine.dispose()
        engine.dispose()
