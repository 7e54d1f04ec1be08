"""OpenAI Responses (`POST …/v1/responses`): JSON, SSE, and WebSocket mode, whose frames
carry the same events as the SSE stream.

A stream is folded into a `response` object (the terminal event's, with the output items
assembled from the deltas when the terminal event leaves them out) and decoded by the
same `decode_body` as a JSON response.
API reference: https://platform.openai.com/docs/api-reference/responses and
https://platform.openai.com/docs/api-reference/responses-streaming

Not responsible for framing, routing, or the finish-reason overrides all protocols share
(exchange.py applies them).
"""

from __future__ import annotations

import copy
from typing import Any

from llmtap.protocols import prefix
from llmtap.protocols.canonical import Exchange, FinishReason, RequestFacts, ServerToolCall, ToolCall, ToolSpec, Usage
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
    stable_hash,
    sub,
    text_of,
    tier_word,
    tool_call_from_object,
    tool_call_from_text,
    without_cache_markers,
)
from llmtap.protocols.contract import NO_EXTRAS, Folded, FoldExtras
from llmtap.protocols.openai_chat import modalities
from llmtap.protocols.who_asked import openai_user

PROTOCOL = "openai.responses"

TERMINAL = ("response.completed", "response.incomplete", "response.failed")
# Statuses of a response still running: how a cut or broken-off stream left it, not how it
# ended. https://platform.openai.com/docs/api-reference/responses/object#responses/object-status
_RUNNING = ("queued", "in_progress")
# Statuses of a finished response (`incomplete` is told by its reason, below).
# https://platform.openai.com/docs/api-reference/responses/object#responses/object-status
_STATUS: dict[str, FinishReason] = {
    "completed": "end_turn",
    "failed": "error",
}
# https://platform.openai.com/docs/api-reference/responses/object#responses/object-incomplete_details
_INCOMPLETE: dict[str, FinishReason] = {
    "max_output_tokens": "max_tokens",
    "content_filter": "content_filter",
}
# Statuses and incomplete reasons that map to no canonical finish reason, on purpose (the
# raw value is kept): SPEC §2 names none for them.
FINISH_NULL = (
    "cancelled",  # the client cancelled it (`POST …/cancel`): nothing finished
    "max_messages",  # incomplete: a limit on the messages of the turn
    "steered",  # incomplete: stopped at a `response.steer`; a successor response goes on
)
# Output items the provider ran itself (SPEC §2 `server_tool_calls`).
# https://platform.openai.com/docs/api-reference/responses/object#responses/object-output
_SERVER_ITEMS = (
    "web_search_call",
    "file_search_call",
    "code_interpreter_call",
    "image_generation_call",
    "mcp_call",
    "mcp_list_tools",
    "tool_search_call",
    "program",  # programmatic tool calling: OpenAI runs the model's JavaScript
)
# Built-in tools the client runs: their calls carry an action object, not JSON text. One
# whose output item comes back in the same response was run by the provider (the `shell`
# tool in a hosted container): a server call then.
# https://platform.openai.com/docs/guides/tools-computer-use, …/tools-local-shell,
# …/tools-shell, …/tools-apply-patch
_CLIENT_ACTION_ITEMS = ("computer_call", "local_shell_call", "shell_call", "apply_patch_call")
# Items that name who runs them in `execution` (`server` when absent): a client-executed
# tool search is the client's call. https://platform.openai.com/docs/guides/tools-tool-search
_EXECUTION_ITEMS = ("tool_search_call",)
# Input items that answer a client-run call by `call_id`, besides the `*_call_output` ones.
_RESULT_ITEMS = ("tool_search_output",)
# The name a built-in tool's calls go by, where it differs from the declared type: a
# computer_call answers the `computer_use_preview` tool.
_TOOL_CALL_NAMES = {
    "computer_use_preview": "computer",
}
# Output items that carry no canonical field: tool outputs and approvals (they answer a
# call), compaction, items that declare tools.
_UNCOUNTED_ITEMS = (
    "function_call_output",
    "custom_tool_call_output",
    "computer_call_output",
    "local_shell_call_output",
    "shell_call_output",
    "apply_patch_call_output",
    "tool_search_output",
    "program_output",
    "mcp_approval_request",  # asks the client to approve an MCP call it has not run yet
    "mcp_approval_response",
    "compaction",
    "additional_tools",
)
# Output items of provider-run tools billed per call, by canonical kind (one use per item).
# https://platform.openai.com/docs/pricing#built-in-tools
_BILLED_ITEMS = {
    "web_search_call": "web_search",
    "file_search_call": "file_search",
    "code_interpreter_call": "code_execution",
}
# Request tool types the provider runs (`web_search…` and `code_interpreter…` by prefix).
# https://platform.openai.com/docs/api-reference/responses/create#responses-create-tools
_SERVER_TOOL_TYPES = (
    "web_search",
    "web_search_2025_08_26",
    "web_search_preview",
    "web_search_preview_2025_03_11",
    "file_search",
    "code_interpreter",
    "image_generation",
    "mcp",
    "tool_search",
    "programmatic_tool_calling",
)
# Request tool types the client runs (any type of neither table is taken as one too).
_CLIENT_TOOL_TYPES = (
    "function",
    "custom",
    "namespace",  # declares tools of its own
    "computer",
    "computer_use_preview",
    "local_shell",
    "shell",
    "apply_patch",
)
# Request fields kept as params; `generate: false` asks for no output (a warmup);
# `background: true` runs it in the background (its polls complete it: SPEC §1).
_PARAMS = (
    "temperature",
    "top_p",
    "store",
    "truncation",
    "service_tier",
    "prompt_cache_retention",
    "text",
    "generate",
    "background",
)
# Input items that declare tools (Codex sends its tools in one, and no top-level `tools`).
_TOOL_ITEMS = ("additional_tools",)
_MAX_NAMESPACE_DEPTH = 4
# Roles of the instructions the model gets before the conversation: with `instructions`,
# the system size and the system hash (SPEC §2).
_SYSTEM_ROLES = ("system", "developer")


