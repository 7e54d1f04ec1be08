"""Cost of an exchange: what the provider bills for what was served, from the
`genai-prices` data at the exchange's own date and a local price file (`price_file.py`).

Prices come from genai-prices' bundled snapshot (never the network: `UpdatePrices` is
never started). genai-prices' own `calc_price` costs ~200 µs a call, too slow for a
recorder, so each (model, price period, price context, tier) is turned once into
per-token rates by asking genai-prices the price of basis usages — one per usage key:
the key and its ancestors at n tokens (`cache_audio_read_tokens` is also an audio input,
a cache read and an input) — so its own rules (what a cache write or an audio token
costs, how reasoning is billed, tiers past 200k input tokens, flex and priority
variants) stay in charge. genai-prices' arithmetic is linear in the usage within a tier,
so a row's usage, split into disjoint leaves over the keys it reports, costs the sum of
leaf × rate: a few integer multiplications. Money is integer pico-dollars (1e-12 USD);
rates that are not whole pico-dollars per token round half-even, per part.

What was served (SPEC §5): `service_tier` and `service_speed` become genai-prices'
`price_context` (`price_context_of`); Anthropic's US-only inference is a multiplier on
every token (`geo_multiplier`); `usage_modalities` are priced at the model's modality
rates; `server_tool_uses` are per-use fees (`fees.py`); `usage_sub` (an advisor's
sub-inference) is priced at its own model's rates and added into the parts. How a total
was made is kept in `cost_detail`.

A row whose model (or sub-usage model) has no price is `unpriced` (never $0) with the
reason `unknown_model`; a row the recorder marked `unverified_host` (protocols/hosts.py)
stays `unpriced` with that reason whatever it claims; a row with usage missing is
`usage_missing`. Every priced row keeps the price data's version: genai-prices' alone,
or — for the rows a local price file names — genai-prices' and the file's (name and
digest), so `reprice` can tell which rows a new or changed price file concerns.

Not responsible for SQL reports (see `reports.py`), for reading the price file
(`price_file.py`) or for when pricing runs (the writer calls `price_rows`; `reprice`
catches up stored rows).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmtap.analytics import cloud_names, price_units
from llmtap.analytics import fees as fees_module
from llmtap.analytics.price_file import PriceFile, PriceFileError, PriceText, ProviderPrices, load, with_providers
from llmtap.protocols import provider_list
from llmtap.protocols.hosts import UNVERIFIED_HOST, dns_name

if TYPE_CHECKING:
    from genai_prices import types

# genai-prices is imported where prices are needed, not here: importing it costs ~0.3 s
# (it brings an HTTP client for its updater), and a report whose rows are all priced
# already never needs it.

__all__ = [
    "FILE_MARK",
    "UNKNOWN_MODEL",
    "Cost",
    "PriceFileError",
    "PriceText",
    "Pricer",
    "ProviderPrices",
    "cost_columns",
]

PICO = Decimal(10) ** 12
FILE_MARK = " + "  # in a price version: priced while a local price file named the model
_NAME_CHARS = 40  # of the price file's name in the version (the column holds 96)
UNKNOWN_MODEL = "unknown_model"
PARTS = ("input", "cache_read", "cache_write", "output")

# Anthropic bills inference kept in the US (`usage.inference_geo == "us"`) at 1.1× the
# standard rate of every token category, for Claude Opus 4.6, Sonnet 4.6 and later models
# on the Claude API itself; earlier models are billed at the standard rate (and refuse the
# parameter). https://platform.claude.com/docs/en/build-with-claude/data-residency and
# https://support.claude.com/en/articles/15422948-enable-us-only-inference-for-your-organization
# A price file's [[geo]] entries override this table for the models they name.
_GEO_MULTIPLIERS = {("anthropic", "us"): Decimal("1.1")}
_GEO_STANDARD_MODELS = (  # released before Opus 4.6: standard rates wherever they ran
    "claude-2",
    "claude-3",
    "claude-instant",
    "claude-v1",
    "claude-4-",
    "claude-opus-4-0",
    "claude-opus-4-1",
    "claude-opus-4-2025",
    "claude-opus-4-5",
    "claude-sonnet-4-0",
    "claude-sonnet-4-2025",
    "claude-sonnet-4-5",
    "claude-haiku-4-5",
)


# Service tiers (SPEC §2 `service_tier`, as the translators spell them) that are the
# standard price: OpenAI `default` and `auto`, Anthropic and Gemini `standard` (and the
# request's `standard_only`, Gemini's `unspecified`), Vertex `on_demand`.
STANDARD_TIERS = ("default", "auto", "standard", "standard_only", "unspecified", "on_demand")
# Tiers genai-prices prices under a context key of their own, by that key.
CONTEXT_TIERS = {"batch": "processing"}  # Anthropic `usage.service_tier: batch`
# Every other tier is passed to genai-prices as `service_tier`, which prices it where the
# model has a variant (`flex`, `priority`, `fast`); these are tiers it has none for, so
# the model's standard rates stand, on purpose until one is published.
TIERS_WITHOUT_PRICES = (
    "scale",  # OpenAI Scale Tier: prepaid capacity units
    "ultrafast",  # OpenAI, access-controlled
    "reserved",  # Bedrock reserved capacity
    "offpeak",  # Vertex ON_DEMAND_OFFPEAK
    "deferred",  # Gemini Interactions
)


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
    detail: dict[str, Any] | None = None  # how the total was made (see module docstring)
    rate_input: int | None = None
    rate_cache_read: int | None = None
    reason: str | None = None  # why unpriced: unverified_host | unknown_model


def package_version() -> str:
    try:
        return importlib.metadata.version("genai-prices")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def price_context_of(tier: str | None, speed: str | None) -> dict[str, str]:
    """What was served, as genai-prices' `price_context`. A standard tier adds nothing
    (`STANDARD_TIERS`); Anthropic's `batch` is genai-prices' `processing`; any other tier
    is passed as it came (`flex`, `priority`, `scale`), and genai-prices prices it where
    it has a variant."""
    context: dict[str, str] = {}
    if not tier and not speed:
        return context
    value = (tier or "").strip().lower()
    if value in CONTEXT_TIERS:
        context[CONTEXT_TIERS[value]] = value
    elif value and value not in STANDARD_TIERS:
        context["service_tier"] = value
    if (speed or "").strip().lower() == "fast":
        context["speed"] = "fast"
    return context


def geo_multiplier(price_file: PriceFile | None, provider: str | None, model: str, geo: str | None) -> Decimal | None:
    """The multiplier a served region puts on every token of `model`, or None."""
    if not geo:
        return None
    if price_file is not None:
        for entry in price_file.geos:
            if entry.geo == geo and entry.naming.names(provider, model):
                return entry.multiplier
    multiplier = _GEO_MULTIPLIERS.get((provider or "", geo))
    if multiplier is None or model.startswith(_GEO_STANDARD_MODELS):
        return None
    return multiplier


@dataclass(slots=True)
class _Resolved:
    """One model's price in one period and context, and its per-token rates by tier."""

    price: types.ModelPrice
    starts: tuple[int, ...]
    missing: tuple[str, ...]  # context entries genai-prices has no variant for
    rates: dict[tuple[int, str], Decimal | int] = field(default_factory=dict)
    bases: dict[int, tuple[int, int]] = field(default_factory=dict)  # tier -> (input, cache read)
    units: dict[str, Any] = field(default_factory=dict)  # price key -> genai-prices' price
    keep: Any = None  # the objects whose ids key this entry: alive while it is

    def unit_price(self, price_key: str) -> Any:
        """The model's price for a unit (a Decimal, TieredPrices or None), looked up once."""
        if price_key not in self.units:
            self.units[price_key] = getattr(self.price, price_key, None)
        return self.units[price_key]

    def bucket(self, input_tokens: int) -> int:
        return sum(1 for start in self.starts if input_tokens > start)

    def base_rates(self, bucket: int) -> tuple[int, int]:
        """Pico-dollars per uncached input token and per cache-read token (for what-ifs)."""
        found = self.bases.get(bucket)
        if found is None:
            found = (_pico(self.rate(bucket, "input_tokens")), _pico(self.rate(bucket, "cache_read_tokens")))
            self.bases[bucket] = found
        return found

    def rate(self, bucket: int, key: str) -> Decimal | int:
        rate = self.rates.get((bucket, key))
        if rate is None:
            rate = self.rates[(bucket, key)] = _basis_rate(self.price, self.starts, bucket, key)
        return rate


