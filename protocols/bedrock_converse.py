"""AWS Bedrock Converse (`POST …/model/{modelId}/converse` and `/converse-stream`):
request facts, JSON responses and event streams.

Converse is Bedrock's own protocol, one shape for every model it serves. A stream's events
(`messageStart`, `contentBlockStart`, `contentBlockDelta`, `contentBlockStop`,
`messageStop`, `metadata`, named by the event-stream `:event-type`) are folded into the
shape of a non-streamed Converse response and decoded by the same `decode_body`.
API reference: https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html
and https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html

Not responsible for the event-stream framing (`eventstream.py`), the stream's exception
messages (exchange.py makes them the record's error), routing, the model the path names
(the response names none: `routing.path_model`), or the finish-reason overrides all
protocols share.
"""

from __future__ import annotations

from typing import Any

from llmtap.protocols.canonical import Exchange, FinishReason, RequestFacts, ToolSpec, Usage
from llmtap.protocols.common import (
    ExchangeBudget,
    KeptText,
    api_error,
    count,
    first_count,
    has_counts,
    items,
    json_size,
    new_budget,
    stable_hash,
    sub,
    tier_word,
    tool_call_from_object,
    tool_call_from_text,
)
from llmtap.protocols.contract import NO_EXTRAS, Folded, FoldExtras

PROTOCOL = "bedrock.converse"

# https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html#API_runtime_Converse_ResponseSyntax
FINISH: dict[str, FinishReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
    "model_context_window_exceeded": "context_window",
    "malformed_model_output": "error",  # as Gemini's MALFORMED_RESPONSE
    "malformed_tool_use": "error",  # as Gemini's MALFORMED_FUNCTION_CALL
}


def convert_usage(raw: Any) -> Usage | None:
    """`inputTokens` excludes cache reads and writes (inputTokens + cacheRead + cacheWrite +
    outputTokens = totalTokens), so canonical input is their sum (SPEC §2). Older
    responses spell the cache counts `cache…InputTokenCount`. `cacheDetails` splits the
    writes by TTL. Bedrock reports no reasoning count."""
    if not has_counts(raw):
        return None
    read = first_count(raw, "cacheReadInputTokens", "cacheReadInputTokenCount") or 0
    write = first_count(raw, "cacheWriteInputTokens", "cacheWriteInputTokenCount") or 0
    by_ttl: dict[str, int] = {}
    for detail in items(raw, "cacheDetails"):
        if isinstance(detail, dict) and detail.get("ttl") in ("5m", "1h"):
            by_ttl[detail["ttl"]] = by_ttl.get(detail["ttl"], 0) + (count(detail.get("inputTokens")) or 0)
    return Usage(
        input_tokens=(count(raw.get("inputTokens")) or 0) + read + write,
        cache_read_tokens=read,
        cache_write_tokens=write,
        output_tokens=count(raw.get("outputTokens")) or 0,
        reasoning_tokens=None,
        cache_write_5m_tokens=by_ttl.get("5m"),
        cache_write_1h_tokens=by_ttl.get("1h"),
        total_tokens_reported=count(raw.get("totalTokens")),
    )


def decode_body(body: dict[str, Any], ex: Exchange, extras: FoldExtras = NO_EXTRAS) -> None:
    """Fill `ex` from a Converse response (or an error body `{"message": …}`)."""
    message = sub(sub(body, "output"), "message")
    if not message and "stopReason" not in body and isinstance(body.get("message", body.get("Message")), str):
        ex.error = api_error({"type": body.get("__type"), "message": body.get("message", body.get("Message"))})
    ex.usage_raw = body.get("usage")
    ex.usage = convert_usage(body.get("usage"))
    ex.service_tier = tier_word(sub(body, "serviceTier").get("type"))
    text = KeptText(new_budget())
    for position, block in enumerate(items(message, "content")):
        if not isinstance(block, dict):
            continue
        if isinstance(block.get("text"), str):
            text.add(block["text"])
        elif isinstance(block.get("citationsContent"), dict):  # generated text with its sources
            for part in items(block["citationsContent"], "content"):
                text.add(part.get("text") if isinstance(part, dict) else None)
        elif isinstance(block.get("reasoningContent"), dict):
            ex.reasoning_blocks += 1
        elif isinstance(block.get("toolUse"), dict):
            call = block["toolUse"]
            streamed = extras.raw_arguments.get(position)
            if streamed is not None:
                ex.tool_calls.append(tool_call_from_text(call.get("toolUseId"), call.get("name"), streamed))
            else:
                ex.tool_calls.append(tool_call_from_object(call.get("toolUseId"), call.get("name"), call.get("input")))
    ex.text = text.value()
    ex.text_truncated = text.truncated or extras.truncated
    raw_finish = body.get("stopReason")
    ex.finish_reason_raw = raw_finish if isinstance(raw_finish, str) else None
    ex.finish_reason = FINISH.get(raw_finish) if isinstance(raw_finish, str) else None


