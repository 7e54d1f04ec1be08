"""Google Gemini `generateContent` and `streamGenerateContent` (SSE with `alt=sse`, else a
streamed JSON array), on Google AI and Vertex AI paths.

Stream chunks are folded into one `GenerateContentResponse` (parts appended in order, the
last cumulative `usageMetadata`, the last `finishReason`) and decoded by the same
`decode_body` as a JSON response. Only the first candidate is decoded.
API reference: https://ai.google.dev/api/generate-content

Not responsible for framing, routing, or the finish-reason overrides all protocols share
(exchange.py applies them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llmtap.protocols.canonical import Exchange, FinishReason, RequestFacts, ServerToolCall, ToolCall, ToolSpec, Usage
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
)
from llmtap.protocols.contract import NO_EXTRAS, Folded, FoldExtras
from llmtap.protocols.partial_args import PartialArgs
from llmtap.protocols.who_asked import vertex_user

PROTOCOL = "gemini.generate"

# Finish reasons (SPEC §2); OTHER, IMAGE_OTHER, FINISH_REASON_UNSPECIFIED and any value
# not listed are null, their raw value kept.
# https://ai.google.dev/api/generate-content#FinishReason and
# https://cloud.google.com/vertex-ai/generative-ai/docs/reference/rest/v1/GenerateContentResponse#FinishReason
FINISH: dict[str, FinishReason] = {
    "STOP": "end_turn",
    "MAX_TOKENS": "max_tokens",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "IMAGE_PROHIBITED_CONTENT": "content_filter",
    "IMAGE_RECITATION": "content_filter",
    "MODEL_ARMOR": "content_filter",
    "MALFORMED_FUNCTION_CALL": "error",
    "UNEXPECTED_TOOL_CALL": "error",
    "TOO_MANY_TOOL_CALLS": "error",
    "MISSING_THOUGHT_SIGNATURE": "error",
    "MALFORMED_RESPONSE": "error",
    "LANGUAGE": "error",
    "NO_IMAGE": "error",
}
# Vertex AI's numbers for the enums it may send as numbers (a client that asks for
# `$alt=json;enum-encoding=int`, as Google's generated REST clients do), by its own
# numbering; the Gemini API numbers some of them otherwise, so they are read on Vertex AI
# paths only. google.cloud.aiplatform.v1 Candidate.FinishReason:
# https://cloud.google.com/java/docs/reference/google-cloud-aiplatform/latest/com.google.cloud.aiplatform.v1.Candidate.FinishReason
# (0-10; 11-16 as the published aiplatform v1 protos number the image reasons)
VERTEX_FINISH_REASONS: dict[int, str] = {
    0: "FINISH_REASON_UNSPECIFIED",
    1: "STOP",
    2: "MAX_TOKENS",
    3: "SAFETY",
    4: "RECITATION",
    5: "OTHER",
    6: "BLOCKLIST",
    7: "PROHIBITED_CONTENT",
    8: "SPII",
    9: "MALFORMED_FUNCTION_CALL",
    10: "MODEL_ARMOR",
    11: "IMAGE_SAFETY",
    12: "IMAGE_PROHIBITED_CONTENT",
    13: "IMAGE_RECITATION",
    14: "IMAGE_OTHER",
    15: "UNEXPECTED_TOOL_CALL",
    16: "NO_IMAGE",
}
# GenerateContentResponse.PromptFeedback.BlockedReason: any reason but 0 (unset) is a block.
# https://cloud.google.com/php/docs/reference/cloud-ai-platform/latest/V1.GenerateContentResponse.PromptFeedback.BlockedReason
VERTEX_BLOCKED_REASONS: dict[int, str] = {
    0: "BLOCKED_REASON_UNSPECIFIED",
    1: "SAFETY",
    2: "OTHER",
    3: "BLOCKLIST",
    4: "PROHIBITED_CONTENT",
    5: "MODEL_ARMOR",
    6: "JAILBREAK",
}
# Modality of a ModalityTokenCount entry.
# https://cloud.google.com/vertex-ai/generative-ai/docs/reference/rest/v1/ModalityTokenCount
VERTEX_MODALITIES: dict[int, str] = {
    0: "MODALITY_UNSPECIFIED",
    1: "TEXT",
    2: "IMAGE",
    3: "VIDEO",
    4: "AUDIO",
    5: "DOCUMENT",
}
# GenerateContentResponse.UsageMetadata.TrafficType.
# https://cloud.google.com/php/docs/reference/cloud-ai-platform/latest/V1.GenerateContentResponse.UsageMetadata.TrafficType
VERTEX_TRAFFIC_TYPES: dict[int, str] = {
    0: "TRAFFIC_TYPE_UNSPECIFIED",
    1: "ON_DEMAND",
    2: "PROVISIONED_THROUGHPUT",
    3: "ON_DEMAND_PRIORITY",
    4: "ON_DEMAND_FLEX",
}
# Finish reasons that map to no canonical one, on purpose (SPEC §2: `OTHER` and values it
# does not list are null; the raw value is kept).
FINISH_NULL = (
    "FINISH_REASON_UNSPECIFIED",
    "OTHER",
    "IMAGE_OTHER",  # image generation stopped for a reason not otherwise specified
    "ESCALATION",  # filtered by an escalation rule (Gemini API only)
    "PUP_LIMITED_DISABLED",  # the account is limited or disabled for Prohibited Use Policy violations
    "CONTINUATION",  # the per-request token limit, to be continued with `continuation_token`
)
_MODEL_IN_PATH = re.compile(r"/models/([^/:?]+):")
# ModalityTokenCount lists of the usage, by the genai-prices unit prefix their non-text
# entries count under; TEXT and DOCUMENT are text and not listed.
# https://ai.google.dev/api/generate-content#UsageMetadata
_MODALITY_LISTS = (
    ("promptTokensDetails", "input_{}_tokens"),
    ("toolUsePromptTokensDetails", "input_{}_tokens"),  # tool-use prompt tokens are input too
    ("cacheTokensDetails", "cache_{}_read_tokens"),
    ("candidatesTokensDetails", "output_{}_tokens"),
)
_MODALITIES = {"AUDIO": "audio", "IMAGE": "image", "VIDEO": "video"}
# `usageMetadata.trafficType`: the tier that served the request (Vertex AI's TrafficType;
# PROVISIONED_THROUGHPUT is prepaid and names no per-token tier).
# https://cloud.google.com/vertex-ai/generative-ai/docs/reference/rest/v1/GenerateContentResponse#TrafficType
_TRAFFIC_TIERS = {
    "ON_DEMAND": "standard",
    "ON_DEMAND_FLEX": "flex",
    "ON_DEMAND_PRIORITY": "priority",
    "ON_DEMAND_OFFPEAK": "offpeak",
}
# Traffic types that name no per-token tier, on purpose.
TRAFFIC_NULL = ("TRAFFIC_TYPE_UNSPECIFIED", "PROVISIONED_THROUGHPUT")
# `Part` fields (https://ai.google.dev/api/caching#Part) that carry no canonical field:
# inputs and media, results of tools (their calls are counted), metadata. `text`,
# `thought`, `functionCall`, `executableCode` and `toolCall` are decoded.
_UNCOUNTED_PART_FIELDS = (
    "inlineData",
    "fileData",
    "functionResponse",
    "toolResponse",
    "codeExecutionResult",
    "thoughtSignature",
    "videoMetadata",
    "mediaResolution",
    "mediaProcessing",
    "partMetadata",
    "audioTranscription",
    "audioMetadata",
    "speechMetadata",
    "documentMetadata",
    "spreadsheetMetadata",
)
# `toolCall.toolType` of a server-side tool call part (the request's
# `includeServerSideToolInvocations`), by the kind its grounding is recorded as.
# https://ai.google.dev/gemini-api/docs/tool-combination
_TOOL_CALL_TYPES = {
    "GOOGLE_SEARCH_WEB": "google_search",
    "GOOGLE_SEARCH_IMAGE": "google_search",
    "URL_CONTEXT": "url_context",
    "GOOGLE_MAPS": "google_maps",
    "FILE_SEARCH": "file_search",
    "MEDIA_PROCESSING": "media_processing",
    "TOOL_TYPE_UNSPECIFIED": "tool_call",
}
# Request `Tool` fields (https://ai.google.dev/api/caching#Tool): function declarations
# are the client's tools, every other field a tool Google runs.
_FUNCTION_TOOL_FIELDS = ("functionDeclarations", "function_declarations")
_SERVER_TOOL_FIELDS = (
    "googleSearch",
    "googleSearchRetrieval",
    "enterpriseWebSearch",
    "urlContext",
    "codeExecution",
    "googleMaps",
    "fileSearch",
    "retrieval",
    "parallelAiSearch",
    "exaAiSearch",
    "mcpServers",
    "computerUse",  # declared as Google's; its actions come back as functionCall parts
)
_GEMINI_MAJOR = re.compile(r"gemini-(\d{1,3})(?!\d)")


def convert_usage(raw: Any, vertex: bool = False) -> Usage | None:
    """Gemini bills thoughts as output but reports them apart from `candidatesTokenCount`;
    tool-use prompt tokens are input reported apart from `promptTokenCount`. `vertex`: the
    usage came on a Vertex AI path, whose modalities may be numbers.
    https://ai.google.dev/api/generate-content#UsageMetadata"""
    if not has_counts(raw):
        return None
    thoughts = count(raw.get("thoughtsTokenCount"))
    return Usage(
        input_tokens=(count(raw.get("promptTokenCount")) or 0) + (count(raw.get("toolUsePromptTokenCount")) or 0),
        cache_read_tokens=count(raw.get("cachedContentTokenCount")) or 0,
        cache_write_tokens=0,
        output_tokens=(count(raw.get("candidatesTokenCount")) or 0) + (thoughts or 0),
        reasoning_tokens=thoughts,
        total_tokens_reported=count(raw.get("totalTokenCount")),
        modalities=_modalities(raw, VERTEX_MODALITIES if vertex else None),
    )


