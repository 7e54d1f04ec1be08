"""Google Gemini Interactions (`POST …/v1beta/interactions`, `…/v1/interactions`), JSON
and SSE, in both shapes the API has served: `steps` with `step.*` events, and the older
`outputs` with `content.*` events.

A stream is folded into an interaction object and decoded by the same `decode_body` as a
JSON response; the streamed argument text travels beside it, in its `FoldExtras`.
API reference: https://ai.google.dev/gemini-api/docs/interactions

Not responsible for framing, routing, or the finish-reason overrides all protocols share
(exchange.py applies them).
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
    items,
    json_size,
    new_budget,
    positive_counts,
    stable_hash,
    sub,
    tier_word,
    tool_call_from_object,
    tool_call_from_text,
)
from llmtap.protocols.contract import NO_EXTRAS, Folded, FoldExtras
from llmtap.protocols.gemini_generate import billed_searches

PROTOCOL = "gemini.interactions"

# https://ai.google.dev/api/interactions-api#Resource:Interaction (status)
FINISH: dict[str, FinishReason] = {
    "completed": "end_turn",
    "requires_action": "tool_use",
    "incomplete": "max_tokens",
    "failed": "error",
}
# Statuses that map to no canonical finish reason, on purpose (SPEC §2 names none for
# them; the raw value is kept).
FINISH_NULL = (
    "cancelled",  # the client cancelled it
    "budget_exceeded",  # an agent's budget ran out
    "requires_continuation",  # stopped early: a new interaction continues it by `continuation_token`
    "idle",  # a live interaction that has done all it was asked
)
TERMINAL = ("interaction.completed", "interaction.complete")
# Statuses of an interaction still running: how a cut stream left it, not how it ended.
_RUNNING = (
    "queued",
    "in_progress",
)
# Usage counts split by modality (lists of {modality, tokens}), by the genai-prices unit
# their non-text entries count under; tool-use tokens are input too.
_MODALITY_LISTS = (
    ("input_tokens_by_modality", "input_{}_tokens"),
    ("tool_use_tokens_by_modality", "input_{}_tokens"),
    ("cached_tokens_by_modality", "cache_{}_read_tokens"),
    ("output_tokens_by_modality", "output_{}_tokens"),
)
_MODALITIES = ("audio", "image", "video")
# Request tool types Google runs; any other (`function`) is the client's.
# https://ai.google.dev/api/interactions-api#Resource:Tool
_SERVER_TOOLS = (
    "google_search",
    "code_execution",
    "url_context",
    "file_search",
    "google_maps",
    "mcp_server",
    "computer_use",
    "retrieval",
    "tool_search",
)
_CLIENT_TOOLS = ("function",)
# Steps (and older outputs) of tools Google ran (SPEC §2 `server_tool_calls`); any other
# `…_call` is taken as one too.
_SERVER_STEPS = (
    "google_search_call",
    "code_execution_call",
    "url_context_call",
    "file_search_call",
    "google_maps_call",
    "mcp_server_tool_call",
    "retrieval_call",
    "tool_search_call",
    "processing_call",
)
# Steps that carry no canonical field: the user's input and the results of tools (their
# calls are counted).
_UNCOUNTED_STEPS = (
    "user_input",
    "function_result",
    "google_search_result",
    "code_execution_result",
    "url_context_result",
    "file_search_result",
    "google_maps_result",
    "mcp_server_tool_result",
    "retrieval_result",
    "tool_search_result",
    "processing_result",
)


def convert_usage(raw: Any) -> Usage | None:
    """Thought tokens are output reported apart; tool-use tokens are input reported apart."""
    if not has_counts(raw):
        return None
    thoughts = count(raw.get("total_thought_tokens"))
    return Usage(
        input_tokens=(count(raw.get("total_input_tokens")) or 0) + (count(raw.get("total_tool_use_tokens")) or 0),
        cache_read_tokens=count(raw.get("total_cached_tokens")) or 0,
        cache_write_tokens=0,
        output_tokens=(count(raw.get("total_output_tokens")) or 0) + (thoughts or 0),
        reasoning_tokens=thoughts,
        total_tokens_reported=count(raw.get("total_tokens")),
        modalities=_modalities(raw),
    )


def _modalities(raw: dict[str, Any]) -> dict[str, int]:
    pairs = []
    for key, unit in _MODALITY_LISTS:
        for entry in items(raw, key):
            modality = str(entry.get("modality")).lower() if isinstance(entry, dict) else ""
            if modality in _MODALITIES:
                pairs.append((unit.format(modality), entry.get("tokens")))
    return positive_counts(pairs)


def _searches(body: dict[str, Any], model: str | None) -> int:
    """Billed Google Search uses: the usage's own `grounding_tool_count` where it is given,
    else counted from the `google_search_call` steps' queries as generateContent's are
    (Gemini 3 per query, earlier models per grounded prompt)."""
    stated = [entry for entry in items(sub(body, "usage"), "grounding_tool_count") if isinstance(entry, dict)]
    if stated:
        return sum(count(e.get("count")) or 0 for e in stated if e.get("type") == "google_search")
    queries: list[Any] = []
    for entry in items(body, "steps") + items(body, "outputs"):
        if isinstance(entry, dict) and entry.get("type") == "google_search_call":
            arguments = sub(entry, "arguments")
            queries += items(arguments, "queries") or [arguments.get("query")]
    return billed_searches(queries, model)


def decode_body(body: dict[str, Any], ex: Exchange, extras: FoldExtras = NO_EXTRAS) -> None:
    if body.get("error") is not None:
        ex.error = _error(body["error"])
    if isinstance(body.get("id"), str):
        ex.response_id = body["id"]
    if isinstance(body.get("model"), str) and body["model"]:
        ex.model = body["model"]
    ex.usage_raw = body.get("usage")
    ex.usage = convert_usage(body.get("usage"))
    ex.service_tier = tier_word(body.get("service_tier"))  # the tier that served it
    searches = _searches(body, ex.model)
    if searches > 0:
        ex.server_tool_uses["web_search"] = searches
    text = KeptText(new_budget())
    for position, entry in enumerate(items(body, "steps") + items(body, "outputs")):
        if isinstance(entry, dict):
            _decode_entry(entry, ex, text, extras.raw_arguments.get(position))
    ex.text = text.value()
    ex.text_truncated = text.truncated or extras.truncated
    status = body.get("status")
    ex.finish_reason_raw = status if isinstance(status, str) and status not in _RUNNING else None
    ex.finish_reason = FINISH.get(status) if isinstance(status, str) else None
    # The object does not echo `background`: the request (or, for a poll, the exchange it
    # continues) says whether it runs in the background.
    background = ex.request is not None and ex.request.params.get("background") is True
    ex.background_state = status[:16] if background and isinstance(status, str) else None


def _error(error: Any) -> ApiError | None:
    """Gemini's `status` is the type; an error object without one may carry a `type`."""
    found = api_error(error, type_key="status", code_key="code")
    plain = api_error(error)
    if found is not None and found.type is None and plain is not None:
        found.type = plain.type
    return found


