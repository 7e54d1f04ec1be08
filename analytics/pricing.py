"""Cost of an exchange, from the `genai-prices` data at the exchange's own date.

Prices come from genai-prices' bundled snapshot (never the network: `UpdatePrices` is
never started) and a local price file that overrides or adds models. genai-prices'
own `calc_price` costs ~200 µs a call, too slow for a recorder, so each (model, price
period, tier) is turned once into per-token rates by asking genai-prices the price of a
few basis usages — its own rules (what a cache write costs, how reasoning is billed,
tiers past 200k input tokens) stay in charge — and each row is then a few integer
multiplications. Money is integer pico-dollars (1e-12 USD); rates that are not whole
pico-dollars per token round half-even.

A row whose model has no price is `unpriced` (never $0) with the reason `unknown_model`;
a row the recorder marked `unverified_host` (traffic to a host that is neither a
provider's nor a configured upstream: storage/hosts.py) stays `unpriced` with that reason
whatever model and usage it claims, here and in `reprice`; a row with usage missing is
`usage_missing`. Every priced row keeps the price data's version: genai-prices' alone, or
— for the models a local price file names — genai-prices' and the file's (name and
digest), so `reprice` can tell which rows a new or changed price file concerns.

Not responsible for SQL reports (see `reports.py`) or for when pricing runs (the writer
calls `price_rows`; `reprice` catches up stored rows).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmtap.storage.hosts import UNVERIFIED_HOST

if TYPE_CHECKING:
    from genai_prices import types

# genai-prices is imported where prices are needed, not here: importing it costs ~0.3 s
# (it brings an HTTP client for its updater), and a report whose rows are all priced
# already never needs it.

PICO = Decimal(10) ** 12
FILE_MARK = " + "  # in a price version: priced while a local price file named the model
_NAME_CHARS = 40  # of the price file's name in the version (the column holds 96)
# Our provider names (SPEC §1) as genai-prices' provider ids.
_PROVIDER_IDS = {"anthropic": "anthropic", "openai": "openai", "google": "google"}
_PRICE_KEYS = (
    "input_mtok",
    "cache_read_mtok",
    "cache_write_mtok",
    "cache_write_1h_mtok",
    "output_mtok",
    "output_reasoning_mtok",
)


UNKNOWN_MODEL = "unknown_model"


class PriceFileError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Rates:
    """Pico-dollars per token for each kind of token, in one tier of one price period."""

    uncached_input: Decimal
    cache_read: Decimal
    cache_write: Decimal  # a write whose 5m/1h split is not reported
    cache_write_5m: Decimal
    cache_write_1h: Decimal
    output: Decimal
    reasoning: Decimal


@dataclass(frozen=True, slots=True)
class Cost:
    status: str  # priced | unpriced | usage_missing
    model: str | None = None
    version: str | None = None
    input: int | None = None  # uncached input
    cache_read: int | None = None
    cache_write: int | None = None
    output: int | None = None
    fee: int | None = None  # per-use fees of server_tool_uses
    total: int | None = None
    detail: dict[str, Any] | None = None  # how the total was made (see cost_columns)
    rate_input: int | None = None
    rate_cache_read: int | None = None
    reason: str | None = None  # why unpriced: unverified_host | unknown_model


@dataclass(frozen=True, slots=True)
class TokenCounts:
    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cache_write_5m_tokens: int | None
    cache_write_1h_tokens: int | None
    output_tokens: int
    reasoning_tokens: int | None


@dataclass(frozen=True, slots=True)
class _Override:
    provider: str | None
    pattern: str
    since: date | None
    price: types.ModelPrice

    def names(self, provider: str | None, model: str) -> bool:
        """This entry is about that model (whatever the date)."""
        if self.provider and self.provider != provider:
            return False
        if self.pattern.endswith("*"):
            return model.startswith(self.pattern[:-1])
        return model == self.pattern

    def matches(self, provider: str | None, model: str, at: datetime) -> bool:
        return self.names(provider, model) and not (self.since and at.date() < self.since)


def package_version() -> str:
    try:
        return importlib.metadata.version("genai-prices")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class Pricer:
    def __init__(self, price_file: Path | None = None) -> None:
        self._snapshot: Any = None
        self.overrides: list[_Override] = []
        self.version = f"genai-prices {package_version()}"
        self.file_version = self.version
        if price_file is not None:
            self.overrides = load_price_file(price_file)
            digest = hashlib.sha256(price_file.read_bytes()).hexdigest()[:12]
            self.file_version = f"{self.version}{FILE_MARK}{price_file.name[:_NAME_CHARS]} {digest}"
        self._models: dict[tuple[str | None, str], tuple[Any, Any] | None] = {}

    def price(self, provider: str | None, model: str | None, at: datetime, tokens: TokenCounts | None) -> Cost:
        if tokens is None:
            return Cost(status="usage_missing")
        if not model:
            return Cost(status="unpriced", reason=UNKNOWN_MODEL)
        at = at if at.tzinfo else at.replace(tzinfo=UTC)
        named = any(o.names(provider, model) for o in self.overrides)
        version = self.file_version if named else self.version
        override = next((o for o in self.overrides if o.matches(provider, model, at)), None) if named else None
        if override is not None:
            model_price, name = override.price, model
        else:
            found = self._find(provider, model)
            if found is None:
                return Cost(status="unpriced", version=version if named else None, reason=UNKNOWN_MODEL)
            model_price, name = found.get_prices(at), found.id
        rates = _rates(model_price, tokens.input_tokens)
        if rates is None:
            return Cost(status="unpriced", model=name, version=version if named else None, reason=UNKNOWN_MODEL)
        return _cost(rates, tokens, name, version)

    @property
    def snapshot(self) -> Any:
        if self._snapshot is None:
            from genai_prices import data_snapshot

            self._snapshot = data_snapshot.get_snapshot()
        return self._snapshot

    def _find(self, provider: str | None, model: str) -> Any:
        key = (provider, model)
        if key not in self._models:
            provider_id = _PROVIDER_IDS.get(provider or "")
            try:
                if provider_id:
                    _, found = self.snapshot.find_provider_model(model, None, provider_id, None)
                else:  # an OpenAI-compatible host: its name, else the model's own maker
                    found = self._find_by_host_or_model(provider, model)
            except LookupError:
                found = None
            self._models[key] = found
        return self._models[key]

    def _find_by_host_or_model(self, host: str | None, model: str) -> Any:
        if host:
            try:
                _, found = self.snapshot.find_provider_model(model, None, None, f"https://{host}/")
                return found
            except LookupError:
                pass
        _, found = self.snapshot.find_provider_model(model, None, None, None)
        return found

    def price_row(self, row: Mapping[str, Any]) -> Cost:
        """The cost of a stored or new exchange row. An `unverified_host` row is never
        priced: its model and usage are whatever an unknown server said."""
        if row.get("price_reason") == UNVERIFIED_HOST:
            return Cost(status="unpriced", reason=UNVERIFIED_HOST)
        return self.price(row.get("provider"), row.get("model"), row["started_at"], tokens_of(row))

    def price_rows(self, rows: Iterable[dict[str, Any]]) -> None:
        """Fill the cost columns of exchange rows (the writer's enrich step)."""
        for row in rows:
            row.update(cost_columns(self.price_row(row)))


def tokens_of(row: Mapping[str, Any]) -> TokenCounts | None:
    if row.get("usage_input_tokens") is None:
        return None
    return TokenCounts(
        input_tokens=row["usage_input_tokens"] or 0,
        cache_read_tokens=row.get("usage_cache_read_input_tokens") or 0,
        cache_write_tokens=row.get("usage_cache_creation_input_tokens") or 0,
        cache_write_5m_tokens=row.get("usage_cache_creation_5m_input_tokens"),
        cache_write_1h_tokens=row.get("usage_cache_creation_1h_input_tokens"),
        output_tokens=row.get("usage_output_tokens") or 0,
        reasoning_tokens=row.get("usage_reasoning_output_tokens"),
    )


def cost_columns(cost: Cost) -> dict[str, Any]:
    return {
        "price_status": cost.status,
        "price_reason": cost.reason,
        "price_model": cost.model,
        "price_version": cost.version,
        "cost_input_pico": cost.input,
        "cost_cache_read_pico": cost.cache_read,
        "cost_cache_write_pico": cost.cache_write,
        "cost_output_pico": cost.output,
        "cost_fee_pico": cost.fee,
        "cost_total_pico": cost.total,
        "cost_detail": cost.detail,
        "rate_input_pico": cost.rate_input,
        "rate_cache_read_pico": cost.rate_cache_read,
    }


def _cost(rates: Rates, tokens: TokenCounts, model: str, version: str) -> Cost:
    write = tokens.cache_write_tokens
    w5 = tokens.cache_write_5m_tokens
    w1 = tokens.cache_write_1h_tokens
    if w5 is not None or w1 is not None:
        w5, w1 = w5 or 0, w1 or 0
        unsplit = max(write - w5 - w1, 0)
    else:
        w5 = w1 = 0
        unsplit = write
    uncached = max(tokens.input_tokens - tokens.cache_read_tokens - write, 0)
    reasoning = min(tokens.reasoning_tokens or 0, tokens.output_tokens)
    cost_input = _pico(uncached * rates.uncached_input)
    cost_read = _pico(tokens.cache_read_tokens * rates.cache_read)
    cost_write = _pico(unsplit * rates.cache_write + w5 * rates.cache_write_5m + w1 * rates.cache_write_1h)
    cost_output = _pico((tokens.output_tokens - reasoning) * rates.output + reasoning * rates.reasoning)
    return Cost(
        status="priced",
        model=model,
        version=version,
        input=cost_input,
        cache_read=cost_read,
        cache_write=cost_write,
        output=cost_output,
        fee=0,
        total=cost_input + cost_read + cost_write + cost_output,
        rate_input=_pico(rates.uncached_input),
        rate_cache_read=_pico(rates.cache_read),
    )


def _pico(value: Decimal) -> int:
    return int(value.quantize(Decimal(1), rounding=ROUND_HALF_EVEN))


def _rates(model_price: types.ModelPrice, input_tokens: int) -> Rates | None:
    if getattr(model_price, "input_mtok", None) is None and getattr(model_price, "output_mtok", None) is None:
        return None
    starts = sorted({tier.start for key in _PRICE_KEYS for tier in _tiers(getattr(model_price, key, None))})
    bucket = sum(1 for start in starts if input_tokens > start)
    key = (id(model_price), bucket)
    cached = _RATES.get(key)
    if cached is None or cached[0] is not model_price:
        cached = _RATES[key] = (model_price, _bucket_rates(model_price, bucket, tuple(starts)))
    return cached[1]


def _tiers(value: Any) -> list[Any]:
    from genai_prices import types

    return list(value.tiers) if isinstance(value, types.TieredPrices) else []


# (id of a ModelPrice, tier) -> (that ModelPrice, its rates); the ModelPrice is kept so
# its id cannot be reused by another object while the entry lives.
_RATES: dict[tuple[int, int], tuple[types.ModelPrice, Rates]] = {}


def _bucket_rates(model_price: types.ModelPrice, bucket: int, starts: tuple[int, ...]) -> Rates:
    """Per-token rates in one tier, read off genai-prices' own arithmetic."""
    from genai_prices import types

    # A total input inside the bucket: tiers apply when input > start.
    n = starts[bucket - 1] + 1 if bucket else (starts[0] if starts else 1_000_000)

    def per_token(**usage: int) -> Decimal:
        return model_price.calc_price(types.Usage(**usage))["total_price"] * PICO / n

    base = per_token(input_tokens=n)
    output = per_token(input_tokens=n, output_tokens=n) - base
    return Rates(
        uncached_input=base,
        cache_read=per_token(input_tokens=n, cache_read_tokens=n),
        cache_write=per_token(input_tokens=n, cache_write_tokens=n),
        cache_write_5m=per_token(input_tokens=n, cache_write_tokens=n, cache_write_5m_tokens=n),
        cache_write_1h=per_token(input_tokens=n, cache_write_tokens=n, cache_write_1h_tokens=n),
        output=output,
        reasoning=per_token(input_tokens=n, output_tokens=n, output_reasoning_tokens=n) - base,
    )


def load_price_file(path: Path) -> list[_Override]:
    """A TOML file of `[[price]]` tables: provider (optional), model (exact, or a prefix
    ending in `*`), since (optional date), and prices in USD per million tokens:
    input_mtok, cache_read_mtok, cache_write_mtok, cache_write_1h_mtok, output_mtok."""
    from genai_prices import types

    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PriceFileError(f"cannot read price file {str(path)!r}: {exc}") from None
    overrides = []
    for index, entry in enumerate(data.get("price", [])):
        if not isinstance(entry, dict) or not isinstance(entry.get("model"), str):
            raise PriceFileError(f"{path}: [[price]] #{index + 1} needs a model name")
        prices = {}
        for key in _PRICE_KEYS:
            if key in entry:
                try:
                    value = Decimal(str(entry[key]))
                except ArithmeticError:
                    value = Decimal(-1)
                if not value.is_finite() or value < 0:
                    raise PriceFileError(f"{path}: {entry['model']}: {key} must be a non-negative number")
                prices[key] = value
        if "input_mtok" not in prices and "output_mtok" not in prices:
            raise PriceFileError(f"{path}: {entry['model']}: give at least input_mtok or output_mtok")
        since = entry.get("since")
        if isinstance(since, str):
            since = date.fromisoformat(since)
        overrides.append(_Override(entry.get("provider"), entry["model"], since, types.ModelPrice(**prices)))
    return overrides


def row_pricer(price_file: Path | None = None) -> Callable[[list[dict[str, Any]]], None]:
    """The writer's `enrich` step: prices exchange rows in place as they are stored.
    A module-level factory, so a writer in another process can be told to build it."""
    return Pricer(price_file).price_rows
