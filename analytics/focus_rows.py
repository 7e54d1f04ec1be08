"""`llmtap export --format focus`: export rows (export_rows.py) as rows of the FinOps
Foundation's FOCUS 1.2 Cost and Usage dataset, the version focus-validator 2.2.1 checks
offline (docs/reconcile-sources.md), with llmtap's own columns prefixed `x_`.

Granularity: one FOCUS row per exchange × charge, a charge being a token class the
provider bills at its own rate — `input` (uncached input: the canonical input less its
cache reads and writes), `cache_read`, `cache_write`, `output` (reasoning included) — or
`fee` (the per-use fees of server tools, fees.py). A charge is written when it has tokens
or money; an exchange with neither (usage missing, most errors) has no FOCUS row, as it
adds nothing to `report cost`. So `SkuId` is `model:class`, `ConsumedQuantity` and
`PricingQuantity` are its tokens (`Tokens`; a fee counts the server tool uses,
`Requests`), and `ListUnitPrice` is the charge's cost over them, so ListUnitPrice ×
PricingQuantity is ListCost as FOCUS requires (a blend where a sub-usage or a modality
priced at another rate was added into the part, pricing.py). `SkuPriceId` adds what was
served (tier, speed, region) to the SkuId. Every cost column is the part's exact
`Decimal` dollars (no discount or contract is known: billed = effective = list =
contracted), so BilledCost summed over a file is `report cost`'s total for the same
rows; a priced part that no token carries (a rounding remainder, a sub-usage's class the
main usage lacks) is a row of one `Requests`. An unpriced row's charges cost 0, as FOCUS
allows no null cost, and `x_PriceStatus` says `unpriced` (with `x_PriceReason`).

The `x_` token columns hold the tokens of the row's own class (null on the others): their
sums over a file are the report's, except that `x_InputTokens` is uncached input (the
report's `input_tokens` is the sum of the three input columns). `Tags` is a JSON object
of the row's `tags` (when it carries a dict of them) with its `team`.

Times are UTC as FOCUS writes them (`2026-11-02T09:00:00Z`): the charge period is the
hour the exchange started in, the billing period its calendar month. The provider's
billing account is not something the proxy sees: `BillingAccountId` is the provider's id
and the sub-account is the API key (its fingerprint); `InvoiceId` is a provisional one,
the provider and the month (`anthropic-2026-11`), not the provider's invoice number.

Not responsible for which exchanges there are or their prices (export_rows.py and the
pricer), nor for writing the file (cli/export.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from decimal import Context, Decimal
from typing import Any

from llmtap.analytics.export_rows import decimal_text
from llmtap.analytics.render import csv_cell

FOCUS_COLUMNS = (
    "BilledCost",
    "BillingAccountId",
    "BillingAccountName",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ChargeFrequency",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "ConsumedQuantity",
    "ConsumedUnit",
    "ContractedCost",
    "EffectiveCost",
    "InvoiceId",
    "InvoiceIssuerName",
    "ListCost",
    "ListUnitPrice",
    "PricingQuantity",
    "PricingUnit",
    "ProviderName",
    "PublisherName",
    "RegionId",
    "RegionName",
    "ServiceCategory",
    "ServiceName",
    "ServiceSubcategory",
    "SkuId",
    "SkuPriceId",
    "SubAccountId",
    "SubAccountName",
    "Tags",
)
# (class, its x_ column, its export money column)
CLASSES = (
    ("input", "x_InputTokens", "input_cost_usd"),
    ("cache_read", "x_CacheReadTokens", "cache_read_cost_usd"),
    ("cache_write", "x_CacheWriteTokens", "cache_write_cost_usd"),
    ("output", "x_OutputTokens", "output_cost_usd"),
)
_COLUMN_OF = {kind: column for kind, column, _ in CLASSES}
TOKEN_COLUMNS = (*_COLUMN_OF.values(), "x_ReasoningTokens")
X_COLUMNS = (
    "x_ExchangeId",
    "x_ConversationId",
    "x_Team",
    "x_EndUser",
    "x_Model",
    "x_ChargeType",
    *TOKEN_COLUMNS,
    "x_PriceStatus",
    "x_PriceReason",
    "x_PriceVersion",
)
COLUMNS = (*FOCUS_COLUMNS, *X_COLUMNS)
DECIMAL_COLUMNS = frozenset(
    (
        "BilledCost",
        "ContractedCost",
        "EffectiveCost",
        "ListCost",
        "ListUnitPrice",
        "ConsumedQuantity",
        "PricingQuantity",
    )
)

_DESCRIBED = {
    "input": "uncached input tokens",
    "cache_read": "cache read input tokens",
    "cache_write": "cache write input tokens",
    "output": "output tokens",
    "fee": "server tool fees",
    "other": "charge without tokens",
}
# genai-prices' provider ids as their companies write them; another id stands as it is.
_PROVIDERS = {"anthropic": "Anthropic", "openai": "OpenAI", "google": "Google", "aws": "AWS", "azure": "Microsoft"}
_SERVICES = {
    "anthropic": "Claude API",
    "openai": "OpenAI API",
    "google": "Gemini API",
    "aws": "Amazon Bedrock",
    "azure": "Azure OpenAI",
}
# The region a cloud's host names: bedrock-runtime.us-east-1.amazonaws.com, or Vertex's
# us-central1-aiplatform.googleapis.com.
_REGION_HOSTS = (
    re.compile(r"bedrock-runtime(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com"),
    re.compile(r"([a-z0-9-]+)-aiplatform\.googleapis\.com"),
)
_UNIT_PRICE = Context(prec=34)  # ListUnitPrice × PricingQuantity is ListCost to ~1e-30
_ZERO = Decimal(0)


def focus_rows(row: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The FOCUS rows of one export row (COLUMNS as keys): money and quantities as
    `Decimal` or `int`, text as `str`, absent values as None."""
    common = _common(row)
    usage = row.get("usage") or {}
    priced = row.get("price_status") == "priced"
    for kind, quantity, cost, unit in _charges(row, usage):
        if not priced:
            cost = _ZERO
        if not quantity and not cost:
            continue
        out = dict(common)
        out.update(_money(kind, quantity, cost, unit, common))
        if kind in _COLUMN_OF:
            out[_COLUMN_OF[kind]] = quantity
        if kind == "output" and usage.get("reasoning_tokens") is not None:
            out["x_ReasoningTokens"] = usage["reasoning_tokens"]
        yield {name: out[name] for name in COLUMNS}