def convert_usage(raw: Any) -> Usage | None:
    """`input_tokens` includes cached tokens; `output_tokens` includes reasoning."""
    if not has_counts(raw):
        return None
    details_in = sub(raw, "input_tokens_details")
    details_out = sub(raw, "output_tokens_details")
    return Usage(
        input_tokens=count(raw.get("input_tokens")) or 0,
        cache_read_tokens=count(details_in.get("cached_tokens")) or 0,
        cache_write_tokens=count(details_in.get("cache_write_tokens")) or 0,
        output_tokens=count(raw.get("output_tokens")) or 0,
        reasoning_tokens=count(details_out.get("reasoning_tokens")),
        total_tokens_reported=count(raw.get("total_tokens")),
        modalities=modalities(details_in, details_out),
    )


def decode_body(body: dict[str, Any], ex: Exchange, extras: FoldExtras = NO_EXTRAS) -> None:
    if body.get("error") is not None:
        ex.error = api_error(body["error"])
    if isinstance(body.get("id"), str):
        ex.response_id = body["id"]
    if isinstance(body.get("model"), str) and body["model"]:
        ex.model = body["model"]
    ex.usage_raw = body.get("usage")
    ex.usage = convert_usage(body.get("usage"))
    # The tier that served it; while queued or running the object echoes the request's.
    ex.service_tier = tier_word(body.get("service_tier"))
    text = KeptText(new_budget())
    refusals: list[str] = []
    output = [item for item in items(body, "output") if isinstance(item, dict)]
    answered = {item.get("call_id") for item in output if str(item.get("type")).endswith("_output")}
    for item in output:
        _decode_item(item, ex, text, refusals, answered)
        billed = _BILLED_ITEMS.get(str(item.get("type")))
        if billed is not None:
            ex.server_tool_uses[billed] = ex.server_tool_uses.get(billed, 0) + 1
    ex.text = text.value()
    ex.text_truncated = text.truncated or extras.truncated
    ex.refusal = "".join(refusals) or None
    ex.warmup = ex.request is not None and ex.request.params.get("generate") is False
    ex.background_state = _background_state(body, ex)
    _finish(body, ex)