@dataclass(slots=True)
class _ModelCost:
    name: str
    named: bool  # the price file names the model
    resolved: _Resolved
    parts: list[int]  # input, cache_read, cache_write, output
    multiplier: Decimal | None
    rate_input: int
    rate_cache_read: int


class Pricer:
    """`price_file`: the local price file; `providers`: the price files of `[[providers]]`
    entries, each the only price list of its provider's traffic (a model its file does
    not name is unpriced, never priced at someone else's rate)."""

    def __init__(self, price_file: Path | PriceText | None = None, providers: Iterable[ProviderPrices] = ()) -> None:
        self._snapshot: Any = None
        self._listings: dict[str, Any] | None = None
        self.version = f"genai-prices {package_version()}"
        self.file_version = self.version
        own = list(providers)
        self._own = frozenset(entry.name for entry in own)
        self.file: PriceFile | None = with_providers(load(price_file) if price_file is not None else None, own)
        if self.file is not None:
            text = self.file.text
            self.file_version = f"{self.version}{FILE_MARK}{text.name[:_NAME_CHARS]} {text.digest[:12]}"
        self._models: dict[tuple[str | None, str], tuple[Any, Any, bool] | None] = {}
        self._resolved: dict[tuple[Any, ...], _Resolved] = {}

    @property
    def namings(self) -> list[Any]:
        """What the price file names (see `price_file.Naming`): rows to price again when
        the file changes."""
        return self.file.namings() if self.file is not None else []

    @property
    def snapshot(self) -> Any:
        if self._snapshot is None:
            from genai_prices import data_snapshot

            self._snapshot = data_snapshot.get_snapshot()
        return self._snapshot

    # -- a row ------------------------------------------------------------------------------

    def price_row(self, row: Mapping[str, Any]) -> Cost:
        """The cost of a stored or new exchange row. An `unverified_host` row is never
        priced: its model and usage are whatever an unknown server said."""
        if row.get("price_reason") == UNVERIFIED_HOST:
            return Cost(status="unpriced", reason=UNVERIFIED_HOST)
        usage = usage_of(row)
        if usage is None:
            return Cost(status="usage_missing")
        provider, model = row.get("provider"), row.get("model")
        if not model:
            return Cost(status="unpriced", reason=UNKNOWN_MODEL)
        at = row["started_at"]
        at = at if at.tzinfo else at.replace(tzinfo=UTC)
        context = price_context_of(row.get("service_tier"), row.get("service_speed"))
        geo = row.get("inference_geo")
        main, source = self._served_cost(provider, model, row.get("model_requested"), at, context, usage, geo)
        if isinstance(main, str):
            return Cost(status="unpriced", version=self._named_version(provider, [model]), reason=UNKNOWN_MODEL)
        subs = []
        for sub in row.get("usage_sub") or ():
            sub_model = str(sub.get("model") or "")
            priced = self._model_cost(provider, sub_model, at, context, sub_usage(sub), geo) if sub_model else "?"
            if isinstance(priced, str):  # never a silent under-bill
                return Cost(
                    status="unpriced",
                    model=main.name,
                    version=self._named_version(provider, [model, sub_model]),
                    reason=UNKNOWN_MODEL,
                    detail={"unpriced": f"{sub.get('kind') or 'sub-usage'} model {sub_model or '(none)'} has no price"},
                )
            subs.append((str(sub.get("kind") or "sub"), priced))
        fee_total, fee_parts = fees_module.price_fees(
            self.file,
            provider,
            model,
            main.resolved.unit_price,
            row.get("server_tool_uses"),
            usage.get("input_tokens", 0),
        )
        version = self._version(provider, [model, *_models(subs)])
        cost = _assemble(main, subs, fee_total, fee_parts, context, version, geo)
        if source is not None and cost.detail is not None:
            cost.detail["price_source"] = source
        return cost

    def price_rows(self, rows: Iterable[dict[str, Any]]) -> None:
        """Fill the cost columns of exchange rows (the writer's enrich step)."""
        for row in rows:
            row.update(cost_columns(self.price_row(row)))

    def _version(self, provider: str | None, models: list[str]) -> str:
        if self.file is not None and any(self.file.names(provider, m) for m in models):
            return self.file_version
        return self.version

    def _named_version(self, provider: str | None, models: list[str]) -> str | None:
        """An unpriced row's version: the file's when the file names it, else none."""
        version = self._version(provider, models)
        return version if version == self.file_version and self.file is not None else None

    # -- a cloud's names --------------------------------------------------------------------

    def _served_cost(
        self,
        provider: str | None,
        model: str,
        requested: str | None,
        at: datetime,
        context: dict[str, str],
        usage: dict[str, int],
        geo: str | None,
    ) -> tuple[_ModelCost | str, dict[str, Any] | None]:
        """The tokens' cost at the serving provider's price of the first name it has
        (`cloud_names`); for a cloud without one, at the maker's list price. Beside it,
        for a cloud's row, which price was used (`cost_detail.price_source`)."""
        names = cloud_names.names_to_try(provider, model, requested)
        for name in names:
            cost = self._model_cost(provider, name, at, context, usage, geo)
            if not isinstance(cost, str):
                return cost, self._source(provider, name, cost) if provider in cloud_names.CLOUDS else None
        if provider not in cloud_names.CLOUDS:
            return UNKNOWN_MODEL, None
        for name in names:  # the cloud lists no price for it: the maker's list price
            maker_name = cloud_names.maker_model(name)
            cost = self._model_cost(None, maker_name, at, context, usage, geo)
            if not isinstance(cost, str):
                source = self._source(None, maker_name, cost)
                source["fallback"] = f"{provider} lists no price for {name}: the maker's list price"
                return cost, source
        return UNKNOWN_MODEL, None

    def _source(self, provider: str | None, name: str, cost: _ModelCost) -> dict[str, Any]:
        """Whose price list priced `name`: the price file, the provider's own list, or (when
        genai-prices itself falls back, as for Azure) the maker's."""
        if cost.named:
            return {"price_file": True, "name": name}
        found = self._find(provider, name)
        assert found is not None  # it was just priced by it
        listing, info, own = found
        owner = listing.id if own else self._owner(info)
        source: dict[str, Any] = {"provider": owner, "model": info.id, "name": name}
        if provider is not None and owner != listing.id:
            source["fallback"] = f"{listing.id} lists {info.id} at {owner}'s price"
        return source

    def _owner(self, info: Any) -> str | None:
        for listing in self.snapshot.providers:
            if any(m is info for m in listing.models):
                return str(listing.id)
        return None

    # -- one model's tokens ---------------------------------------------------------------

    def _model_cost(
        self,
        provider: str | None,
        model: str,
        at: datetime,
        context: dict[str, str],
        usage: dict[str, int],
        geo: str | None,
    ) -> _ModelCost | str:
        found = self._resolve(provider, model, at, context)
        if found is None:
            return UNKNOWN_MODEL
        name, resolved, named = found
        bucket = resolved.bucket(usage.get("input_tokens", 0)) if resolved.starts else 0
        rates = resolved.rates
        parts: list[Any] = [0, 0, 0, 0]
        leaves: dict[str, int] = {}
        for key, descendants, part in _structure(tuple(usage)):
            leaf = usage[key]
            for below in descendants:
                leaf -= leaves[below]
            if leaf < 0:
                leaf = 0
            leaves[key] = leaf
            if leaf:
                rate = rates.get((bucket, key))
                parts[part] += leaf * (rate if rate is not None else resolved.rate(bucket, key))
        multiplier = None
        if geo:
            multiplier = geo_multiplier(self.file, provider, name, geo) or (
                geo_multiplier(self.file, provider, model, geo) if name != model else None
            )
        rate_input, rate_read = resolved.base_rates(bucket)
        if multiplier is not None:
            parts = [p * multiplier for p in parts]
            rate_input, rate_read = _pico(rate_input * multiplier), _pico(rate_read * multiplier)
        return _ModelCost(name, named, resolved, [_pico(p) for p in parts], multiplier, rate_input, rate_read)

    def _resolve(
        self, provider: str | None, model: str, at: datetime, context: dict[str, str]
    ) -> tuple[str, _Resolved, bool] | None:
        """(the model's name, its price in this period and context, named by the file)."""
        named = self.file is not None and self.file.names(provider, model)
        if named and self.file is not None:
            for entry in self.file.prices:
                if entry.naming.names(provider, model) and not (entry.since and at.date() < entry.since):
                    key: tuple[Any, ...] = (id(entry), tuple(context.items()))
                    resolved = self._resolved.get(key)
                    if resolved is None:  # a file's price has no variants: context is standard
                        missing = tuple(f"{k}={v}" for k, v in context.items())
                        resolved = _new_resolved(entry.price, missing, entry)
                        self._resolved[key] = resolved
                    return model, resolved, True
        if provider in self._own:  # a [[providers]] entry's traffic: its own file's prices only
            return None
        found = self._find(provider, model)
        if found is None:
            return None
        _, info, own = found
        standard = info.get_prices(at)
        active: tuple[int, ...] = ()
        if context and own:  # genai-prices applies a context only to a provider's own models
            active = tuple(
                index
                for index, variant in enumerate(info.price_variants or ())
                if all(context.get(k) == v for k, v in variant.when.items())
                and (variant.constraint is None or variant.constraint.active(at))
            )
        key = (id(info), id(standard), active, tuple(context.items()))
        resolved = self._resolved.get(key)
        if resolved is None:
            price = info.get_prices(at, context) if active else standard
            served = {(k, v) for i in active for k, v in info.price_variants[i].when.items()}
            missing = tuple(f"{k}={v}" for k, v in context.items() if (k, v) not in served)
            resolved = self._resolved[key] = _new_resolved(price, missing, (info, standard))
        return info.id, resolved, named

    def _find(self, provider: str | None, model: str) -> tuple[Any, Any, bool] | None:
        """(genai-prices provider, model, whether the model is the provider's own). A row's
        `provider` is genai-prices' provider id where its list knows the host
        (protocols/providers.py); a row stored with a host's name before that names the
        provider its host names; any other (an OpenAI-compatible host, a gateway) is
        priced at the model's own maker's list price."""
        key = (provider, model)
        if key not in self._models:
            listing = self._listing(provider)
            try:
                if listing is not None:
                    found = self.snapshot.find_provider_model(model, listing, None, None)
                else:
                    found = self.snapshot.find_provider_model(model, None, None, None)
                self._models[key] = (found[0], found[1], any(m is found[1] for m in found[0].models))
            except LookupError:
                self._models[key] = None
        return self._models[key]

    def _listing(self, provider: str | None) -> Any:
        """genai-prices' provider of this id (exactly: its fuzzy `provider_match` would take
        a host that merely contains a maker's name), else of the host it names, else None."""
        if self._listings is None:
            self._listings = {str(listing.id): listing for listing in self.snapshot.providers}
        if not provider:
            return None
        found = self._listings.get(provider)
        if found is None:
            name = dns_name(provider)
            listed = provider_list.listed(name) if name is not None else None
            found = self._listings.get(listed.provider) if listed is not None else None
        return found


