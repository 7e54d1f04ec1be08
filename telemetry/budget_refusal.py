"""The refusal of a request over budget, in its protocol's own error shape, with HTTP 429
and `retry-after`, so an SDK raises the error it raises for any rate limit.

- Anthropic: `{"type": "error", "error": {"type": "rate_limit_error", ...}}`
  (https://docs.anthropic.com/en/api/errors)
- OpenAI: `{"error": {"type": "insufficient_quota", "code": "insufficient_quota", ...}}`
  (https://platform.openai.com/docs/guides/error-codes)
- Gemini: `{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", ...}}`
  (https://ai.google.dev/gemini-api/docs/troubleshooting)
- Bedrock: `{"message": ...}` with `x-amzn-ErrorType: ThrottlingException`
  (https://docs.aws.amazon.com/bedrock/latest/APIReference/CommonErrors.html)

In Responses WebSocket mode the refusal of a `response.create` is an `error` event on the
socket, `{"type": "error", "status": 429, "error": {...}}`, the shape OpenAI sends for a
request it refuses in that mode (the SDK's `ResponseWsError`), the socket left open.

`retry-after` is the whole seconds until the period ends, at most RETRY_CAP (a day): the
budget may be raised before then, and SDKs cap what they wait anyway. A request refused
only because of spend still in flight is told `IN_FLIGHT_RETRY` seconds: that spend is
settled, and its estimate released, within seconds.

Not responsible for deciding who is over (budget_state.py) or for answering the flow
(addon/budget_gate.py).
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from decimal import Decimal
from typing import Any

from llmtap.telemetry.budget_config import Limit

RETRY_CAP = 86_400  # seconds
IN_FLIGHT_RETRY = 5  # seconds
REFUSED_HEADER = "x-llmtap-refused"
_MICRO = Decimal("0.000001")

Refusal = tuple[int, list[tuple[str, str]], bytes]  # status, headers, body


def retry_after(end: datetime, now: datetime) -> int:
    return max(1, min(RETRY_CAP, math.ceil((end - now).total_seconds())))


def _usd(amount: Decimal) -> str:
    return f"${amount:.2f}" if amount >= 1 else f"${amount.quantize(_MICRO).normalize():f}"


def message(limit: Limit, end: datetime) -> str:
    return (
        f"llmtap: {limit.label} is over its {limit.period} budget of {_usd(limit.usd)}; "
        f"the period ends {end:%Y-%m-%d %H:%M} UTC"
    )


def short_message(limit: Limit, left_usd: Decimal, in_flight_usd: Decimal, estimate_usd: Decimal) -> str:
    """A request whose estimate the budget's rest (less what is in flight) cannot hold."""
    return (
        f"llmtap: {limit.label} has {_usd(max(left_usd, Decimal(0)))} of its {limit.period} budget of "
        f"{_usd(limit.usd)} left ({_usd(in_flight_usd)} of it held by requests in flight), "
        f"less than this request may cost ({_usd(estimate_usd)})"
    )


def refusal(
    protocol: str | None, path: str, limit: Limit, end: datetime, now: datetime, text: str | None = None,
    retry_s: int | None = None,
) -> Refusal:  # fmt: skip
    """`text` and `retry_s` default to the limit being over until the period ends."""
    text = text or message(limit, end)
    wait = retry_after(end, now) if retry_s is None else retry_s
    headers = [("content-type", "application/json"), ("retry-after", str(wait))]
    headers.append((REFUSED_HEADER, "budget"))
    family = (protocol or "").partition(".")[0]
    body: dict[str, object]
    if family == "bedrock" or "/model/" in path and ("/invoke" in path or "/converse" in path):
        headers.append(("x-amzn-errortype", "ThrottlingException"))
        body = {"message": text}
    elif family == "anthropic":
        body = {"type": "error", "error": {"type": "rate_limit_error", "message": text}}
    elif family == "gemini":
        body = {"error": {"code": 429, "message": text, "status": "RESOURCE_EXHAUSTED"}}
    else:  # openai.chat, openai.responses, and whatever speaks their dialect
        body = {"error": {"message": text, "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}}
    return 429, headers, json.dumps(body).encode()


def websocket_refusal(text: str, retry_s: int, stream_id: Any = None) -> bytes:
    """The `error` event that answers a refused `response.create` in WebSocket mode
    (https://platform.openai.com/docs/guides/websocket-mode): the HTTP error's body under
    `error`, its status beside it, and the create's `stream_id` when it named one."""
    event: dict[str, Any] = {
        "type": "error",
        "status": 429,
        "error": {
            "type": "insufficient_quota",
            "code": "insufficient_quota",
            "message": text,
            "param": None,
            "headers": {"retry-after": str(retry_s), REFUSED_HEADER: "budget"},
        },
    }
    if isinstance(stream_id, str):
        event["stream_id"] = stream_id
    return json.dumps(event).encode()
