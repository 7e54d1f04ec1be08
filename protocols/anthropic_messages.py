"""Anthropic Messages (`POST …/v1/messages`): request facts, JSON responses and SSE streams.

A stream is folded into the shape of a non-streamed Message, then decoded by the same
`decode_body` a JSON response goes through, so the two cannot disagree. The streamed tool
input text travels beside the folded Message, in its `FoldExtras`.
API reference: https://docs.anthropic.com/en/api/messages and
https://docs.anthropic.com/en/docs/build-with-claude/streaming

Not responsible for framing (SSE parsing, content decoding), routing, or the finish-reason
overrides all protocols share (exchange.py applies them).
"""

from __future__ import annotations

import copy
from typing import Any

from llmtap.protocols.canonical import ApiError, Exchange, FinishReason, RequestFacts, ServerToolCall, ToolSpec, Usage
from llmtap.protocols.common import (
    ExchangeBudget,
    KeptText,
    api_error,
    count,
    has_counts,
    instruction_chars,
    items,
    json_size,
    new_budget,
    served_word,
    stable_hash,
    sub,
    tier_word,
    tool_call_from_object,
    tool_call_from_text,
    without_cache_markers,
)
from llmtap.protocols.contract import NO_EXTRAS, Folded, FoldExtras
from llmtap.protocols.who_asked import anthropic_user

PROTOCOL = "anthropic.messages"

# https://docs.anthropic.com/en/api/messages#response-stop-reason; `compaction`: the server
# compacted the context and paused the turn for the client to continue
# (https://platform.claude.com/docs/en/build-with-claude/compaction, pause_after_compaction).
FINISH: dict[str, FinishReason] = {
    "end_turn": "end_turn",
    "max_tokens": "max_tokens",
    "tool_use": "tool_use",
    "stop_sequence": "stop_sequence",
    "refusal": "refusal",
    "pause_turn": "pause_turn",
    "model_context_window_exceeded": "context_window",
    "compaction": "pause_turn",  # the server compacted the context; the client continues
}

# Request tool types (by prefix: `web_search_20250305`) of the tools Anthropic runs itself;
# their calls arrive as `server_tool_use` (or `mcp_tool_use`) blocks.
# https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/overview#server-tools
_SERVER_TOOL_PREFIXES = (
    "web_search",
    "web_fetch",
    "code_execution",
    "mcp",  # `mcp_toolset`
    "tool_search",
    "advisor",
)
# Request tool types (by prefix) the client runs: its own tools (`custom`) and the
# Anthropic-defined ones, whose calls arrive as `tool_use` blocks. Any type of neither
# table is taken as the client's too.
# https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/overview#client-tools
_CLIENT_TOOL_PREFIXES = (
    "custom",
    "bash",
    "text_editor",
    "computer",  # `computer_20250124`, `computer_toolset_20260801`
    "browser",  # `browser_toolset_20260801`
    "memory",
)
# `server_tool_use.name`s, by the request tool (prefix) that brings them: the code
# execution tool runs bash and a text editor as tools of its own.
# https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/code-execution-tool
_SERVER_TOOL_NAMES = {
    "web_search": "web_search",
    "web_fetch": "web_fetch",
    "code_execution": "code_execution",
    "bash_code_execution": "code_execution",
    "text_editor_code_execution": "code_execution",
    "tool_search_tool_regex": "tool_search",
    "tool_search_tool_bm25": "tool_search",
    "advisor": "advisor",
}
_REASONING_BLOCKS = ("thinking", "redacted_thinking")
# A system turn inside `messages` (newer models accept them after the first turn; Claude
# Code sends one): an instruction, counted in the system size (SPEC §2 `request`). It stays
# a message of its role for the prefix hashes, so `system_hash` is the top-level `system`'s.
_SYSTEM_TURN = "system"
_SERVER_CALL_BLOCKS = ("server_tool_use", "mcp_tool_use")
# Response content blocks that carry no canonical field: the results of server tools
# (their calls are counted), compaction summaries, fallback markers, listings.
# https://docs.anthropic.com/en/api/messages#response-content
_UNCOUNTED_BLOCKS = (
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result",
    "tool_search_tool_result",
    "mcp_tool_result",
    "mcp_tool_listing",
    "advisor_tool_result",
    "container_upload",
    "compaction",
    "fallback",
)
# `usage.iterations` entry types (SPEC §2 "Canonical usage"); others are ignored.
_EXECUTOR_ITERATIONS = ("compaction", "message")
_ADVISOR_ITERATION = "advisor_message"
_FALLBACK_ITERATION = "fallback_message"
# `usage.server_tool_use` counts billed per use, by canonical kind.
# https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/web-search-tool#usage
_SERVER_TOOL_COUNTS = {
    "web_search_requests": "web_search",
    "web_fetch_requests": "web_fetch",
}


