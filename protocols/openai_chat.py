"""OpenAI Chat Completions (`POST …/chat/completions`), for OpenAI and every compatible
server (vLLM, Ollama, OpenRouter, Gemini's and Anthropic's compat endpoints).

A stream of `chat.completion.chunk`s is folded into a `chat.completion` body and decoded by
the same `decode_body` as a JSON response. Only the first choice is decoded.
API reference: https://platform.openai.com/docs/api-reference/chat

Not responsible for framing (SSE, `[DONE]`), routing, or the finish-reason overrides all
protocols share (exchange.py applies them).
"""

from __future__ import annotations

from typing import Any

from llmtap.protocols.canonical import Exchange, FinishReason, RequestFacts, ServerToolCall, ToolCall, ToolSpec, Usage
from llmtap.protocols.common import (
    ExchangeBudget,
    KeptText,
    api_error,
    count,
    first_count,
    has_counts,
    instruction_chars,
    items,
    json_size,
    new_budget,
    positive_counts,
    stable_hash,
    sub,
    tier_word,
    tool_call_from_text,
    without_cache_markers,
)
from llmtap.protocols.contract import NO_EXTRAS, Folded, FoldExtras
from llmtap.protocols.who_asked import openai_user

PROTOCOL = "openai.chat"

# https://platform.openai.com/docs/api-reference/chat/object#chat/object-choices
FINISH: dict[str, FinishReason] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "content_filter",
    "error": "error",  # OpenRouter reports upstream failures this way
}
_SYSTEM_ROLES = ("system", "developer")
# Non-text parts of the usage details, under genai-prices' unit names (each a part of the
# totals). https://platform.openai.com/docs/api-reference/chat/object#chat/object-usage
_INPUT_MODALITIES = {"audio_tokens": "input_audio_tokens", "image_tokens": "input_image_tokens"}
_CACHED_MODALITIES = {"audio_tokens": "cache_audio_read_tokens", "image_tokens": "cache_image_read_tokens"}
_OUTPUT_MODALITIES = {"audio_tokens": "output_audio_tokens", "image_tokens": "output_image_tokens"}


def convert_usage(raw: Any) -> Usage | None:
    """`prompt_tokens` already includes cached tokens. DeepSeek reports cache hits as
    `prompt_cache_hit_tokens` instead of `prompt_tokens_details.cached_tokens`."""
    if not has_counts(raw):
        return None
    prompt = sub(raw, "prompt_tokens_details")
    completion = sub(raw, "completion_tokens_details")
    cached = count(prompt.get("cached_tokens"))
    if cached is None:
        cached = count(raw.get("prompt_cache_hit_tokens"))
    return Usage(
        input_tokens=count(raw.get("prompt_tokens")) or 0,
        cache_read_tokens=cached or 0,
        cache_write_tokens=count(prompt.get("cache_write_tokens")) or 0,
        output_tokens=count(raw.get("completion_tokens")) or 0,
        reasoning_tokens=count(completion.get("reasoning_tokens")),
        total_tokens_reported=count(raw.get("total_tokens")),
        modalities=modalities(prompt, completion),
    )


def modalities(input_details: dict[str, Any], output_details: dict[str, Any]) -> dict[str, int]:
    """The audio and image counts of OpenAI's usage details (Chat's `prompt_tokens_details`
    / `completion_tokens_details`, Responses' `input_tokens_details` /
    `output_tokens_details`), cached ones from `cached_tokens_details` where it is given."""
    cached = sub(input_details, "cached_tokens_details")
    return positive_counts(
        [(unit, input_details.get(key)) for key, unit in _INPUT_MODALITIES.items()]
        + [(unit, cached.get(key)) for key, unit in _CACHED_MODALITIES.items()]
        + [(unit, output_details.get(key)) for key, unit in _OUTPUT_MODALITIES.items()]
    )


