"""The local price file: TOML that overrides or adds model prices, per-use fees and
region multipliers, read and checked once, from a path or from the copy a store keeps.

    [[price]]                 # a model genai-prices lacks, or a negotiated rate
    provider = "openai"       # optional
    model = "ft:gpt-4o-mini-2024-07-18:acme::*"   # exact, or a prefix ending in `*`
    since = 2026-01-01        # optional: from that date (UTC)
    input_mtok = 0.3          # USD per million tokens; any genai-prices price key
    output_mtok = 1.2         # (cache_read_mtok, cache_write_mtok, input_audio_mtok, …)

    [[fee]]                   # a per-use fee of a provider-run tool (SPEC §5)
    provider = "anthropic"    # optional
    model = "claude-*"        # optional, exact or prefix `*`
    kind = "web_fetch"        # web_search | web_fetch | file_search | code_execution
    usd_per_1k = 5            # USD per 1,000 uses

    [[geo]]                   # a served region that changes every token's price
    provider = "anthropic"
    geo = "us"
    model = "claude-opus-4-6*"   # optional
    multiplier = 1.1

A `[[fee]]` is used where genai-prices has no fee for that kind and wins where both have
one; a `[[geo]]` replaces the built-in region table's answer for the models it names.
Every bad entry is a `PriceFileError` of one line that names the entry.

A `[[providers]]` entry of the config names a price file of the same format for its own
traffic (`ProviderPrices`): every entry of that file is that provider's (one that names
another provider is refused), and `with_providers` adds them, ahead of the main file's,
to the one `PriceFile` a pricer uses, so its version and digest cover them too.

Not responsible for pricing rows (see `pricing.py`) or for where the file is kept
(`storage/store_settings.py` holds a store's copy).
"""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass, field, replace
from datetime import date
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from genai_prices import types

FEE_KINDS = ("web_search", "web_fetch", "file_search", "code_execution")
_PRICE_FIELDS = ("provider", "model", "since")


class PriceFileError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class PriceText:
    """A price file's name and text: read from a path, or the copy a store keeps."""

    name: str
    content: str

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.content.encode()).hexdigest()

    @classmethod
    def read(cls, path: Path) -> PriceText:
        try:
            return cls(path.name, path.read_bytes().decode())
        except (OSError, UnicodeDecodeError) as exc:
            raise PriceFileError(f"cannot read price file {str(path)!r}: {exc}") from None


@dataclass(frozen=True, slots=True)
class Naming:
    """Which rows an entry is about: a provider (or any) and a model pattern (or any)."""

    provider: str | None
    pattern: str | None  # exact, or a prefix ending in `*`; None: every model

    def names(self, provider: str | None, model: str) -> bool:
        if self.provider and self.provider != provider:
            return False
        if self.pattern is None:
            return True
        if self.pattern.endswith("*"):
            return model.startswith(self.pattern[:-1])
        return model == self.pattern


@dataclass(frozen=True, slots=True)
class PriceEntry:
    naming: Naming
    since: date | None
    price: types.ModelPrice


@dataclass(frozen=True, slots=True)
class FeeEntry:
    naming: Naming
    kind: str
    usd_per_1k: Decimal


@dataclass(frozen=True, slots=True)
class GeoEntry:
    naming: Naming
    geo: str
    multiplier: Decimal


@dataclass(frozen=True, slots=True)
class PriceFile:
    text: PriceText
    prices: list[PriceEntry] = field(default_factory=list)
    fees: list[FeeEntry] = field(default_factory=list)
    geos: list[GeoEntry] = field(default_factory=list)

    def namings(self) -> list[Naming]:
        """Every entry's naming: a row they name is priced "with the file" (its version)."""
        return [e.naming for e in self.prices] + [e.naming for e in self.fees] + [e.naming for e in self.geos]

    def names(self, provider: str | None, model: str) -> bool:
        return any(n.names(provider, model) for n in self.namings())


@dataclass(frozen=True, slots=True)
class ProviderPrices:
    """A `[[providers]]` entry's price file: the prices of `name`'s traffic."""

    name: str
    text: PriceText


def with_providers(main: PriceFile | None, providers: list[ProviderPrices]) -> PriceFile | None:
    """`main` (or nothing) with each provider's entries ahead of its own, each entry
    named for its provider; its text names and holds them all, so a change to any of
    them is a new digest."""
    if not providers:
        return main
    prices: list[PriceEntry] = []
    fees: list[FeeEntry] = []
    geos: list[GeoEntry] = []
    parts = [main.text.content] if main is not None else []
    for own in providers:
        loaded = load(own.text)
        where = f"[[providers]] {own.name}: {own.text.name}"
        for naming in loaded.namings():
            if naming.provider not in (None, own.name):
                named = naming.provider
                raise PriceFileError(f"{where}: an entry names provider {named!r}; every entry is {own.name}'s")
        prices += [replace(e, naming=replace(e.naming, provider=own.name)) for e in loaded.prices]
        fees += [replace(e, naming=replace(e.naming, provider=own.name)) for e in loaded.fees]
        geos += [replace(e, naming=replace(e.naming, provider=own.name)) for e in loaded.geos]
        parts.append(f"# [[providers]] {own.name}: {own.text.name}\n{own.text.content}")
    names = [main.text.name] if main is not None else []
    text = PriceText("+".join([*names, *(own.name for own in providers)]), "\n".join(parts))
    if main is not None:
        prices, fees, geos = prices + main.prices, fees + main.fees, geos + main.geos
    return PriceFile(text=text, prices=prices, fees=fees, geos=geos)