def _models(subs: list[tuple[str, _ModelCost]]) -> list[str]:
    return [cost.name for _, cost in subs]


def _assemble(
    main: _ModelCost,
    subs: list[tuple[str, _ModelCost]],
    fee_total: int,
    fee_parts: list[dict[str, Any]],
    context: dict[str, str],
    version: str,
    geo: str | None,
) -> Cost:
    parts = list(main.parts)
    detail_parts = [_part("tokens", main)]
    for kind, sub in subs:
        parts = [a + b for a, b in zip(parts, sub.parts, strict=True)]
        detail_parts.append(_part(kind, sub))
    detail: dict[str, Any] = {"context": context, "parts": detail_parts + fee_parts}
    if main.multiplier is not None:
        detail["multiplier"] = str(main.multiplier)
        detail["geo"] = geo
    missing = main.resolved.missing
    if subs:
        missing = tuple(sorted({m for cost in [main, *(s for _, s in subs)] for m in cost.resolved.missing}))
    if missing:
        detail["note"] = f"no {', '.join(missing)} price: standard rates"
    return Cost(
        status="priced",
        model=main.name,
        version=version,
        input=parts[0],
        cache_read=parts[1],
        cache_write=parts[2],
        output=parts[3],
        fee=fee_total,
        total=sum(parts) + fee_total,
        detail=detail,
        rate_input=main.rate_input,
        rate_cache_read=main.rate_cache_read,
    )