def _modalities(raw: dict[str, Any], numbers: Mapping[int, str] | None) -> dict[str, int]:
    pairs = []
    for key, unit in _MODALITY_LISTS:
        for entry in items(raw, key):
            name = enum_name(entry.get("modality"), numbers) if isinstance(entry, dict) else None
            modality = _MODALITIES.get(name) if name is not None else None
            if modality is not None:
                pairs.append((unit.format(modality), entry.get("tokenCount")))
    return positive_counts(pairs)


def is_vertex(path: str) -> bool:
    """Whether a request path is Vertex AI's: `…/projects/{p}/locations/{l}/publishers/…`
    (or express mode's `…/publishers/google/models/…`); the Gemini API's never holds them.
    https://cloud.google.com/vertex-ai/generative-ai/docs/reference/rest/v1/projects.locations.publishers.models/generateContent"""
    bare = path.split("?", 1)[0]
    return "/publishers/" in bare or "/projects/" in bare


def enum_name(value: Any, numbers: Mapping[int, str] | None) -> str | None:
    """An enum value as its name: a string as it came; a number by the API's own numbering
    (`numbers`; None where the route's numbering is not known or the number is not in it);
    anything else (a bool, a float, an object) is no enum value."""
    if isinstance(value, str):
        return value
    if numbers is not None and type(value) is int:
        return numbers.get(value)
    return None