def load(source: Path | PriceText) -> PriceFile:
    text = source if isinstance(source, PriceText) else PriceText.read(source)
    where = text.name
    try:
        data = tomllib.loads(text.content)
    except tomllib.TOMLDecodeError as exc:
        raise PriceFileError(f"cannot read price file {where!r}: {exc}") from None
    unknown = set(data) - {"price", "fee", "geo"}
    if unknown:
        raise PriceFileError(f"{where}: unknown table {sorted(unknown)[0]!r} (use [[price]], [[fee]], [[geo]])")
    return PriceFile(
        text=text,
        prices=[_price(where, i, e) for i, e in enumerate(_tables(where, data, "price"), 1)],
        fees=[_fee(where, i, e) for i, e in enumerate(_tables(where, data, "fee"), 1)],
        geos=[_geo(where, i, e) for i, e in enumerate(_tables(where, data, "geo"), 1)],
    )


def _tables(where: str, data: dict[str, Any], name: str) -> list[dict[str, Any]]:
    tables = data.get(name, [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise PriceFileError(f"{where}: {name} must be a list of [[{name}]] tables")
    return tables


def _naming(where: str, label: str, entry: dict[str, Any], *, model_required: bool) -> Naming:
    provider, model = entry.get("provider"), entry.get("model")
    if provider is not None and (not isinstance(provider, str) or not provider):
        raise PriceFileError(f"{where}: {label}: provider must be a non-empty string")
    if model is None and model_required:
        raise PriceFileError(f"{where}: {label} needs a model name")
    if model is not None and (not isinstance(model, str) or not model.strip() or model == "*"):
        raise PriceFileError(f"{where}: {label}: model must be a name or a prefix ending in '*'")
    return Naming(provider, model)


def _money(where: str, label: str, key: str, value: Any) -> Decimal:
    try:
        number = Decimal(str(value)) if isinstance(value, int | float | str) and not isinstance(value, bool) else None
    except InvalidOperation:
        number = None
    if number is None or not number.is_finite() or number < 0:
        raise PriceFileError(f"{where}: {label}: {key} must be a non-negative number")
    return number


def _price(where: str, index: int, entry: dict[str, Any]) -> PriceEntry:
    from genai_prices import types

    from llmtap.analytics import price_units

    label = f"[[price]] #{index}"
    naming = _naming(where, label, entry, model_required=True)
    label = f"{label} ({naming.pattern})"
    keys = [key for key in entry if key not in _PRICE_FIELDS]
    prices = {key: _money(where, label, key, entry[key]) for key in keys}
    if "input_mtok" not in prices and "output_mtok" not in prices:
        raise PriceFileError(f"{where}: {label}: give at least input_mtok or output_mtok")
    try:  # genai-prices' own rules: known keys; a cache or modality price needs its parents
        price_units.validate_price_keys(set(prices))
    except ValueError as exc:
        raise PriceFileError(f"{where}: {label}: {exc}") from None
    since = entry.get("since")
    if isinstance(since, str):
        try:
            since = date.fromisoformat(since)
        except ValueError:
            since = None
    if "since" in entry and not isinstance(since, date):
        raise PriceFileError(f"{where}: {label}: since must be a date (2026-01-31)")
    return PriceEntry(naming, since, types.ModelPrice(**prices))


def _fee(where: str, index: int, entry: dict[str, Any]) -> FeeEntry:
    label = f"[[fee]] #{index}"
    naming = _naming(where, label, entry, model_required=False)
    _known_keys(where, label, entry, {"provider", "model", "kind", "usd_per_1k"})
    kind = entry.get("kind")
    if kind not in FEE_KINDS:
        raise PriceFileError(f"{where}: {label}: kind must be one of {', '.join(FEE_KINDS)}")
    if "usd_per_1k" not in entry:
        raise PriceFileError(f"{where}: {label}: give usd_per_1k (USD per 1,000 uses)")
    return FeeEntry(naming, kind, _money(where, label, "usd_per_1k", entry["usd_per_1k"]))


def _geo(where: str, index: int, entry: dict[str, Any]) -> GeoEntry:
    label = f"[[geo]] #{index}"
    naming = _naming(where, label, entry, model_required=False)
    _known_keys(where, label, entry, {"provider", "model", "geo", "multiplier"})
    geo = entry.get("geo")
    if not isinstance(geo, str) or not geo:
        raise PriceFileError(f'{where}: {label}: give the served region as geo (e.g. "us")')
    if "multiplier" not in entry:
        raise PriceFileError(f"{where}: {label}: give a multiplier (e.g. 1.1)")
    return GeoEntry(naming, geo, _money(where, label, "multiplier", entry["multiplier"]))


def _known_keys(where: str, label: str, entry: dict[str, Any], known: set[str]) -> None:
    """A key the entry does not know is refused, not ignored (a typo would price wrongly)."""
    unknown = set(entry) - known
    if unknown:
        raise PriceFileError(f"{where}: {label}: unknown key {sorted(unknown)[0]!r}")