def _part(what: str, cost: _ModelCost) -> dict[str, Any]:
    part: dict[str, Any] = {"what": what, "model": cost.name, **dict(zip(PARTS, cost.parts, strict=True))}
    part["total"] = sum(cost.parts)
    if cost.multiplier is not None:
        part["multiplier"] = str(cost.multiplier)
    return part


# -- usage as genai-prices' keys ------------------------------------------------------------


def usage_of(row: Mapping[str, Any]) -> dict[str, int] | None:
    """The row's usage under genai-prices' usage keys (only the counts it reports), or
    None when it has none."""
    if row.get("usage_input_tokens") is None:
        return None
    usage = {}
    for column, key in _COLUMNS:
        count = row.get(column)
        if count:
            usage[key] = count
    reasoning = usage.get("output_reasoning_tokens")
    if reasoning and reasoning > usage.get("output_tokens", 0):
        usage["output_reasoning_tokens"] = usage.get("output_tokens", 0)
    modalities = row.get("usage_modalities")
    if modalities:
        for key, count in modalities.items():
            if key in _token_keys() and isinstance(count, int) and not isinstance(count, bool) and count > 0:
                usage[key] = usage.get(key, 0) + count
    return {key: count for key, count in usage.items() if count > 0}


# the exchanges columns of a usage, as genai-prices' usage keys
_COLUMNS = (
    ("usage_input_tokens", "input_tokens"),
    ("usage_cache_read_input_tokens", "cache_read_tokens"),
    ("usage_cache_creation_input_tokens", "cache_write_tokens"),
    ("usage_cache_creation_5m_input_tokens", "cache_write_5m_tokens"),
    ("usage_cache_creation_1h_input_tokens", "cache_write_1h_tokens"),
    ("usage_output_tokens", "output_tokens"),
    ("usage_reasoning_output_tokens", "output_reasoning_tokens"),
)