def _enum_given(value: Any) -> bool:
    """Whether an enum field holds a value, a name or a number (a bool is neither)."""
    return isinstance(value, str) or type(value) is int


def billed_searches(queries: list[Any], model: str | None) -> int:
    """Billed uses of Grounding with Google Search for the queries one response ran. Google
    bills Gemini 3 and later per search query (unique ones, empty ones ignored), and earlier
    models per grounded prompt however many queries it ran; a model whose generation cannot
    be told counts as one grounded prompt.
    https://ai.google.dev/gemini-api/docs/pricing and
    https://ai.google.dev/gemini-api/docs/google-search"""
    unique = {q.strip() for q in queries if isinstance(q, str) and q.strip()}
    if not unique:
        return 0
    major = _GEMINI_MAJOR.search(model or "")
    return len(unique) if major is not None and int(major.group(1)) >= 3 else 1


def decode_body(body: dict[str, Any], ex: Exchange, extras: FoldExtras = NO_EXTRAS) -> None:
    if body.get("error") is not None:
        ex.error = api_error(body["error"], type_key="status", code_key="code")
    if isinstance(body.get("responseId"), str):
        ex.response_id = body["responseId"]
    if isinstance(body.get("modelVersion"), str) and body["modelVersion"]:
        ex.model = body["modelVersion"]
    vertex = is_vertex(extras.path)
    ex.usage_raw = body.get("usageMetadata")
    ex.usage = convert_usage(body.get("usageMetadata"), vertex)
    # The served tier, where the usage states it (the `x-gemini-service-tier` response
    # header outranks it: `ExchangeDecoder` applies that one).
    traffic = enum_name(sub(body, "usageMetadata").get("trafficType"), VERTEX_TRAFFIC_TYPES if vertex else None)
    ex.service_tier = _TRAFFIC_TIERS.get(traffic) if traffic is not None else None
    candidates = [c for c in items(body, "candidates") if isinstance(c, dict)]
    candidate = min(candidates, key=lambda c: count(c.get("index")) or 0) if candidates else {}
    parts, extras = _parts(candidate, extras)
    text = KeptText(new_budget())
    in_thought = False
    for position, part in enumerate(parts):
        if not isinstance(part, dict):
            continue
        thought = part.get("thought") is True
        if thought and not in_thought:
            ex.reasoning_blocks += 1  # consecutive thought parts are one block
        in_thought = thought
        if thought:
            continue
        if isinstance(part.get("text"), str):
            text.add(part["text"])
        elif isinstance(part.get("functionCall"), dict):
            ex.tool_calls.append(_tool_call(part["functionCall"], extras.raw_arguments.get(position)))
        elif "executableCode" in part:
            ex.server_tool_calls.append(ServerToolCall(type="code_execution"))
        elif isinstance(part.get("toolCall"), dict):
            ex.server_tool_calls.append(_server_call(part["toolCall"]))
    ex.text = text.value()
    ex.text_truncated = text.truncated or extras.truncated
    called = {call.type for call in ex.server_tool_calls}  # by toolCall parts, told once
    ex.server_tool_calls += [ServerToolCall(type=kind) for kind in _grounding_tools(candidate) if kind not in called]
    searches = billed_searches(items(sub(candidate, "groundingMetadata"), "webSearchQueries"), ex.model)
    if searches:
        ex.server_tool_uses["web_search"] = searches  # the one grounding billed per use
    _finish(body, candidate, ex, vertex)


