"""What a request asked for, as the GenAI conventions' request attributes: sampling
settings, stop sequences, candidate count, seed, the requested output type, the
reasoning level, the previous response it continues, and (OpenAI only) the API and the
requested service tier. Read from export's `request` object (`params`, `thinking`,
`stream`, `previous_response_id`: what the translators kept of the request body).

The values come from a client's body, so each is taken only when it has the type the
convention gives it and fits its bound (a finite number, a whole number OTLP's int64
holds, a short string, a few short stop sequences); anything else is left out, never
cut or coerced into another meaning.

Not responsible for the response's attributes or the usage (otlp_spans.py), nor for
what the translators keep of a body (protocols/*).
"""

from __future__ import annotations

import math
from typing import Any

# gen_ai.request.* from the body's own names, per protocol: Chat and Responses
# (https://platform.openai.com/docs/api-reference/chat/create,
# https://platform.openai.com/docs/api-reference/responses/create), Anthropic
# (https://docs.anthropic.com/en/api/messages), Gemini generationConfig
# (https://ai.google.dev/api/generate-content#generationconfig), Interactions
# generation_config (https://ai.google.dev/api/interactions-api), Bedrock
# inferenceConfig (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InferenceConfiguration.html)
DOUBLES = {
    "gen_ai.request.temperature": ("temperature",),
    "gen_ai.request.top_p": ("top_p", "topP"),
}
INTS = {
    "gen_ai.request.top_k": ("top_k", "topK"),
    "gen_ai.request.seed": ("seed",),
}
STOPS = ("stop_sequences", "stopSequences", "stop")  # Chat's `stop` may be one string
CHOICES = ("n", "candidateCount")  # set only when not 1, as the convention asks
# the reasoning effort as sent: Chat `reasoning_effort`, Responses `reasoning.effort`,
# Gemini `thinkingConfig.thinkingLevel`, Interactions `thinking_level`
LEVELS = ("reasoning_effort", "effort", "thinkingLevel", "thinking_level")
# requested output format -> gen_ai.output.type: Chat `response_format.type`, Responses
# `text.format.type`, Gemini `responseMimeType`
OUTPUT_TYPES = {
    "json_object": "json",
    "json_schema": "json",
    "text": "text",
    "application/json": "json",
    "text/plain": "text",
}
# openai.api.type (the OpenAI refinement's well-known values)
OPENAI_APIS = {"openai.chat": "chat_completions", "openai.responses": "responses"}

INT64 = 1 << 63
TEXT_MAX = 64  # a level, a tier: a word, not a paragraph
STOPS_MAX = 16  # Chat takes 4, Bedrock 4, Anthropic a few; more is no real request
STOP_CHARS_MAX = 256


def request_attributes(row: dict[str, Any], provider_name: str | None) -> dict[str, Any]:
    """`row`: an export row; `provider_name`: its gen_ai.provider.name."""
    request = row.get("request") or {}
    params: dict[str, Any] = request["params"] if isinstance(request.get("params"), dict) else {}
    out: dict[str, Any] = {}
    for attribute, names in DOUBLES.items():
        out[attribute] = _double(_first(params, names))
    for attribute, names in INTS.items():
        out[attribute] = _int(_first(params, names))
    out["gen_ai.request.stop_sequences"] = _stops(_first(params, STOPS))
    choices = _int(_first(params, CHOICES))
    out["gen_ai.request.choice.count"] = choices if choices != 1 else None
    out["gen_ai.output.type"] = _output_type(params)
    thinking: dict[str, Any] = request["thinking"] if isinstance(request.get("thinking"), dict) else {}
    out["gen_ai.request.reasoning.level"] = _text(_first(thinking, LEVELS))
    out["gen_ai.request.previous_response.id"] = _text(request.get("previous_response_id"), 255)
    stream = request.get("stream")
    if stream is True or (stream is None and row.get("streamed")):
        out["gen_ai.request.stream"] = True  # set if and only if the request streams
    if provider_name == "openai" and row.get("protocol") in OPENAI_APIS:
        out["openai.api.type"] = OPENAI_APIS[row["protocol"]]
        tier = _text(params.get("service_tier"))
        out["openai.request.service_tier"] = tier if tier != "auto" else None
    return out


def _first(values: dict[str, Any], names: tuple[str, ...]) -> Any:
    return next((values[name] for name in names if name in values), None)


def _double(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int) and abs(value) >= INT64:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _int(value: Any) -> int | None:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if -INT64 <= value < INT64 else None


def _text(value: Any, limit: int = TEXT_MAX) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= limit else None


def _stops(value: Any) -> list[str] | None:
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not 0 < len(stops) <= STOPS_MAX:
        return None
    if not all(isinstance(s, str) and len(s) <= STOP_CHARS_MAX for s in stops):
        return None
    return list(stops)


def _output_type(params: dict[str, Any]) -> str | None:
    chat, responses = params.get("response_format"), params.get("text")
    if isinstance(chat, dict):
        asked = chat.get("type")
    elif isinstance(responses, dict) and isinstance(responses.get("format"), dict):
        asked = responses["format"].get("type")
    else:
        asked = params.get("responseMimeType")
    return OUTPUT_TYPES.get(asked) if isinstance(asked, str) else None