def _decode_entry(entry: dict[str, Any], ex: Exchange, text: KeptText, streamed: str | None) -> None:
    """One step or output; `streamed` is a function call's argument text as its deltas came."""
    kind = entry.get("type")
    if kind == "text":
        text.add(entry.get("text"))
    elif kind == "model_output":
        for part in items(entry, "content"):
            if isinstance(part, dict) and part.get("type") == "text":
                text.add(part.get("text"))
    elif kind == "thought":
        ex.reasoning_blocks += 1
    elif kind == "function_call":
        if streamed is not None:
            ex.tool_calls.append(tool_call_from_text(entry.get("id"), entry.get("name"), streamed))
        elif isinstance(entry.get("arguments"), str):
            ex.tool_calls.append(tool_call_from_text(entry.get("id"), entry.get("name"), entry["arguments"]))
        else:
            ex.tool_calls.append(tool_call_from_object(entry.get("id"), entry.get("name"), entry.get("arguments")))
    elif isinstance(kind, str) and (kind in _SERVER_STEPS or kind.endswith("_call")):
        ex.server_tool_calls.append(ServerToolCall(type=kind, id=entry.get("id"), name=entry.get("name")))


class Fold:
    """Folds `step.*` / `content.*` events into an interaction with `steps`/`outputs`."""

    def __init__(self, budget: ExchangeBudget) -> None:
        self.interaction: dict[str, Any] = {}
        self.entries: dict[int, dict[str, Any]] = {}
        self.texts: dict[int, KeptText] = {}
        self.args: dict[int, KeptText] = {}
        self.budget = budget
        self.error: Any = None
        self.complete = False
        self.saw_token = False

    def feed(self, event: Any, name: str = "") -> None:
        if not isinstance(event, dict):
            return
        kind = event.get("event_type") or name
        if kind in ("interaction.created", "interaction.start", *TERMINAL):
            if isinstance(event.get("interaction"), dict):
                self.interaction.update(event["interaction"])
            self.complete = self.complete or kind in TERMINAL
        elif kind == "interaction.status_update" and isinstance(event.get("status"), str):
            self.interaction["status"] = event["status"]
        elif kind in ("step.start", "content.start"):
            index = count(event.get("index"))
            entry = event.get("step", event.get("content"))
            if index is not None and isinstance(entry, dict):
                self.entries[index] = copy.copy(entry)
        elif kind in ("step.delta", "content.delta"):
            self._delta(event)
        elif kind == "error":
            self.error = event.get("error") if isinstance(event.get("error"), dict) else event

    def _delta(self, event: dict[str, Any]) -> None:
        index = count(event.get("index"))
        delta = sub(event, "delta")
        if index is None:
            return
        kind = delta.get("type")
        if kind == "text":
            self.texts.setdefault(index, KeptText(self.budget)).add(delta.get("text"))
            self.entries.setdefault(index, {"type": "text"})
            self.saw_token = True
        elif kind == "arguments_delta" or (kind == "function_call" and isinstance(delta.get("arguments"), str)):
            self.args.setdefault(index, KeptText(self.budget)).add(delta.get("arguments"))
            self.saw_token = True
        elif kind == "function_call":  # the older shape sends the whole call in one delta
            self.entries[index] = {k: v for k, v in delta.items()}
            self.saw_token = True
        elif kind in ("thought_summary", "thought_signature", "thought"):
            self.entries.setdefault(index, {"type": "thought"})
        elif isinstance(kind, str) and kind.endswith("_call"):
            self.entries.setdefault(index, dict(delta))

    def end_marker(self) -> None:
        """Interactions streams end with `interaction.completed`."""

    def result(self) -> Folded:
        body = {k: v for k, v in self.interaction.items() if k not in ("steps", "outputs")}
        entries: list[dict[str, Any]] = []
        raw_arguments: dict[int, str] = {}
        for index in sorted(self.entries):
            entry = self.entries[index]
            if index in self.texts:
                text = self.texts[index].value()
                if entry.get("type") == "model_output":
                    entry["content"] = [{"type": "text", "text": text}]
                else:
                    entry["text"] = text
            if index in self.args:
                raw_arguments[len(entries)] = self.args[index].value()
            entries.append(entry)
        final = items(self.interaction, "steps") or items(self.interaction, "outputs")
        body["steps"] = final or entries
        if self.error is not None and body.get("error") is None:
            body["error"] = self.error
        truncated = any(t.truncated for t in (*self.texts.values(), *self.args.values()))
        # The terminal event's own steps, when it lists them, stand over what the deltas built.
        return Folded(body, FoldExtras(truncated=truncated, raw_arguments={} if final else raw_arguments))


