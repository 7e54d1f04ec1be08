"""The served tier through the real proxy: a Gemini request asking `service_tier:
priority` that the simulator's Gemini route serves at standard (`[tier-fallback]` in the
prompt; it says so in `x-gemini-service-tier`) is recorded as `standard` and priced at
standard rates, whether mitmproxy held the small JSON answer or the tee streamed SSE. A
request served what it asked is recorded, and priced, at that tier.

Not responsible for the decoder's rules (tests/protocols/test_tierheader.py has them).
"""

from __future__ import annotations

import json
import time
from decimal import Decimal

import pytest
from genai_prices import Usage, calc_price

from llmtap.simulator.provider import SimulatedProvider
from llmtap.simulator.upstream import Seen
from llmtap.simulator.wire_gemini import SERVED_TIER_HEADER, TIER_FALLBACK
from tests.e2e import harness
from tests.e2e.harness import Proxy

# genai-prices prices this model with a `service_tier: priority` variant (from 2026-10-15).
MODEL = "gemini-3.8-flash-tts"


def pico(row: dict, tier: str | None) -> int:
    """genai-prices' own price of the row's usage at `tier` (None: standard)."""
    price = calc_price(
        Usage(input_tokens=row["usage_input_tokens"], output_tokens=row["usage_output_tokens"]),
        MODEL,
        provider_id="google",
        genai_request_timestamp=row["started_at"],
        price_context={"service_tier": tier} if tier else None,
    )
    return int(price.total_price * Decimal(10**12))


@pytest.mark.parametrize(
    ("method", "query", "fallback", "served"),
    [
        ("generateContent", "", True, "standard"),  # a small JSON answer: mitmproxy holds it
        ("streamGenerateContent", "?alt=sse", True, "standard"),  # SSE: through the tee
        ("generateContent", "", False, "priority"),  # served as asked
    ],
)
def test_gemini_served_tier_header_is_recorded_and_priced(
    proxy: Proxy, method: str, query: str, fallback: bool, served: str
) -> None:
    text = "Read the release notes aloud." + (f" {TIER_FALLBACK}" if fallback else "")
    body = {"contents": [{"role": "user", "parts": [{"text": text}]}], "service_tier": "priority"}
    path = f"/v1beta/models/{MODEL}:{method}{query}"
    reply = SimulatedProvider()(Seen("POST", path, {}, json.dumps(body).encode(), time.time()))
    assert (SERVED_TIER_HEADER, served) in reply.headers
    token = proxy.routes.add(reply)
    key = proxy.key(harness.GOOGLE_KEY)

    raw, _ = harness.curl(
        [
            f"{proxy.base('gemini')}{path}",
            "-H", "content-type: application/json",
            "-H", f"{harness.CASE_HEADER}: {token}",
            "-H", f"x-goog-api-key: {key}",
            "-i",
            "--data-binary", json.dumps(body),
        ]
    )  # fmt: skip
    assert f"{SERVED_TIER_HEADER}: {served}".encode() in raw.lower()  # the client gets the header as sent

    row = proxy.record(key)
    assert (row["protocol"], row["model"], row["streamed"]) == ("gemini.generate", MODEL, bool(query))
    assert row["service_tier"] == served
    assert row["price_status"] == "priced", row
    assert row["cost_total_pico"] == pico(row, None if served == "standard" else served)
    assert pico(row, None) < pico(row, "priority")  # the tier shows in the price