def _decode_item(item: dict[str, Any], ex: Exchange, text: KeptText, refusals: list[str], answered: set[Any]) -> None:
    kind = item.get("type")
    if kind == "message":
        for part in items(item, "content"):
            if not isinstance(part, dict):
                continue
            if part.get("type") == "output_text":
                text.add(part.get("text"))
            elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
                refusals.append(part["refusal"])
    elif kind == "reasoning":
        ex.reasoning_blocks += 1
    elif kind == "function_call":
        raw = item.get("arguments")
        ex.tool_calls.append(
            tool_call_from_text(item.get("call_id"), item.get("name"), raw if isinstance(raw, str) else "")
        )
    elif kind == "custom_tool_call":
        # Free-form input text, not JSON: checked against the tool's declared format.
        raw = item.get("input")
        ex.tool_calls.append(
            ToolCall(
                id=text_of(item.get("call_id")),
                name=text_of(item.get("name")),
                arguments=None,
                arguments_raw=raw if isinstance(raw, str) else "",
                valid_json=False,
                kind="custom",
            )
        )
    elif isinstance(kind, str):
        runner = _runner(kind, item, answered)
        if runner == "client":
            ex.tool_calls.append(tool_call_from_object(item.get("call_id"), kind.removesuffix("_call"), _action(item)))
        elif runner == "server":
            ex.server_tool_calls.append(ServerToolCall(type=kind, id=item.get("id"), name=item.get("name")))


def _runner(kind: str, item: dict[str, Any], answered: set[Any]) -> str | None:
    """Who runs a built-in tool's call (`client` or `server`); None for an item that is
    no call (an MCP approval request, an output)."""
    if kind in _CLIENT_ACTION_ITEMS:
        return "server" if item.get("call_id") in answered else "client"
    if kind in _EXECUTION_ITEMS:
        return "client" if item.get("execution") == "client" else "server"
    return "server" if kind in _SERVER_ITEMS or kind.endswith("_call") else None


def _action(item: dict[str, Any]) -> Any:
    """What a built-in client call asks for: its `action` (`operation` for apply_patch,
    `arguments` for a tool search); a computer_call of the GA `computer` tool may batch
    its steps in `actions` instead."""
    for key in ("action", "operation", "arguments"):
        if key in item:
            return item[key]
    actions = item.get("actions")
    return {"actions": actions} if isinstance(actions, list) else None


def _background_state(body: dict[str, Any], ex: Exchange) -> str | None:
    """A background response's status: the object echoes `background: true`, on its POST
    and on every poll (https://platform.openai.com/docs/guides/background); the request
    (a poll's stands for the work it continues) says so too, should a server not echo it."""
    asked = ex.request is not None and ex.request.params.get("background") is True
    status = body.get("status")
    return status[:16] if (body.get("background") is True or asked) and isinstance(status, str) else None


def _finish(body: dict[str, Any], ex: Exchange) -> None:
    status = body.get("status")
    ex.finish_reason_raw = status if isinstance(status, str) and status not in _RUNNING else None
    if status == "incomplete":
        reason = sub(body, "incomplete_details").get("reason")
        ex.finish_reason = _INCOMPLETE.get(reason) if isinstance(reason, str) else None
    elif isinstance(status, str):
        ex.finish_reason = _STATUS.get(status)
    # A refusal part is `refusal`, unless the output holds tool calls too: that stop the
    # shared override makes `tool_use`.
    if ex.refusal and ex.finish_reason == "end_turn" and not ex.tool_calls:
        ex.finish_reason = "refusal"


