"""What a request may cost, estimated on the event loop as it passes the budget gate, so
the gate can reserve it (budget_ledger.py) before any of it is spent.

The estimate prices the usage the request could bill, as the writer will price it
(analytics/pricing.py, at the model's genai-prices price for its provider, tier and
date): a token of input for every `BYTES_PER_TOKEN` bytes of the request body (the
body's JSON and any media count too: an estimate, high for images and cached prefixes,
which is the side a budget should err on), all of it at the cache-write price when an
Anthropic request marks a cache breakpoint; and as output the request's own limit
(`max_tokens`, `max_completion_tokens`, `max_output_tokens`, `maxOutputTokens`, …) times
the completions it asks for (`n`, `candidateCount`), else `default_output_tokens` (the
models' own default is their maximum). A Responses `generate: false` asks for none.

A body over `PARSE_LIMIT` is not parsed here (time on the event loop is every client's):
its output is `default_output_tokens`, and its model the priciest of those the body names
(a path's model, else every `"model": "…"` in it), so a crafted body can only make its
own estimate larger. Measured on the 2-core machine: 0.1-0.3 ms for a small request,
about 1.5 ms at 100 KB, 3-8 ms for a 3 MB body (searched, not parsed).

An estimate of 0 reserves nothing: a model without a price (unpriced spend is never
counted: budget_spend.py), a destination that may not bill (`unverified_host`), or a body
that names no model. Such a request is still refused once its limits are reached.

Not responsible for prices (analytics/pricing.py), reserving (budget_ledger.py) or
refusing (budget_gate.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from llmtap.protocols.exchange import TRANSLATORS
from llmtap.protocols.hosts import UNVERIFIED_HOST
from llmtap.protocols.providers import provider_of
from llmtap.protocols.routing import path_model

BYTES_PER_TOKEN = 4
# Bytes: a larger body is never parsed on the event loop. json.loads takes about 1 ms for
# 256 KiB on a loaded 2-core machine; a larger body is only searched (memory speed).
PARSE_LIMIT = 256 * 1024
MAX_CHOICES = 128  # `n` or `candidateCount` beyond this is refused by the providers anyway
MAX_NAMED_MODELS = 8  # `"model"` values tried in a body too large to parse

# Where each protocol's request sets its output limit (as its translator's `decode_request`
# reads it: protocols/*.py), the first present wins; and how many completions it asks for.
_OUTPUT_LIMIT: dict[str, tuple[tuple[str, ...], ...]] = {
    "anthropic.messages": (("max_tokens",),),
    "openai.chat": (("max_completion_tokens",), ("max_tokens",)),
    "openai.responses": (("max_output_tokens",),),
    "gemini.generate": (("generationConfig", "maxOutputTokens"), ("generation_config", "max_output_tokens")),
    "gemini.interactions": (("generation_config", "max_output_tokens"),),
    "bedrock.converse": (("inferenceConfig", "maxTokens"),),
}
_CHOICES: dict[str, tuple[str, ...]] = {
    "openai.chat": ("n",),
    "gemini.generate": ("generationConfig", "candidateCount"),
}


@dataclass(frozen=True, slots=True)
class Estimate:
    pico: int  # 0: reserves nothing
    model: str | None
    input_tokens: int
    output_tokens: int
    priced: bool


class Estimator:
    """`pricer` is an analytics.pricing.Pricer (genai-prices plus the store's or the
    config's price file), used from the event loop only."""

    def __init__(self, pricer: Any, default_output_tokens: int, clock: Callable[[], datetime] | None = None) -> None:
        self.pricer = pricer
        self.default_output_tokens = default_output_tokens
        self.clock = clock or (lambda: datetime.now(UTC))

    def estimate(
        self,
        *,
        protocol: str,
        path: str,
        host: str | None,
        body: bytes | None,
        provider: str | None = None,
        price_reason: str | None = None,
    ) -> Estimate:
        raw = body or b""
        input_tokens = max(1, -(-len(raw) // BYTES_PER_TOKEN))
        parsed = _parsed(raw) if len(raw) <= PARSE_LIMIT else None
        request = _unwrapped(parsed) if parsed is not None else {}
        module = TRANSLATORS.get(protocol)
        if module is None or price_reason == UNVERIFIED_HOST:
            return Estimate(0, None, input_tokens, 0, priced=False)
        if parsed is not None:
            named = module.requested_model(parsed, path) or path_model(path)
            models = [named] if named else []
            output = _output_tokens(protocol, request, self.default_output_tokens)
        else:  # too big to parse here, or not JSON (the provider refuses it)
            named = module.requested_model({}, path) or path_model(path)
            models = [named] if named else _named_models(raw)
            output = self.default_output_tokens
        row = {
            "provider": provider or provider_of(protocol, host, path),
            "protocol": protocol,
            "started_at": self.clock(),
            "service_tier": module.requested_tier(parsed) if parsed is not None else None,
            "service_speed": _text(request.get("speed")),
            "inference_geo": _text(request.get("inference_geo")),
            "usage_input_tokens": input_tokens,
            "usage_output_tokens": output,
        }
        if protocol == "anthropic.messages" and b"cache_control" in raw:  # may write it all to the cache
            column = (
                "usage_cache_creation_1h_input_tokens" if b'"1h"' in raw else "usage_cache_creation_5m_input_tokens"
            )
            row["usage_cache_creation_input_tokens"] = row[column] = input_tokens
        best: Estimate | None = None
        for model in models:
            cost = self.pricer.price_row({**row, "model": model, "model_requested": model})
            if cost.status == "priced" and cost.total is not None and (best is None or cost.total > best.pico):
                best = Estimate(int(cost.total), model, input_tokens, output, priced=True)
        return best or Estimate(0, models[0] if models else None, input_tokens, output, priced=False)


def _parsed(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _unwrapped(body: dict[str, Any]) -> dict[str, Any]:
    """A Responses WebSocket `response.create` may carry the request wrapped in `response`."""
    inner = body.get("response")
    return inner if body.get("type") == "response.create" and isinstance(inner, dict) else body


def _at(body: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = body
    for part in path:
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _output_tokens(protocol: str, request: dict[str, Any], default: int) -> int:
    if request.get("generate") is False:  # a Responses warm-up: no generation
        return 0
    limit = None
    for path in _OUTPUT_LIMIT.get(protocol, ()):
        limit = _count(_at(request, path))
        if limit is not None:
            break
    choices = _count(_at(request, _CHOICES[protocol])) if protocol in _CHOICES else None
    return (default if limit is None else limit) * min(max(choices or 1, 1), MAX_CHOICES)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _named_models(raw: bytes) -> list[str]:
    """Every `"model": "…"` string in a body, wherever it stands (at most a few)."""
    found: list[str] = []
    start = 0
    decoder = json.JSONDecoder()
    while len(found) < MAX_NAMED_MODELS:
        at = raw.find(b'"model"', start)
        if at < 0:
            break
        start = at + 7
        window = raw[start : start + 512].decode("utf-8", "replace").lstrip()
        if not window.startswith(":"):
            continue
        try:
            value, _ = decoder.raw_decode(window[1:].lstrip())
        except ValueError:
            continue
        if isinstance(value, str) and value and value not in found:
            found.append(value)
    return found
