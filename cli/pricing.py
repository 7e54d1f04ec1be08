"""`llmtap reprice [--prices FILE | --no-prices]`, and the pricer every other command
prices with: an explicit price file (`--prices`, `LLMTAP_PRICES`, config `prices`) when
one is given, else the one `reprice --prices FILE` installed in the store, else
genai-prices alone; and beside it the price files of the config's `[[providers]]`.

`reprice` draws a bar on a terminal (cli/progress.py) and ends with how many it priced and
how many of those changed in money (pricedness or a cost part; a new price version alone
is no change).

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
        description="Price every stored exchange again at its own date, with the store's price file (or the one "
        "given, which is then installed in the store) over genai-prices; every later report and `show` "
        "uses the new prices.",
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--prices", metavar="FILE", help="local price file (TOML): installed in the store, every command then uses it"
    )
    group.add_argument(
        "--no-prices", action="store_true", help="remove the store's price file: genai-prices alone again"
    )
    settings_module.add_common(parser)
    parser.set_defaults(run=run_reprice)


def pricer_for(settings: settings_module.Settings, engine: Any = None) -> Any:
    """The pricer for these settings: genai-prices plus the explicit price file, else the
    store's (when given the store's `engine`), else none."""
    from llmtap.analytics.pricing import PriceFileError, Pricer
    from llmtap.analytics.store_prices import installed

    try:
        providers = provider_prices(settings)
        if settings.price_file is not None or engine is None:
            return Pricer(settings.price_file, providers)
        return Pricer(installed(engine), providers)
    except PriceFileError as exc:
        raise UsageError(str(exc)) from None


def provider_prices(settings: settings_module.Settings) -> list[Any]:
    """The `[[providers]]` entries' price files, read (analytics.price_file.ProviderPrices)."""
    from llmtap.analytics.price_file import PriceFileError, PriceText, ProviderPrices

    try:
        return [ProviderPrices(name, PriceText.read(path)) for name, path in settings.provider_files.items()]
    except PriceFileError as exc:
        raise UsageError(str(exc)) from None


def catch_up(engine: Any, pricer: Any, duck: Any = None, *, meter: bool = False) -> int:
    """Price the rows stored without a price (imported, recorded while no pricer ran) or
    under another price file, at their own dates; returns how many. With a DuckDB
    connection (`duck`), DuckDB finds them: one parallel pass over a few columns, much
    cheaper than the store's own scan. `meter`: show progress on a terminal (a long
    command's first step)."""
    from llmtap.analytics.reprice import reprice, stale_ids
    from llmtap.cli.progress import Meter

    if duck is None:
        if not meter:
            return reprice(engine, pricer)
        with Meter("pricing stale rows") as shown:
            return reprice(engine, pricer, progress=lambda n, _changed: shown.advance(n))
    from llmtap.analytics.duck import refresh

    ids = stale_ids(duck, pricer)
    count = 0
    if ids and meter:
        with Meter("pricing stale rows", total=len(ids)) as shown:
            count = reprice(engine, pricer, ids=ids, progress=lambda n, _changed: shown.advance(n))
    elif ids:
        count = reprice(engine, pricer, ids=ids)
    if count:
        refresh(duck)  # a facts copy it reads must show the prices just written
    return count


def run_reprice(args: argparse.Namespace) -> int:
    """Price every stored exchange. `--prices FILE` checks the file and installs it in the
    store first; `--no-prices` removes the store's file; with neither, the usual pricer
    (config or environment file, else the store's)."""
    from llmtap.analytics.price_file import PriceFileError, PriceText
    from llmtap.analytics.reprice import reprice
    from llmtap.analytics.store_prices import install, uninstall
    from llmtap.cli.progress import Meter, counted
    from llmtap.cli.store import open_store

    settings = settings_module.load(args)
    text = None
    if args.prices:
        try:
            text = PriceText.read(settings.price_file) if settings.price_file else None
            pricer_for(settings)  # a bad file fails before the store is touched
        except PriceFileError as exc:
            raise UsageError(str(exc)) from None
    engine = open_store(settings)
    try:
        if text is not None:
            install(engine, text)
        elif args.no_prices:
            uninstall(engine)
            settings.price_file = None
        pricer = pricer_for(settings, engine)
        changed = 0

        def priced(n: int, money: int) -> None:
            nonlocal changed
            changed += money
            meter.advance(n)

        with Meter("repricing", total=lambda: _stored(engine)) as meter:
            count = reprice(engine, pricer, everything=True, progress=priced)
    finally:
        engine.dispose()
    kept = f" (installed in the store: every command prices with {text.name})" if text is not None else ""
    print(f"repriced {counted(count, 'exchange')} ({changed:,} changed) with {pricer.file_version}{kept}")
    return 0


def _stored(engine: Any) -> int:
    from llmtap.storage.export import count_exchanges

    return count_exchanges(engine)