class Fold:
    """Folds ConverseStream events into a Converse response body."""

    def __init__(self, budget: ExchangeBudget) -> None:
        self.budget = budget
        self.role = "assistant"
        self.blocks: dict[int, dict[str, Any]] = {}  # contentBlockIndex -> block shell
        self.texts: dict[int, KeptText] = {}
        self.inputs: dict[int, KeptText] = {}
        self.tail: dict[str, Any] = {}  # stopReason, usage, metrics, … as the body has them
        self.complete = False
        self.saw_token = False

    def feed(self, event: Any, name: str = "") -> None:
        if not isinstance(event, dict):
            return
        if not name and len(event) == 1:  # an event in its union wrapper: {"messageStop": {…}}
            ((name, inner),) = event.items()
            event = inner if isinstance(inner, dict) else {}
        if name == "messageStart" and isinstance(event.get("role"), str):
            self.role = event["role"]
        elif name == "contentBlockStart":
            self._start(event)
        elif name == "contentBlockDelta":
            self._delta(event)
        elif name == "messageStop":
            self.complete = True
            for key in ("stopReason", "additionalModelResponseFields"):
                if key in event:
                    self.tail[key] = event[key]
        elif name == "metadata":
            for key in ("usage", "metrics", "trace", "performanceConfig", "serviceTier"):
                if key in event:
                    self.tail[key] = event[key]
        # contentBlockStop and unknown events carry nothing we keep.

    def end_marker(self) -> None:
        """Event streams have no `[DONE]`; nothing to do."""

    def _start(self, event: dict[str, Any]) -> None:
        index = count(event.get("contentBlockIndex"))
        tool = sub(sub(event, "start"), "toolUse")
        if index is None or not tool:
            return
        self.blocks[index] = {"toolUse": {"toolUseId": tool.get("toolUseId"), "name": tool.get("name")}}
        self.inputs[index] = KeptText(self.budget)
        self.saw_token = True

    def _delta(self, event: dict[str, Any]) -> None:
        index = count(event.get("contentBlockIndex"))
        delta = sub(event, "delta")
        if index is None:
            return
        if isinstance(delta.get("text"), str):
            self.blocks.setdefault(index, {"text": ""})
            self.texts.setdefault(index, KeptText(self.budget)).add(delta["text"])
            self.saw_token = self.saw_token or bool(delta["text"])
        elif "toolUse" in delta:
            self.blocks.setdefault(index, {"toolUse": {}})
            self.inputs.setdefault(index, KeptText(self.budget)).add(sub(delta, "toolUse").get("input"))
            self.saw_token = True
        elif "reasoningContent" in delta:
            self.blocks.setdefault(index, {"reasoningContent": {}})

    def result(self) -> Folded:
        content: list[dict[str, Any]] = []
        raw_inputs: dict[int, str] = {}
        truncated = False
        for index in sorted(self.blocks):
            block = dict(self.blocks[index])
            if index in self.texts:
                block["text"] = self.texts[index].value()
                truncated = truncated or self.texts[index].truncated
            if index in self.inputs:
                truncated = truncated or self.inputs[index].truncated
                raw_inputs[len(content)] = self.inputs[index].value()
            content.append(block)
        body: dict[str, Any] = {"output": {"message": {"role": self.role, "content": content}}, **self.tail}
        return Folded(body, FoldExtras(truncated=truncated, raw_arguments=raw_inputs))