def sub_usage(sub: Mapping[str, Any]) -> dict[str, int]:
    """A sub-usage ({kind, model, input_tokens, cache_read_tokens, …}) as usage keys."""
    usage = {
        key: int(sub.get(key) or 0)
        for key in ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens")
    }
    return {key: count for key, count in usage.items() if count > 0}


_TOKEN_KEYS: frozenset[str] | None = None


def _token_keys() -> frozenset[str]:
    """genai-prices' usage keys that count tokens (the only ones a usage may carry here)."""
    global _TOKEN_KEYS
    if _TOKEN_KEYS is None:
        units = price_units.registry().units
        _TOKEN_KEYS = frozenset(k for k, u in units.items() if u.dimensions.get("family") == "tokens")
    return _TOKEN_KEYS


_STRUCTURES: dict[tuple[str, ...], list[tuple[str, tuple[str, ...], int]]] = {}


def _structure(keys: tuple[str, ...]) -> list[tuple[str, tuple[str, ...], int]]:
    """For the usage keys a row reports: each key, most specific first, with the reported
    keys below it (whose leaves it does not count again) and the cost part it is billed
    under. A usage is the sum of its leaves, each priced at its key's basis rate."""
    found = _STRUCTURES.get(keys)
    if found is None:
        units = price_units.registry().units
        ordered = sorted(keys, key=lambda k: (-len(units[k].dimensions), k))
        found = [
            (
                key,
                tuple(d for d in ordered if d != key and units[key].dimensions.items() <= units[d].dimensions.items()),
                _part_index(units[key].dimensions),
            )
            for key in ordered
        ]
        _STRUCTURES[keys] = found
    return found


