"""The part of genai-prices llmtap relies on: names, signatures and behaviour, pinned.

pyproject.toml pins genai-prices to `>=0.2.3,<0.3`. When a release inside (or, after
the pin moves, past) that range changes something llmtap calls, one of these tests fails
with a message naming what changed and where llmtap uses it, rather than pricing going
quietly wrong or a report crashing in the field. Each test checks one thing.

The expected prices are genai-prices' published list prices for models whose prices are
settled (at a fixed date, so a new price period does not move them): a change in them
means genai-prices' arithmetic or data format changed, not a price.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import inspect
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import genai_prices
import pytest
from genai_prices import Usage, calc_price, data_snapshot, types
from genai_prices.units import UnitRegistry
from genai_prices.validation import validate_model_price

from llmtap.analytics import price_units, pricing

VERSION = importlib.metadata.version("genai-prices")
AT = datetime(2025, 9, 1, tzinfo=UTC)


def broke(what: str) -> str:
    """The one message every failure here gives."""
    return f"genai-prices {VERSION} broke what llmtap relies on: {what}"


def parameters(function: Any) -> list[str]:
    return list(inspect.signature(function).parameters)


# -- names and signatures -------------------------------------------------------------------

# (module, name): every genai-prices name llmtap's code imports or calls by name.
NAMES = [
    ("genai_prices", "calc_price"),  # tests, price oracle
    ("genai_prices", "extract_usage"),  # tests
    ("genai_prices", "Usage"),  # analytics/whatif.py
    ("genai_prices", "data_snapshot"),  # analytics/pricing.py, protocols/provider_list.py
    ("genai_prices", "types"),  # analytics/*.py
    ("genai_prices", "__version__"),
    ("genai_prices.data_snapshot", "get_snapshot"),  # analytics/pricing.py, protocols/provider_list.py
    ("genai_prices.data_snapshot", "set_custom_snapshot"),  # protocols/provider_list.py's docstring, tests
    ("genai_prices.data_snapshot", "DataSnapshot"),
    ("genai_prices.types", "Usage"),  # analytics/pricing.py
    ("genai_prices.types", "ModelPrice"),  # analytics/price_file.py
    ("genai_prices.types", "TieredPrices"),  # analytics/fees.py, whatif.py, pricing.py
    ("genai_prices.types", "Tier"),
    ("genai_prices.types", "calc_unit_price"),  # analytics/whatif.py
    ("genai_prices.types", "Provider"),
    ("genai_prices.types", "ModelInfo"),
    ("genai_prices.data_units", "unit_data"),  # analytics/price_units.py
    ("genai_prices.units", "UnitRegistry"),  # analytics/price_units.py
    ("genai_prices.validation", "validate_model_price"),  # analytics/price_units.py
]


@pytest.mark.parametrize(("module", "name"), NAMES, ids=[f"{m}.{n}" for m, n in NAMES])
def test_the_names_llmtap_imports_exist(module: str, name: str) -> None:
    try:
        found = importlib.import_module(module)
    except ImportError:
        pytest.fail(broke(f"module {module} is gone"))
    assert hasattr(found, name), broke(f"{module}.{name} is gone")


# callable -> the parameters llmtap passes (by name or position), in genai-prices' order
SIGNATURES: list[tuple[str, Any, list[str]]] = [
    (
        "calc_price",
        genai_prices.calc_price,
        ["usage", "model_ref", "provider_id", "provider_api_url", "genai_request_timestamp", "price_context"],
    ),
    ("extract_usage", genai_prices.extract_usage, ["response_data", "provider_id", "provider_api_url", "api_flavor"]),
    # called positionally: (model, listing, provider_id, api_url) in analytics/pricing.py, whatif.py
    (
        "DataSnapshot.find_provider_model",
        data_snapshot.DataSnapshot.find_provider_model,
        ["self", "model_ref", "provider", "provider_id", "provider_api_url"],
    ),
    ("ModelInfo.get_prices", types.ModelInfo.get_prices, ["self", "request_timestamp", "price_context"]),
    ("ModelPrice.calc_price", types.ModelPrice.calc_price, ["self", "usage"]),
    # called positionally: (price, count, total_input_tokens, per) in analytics/whatif.py
    ("types.calc_unit_price", types.calc_unit_price, ["price", "count", "total_input_tokens", "per"]),
    ("UnitRegistry", UnitRegistry, ["raw_units"]),  # UnitRegistry(unit_data) in analytics/price_units.py
    ("UnitRegistry.ancestor_usage_keys", UnitRegistry.ancestor_usage_keys, ["self", "usage_key"]),
    ("validate_model_price", validate_model_price, ["price_keys", "registry"]),
]


@pytest.mark.parametrize(("name", "function", "expected"), SIGNATURES, ids=[s[0] for s in SIGNATURES])
def test_the_signatures_llmtap_calls_are_unchanged(name: str, function: Any, expected: list[str]) -> None:
    found = parameters(function)
    assert found == expected, broke(f"{name} takes ({', '.join(found)}), llmtap calls it as ({', '.join(expected)})")


# -- behaviour ----------------------------------------------------------------------------------

# (provider, model, input $, output $, total $) for 1M input tokens of which 200k cache
# reads, and 100k output tokens, at AT.
PRICES = [
    ("openai", "gpt-4o", "2.25", "1", "3.25"),  # $2.50 / $1.25 cached / $10 per MTok
    ("anthropic", "claude-sonnet-4-20250514", "2.46", "1.5", "3.96"),  # $3 / $0.30 / $15
    ("google", "gemini-2.5-pro", "2.05", "1.5", "3.55"),  # $1.25 (≤200k), $2.50 past it; $0.31 / $15
]


@pytest.mark.parametrize(("provider", "model", "inp", "out", "total"), PRICES, ids=[p[1] for p in PRICES])
def test_a_known_model_costs_its_known_price(provider: str, model: str, inp: str, out: str, total: str) -> None:
    usage = Usage(input_tokens=1_000_000, cache_read_tokens=200_000, output_tokens=100_000)
    price = calc_price(usage, model, provider_id=provider, genai_request_timestamp=AT)
    found = (price.input_price, price.output_price, price.total_price)
    assert found == (Decimal(inp), Decimal(out), Decimal(total)), broke(
        f"calc_price({model!r} at {provider}) is (input, output, total) {found}, was ({inp}, {out}, {total})"
    )


def test_a_model_price_prices_a_usage_as_a_mapping_of_decimals() -> None:
    """analytics/pricing.py reads `price.calc_price(Usage(...))["total_price"]`."""
    _, info = data_snapshot.get_snapshot().find_provider_model("gpt-4o", None, "openai", None)
    price = info.get_prices(AT)
    found = price.calc_price(types.Usage(input_tokens=1_000_000, output_tokens=1_000_000))
    assert found == {"input_price": Decimal("2.5"), "output_price": Decimal("10"), "total_price": Decimal("12.5")}, (
        broke(f"ModelPrice.calc_price returns {found!r}")
    )


def test_a_tiered_price_has_a_base_and_tiers_with_start_and_price() -> None:
    """analytics/fees.py, whatif.py and pricing.py walk `TieredPrices.base` and
    `.tiers[i].start` / `.price`, and whatif.py lets `calc_unit_price` pick the tier."""
    _, info = data_snapshot.get_snapshot().find_provider_model("gemini-2.5-pro", None, "google", None)
    tiered = info.get_prices(AT).input_mtok
    assert isinstance(tiered, types.TieredPrices), broke(f"gemini-2.5-pro's input_mtok is {tiered!r}, not TieredPrices")
    found = (tiered.base, [(tier.start, tier.price) for tier in tiered.tiers])
    assert found == (Decimal("1.25"), [(200_000, Decimal("2.5"))]), broke(f"TieredPrices reads {found}")
    picked = (types.calc_unit_price(tiered, 1, 200_000, 1), types.calc_unit_price(tiered, 1, 200_001, 1))
    assert picked == (Decimal("1.25"), Decimal("2.5")), broke(f"calc_unit_price picks {picked} at 200,000 / 200,001")


def test_price_variants_are_chosen_by_a_price_context() -> None:
    """analytics/pricing.py reads `ModelInfo.price_variants[i].when` / `.prices` and passes
    the context to `get_prices`."""
    _, info = data_snapshot.get_snapshot().find_provider_model("gpt-5", None, "openai", None)
    whens = [dict(variant.when) for variant in info.price_variants or ()]
    assert {"service_tier": "flex"} in whens, broke(f"gpt-5's price_variants are {whens}, no service_tier flex")
    at = datetime(2026, 11, 1, tzinfo=UTC)  # the variants are in force from 2026-10-12
    standard, flex = info.get_prices(at), info.get_prices(at, {"service_tier": "flex"})
    assert (standard.input_mtok, flex.input_mtok) == (Decimal("1.25"), Decimal("0.625")), broke(
        f"gpt-5 input_mtok standard/flex on {at.date()} is {standard.input_mtok}/{flex.input_mtok}"
    )


def test_the_snapshot_lists_the_providers_llmtap_names() -> None:
    """protocols/provider_list.py reads `providers[i].id` and `.api_pattern`; analytics
    `.models[i].id`; analytics/cloud_names.py and protocols/hosts.py name these ids."""
    snapshot = data_snapshot.get_snapshot()
    listed = {str(provider.id): provider for provider in snapshot.providers}
    wanted = {"anthropic", "openai", "google", "aws", "azure", "openrouter", "mistral", "groq", "deepseek", "x-ai"}
    assert wanted <= set(listed), broke(f"the snapshot's providers lack {sorted(wanted - set(listed))}")
    openai = listed["openai"]
    assert openai.api_pattern == r"https://api\.openai\.com", broke(f"openai's api_pattern is {openai.api_pattern!r}")
    assert "gpt-4o" in {str(model.id) for model in openai.models}, broke("openai's models lack gpt-4o")
    assert snapshot.from_auto_update is False, broke("the bundled snapshot says it came from an auto-update")


def test_the_price_version_is_the_package_version() -> None:
    """Every priced row keeps `genai-prices <version>` (analytics/pricing.py): `reprice`
    tells old rows by it."""
    assert genai_prices.__version__ == VERSION, broke(f"__version__ is {genai_prices.__version__!r}")
    assert pricing.package_version() == VERSION
    major, minor, *_ = (int(part) for part in VERSION.split(".")[:3])
    assert (major, minor) == (0, 2), broke(f"version {VERSION} is outside the pinned range >=0.2.3,<0.3")
    assert pricing.Pricer().version == f"genai-prices {VERSION}"


def test_the_units_llmtap_builds_are_genai_prices_units() -> None:
    """analytics/price_units.py builds genai-prices' unit registry from its public unit
    table; analytics/pricing.py reads each unit's `dimensions` and ancestors."""
    units = price_units.registry().units
    dimensions = {key: dict(units[key].dimensions) for key in ("input_tokens", "cache_read_tokens", "output_tokens")}
    assert dimensions == {
        "input_tokens": {"family": "tokens", "direction": "input"},
        "cache_read_tokens": {"family": "tokens", "direction": "input", "token_type": "cache_read"},
        "output_tokens": {"family": "tokens", "direction": "output"},
    }, broke(f"the units' dimensions are {dimensions}")
    assert units["input_tokens"].price_key == "input_mtok" and units["input_tokens"].per == 1_000_000, broke(
        f"input_tokens is priced as {units['input_tokens'].price_key} per {units['input_tokens'].per}"
    )
    ancestors = price_units.registry().ancestor_usage_keys("cache_audio_read_tokens")
    assert ancestors == {"input_tokens", "cache_read_tokens", "input_audio_tokens"}, broke(
        f"cache_audio_read_tokens' ancestors are {sorted(ancestors)}"
    )