def _grounding_tools(candidate: dict[str, Any]) -> list[str]:
    """The grounding tools a candidate's metadata shows ran, in this order: Google Search by
    its queries, Google Maps by its place chunks (or its widget token), URL context by its
    URL metadata. A web grounding chunk may be Search's or URL context's, so names neither.
    https://ai.google.dev/gemini-api/docs/google-search, …/maps-grounding, …/url-context"""
    grounding = sub(candidate, "groundingMetadata")
    found = []
    if any(isinstance(q, str) and q.strip() for q in items(grounding, "webSearchQueries")):
        found.append("google_search")
    places = any(sub(chunk, "maps") for chunk in items(grounding, "groundingChunks"))
    if places or isinstance(grounding.get("googleMapsWidgetContextToken"), str):
        found.append("google_maps")
    if items(sub(candidate, "urlContextMetadata"), "urlMetadata"):
        found.append("url_context")
    return found


def _parts(candidate: dict[str, Any], extras: FoldExtras) -> tuple[list[Any], FoldExtras]:
    """The candidate's parts, with calls streamed in pieces assembled: a fold has done that
    already, but a JSON body (or one a client saved from a stream) may still hold them."""
    parts = items(sub(candidate, "content"), "parts")
    if not any(_streams_call(part) for part in parts):
        return parts, extras
    fold = Fold(extras.budget or new_budget())
    for part in parts:
        if isinstance(part, dict):
            fold._part(part)
    assembled, raw_arguments, truncated = fold.assembled_parts()
    return assembled, FoldExtras(
        truncated=extras.truncated or truncated, raw_arguments=raw_arguments, budget=fold.budget
    )