def _charges(row: Mapping[str, Any], usage: Mapping[str, Any]) -> Iterator[tuple[str, int, Decimal, str]]:
    """(class, quantity, cost, unit) of each charge, the remainder of the total last."""
    reads, writes = usage.get("cache_read_tokens") or 0, usage.get("cache_write_tokens") or 0
    tokens = {
        "input": max((usage.get("input_tokens") or 0) - reads - writes, 0),
        "cache_read": reads,
        "cache_write": writes,
        "output": usage.get("output_tokens") or 0,
    }
    parts = _ZERO
    for kind, _, money in CLASSES:
        cost = row.get(money) or _ZERO
        parts += cost
        yield kind, tokens[kind], cost, "Tokens"
    fee = row.get("fee_cost_usd") or _ZERO
    parts += fee
    uses = row.get("server_tool_uses") or {}
    count = sum(n for n in uses.values() if isinstance(n, int) and not isinstance(n, bool) and n > 0)
    yield "fee", count, fee, "Requests"
    total = row.get("cost_usd")
    if total is not None and total != parts:
        yield "other", 0, total - parts, "Requests"


def _money(kind: str, quantity: int, cost: Decimal, unit: str, common: Mapping[str, Any]) -> dict[str, Any]:
    if not quantity:  # money no token carries: one charge of it
        quantity, unit = 1, "Requests"
    price = _UNIT_PRICE.divide(cost, Decimal(quantity)) if cost else _ZERO
    sku = f"{common['x_Model']}:{kind}"
    return {
        "BilledCost": cost,
        "ContractedCost": cost,
        "EffectiveCost": cost,
        "ListCost": cost,
        "ListUnitPrice": price,
        "ConsumedQuantity": quantity,
        "ConsumedUnit": unit,
        "PricingQuantity": quantity,
        "PricingUnit": unit,
        "SkuId": sku,
        "SkuPriceId": ":".join((sku, *common["_served"])),
        "ChargeDescription": _description(kind, common),
        "x_ChargeType": kind,
    }


def _description(kind: str, common: Mapping[str, Any]) -> str:
    what = f"{common['x_Model']} {_DESCRIBED[kind]}"
    uses = common["_uses"]
    if kind == "fee" and uses:
        what += " (" + ", ".join(f"{name} x {count}" for name, count in sorted(uses.items())) + ")"
    return what.encode("ascii", "backslashreplace").decode("ascii")  # FOCUS asks for ASCII here