def test_price_keys_are_validated_by_genai_prices_rules() -> None:
    """analytics/price_file.py refuses a price file's bad keys with genai-prices' message."""
    price_units.validate_price_keys({"input_mtok", "output_mtok", "cache_read_mtok"})
    for keys, message in [
        ({"input_mtok", "bogus_mtok"}, "Unknown price key: bogus_mtok"),
        ({"input_mtok", "cache_audio_read_mtok"}, "Missing ancestor price for cache_audio_read_tokens"),
    ]:
        with pytest.raises(ValueError) as raised:
            price_units.validate_price_keys(keys)
        assert message in str(raised.value), broke(f"validate_model_price({sorted(keys)}) says {raised.value}")


# -- no private names ---------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("addon", "analytics", "cli", "dashboards", "lake", "protocols", "storage", "telemetry")


def private_uses(source: str) -> list[str]:
    """The private genai-prices names a module's source imports: `_name` from a genai-prices
    module, or a module of it whose name starts with `_`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "genai_prices":
            module = node.module or ""
            if any(part.startswith("_") for part in module.split(".")):
                found.append(module)
            found += [f"{module}.{alias.name}" for alias in node.names if alias.name.startswith("_")]
        elif isinstance(node, ast.Import):
            found += [
                alias.name
                for alias in node.names
                if alias.name.split(".")[0] == "genai_prices" and any(p.startswith("_") for p in alias.name.split("."))
            ]
    return found


def test_the_private_name_llmtap_used_to_import_is_found() -> None:
    assert private_uses("from genai_prices.units import _get_registry") == ["genai_prices.units._get_registry"]
    assert private_uses("from genai_prices._usage import UsageValue") == ["genai_prices._usage"]
    assert private_uses("from genai_prices import types") == []


def test_llmtap_imports_no_private_genai_prices_name() -> None:
    found = {
        str(path.relative_to(ROOT)): uses
        for folder in SOURCES
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "genai_prices" in (text := path.read_text(encoding="utf-8")) and (uses := private_uses(text))
    }
    assert not found, f"llmtap imports private genai-prices names (use its public API): {found}"