def decode_body(body: dict[str, Any], ex: Exchange, extras: FoldExtras = NO_EXTRAS) -> None:
    if "error" in body and body["error"] is not None:
        ex.error = api_error(body["error"])
    if isinstance(body.get("id"), str):
        ex.response_id = body["id"]
    if isinstance(body.get("model"), str) and body["model"]:
        ex.model = body["model"]
    ex.usage_raw = body.get("usage")
    ex.usage = convert_usage(body.get("usage"))
    ex.service_tier = tier_word(body.get("service_tier"))  # the tier that served it
    choices = [c for c in items(body, "choices") if isinstance(c, dict)]
    choice = min(choices, key=lambda c: count(c.get("index")) or 0) if choices else {}
    message = sub(choice, "message")
    text = KeptText(new_budget())
    content = message.get("content")
    if isinstance(content, list):  # some compatible servers send content parts
        for part in content:
            if isinstance(part, dict) and part.get("type") in ("text", "output_text"):
                text.add(part.get("text"))
    else:
        text.add(content)
    ex.text = text.value()
    ex.text_truncated = text.truncated or extras.truncated
    if message.get("reasoning_content") or message.get("reasoning"):
        ex.reasoning_blocks = 1  # DeepSeek, vLLM, OpenRouter expose reasoning text
    ex.tool_calls.extend(_tool_calls(message))
    for annotation in items(message, "annotations"):
        if isinstance(annotation, dict) and annotation.get("type") == "url_citation":
            ex.server_tool_calls.append(ServerToolCall(type="web_search"))
            break
    refusal = message.get("refusal")
    ex.refusal = refusal if isinstance(refusal, str) and refusal else None
    raw_finish = choice.get("finish_reason")
    ex.finish_reason_raw = raw_finish if isinstance(raw_finish, str) else None
    ex.finish_reason = FINISH.get(raw_finish) if isinstance(raw_finish, str) else None
    # A `message.refusal` on a finished choice is `refusal`, unless the stop holds tool
    # calls: that one the shared override makes `tool_use`.
    stopped = ex.finish_reason is None or (ex.finish_reason == "end_turn" and not ex.tool_calls)
    if ex.refusal and stopped and raw_finish is not None:
        ex.finish_reason = "refusal"


def _custom_call(call_id: Any, name: Any, raw: str) -> ToolCall:
    """A call of a `custom` tool: its input is free text, checked against the tool's
    declared format (toolcheck), never parsed as JSON."""
    return ToolCall(
        id=call_id if isinstance(call_id, str) else None,
        name=name if isinstance(name, str) else None,
        arguments=None,
        arguments_raw=raw,
        valid_json=False,
        kind="custom",
    )


def _tool_calls(message: dict[str, Any]) -> list[ToolCall]:
    calls = []
    for call in items(message, "tool_calls"):
        if not isinstance(call, dict):
            continue
        function = sub(call, "function")
        if call.get("type", "function") not in ("function", None) and not function:
            custom = sub(call, "custom")  # custom tools take free text, not JSON
            calls.append(_custom_call(call.get("id"), custom.get("name"), _text(custom.get("input"))))
            continue
        calls.append(tool_call_from_text(call.get("id"), function.get("name"), _text(function.get("arguments"))))
    legacy = sub(message, "function_call")  # the pre-tools `functions` API
    if legacy:
        calls.append(tool_call_from_text(None, legacy.get("name"), _text(legacy.get("arguments"))))
    return calls


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


class _Name:
    """A call's name as its deltas bring it: OpenAI sends it once, some servers repeat it
    whole in every delta, others stream it in pieces, which are joined. Kept text, so its
    length is the exchange's business, and a repeat is told apart without joining."""

    __slots__ = ("text", "length")

    def __init__(self, budget: ExchangeBudget) -> None:
        self.text = KeptText(budget)
        self.length = 0

    def add(self, piece: Any) -> None:
        if not isinstance(piece, str) or not piece:
            return
        if len(piece) == self.length and piece == self.text.value():
            return  # the whole name again
        self.text.add(piece)
        self.length += len(piece)

    def value(self) -> str | None:
        return self.text.value() if self.length else None