def convert_usage(raw: Any) -> Usage | None:
    """Anthropic's `input_tokens` excludes cache reads and writes; canonical input is all
    of it. https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching

    `usage.iterations` (SPEC §2): the top-level counts leave a server-side compaction out,
    so when executor iterations (`compaction`, `message`) are listed, input and output are
    their sums (cache counts stay the top level's); an `advisor_message` is a sub-usage of
    its own model; when a `fallback_message` served the turn the top-level counts stand.
    https://platform.claude.com/docs/en/build-with-claude/compaction"""
    if not has_counts(raw):
        return None
    write = count(raw.get("cache_creation_input_tokens")) or 0
    read = count(raw.get("cache_read_input_tokens")) or 0
    fresh = count(raw.get("input_tokens")) or 0
    output = count(raw.get("output_tokens")) or 0
    iterations = [entry for entry in items(raw, "iterations") if isinstance(entry, dict)]
    executors = [entry for entry in iterations if entry.get("type") in _EXECUTOR_ITERATIONS]
    if executors and not any(entry.get("type") == _FALLBACK_ITERATION for entry in iterations):
        fresh = sum(count(entry.get("input_tokens")) or 0 for entry in executors)
        output = sum(count(entry.get("output_tokens")) or 0 for entry in executors)
    split = sub(raw, "cache_creation")
    return Usage(
        input_tokens=fresh + write + read,
        cache_read_tokens=read,
        cache_write_tokens=write,
        output_tokens=output,
        reasoning_tokens=count(sub(raw, "output_tokens_details").get("thinking_tokens")),
        cache_write_5m_tokens=count(split.get("ephemeral_5m_input_tokens")),
        cache_write_1h_tokens=count(split.get("ephemeral_1h_input_tokens")),
        sub_usages=[_advisor_usage(entry) for entry in iterations if entry.get("type") == _ADVISOR_ITERATION],
    )


def _advisor_usage(entry: dict[str, Any]) -> dict[str, Any]:
    """An `advisor_message` iteration as a sub-usage, input counted as canonical input is."""
    write = count(entry.get("cache_creation_input_tokens")) or 0
    read = count(entry.get("cache_read_input_tokens")) or 0
    return {
        "kind": "advisor",
        "model": entry.get("model") if isinstance(entry.get("model"), str) else None,
        "input_tokens": (count(entry.get("input_tokens")) or 0) + write + read,
        "cache_read_tokens": read,
        "cache_write_tokens": write,
        "output_tokens": count(entry.get("output_tokens")) or 0,
    }


def _fallback_model(raw: Any) -> str | None:
    """The model of the `fallback_message` iteration that served the turn, if one did."""
    model = None
    for entry in items(raw, "iterations"):
        if isinstance(entry, dict) and entry.get("type") == _FALLBACK_ITERATION and isinstance(entry.get("model"), str):
            model = entry["model"]
    return model


def _served(raw: Any, ex: Exchange) -> None:
    """What the usage says was served: tier, region, speed, and per-use server tools.
    https://docs.anthropic.com/en/api/messages (usage.service_tier, inference_geo, speed,
    server_tool_use)"""
    usage = raw if isinstance(raw, dict) else {}
    ex.service_tier = tier_word(usage.get("service_tier"))
    ex.inference_geo = served_word(usage.get("inference_geo"))
    ex.speed = served_word(usage.get("speed"))
    tools = sub(usage, "server_tool_use")
    for field_name, kind in _SERVER_TOOL_COUNTS.items():
        uses = count(tools.get(field_name)) or 0
        if uses > 0:
            ex.server_tool_uses[kind] = uses


