"""`llmtap reprice [--prices FILE]`, and the pricer every other command prices with.

Not responsible for the prices themselves (analytics/pricing.py) or for which stored rows
need pricing again (analytics/reprice.py).
"""

from __future__ import annotations

import argparse
from typing import Any

from llmtap.cli import settings as settings_module
from llmtap.cli.errors import UsageError


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "reprice",
        help="price every stored exchange again (after a price file or price data change)",
    )
    parser.add_argument("--prices", metavar="FILE", help="local price file (TOML)")
    settings_module.add_common(parser)
    parser.set_defaults(run=run_reprice)


def pricer_for(settings: settings_module.Settings) -> Any:
    """The pricer for these settings (genai-prices plus the local price file, if any)."""
    from llmtap.analytics.pricing import PriceFileError, Pricer

    try:
        return Pricer(settings.price_file)
    except PriceFileError as exc:
        raise UsageError(str(exc)) from None


def catch_up(engine: Any, pricer: Any, duck: Any = None) -> int:
    """Price the rows stored without a price (imported, recorded while no pricer ran) or
    under another price file, at their own dates; returns how many. With a DuckDB
    connection (`duck`), DuckDB finds them: one parallel pass over a few columns, much
    cheaper than the store's own scan."""
    from llmtap.analytics.reprice import reprice, stale_ids

    if duck is None:
        return reprice(engine, pricer)
    ids = stale_ids(duck, pricer)
    return reprice(engine, pricer, ids=ids) if ids else 0


def run_reprice(args: argparse.Namespace) -> int:
    from llmtap.analytics.reprice import reprice
    from llmtap.cli.store import open_store

    settings = settings_module.load(args)
    pricer = pricer_for(settings)
    engine = open_store(settings)
    try:
        count = reprice(engine, pricer, everything=True)
    finally:
        engine.dispose()
    print(f"priced {count} exchanges with {pricer.file_version}")
    return 0