def _server_call(call: dict[str, Any]) -> ServerToolCall:
    """A server-side `toolCall` part: its kind by `toolType` (an unknown type as it came)."""
    raw = _str_or_none(call.get("toolType"))
    kind = _TOOL_CALL_TYPES.get(raw or "") or (raw or "tool_call")[:64].lower()
    return ServerToolCall(type=kind, id=_str_or_none(call.get("id")), name=raw[:64] if raw else None)


def _tool_call(call: dict[str, Any], raw: str | None) -> ToolCall:
    """A `functionCall`; `raw` is the text of streamed pieces that made no JSON object."""
    if raw is None:
        return tool_call_from_object(call.get("id"), call.get("name"), call.get("args"))
    return ToolCall(
        id=_str_or_none(call.get("id")),
        name=_str_or_none(call.get("name")),
        arguments=None,
        arguments_raw=raw,
        valid_json=False,
    )


def _finish(body: dict[str, Any], candidate: dict[str, Any], ex: Exchange, vertex: bool) -> None:
    """The candidate's `finishReason`, else the prompt's `blockReason`: each read as a name
    or, on Vertex AI, a number; the raw value is the wire's, a number as its digits."""
    raw = candidate.get("finishReason")
    blocked = sub(body, "promptFeedback").get("blockReason")
    if not _enum_given(raw) and _enum_given(blocked) and blocked != 0:  # 0: BLOCKED_REASON_UNSPECIFIED
        ex.finish_reason_raw = str(blocked)
        ex.finish_reason = "content_filter"
    elif _enum_given(raw):
        ex.finish_reason_raw = str(raw)
        name = enum_name(raw, VERTEX_FINISH_REASONS if vertex else None)
        ex.finish_reason = FINISH.get(name) if name is not None else None


@dataclass(slots=True)
class _TextRun:
    """Consecutive streamed text parts of one kind (thought or not), joined as they come."""

    text: KeptText
    thought: bool


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _streams_call(part: Any) -> bool:
    """Whether a part is a piece of a call streamed in parts (Gemini 3 `partialArgs`)."""
    call = sub(part, "functionCall")
    return "partialArgs" in call or call.get("willContinue") is True


class _StreamedCall:
    """One function call that arrives over several `functionCall` parts: it opens with
    `{name, willContinue: true}`, its `partialArgs` pieces follow, and a part without
    `willContinue` (often an empty `functionCall {}`) closes it.
    https://cloud.google.com/vertex-ai/generative-ai/docs/multimodal/function-calling"""

    __slots__ = ("part", "call", "pieces")

    def __init__(self, part: dict[str, Any], call: dict[str, Any], budget: ExchangeBudget) -> None:
        self.part = part  # the opening part (its thoughtSignature stays with the call)
        self.call = {k: call[k] for k in ("id", "name", "args") if k in call}
        self.pieces = PartialArgs(budget)
        self.more(call)

    def more(self, call: dict[str, Any]) -> None:
        if "id" not in self.call and isinstance(call.get("id"), str):
            self.call["id"] = call["id"]
        args = call.get("args")
        if isinstance(args, dict) and args is not self.call.get("args"):
            base = self.call.get("args")
            self.call["args"] = (base if isinstance(base, dict) else {}) | args
        for piece in items(call, "partialArgs"):
            self.pieces.add(piece)

    def result(self) -> tuple[dict[str, Any], str | None]:
        """The call as one complete part, and its raw text when its pieces make no object."""
        call = dict(self.call)
        raw = None
        if self.pieces.entries:
            args, raw = self.pieces.assemble(call.get("args"))
            call.pop("args", None)
            if args is not None:
                call["args"] = args
        return {k: v for k, v in self.part.items() if k != "functionCall"} | {"functionCall": call}, raw


