"""Per-use fees of the tools a provider runs itself (`server_tool_uses`, SPEC §5): each
kind's count at genai-prices' price for its unit, or at the local price file's
`[[fee]]` price, which wins where both have one. Money is integer pico-dollars.

| kind | genai-prices unit | |
|---|---|---|
| `web_search` | `web_searches` (`web_searches_kcount`) | Anthropic, OpenAI, Gemini grounding |
| `file_search` | `storage_searches` (`storage_searches_kcount`) | OpenAI |
| `code_execution` | `code_executions` (`code_executions_kcount`) | |
| `web_fetch` | none: Anthropic charges no fee for it; 0 unless a price file sets one | |

A model price with a per-request price (genai-prices' `requests_kcount`) bills it here
too, as the kind `request`, once per exchange.

Not responsible for token prices (see `pricing.py`) or for reading the file
(`price_file.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import ROUND_HALF_EVEN, Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llmtap.analytics.price_file import PriceFile

UnitPrice = Callable[[str], Any]  # a price key -> the model's price for it (Decimal, TieredPrices or None)

UNIT_KEYS = {
    "web_search": "web_searches_kcount",
    "file_search": "storage_searches_kcount",
    "code_execution": "code_executions_kcount",
    "web_fetch": None,
}
_PICO_PER_USD_PER_1K = Decimal(10) ** 9  # USD per 1,000 uses -> pico-dollars per use


def price_fees(
    price_file: PriceFile | None,
    provider: str | None,
    model: str,
    unit_price: UnitPrice,
    uses: Mapping[str, Any] | None,
    input_tokens: int,
) -> tuple[int, list[dict[str, Any]]]:
    """(the fees' total, one `cost_detail` part per kind used)."""
    per_request = _unit_price(unit_price, "requests_kcount", input_tokens)
    if not uses and per_request is None:
        return 0, []
    parts = []
    for kind, count in sorted((uses or {}).items()):
        if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
            continue
        usd, source = _file_fee(price_file, provider, model, kind), "price file"
        if usd is None:
            usd, source = _unit_price(unit_price, UNIT_KEYS.get(kind), input_tokens), "genai-prices"
        parts.append(_part(kind, count, usd, source))
    if per_request is not None:
        parts.append(_part("request", 1, per_request, "genai-prices"))
    return sum(part["total"] for part in parts), parts


def _part(kind: str, count: int, usd_per_1k: Decimal | None, source: str) -> dict[str, Any]:
    if usd_per_1k is None:  # no price for this kind anywhere: no fee, and it says so
        return {"what": "fee", "kind": kind, "count": count, "usd_per_1k": None, "total": 0, "source": None}
    total = int((count * usd_per_1k * _PICO_PER_USD_PER_1K).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))
    return {
        "what": "fee",
        "kind": kind,
        "count": count,
        "usd_per_1k": format(usd_per_1k.normalize(), "f"),
        "total": total,
        "source": source,
    }


def _file_fee(price_file: PriceFile | None, provider: str | None, model: str, kind: str) -> Decimal | None:
    if price_file is None:
        return None
    for entry in price_file.fees:
        if entry.kind == kind and entry.naming.names(provider, model):
            return entry.usd_per_1k
    return None


def _unit_price(unit_price: UnitPrice, price_key: str | None, input_tokens: int) -> Decimal | None:
    """genai-prices' price per 1,000 of a unit; a tiered one by the exchange's input, as
    its `calc_unit_price` picks it."""
    value = unit_price(price_key) if price_key else None
    if value is None or isinstance(value, Decimal):
        return value
    from genai_prices import types

    if isinstance(value, types.TieredPrices):
        chosen = value.base
        for tier in reversed(value.tiers):
            if input_tokens > tier.start:
                chosen = tier.price
                break
        return chosen
    return None