class Fold:
    """Folds `chat.completion.chunk`s into one `chat.completion`."""

    def __init__(self, budget: ExchangeBudget) -> None:
        self.head: dict[str, Any] = {}
        self.budget = budget
        self.content = KeptText(budget)
        self.refusal = KeptText(budget)
        self.reasoning = False
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish: Any = None
        self.usage: Any = None
        self.error: Any = None
        self.complete = False
        self.saw_token = False

    def feed(self, chunk: Any, name: str = "") -> None:
        if not isinstance(chunk, dict):
            return
        if chunk.get("error") is not None:
            self.error = chunk["error"]
        for key in ("id", "model", "created", "system_fingerprint", "service_tier"):
            if chunk.get(key) and key not in self.head:
                self.head[key] = chunk[key]
        # Usage rides a final chunk; a later `usage: null` must not erase it.
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        for choice in items(chunk, "choices"):
            if isinstance(choice, dict) and (count(choice.get("index")) or 0) == 0:
                self._choice(choice)

    def _choice(self, choice: dict[str, Any]) -> None:
        delta = sub(choice, "delta") or sub(choice, "message")
        content = delta.get("content")
        if isinstance(content, str) and content:
            self.content.add(content)
            self.saw_token = True
        if isinstance(delta.get("refusal"), str):
            self.refusal.add(delta["refusal"])
        if delta.get("reasoning_content") or delta.get("reasoning"):
            self.reasoning = True
        for position, call in enumerate(items(delta, "tool_calls")):
            if isinstance(call, dict):
                self._tool_delta(call, position)
        legacy = sub(delta, "function_call")
        if legacy:
            self._tool_delta({"index": -1, "function": legacy}, -1)
        if choice.get("finish_reason") is not None:
            self.finish = choice["finish_reason"]
            self.complete = True

    def _tool_delta(self, call: dict[str, Any], position: int) -> None:
        index = count(call.get("index"))
        index = position if index is None else index
        slot = self.calls.get(index)
        if slot is None:
            if not self.budget.open_call():
                return  # past the exchange's bound on calls: counted, not kept
            slot = self.calls[index] = {"id": None, "name": _Name(self.budget), "args": KeptText(self.budget)}
            slot["custom"] = False
        if isinstance(call.get("id"), str) and call["id"]:
            slot["id"] = call["id"]
        function = sub(call, "function")
        if call.get("type") == "custom" or (not function and sub(call, "custom")):
            # a custom tool's call streams its free-text input under `custom`
            slot["custom"] = True
            function = {"name": sub(call, "custom").get("name"), "arguments": sub(call, "custom").get("input")}
        slot["name"].add(function.get("name"))
        slot["args"].add(function.get("arguments"))
        self.saw_token = True

    def end_marker(self) -> None:
        self.complete = True

    def result(self) -> Folded:
        message: dict[str, Any] = {"role": "assistant", "content": self.content.value() or None}
        if self.refusal.value():
            message["refusal"] = self.refusal.value()
        if self.reasoning:
            message["reasoning_content"] = True
        calls = []
        truncated = self.content.truncated
        for index in sorted(self.calls):
            slot = self.calls[index]
            truncated = truncated or slot["args"].truncated
            name = slot["name"].value()
            call = {
                "id": slot["id"],
                "type": "function",
                "function": {"name": name, "arguments": slot["args"].value()},
            }
            if slot.get("custom"):
                call = {
                    "id": slot["id"],
                    "type": "custom",
                    "custom": {"name": name, "input": slot["args"].value()},
                }
            if index == -1:
                message["function_call"] = call["function"]
            else:
                calls.append(call)
        if calls:
            message["tool_calls"] = calls
        body: dict[str, Any] = dict(self.head)
        body["choices"] = [{"index": 0, "message": message, "finish_reason": self.finish}]
        body["usage"] = self.usage
        if self.error is not None:
            body["error"] = self.error
        return Folded(body, FoldExtras(truncated=truncated))


