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

`retry-after` is the whole seconds until the period ends, at most RETRY_CAP (a day): the
budget may be raised before then, and SDKs cap what they wait anyway.

Not responsible for deciding who is over (budget_state.py) or for answering the flow
(addon/budget_gate.py).
"""

from __future__ import annotations

import json
import math
from datetime import datetime

from llmtap.telemetry.budget_config import Limit

RETRY_CAP = 86_400  # seconds
REFUSED_HEADER = "x-llmtap-refused"

Refusal = tuple[int, list[tuple[str, str]], bytes]  # status, headers, body


def retry_after(end: datetime, now: datetime) -> int:
    return max(1, min(RETRY_CAP, math.ceil((end - now).total_seconds())))


def message(limit: Limit, end: datetime) -> str:
    return (
        f"llmtap: {limit.label} is over its {limit.period} budget of ${limit.usd:.2f}; "
        f"the period ends {end:%Y-%m-%d %H:%M} UTC"
    )


def refusal(protocol: str | None, path: str, limit: Limit, end: datetime, now: datetime) -> Refusal:
    text = message(limit, end)
    headers = [("content-type", "application/json"), ("retry-after", str(retry_after(end, now)))]
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