class Fold:
    """Folds Responses stream events (SSE or WebSocket frames) into a `response` object."""

    def __init__(self, budget: ExchangeBudget) -> None:
        self.response: dict[str, Any] = {}
        self.items: dict[int, dict[str, Any]] = {}
        self.texts: dict[int, dict[int, KeptText]] = {}  # output_index -> content_index -> text
        self.args: dict[int, KeptText] = {}
        self.budget = budget
        self.error: Any = None
        self.complete = False
        self.saw_token = False

    def feed(self, event: Any, name: str = "") -> None:
        if not isinstance(event, dict):
            return
        kind = event.get("type") or name
        if kind in ("response.created", "response.in_progress", "response.queued", *TERMINAL):
            if isinstance(event.get("response"), dict):
                self.response = event["response"]
            self.complete = self.complete or kind in TERMINAL
        elif kind == "response.output_item.added":
            self._item(event, done=False)
        elif kind == "response.output_item.done":
            self._item(event, done=True)
        elif kind == "response.output_text.delta":
            parts = self.texts.setdefault(count(event.get("output_index")) or 0, {})
            part = count(event.get("content_index")) or 0
            if part not in parts:
                parts[part] = KeptText(self.budget)
            parts[part].add(event.get("delta"))
            self.saw_token = True
        elif kind in ("response.function_call_arguments.delta", "response.custom_tool_call_input.delta"):
            index = count(event.get("output_index")) or 0
            self.args.setdefault(index, KeptText(self.budget)).add(event.get("delta"))
            self.saw_token = True
        elif kind == "error":
            self.error = _stream_error(event)

    def end_marker(self) -> None:
        """Responses streams end with a terminal event, not `[DONE]`."""

    def _item(self, event: dict[str, Any], done: bool) -> None:
        index = count(event.get("output_index"))
        item = event.get("item")
        if index is None or not isinstance(item, dict):
            return
        if done or index not in self.items:
            self.items[index] = copy.copy(item)
        if done:  # the finished item is authoritative: drop what the deltas built
            self.args.pop(index, None)
            self.texts.pop(index, None)

    def result(self) -> Folded:
        body = dict(self.response)
        if not items(body, "output"):
            body["output"] = self._assembled()
        if self.error is not None and body.get("error") is None:
            body["error"] = self.error
        texts = [text for parts in self.texts.values() for text in parts.values()]
        truncated = any(t.truncated for t in (*texts, *self.args.values()))
        return Folded(body, FoldExtras(truncated=truncated))

    def _assembled(self) -> list[dict[str, Any]]:
        output = []
        for index in sorted(self.items):
            item = self.items[index]
            if index in self.args:
                key = "input" if item.get("type") == "custom_tool_call" else "arguments"
                item[key] = self.args[index].value()
            parts = self.texts.get(index)
            if parts:
                item["content"] = [{"type": "output_text", "text": parts[part].value()} for part in sorted(parts)]
            output.append(item)
        return output


def _stream_error(event: dict[str, Any]) -> dict[str, Any]:
    """The `error` event carries code, message and param beside its own `type: "error"`,
    which names the event, not the error
    (https://platform.openai.com/docs/api-reference/responses-streaming/error). Some servers
    nest an `error` object instead; that one is taken as it is."""
    error = event.get("error")
    if isinstance(error, dict):
        return error
    return {k: v for k, v in event.items() if k not in ("type", "sequence_number")}


def _unwrap(body: dict[str, Any]) -> dict[str, Any]:
    """WebSocket mode sends `response.create` messages, which may carry the request's fields
    at the top level or wrapped in `response`."""
    wrapped = body.get("response")
    if body.get("type") == "response.create" and isinstance(wrapped, dict):
        return wrapped
    return body


def requested_model(body: dict[str, Any], path: str) -> str | None:
    body = _unwrap(body)
    return body.get("model") if isinstance(body.get("model"), str) else None


def requested_tier(body: dict[str, Any]) -> str | None:
    """https://platform.openai.com/docs/api-reference/responses/create#responses-create-service_tier"""
    return tier_word(_unwrap(body).get("service_tier"))