class Fold:
    """Folds stream chunks (SSE events or array elements) into one response."""

    def __init__(self, budget: ExchangeBudget) -> None:
        self.head: dict[str, Any] = {}
        self.parts: list[dict[str, Any] | _TextRun | _StreamedCall] = []
        self.open_call: _StreamedCall | None = None  # a streamed call still taking pieces
        self.budget = budget
        self.candidate: dict[str, Any] = {}
        # Grounding metadata of all chunks as one: the later chunks' fields, with the search
        # queries of all, so queries one chunk listed are not lost to a later one's citations.
        self.grounding: Any = None
        self.queries: dict[str, None] = {}
        self.usage: Any = None
        self.error: Any = None
        self.complete = False
        self.saw_token = False
        self.truncated = False

    def feed(self, chunk: Any, name: str = "") -> None:
        if not isinstance(chunk, dict):
            return
        if chunk.get("error") is not None:
            self.error = chunk["error"]
        for key in ("modelVersion", "responseId", "promptFeedback", "createTime"):
            if chunk.get(key):
                self.head[key] = chunk[key]
        if has_counts(chunk.get("usageMetadata")) or "usageMetadata" in chunk and not self.usage:
            self.usage = chunk["usageMetadata"]  # cumulative: the last one wins
        if sub(chunk, "promptFeedback").get("blockReason"):
            self.complete = True
        for candidate in items(chunk, "candidates"):
            if isinstance(candidate, dict) and (count(candidate.get("index")) or 0) == 0:
                self._candidate(candidate)

    def _candidate(self, candidate: dict[str, Any]) -> None:
        for key, value in candidate.items():
            if key == "groundingMetadata":
                self._grounding(value)
            elif key != "content":
                self.candidate[key] = value
        for part in items(sub(candidate, "content"), "parts"):
            if isinstance(part, dict):
                self._part(part)
        if candidate.get("finishReason"):
            self.complete = True

    def _grounding(self, later: Any) -> None:
        if not isinstance(later, dict) or not isinstance(self.grounding, dict):
            self.grounding, self.queries = (dict(later) if isinstance(later, dict) else later), {}
        else:
            self.grounding.update(later)
        for query in items(later, "webSearchQueries"):
            if isinstance(query, str):
                self.queries[query] = None

    def _part(self, part: dict[str, Any]) -> None:
        text = part.get("text")
        if isinstance(text, str) and set(part) <= {"text", "thought", "thoughtSignature"}:
            thought = part.get("thought") is True
            previous = self.parts[-1] if self.parts else None
            if isinstance(previous, _TextRun) and previous.thought is thought:
                previous.text.add(text)  # merge consecutive text fragments of one kind
            else:
                run = _TextRun(KeptText(self.budget), thought)
                run.text.add(text)
                self.parts.append(run)
            self.saw_token = self.saw_token or not thought
            return
        call = part.get("functionCall")
        if isinstance(call, dict) and (self.open_call is not None or _streams_call(part) or not call):
            self._call_piece(part, call)
            return
        self.parts.append(part)
        self.saw_token = self.saw_token or "functionCall" in part

    def _call_piece(self, part: dict[str, Any], call: dict[str, Any]) -> None:
        """A `functionCall` part of a call streamed in pieces: a named one opens a call
        (closing any still open), the others add to the open one; one without
        `willContinue` closes it. A closer with no call open closes nothing."""
        if "name" in call or (self.open_call is None and ("partialArgs" in call or "args" in call)):
            self.open_call = _StreamedCall(part, call, self.budget)
            self.parts.append(self.open_call)
            self.saw_token = True
        elif self.open_call is not None:
            self.open_call.more(call)
        if call.get("willContinue") is not True:
            self.open_call = None

    def end_marker(self) -> None:
        """Gemini streams have no `[DONE]`; the chunk with `finishReason` is the last."""

    def assembled_parts(self) -> tuple[list[dict[str, Any]], dict[int, str], bool]:
        """The parts so far as a JSON response holds them (text runs joined, streamed calls
        assembled), the raw text of calls whose pieces make no object (by position), and
        whether the kept-text budget cut anything."""
        parts: list[dict[str, Any]] = []
        raw_arguments: dict[int, str] = {}
        for part in self.parts:
            if isinstance(part, _TextRun):
                self.truncated = self.truncated or part.text.truncated
                parts.append({"text": part.text.value(), "thought": part.thought})
            elif isinstance(part, _StreamedCall):
                self.truncated = self.truncated or part.pieces.truncated
                whole, raw = part.result()
                if raw is not None:
                    raw_arguments[len(parts)] = raw
                parts.append(whole)
            else:
                parts.append(part)
        return parts, raw_arguments, self.truncated

    def result(self) -> Folded:
        parts, raw_arguments, truncated = self.assembled_parts()
        candidate = dict(self.candidate)
        if self.grounding is not None:
            grounding = candidate["groundingMetadata"] = self.grounding
            if isinstance(grounding, dict) and self.queries:
                candidate["groundingMetadata"] = grounding | {"webSearchQueries": list(self.queries)}
        candidate["content"] = {"role": "model", "parts": parts}
        body: dict[str, Any] = dict(self.head)
        body["candidates"] = [candidate] if (parts or self.candidate) else []
        body["usageMetadata"] = self.usage
        if self.error is not None:
            body["error"] = self.error
        return Folded(body, FoldExtras(truncated=truncated, raw_arguments=raw_arguments))