def csv_line(row: Mapping[str, Any]) -> list[Any]:
    """A FOCUS row as CSV cells: decimal columns as plain decimal text with a point (`12.0`:
    a reader that infers types, as focus-validator's does, then reads a decimal, not an
    integer), and no text cell a spreadsheet would run as a formula (render.csv_cell)."""
    return [_cell(name, row[name]) for name in COLUMNS]


def _cell(name: str, value: Any) -> Any:
    if value is None:
        return None
    if name in DECIMAL_COLUMNS:
        text = decimal_text(Decimal(value))
        return text if "." in text else text + ".0"
    return csv_cell(decimal_text(value) if isinstance(value, Decimal) else value)


def _common(row: Mapping[str, Any]) -> dict[str, Any]:
    """What every FOCUS row of the exchange shares, plus `_served` and `_uses` (the
    SkuPriceId's suffix and the fee's description), which the rows it yields leave out."""
    provider_id = row.get("provider") or row.get("host") or "unknown"
    provider = _PROVIDERS.get(provider_id, provider_id)
    model = row.get("model") or row.get("model_requested") or "unknown"
    started = _utc(row["started_at"])
    hour = started.replace(minute=0, second=0, microsecond=0)
    month = hour.replace(day=1, hour=0)
    region = _region(row)
    fingerprint = row.get("key_fingerprint")
    served = tuple(str(v) for v in (row.get("service_tier"), row.get("speed"), row.get("inference_geo")) if v)
    out: dict[str, Any] = dict.fromkeys(COLUMNS)
    out.update(
        {
            "BillingAccountId": provider_id,
            "BillingAccountName": provider,
            "BillingCurrency": "USD",
            "BillingPeriodStart": _when(month),
            "BillingPeriodEnd": _when((month + timedelta(days=32)).replace(day=1)),
            "ChargeCategory": "Usage",
            "ChargeFrequency": "Usage-Based",
            "ChargePeriodStart": _when(hour),
            "ChargePeriodEnd": _when(hour + timedelta(hours=1)),
            "InvoiceId": f"{provider_id}-{month:%Y-%m}",  # provisional: the month's invoice
            "InvoiceIssuerName": provider,
            "ProviderName": provider,
            "PublisherName": provider,
            "RegionId": region,
            "RegionName": region,
            "ServiceCategory": "AI and Machine Learning",
            "ServiceName": _service(provider_id, row.get("host")),
            "ServiceSubcategory": "Generative AI",
            "SubAccountId": fingerprint,
            "SubAccountName": f"API key ending {row.get('key_last4') or '?'}" if fingerprint else None,
            "Tags": _tags(row),
            "x_ExchangeId": row["id"],
            "x_ConversationId": row.get("conversation_id"),
            "x_Team": row.get("team"),
            "x_EndUser": row.get("end_user"),
            "x_Model": model,
            "x_PriceStatus": row.get("price_status"),
            "x_PriceReason": row.get("price_reason"),
            "x_PriceVersion": row.get("price_version"),
            "_uses": dict(row.get("server_tool_uses") or {}),
            "_served": served,
        }
    )
    return out


def _service(provider_id: str, host: str | None) -> str:
    if provider_id == "google" and host and host.endswith("aiplatform.googleapis.com"):
        return "Vertex AI"
    return _SERVICES.get(provider_id, provider_id)


def _region(row: Mapping[str, Any]) -> str | None:
    host = row.get("host") or ""
    for pattern in _REGION_HOSTS:
        found = pattern.fullmatch(host)
        if found:
            return found.group(1)
    geo = row.get("inference_geo")
    return str(geo) if geo else None


def _tags(row: Mapping[str, Any]) -> str:
    """FOCUS's key-value format: a JSON object whose values are scalars (a nested value
    becomes its JSON text)."""
    tags: dict[str, Any] = {"team": row.get("team")}
    own = row.get("tags")
    if isinstance(own, Mapping):
        for key, value in own.items():
            if str(key) != "team":
                scalar = value is None or isinstance(value, str | int | float | bool)
                tags[str(key)] = value if scalar else json.dumps(value, ensure_ascii=False, default=str)
    return json.dumps(tags, ensure_ascii=False, default=str)


def _utc(value: datetime | str) -> datetime:
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