def decode_request(body: dict[str, Any], path: str = "") -> RequestFacts:
    body = _unwrap(body)
    reasoning = body.get("reasoning")
    facts = RequestFacts(
        model=requested_model(body, path),
        stream=body.get("stream") if isinstance(body.get("stream"), bool) else None,
        max_tokens=count(body.get("max_output_tokens")),
        tool_choice=body.get("tool_choice"),
        prompt_cache_key=body.get("prompt_cache_key") if isinstance(body.get("prompt_cache_key"), str) else None,
        previous_response_id=body.get("previous_response_id")
        if isinstance(body.get("previous_response_id"), str)
        else None,
        thinking=reasoning if isinstance(reasoning, dict) else None,
        end_user=openai_user(body),
        params={k: body[k] for k in _PARAMS if k in body},
    )
    if facts.params.get("prompt_cache_retention") == "24h":
        facts.cache_ttl = "24h"
    entries = body.get("input")
    if isinstance(entries, str):
        entries = [{"role": "user", "content": entries}]
    entries = [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
    groups = [items(body, "tools"), *(items(e, "tools") for e in entries if e.get("type") in _TOOL_ITEMS)]
    for group in groups:
        for tool in group:
            _declare(facts, tool, None, 0)
    instructions = body.get("instructions")
    system: list[Any] = []
    for entry in entries:
        if entry.get("type") in _TOOL_ITEMS:
            continue  # declares tools; not a message of any role
        _scan_entry(facts, entry)
        if entry.get("role") in _SYSTEM_ROLES and entry.get("type", "message") == "message":
            system.append(without_cache_markers(entry))
        facts.message_hashes.append(stable_hash(without_cache_markers(entry)))
        facts.message_chars.append(json_size(entry.get("content", entry.get("output", entry.get("arguments", "")))))
    facts.system_chars = (json_size(instructions) if instructions else 0) + sum(
        instruction_chars(m.get("content")) for m in system
    )
    # Hashes as before for requests without item-declared tools or system messages, so
    # stored records compare alike with new ones.
    facts.tools_hash = stable_hash(groups[0] if len(groups) == 1 else groups)
    facts.system_hash = stable_hash([instructions or "", *system] if system else instructions or "")
    # what a follow-up chained to this response stands on (SPEC §5): absent is not empty
    tools = body.get("tools")
    facts.prefix = prefix.parts(
        tools=tools if isinstance(tools, list) else None,
        tool_items=groups[1:],
        instructions=instructions,
        system_items=system,
    )
    return facts


def _declare(facts: RequestFacts, tool: Any, namespace: str | None, depth: int) -> None:
    """One declared tool into the facts; a `namespace` entry declares its tools as
    `namespace.tool` (its calls name the bare tool and carry `namespace` beside it)."""
    if not isinstance(tool, dict):
        return
    kind = str(tool.get("type") or "function")
    name = str(tool.get("name") or _TOOL_CALL_NAMES.get(kind, kind))
    qualified = f"{namespace}.{name}" if namespace else name
    if kind == "namespace":
        if depth < _MAX_NAMESPACE_DEPTH:
            for child in items(tool, "tools"):
                _declare(facts, child, qualified, depth + 1)
    elif _provider_runs(kind, tool):
        facts.server_tools.append(kind)
    elif kind == "custom":
        declared = tool.get("format")
        facts.tools.append(ToolSpec(name=qualified, schema=declared if isinstance(declared, dict) else None, type=kind))
    else:
        schema = tool.get("parameters") if isinstance(tool.get("parameters"), dict) else None
        facts.tools.append(ToolSpec(name=qualified, schema=schema, type=kind))


def _provider_runs(kind: str, tool: dict[str, Any]) -> bool:
    """Whether the provider runs a declared tool: a server type, unless it says the client
    executes it (`execution: "client"`, a client-run tool search)."""
    if tool.get("execution") == "client":
        return False
    return kind in _SERVER_TOOL_TYPES or kind.startswith(("web_search", "code_interpreter"))


def _scan_entry(facts: RequestFacts, entry: dict[str, Any]) -> None:
    kind = text_of(entry.get("type", "message")) or ""
    if kind == "message" or "role" in entry:
        role = str(entry.get("role"))
        facts.messages_by_role[role] = facts.messages_by_role.get(role, 0) + 1
        content = entry.get("content")
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and part.get("type") == "input_image":
                facts.images += 1
    elif (kind.endswith("_call_output") or kind in _RESULT_ITEMS) and isinstance(entry.get("call_id"), str):
        facts.tool_result_ids.append(entry["call_id"])
        facts.messages_by_role["tool"] = facts.messages_by_role.get("tool", 0) + 1
    elif kind.endswith("_call") and isinstance(entry.get("call_id"), str):
        facts.tool_call_ids.append(entry["call_id"])