def requested_model(body: dict[str, Any], path: str) -> str | None:
    match = _MODEL_IN_PATH.search(path.split("?", 1)[0] + ":")
    if match:
        return match.group(1)
    return body.get("model") if isinstance(body.get("model"), str) else None


def requested_tier(body: dict[str, Any]) -> str | None:
    """The request body's top-level `service_tier` (`flex`, `priority`; omitted is standard).
    https://ai.google.dev/gemini-api/docs/flex-inference"""
    return tier_word(body.get("service_tier", body.get("serviceTier")))


def decode_request(body: dict[str, Any], path: str = "") -> RequestFacts:
    config = sub(body, "generationConfig")
    facts = RequestFacts(
        model=requested_model(body, path),
        stream=":streamGenerateContent" in path if path else None,
        max_tokens=count(config.get("maxOutputTokens")),
        tool_choice=body.get("toolConfig"),
        cached_content=body.get("cachedContent") if isinstance(body.get("cachedContent"), str) else None,
        end_user=vertex_user(body),
        thinking=config.get("thinkingConfig") if isinstance(config.get("thinkingConfig"), dict) else None,
        params={
            k: config[k]
            for k in ("temperature", "topP", "topK", "stopSequences", "responseMimeType", "candidateCount")
            if k in config
        },
    )
    tools = [t for t in items(body, "tools") if isinstance(t, dict)]
    for tool in tools:
        declarations = items(tool, "functionDeclarations") or items(tool, "function_declarations")
        for declaration in declarations:
            if isinstance(declaration, dict):
                schema = declaration.get("parametersJsonSchema", declaration.get("parameters"))
                facts.tools.append(
                    ToolSpec(name=str(declaration.get("name")), schema=schema if isinstance(schema, dict) else None)
                )
        facts.server_tools += [key for key in tool if key not in _FUNCTION_TOOL_FIELDS]
    system = body.get("systemInstruction", body.get("system_instruction"))
    facts.system_chars = sum(json_size(p.get("text", "")) for p in items(system, "parts") if isinstance(p, dict))
    for content in items(body, "contents"):
        if not isinstance(content, dict):
            continue
        role = str(content.get("role") or "user")
        facts.messages_by_role[role] = facts.messages_by_role.get(role, 0) + 1
        facts.message_hashes.append(stable_hash(content))
        facts.message_chars.append(json_size(content.get("parts") or []))
        _scan_parts(facts, items(content, "parts"))
    facts.tools_hash = stable_hash(tools)
    facts.system_hash = stable_hash(system or {})
    return facts


def _scan_parts(facts: RequestFacts, parts: list[Any]) -> None:
    for part in parts:
        if not isinstance(part, dict):
            continue
        media = sub(part, "inlineData") or sub(part, "fileData")
        if str(media.get("mimeType", "")).startswith("image/"):
            facts.images += 1
        response = sub(part, "functionResponse")
        if isinstance(response.get("id"), str):
            facts.tool_result_ids.append(response["id"])
        call = sub(part, "functionCall")
        if isinstance(call.get("id"), str):
            facts.tool_call_ids.append(call["id"])