def requested_model(body: dict[str, Any], path: str) -> str | None:
    """Converse bodies name no model: the path's `{modelId}` does (routing.path_model)."""
    return None


def requested_tier(body: dict[str, Any]) -> str | None:
    """`serviceTier: {type: priority|default|flex}`.
    https://docs.aws.amazon.com/bedrock/latest/userguide/service-tiers-inference.html"""
    return tier_word(sub(body, "serviceTier").get("type"))


def decode_request(body: dict[str, Any], path: str = "") -> RequestFacts:
    config = sub(body, "inferenceConfig")
    tools_config = sub(body, "toolConfig")
    facts = RequestFacts(
        model=None,
        stream=path.split("?", 1)[0].rstrip("/").endswith("/converse-stream"),
        max_tokens=count(config.get("maxTokens")),
        tool_choice=tools_config.get("toolChoice"),
        params={k: config[k] for k in ("temperature", "topP", "stopSequences") if k in config},
    )
    extra = sub(body, "additionalModelRequestFields")
    thinking: dict[str, Any] = {k: extra[k] for k in ("thinking", "reasoning_config", "reasoningConfig") if k in extra}
    facts.thinking = thinking or None
    tools = [t for t in items(tools_config, "tools") if isinstance(t, dict)]
    for tool in tools:
        spec = sub(tool, "toolSpec")
        if spec:
            schema = sub(spec, "inputSchema").get("json")
            facts.tools.append(
                ToolSpec(name=str(spec.get("name")), schema=schema if isinstance(schema, dict) else None)
            )
        elif sub(tool, "systemTool"):  # a tool Bedrock runs itself (Nova's web grounding)
            facts.server_tools.append(str(sub(tool, "systemTool").get("name") or "system_tool"))
        _mark(facts, tool)
    system = [s for s in items(body, "system") if isinstance(s, dict)]
    facts.system_chars = sum(json_size(s.get("text", "")) for s in system)
    for entry in system:
        _mark(facts, entry)
    for message in (m for m in items(body, "messages") if isinstance(m, dict)):
        role = str(message.get("role"))
        facts.messages_by_role[role] = facts.messages_by_role.get(role, 0) + 1
        blocks = [b for b in items(message, "content") if isinstance(b, dict)]
        _scan_blocks(facts, blocks)
        kept = [b for b in blocks if "cachePoint" not in b]  # moving a cache point keeps the prefix
        facts.message_hashes.append(stable_hash({"role": role, "content": kept}))
        facts.message_chars.append(json_size(kept))
    facts.tools_hash = stable_hash([t for t in tools if "cachePoint" not in t])
    facts.system_hash = stable_hash([s for s in system if "cachePoint" not in s])
    return facts


def _scan_blocks(facts: RequestFacts, blocks: list[dict[str, Any]]) -> None:
    for block in blocks:
        if _mark(facts, block):
            continue
        if "image" in block:
            facts.images += 1
        elif isinstance(block.get("toolResult"), dict):
            result_id = block["toolResult"].get("toolUseId")
            if isinstance(result_id, str):
                facts.tool_result_ids.append(result_id)
        elif isinstance(block.get("toolUse"), dict):
            call_id = block["toolUse"].get("toolUseId")
            if isinstance(call_id, str):
                facts.tool_call_ids.append(call_id)


def _mark(facts: RequestFacts, block: dict[str, Any]) -> bool:
    """A `cachePoint` block (in tools, system or a message) is a cache breakpoint; its TTL
    is 5 minutes unless it asks for `1h`.
    https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html"""
    if "cachePoint" not in block:
        return False
    facts.cache_breakpoints += 1
    ttl = sub(block, "cachePoint").get("ttl")
    if facts.cache_ttl != "1h":
        facts.cache_ttl = "1h" if ttl == "1h" else "5m"
    return True