def _part_index(dimensions: Mapping[str, str]) -> int:
    if dimensions.get("direction") == "output":
        return 3
    return {"cache_read": 1, "cache_write": 2}.get(dimensions.get("token_type", ""), 0)


# -- rates --------------------------------------------------------------------------------


def _new_resolved(price: types.ModelPrice, missing: tuple[str, ...], keep: Any) -> _Resolved:
    from genai_prices import types

    starts = sorted(
        {tier.start for value in vars(price).values() if isinstance(value, types.TieredPrices) for tier in value.tiers}
    )
    return _Resolved(price=price, starts=tuple(starts), missing=missing, keep=keep)


def _basis_rate(price: types.ModelPrice, starts: tuple[int, ...], bucket: int, key: str) -> Decimal | int:
    """Pico-dollars per token of `key` in one tier, read off genai-prices' arithmetic: the
    price of n tokens of the key (and of its ancestors, which count it too) less the
    price of what the basis needs besides (an input to set the tier; a per-request
    price), over n."""
    from genai_prices import types

    # A total input inside the bucket: tiers apply when input > start.
    n = starts[bucket - 1] + 1 if bucket else (starts[0] if starts else 1_000_000)

    def total(usage: dict[str, int]) -> Decimal:
        return price.calc_price(types.Usage(**usage))["total_price"] * PICO

    basis = dict.fromkeys((key, *price_units.registry().ancestor_usage_keys(key)), n)
    if "input_tokens" in basis:
        rate = (total(basis) - total({})) / n
    else:
        basis["input_tokens"] = n
        rate = (total(basis) - total({"input_tokens": n})) / n
    return int(rate) if rate == rate.to_integral_value() else rate


def _pico(value: Decimal | int) -> int:
    if isinstance(value, int):
        return value
    return int(value.quantize(Decimal(1), rounding=ROUND_HALF_EVEN))


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


def row_pricer(
    price_file: Path | None = None, store_url: str | None = None, providers: Iterable[ProviderPrices] = ()
) -> Callable[[list[dict[str, Any]]], None]:
    """The writer's `enrich` step: prices exchange rows in place as they are stored, with
    `price_file`, else the price file installed in the store at `store_url` (and the one
    installed later: `StorePricer` looks again now and then), and the `[[providers]]`
    entries' own price files. A module-level factory, so a writer in another process can
    be told to build it."""
    own = list(providers)
    if price_file is not None or store_url is None:
        return Pricer(price_file, own).price_rows
    from llmtap.analytics.store_prices import StorePricer

    return StorePricer(store_url, own)