def requested_model(body: dict[str, Any], path: str) -> str | None:
    for key in ("model", "agent"):
        value = body.get(key)
        if isinstance(value, str):
            return value
    return None


def requested_tier(body: dict[str, Any]) -> str | None:
    """The request's `service_tier` (`flex`, `priority`; omitted is standard).
    https://ai.google.dev/gemini-api/docs/flex-inference"""
    return tier_word(body.get("service_tier"))


def decode_request(body: dict[str, Any], path: str = "") -> RequestFacts:
    config = sub(body, "generation_config")
    thinking: dict[str, Any] = {
        k: config[k] for k in ("thinking_level", "thinking_summaries", "thinking_budget") if k in config
    }
    facts = RequestFacts(
        model=requested_model(body, path),
        stream=body.get("stream") if isinstance(body.get("stream"), bool) else None,
        max_tokens=count(config.get("max_output_tokens")),
        tool_choice=config.get("tool_choice", body.get("tool_choice")),
        previous_response_id=body.get("previous_interaction_id")
        if isinstance(body.get("previous_interaction_id"), str)
        else None,
        thinking=thinking or None,
        params={k: config[k] for k in ("temperature", "top_p", "seed", "stop_sequences") if k in config},
    )
    if body.get("background") is True:  # https://ai.google.dev/api/interactions-api (create)
        facts.params["background"] = True
    tools = [t for t in items(body, "tools") if isinstance(t, dict)]
    for tool in tools:
        kind = str(tool.get("type") or "function")
        if kind in _SERVER_TOOLS:
            facts.server_tools.append(kind)
        else:
            schema = tool.get("parameters") if isinstance(tool.get("parameters"), dict) else None
            facts.tools.append(ToolSpec(name=str(tool.get("name") or kind), schema=schema, type=kind))
    system = body.get("system_instruction")
    facts.system_chars = json_size(system) if system else 0
    entries = body.get("input")
    if isinstance(entries, (str, dict)):
        entries = [entries]
    for entry in entries if isinstance(entries, list) else []:
        _scan_entry(facts, entry)
        facts.message_hashes.append(stable_hash(entry))
        facts.message_chars.append(json_size(entry))
    facts.tools_hash = stable_hash(tools)
    facts.system_hash = stable_hash(system or "")
    return facts


def _scan_entry(facts: RequestFacts, entry: Any) -> None:
    if isinstance(entry, str):
        facts.messages_by_role["user"] = facts.messages_by_role.get("user", 0) + 1
        return
    if not isinstance(entry, dict):
        return
    role = str(entry.get("role") or "user")
    facts.messages_by_role[role] = facts.messages_by_role.get(role, 0) + 1
    content = entry.get("content")
    for part in content if isinstance(content, list) else [entry]:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "image":
            facts.images += 1
        elif kind == "function_result" and isinstance(part.get("call_id"), str):
            facts.tool_result_ids.append(part["call_id"])
        elif kind == "function_call" and isinstance(part.get("id"), str):
            facts.tool_call_ids.append(part["id"])