def decode_body(body: dict[str, Any], ex: Exchange, extras: FoldExtras = NO_EXTRAS) -> None:
    """Fill `ex` from a Message (or an error body), streamed-and-folded or not."""
    if body.get("type") == "error" or "error" in body:
        ex.error = _error(body.get("error"))
    elif "content" not in body and isinstance(body.get("message"), str):
        # Bedrock's error body names no type (its `x-amzn-ErrorType` header does):
        # https://docs.aws.amazon.com/bedrock/latest/APIReference/CommonErrors.html
        ex.error = api_error({"message": body["message"]})
    ex.response_id = body.get("id") if isinstance(body.get("id"), str) else None
    if isinstance(body.get("model"), str):
        ex.model = body["model"]
    raw_usage = body.get("usage")
    ex.usage_raw = raw_usage
    ex.usage = convert_usage(raw_usage)
    ex.model = _fallback_model(raw_usage) or ex.model
    _served(raw_usage, ex)
    text = KeptText(new_budget())
    for position, block in enumerate(items(body, "content")):
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            text.add(block.get("text"))
        elif kind in _REASONING_BLOCKS:
            ex.reasoning_blocks += 1
        elif kind == "tool_use":
            streamed = extras.raw_arguments.get(position)
            if streamed is not None:
                call = tool_call_from_text(block.get("id"), block.get("name"), streamed)
            else:
                call = tool_call_from_object(block.get("id"), block.get("name"), block.get("input"))
            ex.tool_calls.append(call)
        elif kind in _SERVER_CALL_BLOCKS:
            ex.server_tool_calls.append(ServerToolCall(type=kind, id=block.get("id"), name=block.get("name")))
    ex.text = text.value()
    ex.text_truncated = text.truncated or extras.truncated
    raw_finish = body.get("stop_reason")
    ex.finish_reason_raw = raw_finish if isinstance(raw_finish, str) else None
    ex.finish_reason = FINISH.get(raw_finish) if isinstance(raw_finish, str) else None


def _error(error: Any) -> ApiError | None:
    """Anthropic's `{type, message}`; on Vertex AI a Google error `{code, message, status}`,
    whose `status` (`RESOURCE_EXHAUSTED`) is its type."""
    found = api_error(error)
    if found is not None and found.type is None and isinstance(error, dict) and isinstance(error.get("status"), str):
        found.type = error["status"]
    return found


class Fold:
    """Folds stream events into a Message body. https://docs.anthropic.com/en/docs/build-with-claude/streaming"""

    def __init__(self, budget: ExchangeBudget) -> None:
        self.message: dict[str, Any] = {}
        self.blocks: dict[int, dict[str, Any]] = {}
        self.texts: dict[int, KeptText] = {}
        self.inputs: dict[int, KeptText] = {}
        self.budget = budget
        self.complete = False
        self.saw_token = False

    def feed(self, event: Any, name: str = "") -> None:
        if not isinstance(event, dict):
            return
        kind = event.get("type") or name
        if kind == "message_start":
            message = event.get("message")
            if isinstance(message, dict):
                self.message = {k: v for k, v in message.items() if k != "content"}
                self.message["usage"] = dict(sub(message, "usage"))
        elif kind == "content_block_start":
            self._start(event)
        elif kind == "content_block_delta":
            self._delta(event)
        elif kind == "message_delta":
            delta = sub(event, "delta")
            for key in ("stop_reason", "stop_sequence"):
                if key in delta:
                    self.message[key] = delta[key]
            # message_delta usage is cumulative and final for every field it carries.
            usage = self.message.setdefault("usage", {})
            usage.update(sub(event, "usage"))
        elif kind == "message_stop":
            self.complete = True
        elif kind == "error":
            self.message["error"] = event.get("error")
        # ping and unknown event types carry nothing we keep.

    def end_marker(self) -> None:
        """Anthropic streams have no `[DONE]`; nothing to do."""

    def _start(self, event: dict[str, Any]) -> None:
        index = count(event.get("index"))
        block = event.get("content_block")
        if index is None or not isinstance(block, dict):
            return
        self.blocks[index] = copy.copy(block)
        if block.get("type") == "text":
            self.texts[index] = KeptText(self.budget)
            self.texts[index].add(block.get("text"))
        elif block.get("type") in ("tool_use", *_SERVER_CALL_BLOCKS):
            self.inputs[index] = KeptText(self.budget)
            self.saw_token = self.saw_token or block.get("type") == "tool_use"

    def _delta(self, event: dict[str, Any]) -> None:
        index = count(event.get("index"))
        delta = sub(event, "delta")
        kind = delta.get("type")
        if index is None:
            return
        if kind == "text_delta":
            self.texts.setdefault(index, KeptText(self.budget)).add(delta.get("text"))
            self.blocks.setdefault(index, {"type": "text"})
            self.saw_token = True
        elif kind == "input_json_delta":
            self.inputs.setdefault(index, KeptText(self.budget)).add(delta.get("partial_json"))
            self.blocks.setdefault(index, {"type": "tool_use"})
            self.saw_token = True

    def result(self) -> Folded:
        content: list[dict[str, Any]] = []
        raw_inputs: dict[int, str] = {}
        truncated = False
        for index in sorted(self.blocks):
            block = self.blocks[index]
            if index in self.texts:
                block["text"] = self.texts[index].value()
                truncated = truncated or self.texts[index].truncated
            if index in self.inputs:
                raw = self.inputs[index].value()
                truncated = truncated or self.inputs[index].truncated
                # With no deltas (or only ""), the start block's `input` stands.
                if raw.strip():
                    raw_inputs[len(content)] = raw
            content.append(block)
        body = dict(self.message)
        body["content"] = content
        return Folded(body, FoldExtras(truncated=truncated, raw_arguments=raw_inputs))


