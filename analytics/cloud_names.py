"""Which names a cloud-served exchange is priced by (SPEC §5: what the provider bills).

Clouds resell other makers' models under their own ids and prices: Bedrock bills the
model id the request invoked (`us.anthropic.claude-3-5-haiku-20241022-v1:0`: a regional
inference profile is priced apart from a `global.` one), while the response names
Anthropic's id (`claude-3-5-haiku-20241022`, or a variant such as
`claude-3-sonnet-28k-20240229` that no price list knows). So a Bedrock row is looked up
by the path's model id first, then by the response's; Azure and Vertex rows by the
response's model, then the requested one. When the cloud's own list has neither, the
maker's list price stands in (`maker_model` turns a Bedrock id back into the maker's
name), and the cost detail says so.

Not responsible for the prices themselves or the lookups (analytics/pricing.py asks
genai-prices), nor for naming the provider (protocols/providers.py).
"""

from __future__ import annotations

import re

# genai-prices provider ids of the clouds whose lists hold other makers' models.
CLOUDS = frozenset(("aws", "azure", "google"))

# A Bedrock model id: an optional inference-profile geography, the maker, the model, a
# version suffix. https://docs.aws.amazon.com/bedrock/latest/userguide/models-supported.html
# and https://docs.aws.amazon.com/bedrock/latest/userguide/inference-profiles-support.html
_BEDROCK_ID = re.compile(
    r"(?:(?:us|us-gov|eu|apac|au|ca|jp|in|global)\.)?"
    r"(?:anthropic|openai|meta|mistral|amazon|cohere|ai21|deepseek|qwen|writer|google|moonshotai|zai)\."
    r"(?P<model>.+?)(?:-v\d+(?::\d+)?)?"
)


def names_to_try(provider: str | None, model: str, requested: str | None) -> list[str]:
    """The names a row's price is looked up by at its provider, in order, without repeats."""
    names = [requested, model] if provider == "aws" else [model, requested]
    if provider not in CLOUDS:
        names = [model]
    seen: list[str] = []
    for name in names:
        if name and name not in seen:
            seen.append(name)
    return seen


def maker_model(name: str) -> str:
    """The maker's name for a cloud's model id: `us.anthropic.claude-3-sonnet-20240229-v1:0`
    is `claude-3-sonnet-20240229`; any other name is returned as it is."""
    match = _BEDROCK_ID.fullmatch(name)
    return match.group("model") if match else name
