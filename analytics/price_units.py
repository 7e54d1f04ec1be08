"""genai-prices' usage units (`input_tokens`, `cache_audio_read_tokens`, …: each a price
key, a `per` and its dimensions), through its public names only.

genai-prices keeps a private registry of its bundled units (`genai_prices.units._get_registry`)
that a minor release may rename or drop. llmtap builds its own, once, from the public
pieces that registry is made of: the bundled unit table `genai_prices.data_units.unit_data`
and the `genai_prices.units.UnitRegistry` class over it. Both, and the validation llmtap
calls on a price file's keys, are pinned by tests/analytics/test_genai_prices_contract.py,
which fails with one message naming what an upgrade changed.

Not responsible for prices (`pricing.py`), nor for reading price files (`price_file.py`).
genai-prices is imported on first use: importing it costs ~0.3 s.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from genai_prices.units import UnitRegistry


@cache
def registry() -> UnitRegistry:
    """genai-prices' bundled units, indexed (ancestors, price keys)."""
    from genai_prices.data_units import unit_data
    from genai_prices.units import UnitRegistry

    return UnitRegistry(unit_data)


def validate_price_keys(keys: set[str]) -> None:
    """genai-prices' own rules for a model price's keys: each key is known, and a cache or
    modality price comes with its parents'. ValueError (genai-prices' message) if not."""
    from genai_prices.validation import validate_model_price

    validate_model_price(keys, registry())