def requested_model(body: dict[str, Any], path: str) -> str | None:
    return body.get("model") if isinstance(body.get("model"), str) else None


def requested_tier(body: dict[str, Any]) -> str | None:
    """https://platform.openai.com/docs/api-reference/chat/create#chat-create-service_tier"""
    return tier_word(body.get("service_tier"))


def decode_request(body: dict[str, Any], path: str = "") -> RequestFacts:
    facts = RequestFacts(
        model=requested_model(body, path),
        stream=body.get("stream") if isinstance(body.get("stream"), bool) else None,
        max_tokens=first_count(body, "max_completion_tokens", "max_tokens"),
        tool_choice=body.get("tool_choice", body.get("function_call")),
        end_user=openai_user(body),
        prompt_cache_key=body.get("prompt_cache_key") if isinstance(body.get("prompt_cache_key"), str) else None,
        params={
            k: body[k]
            for k in ("temperature", "top_p", "stop", "n", "seed", "stream_options", "service_tier", "response_format")
            if k in body
        },
    )
    thinking: dict[str, Any] = {k: body[k] for k in ("reasoning_effort", "reasoning", "thinking") if k in body}
    facts.thinking = thinking or None
    tools = [t for t in items(body, "tools") if isinstance(t, dict)]
    for tool in tools:
        function = sub(tool, "function")
        if function:
            schema = function.get("parameters") if isinstance(function.get("parameters"), dict) else None
            facts.tools.append(ToolSpec(name=str(function.get("name")), schema=schema))
        else:
            kind = str(tool.get("type") or "function")
            name = sub(tool, kind).get("name") or tool.get("name") or kind
            # a custom tool's declared format (text, or a grammar) is what its calls are checked against
            declared = sub(tool, kind).get("format") if kind == "custom" else None
            schema = declared if isinstance(declared, dict) else None
            facts.tools.append(ToolSpec(name=str(name), schema=schema, type=kind))
    for function in items(body, "functions"):
        if isinstance(function, dict):
            schema = function.get("parameters") if isinstance(function.get("parameters"), dict) else None
            facts.tools.append(ToolSpec(name=str(function.get("name")), schema=schema))
    if "web_search_options" in body:
        facts.server_tools.append("web_search")
    messages = [m for m in items(body, "messages") if isinstance(m, dict)]
    lead = 0
    while lead < len(messages) and messages[lead].get("role") in _SYSTEM_ROLES:
        lead += 1
    # Every system / developer message is an instruction (SPEC §2 `request`): the leading
    # ones and any later one count in the system size and the system hash.
    system = [m for m in messages if m.get("role") in _SYSTEM_ROLES]
    facts.system_chars = sum(instruction_chars(m.get("content")) for m in system)
    for message in messages:
        _scan_message(facts, message)
    for message in messages[lead:]:
        facts.message_hashes.append(stable_hash(without_cache_markers(message)))
        facts.message_chars.append(json_size(message.get("content") or ""))
    facts.tools_hash = stable_hash(without_cache_markers(tools + items(body, "functions")))
    facts.system_hash = stable_hash(without_cache_markers(system))
    return facts


def _scan_message(facts: RequestFacts, message: dict[str, Any]) -> None:
    role = str(message.get("role"))
    facts.messages_by_role[role] = facts.messages_by_role.get(role, 0) + 1
    if role == "tool" and isinstance(message.get("tool_call_id"), str):
        facts.tool_result_ids.append(message["tool_call_id"])
    for call in items(message, "tool_calls"):
        if isinstance(call, dict) and isinstance(call.get("id"), str):
            facts.tool_call_ids.append(call["id"])
    content = message.get("content")
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        if part.get("type") in ("image_url", "input_image", "image"):
            facts.images += 1
        marker = part.get("cache_control")
        if isinstance(marker, dict):  # OpenRouter and Anthropic-compatible servers
            facts.cache_breakpoints += 1
            if facts.cache_ttl != "1h":
                facts.cache_ttl = marker.get("ttl") if marker.get("ttl") in ("5m", "1h") else "5m"
