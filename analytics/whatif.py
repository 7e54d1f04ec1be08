"""What-if pricing (`llmtap report whatif --model M`): what the recorded traffic would
have cost on model M at today's prices, with the same token counts, and what its prompt
cache misses cost there.

M's price is the local price file's when the file names it (as `pricing.Pricer` chooses),
else genai-prices' bundled data at today's date. An exchange's price on M depends on the
exchange, not only on sums: genai-prices applies a tier to every token of a request whose
input is past the tier's start (Gemini 2.5 Pro past 200k, say), and a served tier (batch,
flex, priority) picks a price variant. So DuckDB sums the exchanges per group, tier bucket
(how many of M's tier starts the input exceeds) and served tier (`sql/whatif.sql`); each
of those few sub-groups is priced once with genai-prices' own `calc_price` on M's price
with its tiers fixed at the bucket's (`_flat`). Within one bucket that arithmetic is
linear in the counts, so a group's what-if total is exactly the sum of `calc_price` on
each exchange's usage, without one Python call per exchange. A per-request price is
counted once per exchange.

The usage priced is the stored one: input (cache reads and writes included), cache
reads, cache writes, output and reasoning. Not kept in the report tables, hence not
priced: the 5-minute/1-hour split of cache writes (all at M's `cache_write` price),
modality counts (audio, images), per-use tool fees, a region's multiplier, the fast-mode
speed, the sub-usage of an advisor model. An exchange from an unverified host has no what-if either: its usage
is whatever an unknown server said (pricing.py prices it at no model). Money is exact
`Decimal` dollars.

Not responsible for the actual cost of the rows (pricing.py prices them when stored), for
what a cache miss is (protocols/rules.py, stored by storage/verdicts.py) or for rendering (render.py).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from copy import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import duckdb

from llmtap.analytics import reports
from llmtap.analytics.duck import connect
from llmtap.analytics.pricing import PICO, Pricer, price_context_of

if TYPE_CHECKING:
    from genai_prices import types

REPORT = reports.Report("whatif", ())
COLUMNS = (
    "requests",
    "input_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "output_tokens",
    "cost_usd",
    "whatif_cost_usd",
    "difference_usd",
    "ratio",
    "misses",
    "missed_tokens",
    "miss_cost_usd",
    "whatif_miss_cost_usd",
    "unpriced",
    "unverified_host",
    "usage_missing",
    "whatif_model",
    "whatif_prices",
)
_RATIO_PLACES = Decimal("0.0001")


class WhatIfError(ValueError):
    """The model (or provider) asked for has no price to compare with."""


@dataclass
class Target:
    """Model M's price: `price_for(price_context)` gives its genai-prices `ModelPrice`
    today in that context; `starts` every tier start any of its prices has."""

    provider: str | None
    model: str
    prices: str  # where the price comes from: genai-prices' version, or the price file's
    price_for: Callable[[dict[str, str]], types.ModelPrice]
    starts: tuple[int, ...]
    _priced: dict[tuple[Any, ...], _Bucket] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.provider}/{self.model}" if self.provider else self.model

    def bucket(self, served_tier: str, bucket: int) -> _Bucket:
        key = (served_tier, bucket)
        found = self._priced.get(key)
        if found is None:
            context = price_context_of(served_tier or None, None)
            price = self.price_for(context)
            found = self._priced[key] = _Bucket(_flat(price, self.starts[bucket - 1] + 1 if bucket else 0))
        return found


class _Bucket:
    """M's price with its tiers fixed at one bucket's: linear in the token counts."""

    def __init__(self, price: types.ModelPrice) -> None:
        self.price = price
        self.per_request = self._calc()  # what a request costs before any token
        # what a missed cache read costs more than a hit, per token (0 if M has no cache price)
        self.miss_rate = max(self._calc(input_tokens=1) - self._calc(input_tokens=1, cache_read_tokens=1), Decimal(0))

    def _calc(self, **usage: int) -> Decimal:
        from genai_prices import Usage

        return Decimal(self.price.calc_price(Usage(**usage))["total_price"])

    def cost(self, requests: int, leaves: dict[str, int]) -> Decimal:
        """The sum of the exchanges' prices: their summed usage once, the per-request
        price once per exchange."""
        if not requests:
            return Decimal(0)
        uncached, read, write = leaves["uncached"], leaves["read"], leaves["write"]
        tokens = self._calc(
            input_tokens=uncached + read + write,
            cache_read_tokens=read,
            cache_write_tokens=write,
            output_tokens=leaves["output"],
            output_reasoning_tokens=leaves["reasoning"],
        )
        return tokens - self.per_request + requests * self.per_request


def _flat(price: types.ModelPrice, input_tokens: int) -> types.ModelPrice:
    """`price` with each tiered price replaced by the one genai-prices applies to a
    request of `input_tokens` input tokens (its own tier lookup)."""
    from genai_prices.types import TieredPrices, calc_unit_price

    flat = copy(price)
    for key, value in vars(price).items():
        if isinstance(value, TieredPrices):
            setattr(flat, key, calc_unit_price(value, 1, input_tokens, 1))
    return flat


# -- which model ------------------------------------------------------------------------------


def target(model: str, provider: str | None, pricer: Pricer, at: datetime | None = None) -> Target:
    """Model M as `--model` and `--provider` name it: the price file's entry that names it
    (in force `at`, default now), else genai-prices' model; a WhatIfError naming close
    matches when neither has it."""
    at = at or datetime.now(UTC)
    model = model.strip()
    if not model:
        raise WhatIfError("--model is empty: name the model to price the traffic at")
    entry = _file_entry(pricer, provider, model, at)
    if entry is not None:
        named = provider or entry.naming.provider
        return Target(named, model, pricer.file_version, lambda _context: entry.price, _starts([entry.price]))
    snapshot = pricer.snapshot
    if provider is not None and not any(p.id == provider for p in snapshot.providers):
        raise WhatIfError(
            f"--provider {provider!r} is not a genai-prices provider{_close(provider, _provider_ids(pricer))}"
        )
    try:
        listing, info = snapshot.find_provider_model(model, None, provider, None)
    except LookupError:
        where = f" at {provider}" if provider else ""
        raise WhatIfError(
            f"--model {model!r} has no price{where} in {pricer.version}{_close(model, _model_ids(pricer, provider))}"
        ) from None
    own = any(m is info for m in listing.models)

    def price_for(context: dict[str, str]) -> types.ModelPrice:
        # genai-prices applies a context only to a provider's own models (ModelInfo.calc_price)
        return info.get_prices(at, context) if context and own else info.get_prices(at)

    every = [price_for({})] + [variant.prices for variant in info.price_variants or ()]
    if all(getattr(p, "input_mtok", None) is None and getattr(p, "output_mtok", None) is None for p in every):
        raise WhatIfError(f"--model {model!r} ({listing.id}/{info.id}) is not priced per token")
    return Target(listing.id, info.id, pricer.version, price_for, _starts(every))


def _file_entry(pricer: Pricer, provider: str | None, model: str, at: datetime) -> Any:
    if pricer.file is None:
        return None
    for entry in pricer.file.prices:  # the first in force, as the pricer takes it
        # without --provider, an entry for one provider names the model too
        names = entry.naming.names(provider or entry.naming.provider, model)
        if names and not (entry.since and at.date() < entry.since):
            return entry
    return None


def _starts(prices: list[types.ModelPrice]) -> tuple[int, ...]:
    from genai_prices.types import TieredPrices

    return tuple(
        sorted(
            {
                tier.start
                for price in prices
                for value in vars(price).values()
                if isinstance(value, TieredPrices)
                for tier in value.tiers
            }
        )
    )


def _provider_ids(pricer: Pricer) -> list[str]:
    return [str(p.id) for p in pricer.snapshot.providers]


def _model_ids(pricer: Pricer, provider: str | None) -> list[str]:
    ids = [str(m.id) for p in pricer.snapshot.providers if provider in (None, p.id) for m in p.models]
    if pricer.file is not None:
        ids += [n.pattern for n in pricer.file.namings() if n.pattern]
    return ids


def _close(word: str, candidates: list[str]) -> str:
    found = difflib.get_close_matches(word.lower(), sorted(set(candidates)), n=5, cutoff=0.6)
    return f" (close: {', '.join(found)})" if found else ""


# -- the report -------------------------------------------------------------------------------


def run(
    url: str,
    whatif: Target,
    *,
    by: list[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    connection: duckdb.DuckDBPyConnection | None = None,
    tz: str = "UTC",
) -> reports.Table:
    """The recorded traffic per `--by` group (default: one row) at M's prices: two passes,
    the exchanges (`whatif.sql`) and their cache misses (`cache.sql`), each split by M's
    tier bucket and the served tier."""
    dims = reports.dimensions_for(REPORT, by)
    # a bucket: how many of M's tier starts the input exceeds (the starts are bound values)
    bucket = " + ".join(f"CAST(usage_input_tokens > $start_{i} AS INTEGER)" for i in range(len(whatif.starts)))
    split = {"served_tier": "coalesce(service_tier, '')", "bucket": f"({bucket or '0'})", "actual": _ACTUAL}
    params: dict[str, Any] = {**reports._bounds(since, until)}
    params.update({f"start_{i}": start for i, start in enumerate(whatif.starts)})
    exchanges = reports.build(REPORT, dims, tz, split)
    misses = reports.build(_CACHE, dims, tz, split)
    own = connection is None
    connection = connection or connect(url)
    try:
        parts = _fetch(connection, exchanges, params)
        missed = _fetch(connection, misses, params)
    finally:
        if own:
            connection.close()
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for part in parts:
        key = tuple(part[d] for d in dims)
        if key not in groups:
            groups[key] = _empty(dims, key)
        _add(groups[key], part, whatif)
    for part in missed:
        if part["misses"]:  # a group with misses has exchanges too
            _add_misses(groups[tuple(part[d] for d in dims)], part, whatif)
    rows = [_finish(groups[key], whatif) for key in sorted(groups, key=lambda k: tuple(str(v) for v in k))]
    return reports.Table([*dims, *COLUMNS], rows, dims)


_CACHE = reports.REPORTS["cache"]
# Whether an exchange has an actual price (the comparison is like with like), and the rows
# from an unverified host, whose usage is whatever an unknown server said: pricing.py never
# prices them, and neither does a what-if.
_ACTUAL = (
    "CASE WHEN price_status = 'priced' THEN 'priced' "
    "WHEN price_reason = 'unverified_host' THEN 'unverified_host' ELSE 'other' END"
)


def _fetch(connection: duckdb.DuckDBPyConnection, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    used = {name: value for name, value in params.items() if f"${name}" in query}
    result = connection.execute(query, used)
    names = [d[0] for d in result.description]
    return [dict(zip(names, values, strict=True)) for values in result.fetchall()]


_COUNTS = ("requests", "input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens", "unpriced")


def _empty(dims: list[str], key: tuple[Any, ...]) -> dict[str, Any]:
    group: dict[str, Any] = dict(zip(dims, key, strict=True))
    group.update(dict.fromkeys((*_COUNTS, "usage_missing", "unverified_host", "misses", "missed_tokens"), 0))
    group.update(cost=None, whatif=None, whatif_priced=Decimal(0), miss_cost=None, whatif_miss=Decimal(0))
    return group


def _add(group: dict[str, Any], part: dict[str, Any], whatif: Target) -> None:
    for name in (*_COUNTS, "usage_missing"):
        group[name] += part[name]
    if part["cost_usd"] is not None:
        group["cost"] = (group["cost"] or 0) + int(part["cost_usd"])
    if part["actual"] == "unverified_host":
        group["unverified_host"] += part["requests"]
        return
    with_usage = part["requests"] - part["usage_missing"]
    if part["bucket"] is None or not with_usage:
        return
    leaves = {n: int(part[f"{n}_leaf"]) for n in ("uncached", "read", "write", "output", "reasoning")}
    cost = whatif.bucket(part["served_tier"], int(part["bucket"])).cost(with_usage, leaves)
    group["whatif"] = (group["whatif"] or Decimal(0)) + cost
    if part["actual"] == "priced":
        group["whatif_priced"] += cost


def _add_misses(group: dict[str, Any], part: dict[str, Any], whatif: Target) -> None:
    group["misses"] += part["misses"]
    group["missed_tokens"] += part["missed_tokens"]
    if part["extra_cost_usd"] is not None:  # pico-dollars; None: none of these misses has a price
        group["miss_cost"] = (group["miss_cost"] or 0) + int(part["extra_cost_usd"])
    if part["actual"] != "unverified_host":
        priced = whatif.bucket(part["served_tier"], int(part["bucket"]))
        group["whatif_miss"] += int(part["missed_tokens"]) * priced.miss_rate


def _finish(group: dict[str, Any], whatif: Target) -> dict[str, Any]:
    actual = None if group["cost"] is None else Decimal(group["cost"]) / PICO
    row = dict(group)
    row["cost_usd"] = actual
    row["whatif_cost_usd"] = None if group["whatif"] is None else group["whatif"].normalize()
    row["difference_usd"] = None if actual is None else (group["whatif_priced"] - actual).normalize()
    row["ratio"] = (group["whatif_priced"] / actual).quantize(_RATIO_PLACES) if actual else None
    # cache.sql's rule: 0 without misses, unknown (None) when none of the misses has a price
    if group["misses"] == 0:
        row["miss_cost_usd"] = Decimal(0)
    else:
        row["miss_cost_usd"] = None if group["miss_cost"] is None else Decimal(group["miss_cost"]) / PICO
    row["whatif_miss_cost_usd"] = group["whatif_miss"].normalize()
    row["whatif_model"] = whatif.label
    row["whatif_prices"] = whatif.prices
    dims = [name for name in group if name not in _WORK and name not in COLUMNS]
    return {name: row[name] for name in [*dims, *COLUMNS]}


_WORK = ("cost", "whatif", "whatif_priced", "miss_cost", "whatif_miss")
