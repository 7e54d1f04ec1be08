"""The price file a store prices with (`store_settings` key `price_file`): install it,
remove it, read it as a `PriceText`, and a writer step that prices with it and notices
when `llmtap reprice` installs another one while a proxy runs.

Not responsible for the prices (`pricing.py`) or for choosing between an explicit price
file and the store's (cli/pricing.py).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from llmtap.analytics.price_file import PriceText, ProviderPrices, load
from llmtap.storage import store_settings

log = logging.getLogger("llmtap.analytics")

RECHECK_SECONDS = 30.0  # how often a writer asks the store whether its price file changed


def installed(engine: Engine) -> PriceText | None:
    """The store's price file, or None (genai-prices alone)."""
    value = store_settings.read(engine, store_settings.PRICE_FILE)
    if not isinstance(value, dict) or not isinstance(value.get("content"), str):
        return None
    return PriceText(str(value.get("name") or "prices.toml"), value["content"])


def install(engine: Engine, text: PriceText) -> None:
    """Check the file (a `PriceFileError` if it is bad) and make it the store's."""
    load(text)
    store_settings.write(
        engine, store_settings.PRICE_FILE, {"name": text.name, "digest": text.digest, "content": text.content}
    )


def uninstall(engine: Engine) -> bool:
    return store_settings.remove(engine, store_settings.PRICE_FILE)


class StorePricer:
    """The writer's `enrich` step for a store with no explicit price file: prices with
    the store's file, and looks again every `RECHECK_SECONDS` (rows it priced with a file
    since replaced are caught up by the next report: `reprice.stale`)."""

    def __init__(self, url: str, providers: list[ProviderPrices] | None = None) -> None:
        from llmtap.storage.engine import make_engine

        self._providers = list(providers or ())  # `[[providers]]` price files, beside the store's
        self._engine = make_engine(url)
        self._digest: str | None = "?"
        self._checked = 0.0
        self._pricer: Any = None

    def __call__(self, rows: list[dict[str, Any]]) -> None:
        self._refresh()
        self._pricer.price_rows(rows)

    def _refresh(self) -> None:
        from llmtap.analytics.pricing import Pricer

        now = time.monotonic()
        if self._pricer is not None and now - self._checked < RECHECK_SECONDS:
            return
        self._checked = now
        try:
            text = installed(self._engine)
        except Exception as exc:  # noqa: BLE001 - whatever it is, price as before
            # The store away (SQLAlchemyError, OSError): the writer says when it goes and when
            # it is back, once each; a line here per look, with a traceback, repeated that
            # every RECHECK_SECONDS while it was away. Anything else is a bug: its traceback.
            bug = not isinstance(exc, (SQLAlchemyError, OSError))
            level = logging.WARNING if bug else logging.DEBUG
            log.log(level, "llmtap: cannot read the store's price file (%s); pricing as before", exc, exc_info=bug)
            if self._pricer is None:
                self._pricer = Pricer(None, self._providers)
            return
        finally:
            self._engine.dispose()  # one look every RECHECK_SECONDS: hold no connection between
        digest = text.digest if text is not None else None
        if self._pricer is None or digest != self._digest:
            try:
                self._pricer = Pricer(text, self._providers)
            except ValueError:
                log.exception("llmtap: the store's price file is bad; pricing with genai-prices alone")
                self._pricer = Pricer(None, self._providers)
            self._digest = digest