def requested_model(body: dict[str, Any], path: str) -> str | None:
    return body.get("model") if isinstance(body.get("model"), str) else None


def requested_tier(body: dict[str, Any]) -> str | None:
    """The request's `service_tier`: `auto` lets Anthropic choose (no tier until the
    response says), `standard_only` asks for the standard tier.
    https://docs.anthropic.com/en/api/service-tiers"""
    tier = tier_word(body.get("service_tier"))
    return "standard" if tier == "standard_only" else tier


def decode_request(body: dict[str, Any], path: str = "") -> RequestFacts:
    messages = [m for m in items(body, "messages") if isinstance(m, dict)]
    facts = RequestFacts(
        model=body.get("model") if isinstance(body.get("model"), str) else None,
        stream=body.get("stream") if isinstance(body.get("stream"), bool) else None,
        max_tokens=count(body.get("max_tokens")),
        tool_choice=body.get("tool_choice"),
        thinking=body.get("thinking") if isinstance(body.get("thinking"), dict) else None,
        end_user=anthropic_user(body),
        params={
            k: body[k]
            for k in ("temperature", "top_p", "top_k", "stop_sequences", "service_tier", "speed", "inference_geo")
            if k in body
        },
    )
    for tool in items(body, "tools"):
        if not isinstance(tool, dict):
            continue
        kind = str(tool.get("type") or "custom")
        name = str(tool.get("name") or kind)
        if kind.startswith(_SERVER_TOOL_PREFIXES):
            facts.server_tools.append(name)
        else:
            schema = tool.get("input_schema") if isinstance(tool.get("input_schema"), dict) else None
            facts.tools.append(ToolSpec(name=name, schema=schema, type=kind))
    system = body.get("system")
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    system = system if isinstance(system, list) else []
    facts.system_chars = sum(json_size(b.get("text", "")) for b in system if isinstance(b, dict))
    _scan_markers(facts, [items(body, "tools"), system, body])
    for message in messages:
        role = str(message.get("role"))
        if role == _SYSTEM_TURN:
            facts.system_chars += instruction_chars(message.get("content"))
        facts.messages_by_role[role] = facts.messages_by_role.get(role, 0) + 1
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        normalized = {"role": role, "content": without_cache_markers(blocks)}
        facts.message_hashes.append(stable_hash(normalized))
        facts.message_chars.append(json_size(blocks))
        _scan_blocks(facts, blocks)
    facts.tools_hash = stable_hash(without_cache_markers(body.get("tools") or []))
    facts.system_hash = stable_hash(without_cache_markers(system))
    return facts


def _scan_blocks(facts: RequestFacts, blocks: Any) -> None:
    # Depth-first with a stack of its own: tool results may nest deeper than Python recurses.
    pending = list(reversed(blocks)) if isinstance(blocks, list) else []
    while pending:
        block = pending.pop()
        if not isinstance(block, dict):
            continue
        _mark(facts, block.get("cache_control"))
        kind = block.get("type")
        if kind == "image":
            facts.images += 1
        elif kind == "tool_result" and isinstance(block.get("tool_use_id"), str):
            facts.tool_result_ids.append(block["tool_use_id"])
            content = block.get("content")
            pending.extend(reversed(content) if isinstance(content, list) else [])
        elif kind == "tool_use" and isinstance(block.get("id"), str):
            facts.tool_call_ids.append(block["id"])


def _scan_markers(facts: RequestFacts, places: list[Any]) -> None:
    tools, system, body = places
    for entry in tools + system:
        if isinstance(entry, dict):
            _mark(facts, entry.get("cache_control"))
    _mark(facts, body.get("cache_control"))  # automatic prompt caching, top level


def _mark(facts: RequestFacts, marker: Any) -> None:
    if not isinstance(marker, dict):
        return
    facts.cache_breakpoints += 1
    ttl = marker.get("ttl") if marker.get("ttl") in ("5m", "1h") else "5m"
    if facts.cache_ttl != "1h":
        facts.cache_ttl = ttl
