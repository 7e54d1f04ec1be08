"""The canonical exchange of SPEC.md §2: one request and its response, as plain values.

These are pure values with one meaning across providers. Identity (database ids, who sent
it, when) is the storage's and the addon's business, not this module's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

# SPEC §2 "Canonical finish reasons" and the tool-call statuses: protocols/vocabulary.py.
from llmtap.protocols.vocabulary import FINISH_REASONS as FINISH_REASONS
from llmtap.protocols.vocabulary import FinishReason as FinishReason
from llmtap.protocols.vocabulary import ToolStatus

# Where the usage counts came from: the provider's final report, the last cumulative count
# of a stream that was cut (so possibly low), or nowhere.
USAGE_PROVENANCE = ("reported", "partial", "missing")


@dataclass(slots=True)
class Usage:
    """Token counts, one meaning everywhere (SPEC §2 "Canonical usage").

    `input_tokens` includes cached reads and cache writes; `output_tokens` includes
    reasoning. `reasoning_tokens` is None when the provider does not report it. The 5m/1h
    split of cache writes is None unless the provider reports it (Anthropic).
    """

    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int | None = None
    cache_write_5m_tokens: int | None = None
    cache_write_1h_tokens: int | None = None
    total_tokens_reported: int | None = None
    # Where the usage splits input or output by modality: the non-text counts, under
    # genai-prices' unit names (`input_audio_tokens`, `cache_audio_read_tokens`,
    # `input_image_tokens`, `output_audio_tokens`, `output_image_tokens`, …), each a part
    # of the totals above. Empty when the payload does not split them.
    modalities: dict[str, int] = field(default_factory=dict)
    # Usage of other models inside this exchange, billed at their own rates and never
    # counted in the totals above (Anthropic's advisor tool: an `advisor_message`
    # iteration). Each: {kind, model, input_tokens, cache_read_tokens,
    # cache_write_tokens, output_tokens}, with the same meanings as the totals.
    sub_usages: list[dict[str, Any]] = field(default_factory=list)

    def checks(self) -> list[str]:
        """The invariants a well-formed usage keeps; each broken one as a sentence."""
        problems = []
        if self.cache_read_tokens + self.cache_write_tokens > self.input_tokens:
            problems.append(
                f"cache_read_tokens + cache_write_tokens ({self.cache_read_tokens} + "
                f"{self.cache_write_tokens}) exceed input_tokens ({self.input_tokens})"
            )
        if self.reasoning_tokens is not None and self.reasoning_tokens > self.output_tokens:
            problems.append(f"reasoning_tokens ({self.reasoning_tokens}) exceed output_tokens ({self.output_tokens})")
        total = self.total_tokens_reported
        if total is not None and total != self.input_tokens + self.output_tokens:
            problems.append(
                f"reported total {total} != input_tokens + output_tokens ({self.input_tokens + self.output_tokens})"
            )
        return problems


@dataclass(slots=True)
class ToolCall:
    """A call of a client-side tool. `arguments_raw` is exactly what the model produced.

    `kind` is `function` (JSON arguments) or `custom` (a free-form tool such as a Responses
    `custom` tool: its input text is `arguments_raw`, `arguments` is None and `valid_json`
    False, and it is checked against its declared grammar, never as JSON)."""

    id: str | None
    name: str | None
    arguments: dict[str, Any] | None
    arguments_raw: str
    valid_json: bool
    kind: str = "function"
    # Set by `toolcheck`: one of vocabulary.TOOL_STATUSES (SPEC §5), with a sentence
    # saying why when not valid.
    status: ToolStatus = "valid"
    status_detail: str | None = None


@dataclass(slots=True)
class ServerToolCall:
    """A call the provider ran itself (web search, code execution, grounding)."""

    type: str
    id: str | None = None
    name: str | None = None


@dataclass(slots=True)
class ApiError:
    type: str | None
    code: str | None
    message: str | None


@dataclass(slots=True)
class ToolSpec:
    """A tool the request declared: its name and the JSON Schema of its arguments.

    A `custom` tool (Responses) has no JSON Schema: its `schema` is the declared input
    format as sent (`{"type": "grammar", "syntax": "lark" | "regex", "definition": …}` or
    `{"type": "text"}`), or None. A tool declared inside a namespace is named
    `namespace.tool`."""

    name: str
    schema: dict[str, Any] | None = None
    type: str = "function"


@dataclass(slots=True)
class RequestFacts:
    """What the request asked for, as reports and cache analysis need it."""

    model: str | None = None
    stream: bool | None = None
    max_tokens: int | None = None
    tools: list[ToolSpec] = field(default_factory=list)
    server_tools: list[str] = field(default_factory=list)
    tool_choice: Any = None
    messages_by_role: dict[str, int] = field(default_factory=dict)
    system_chars: int = 0
    images: int = 0
    cache_breakpoints: int = 0
    cache_ttl: str | None = None
    prompt_cache_key: str | None = None
    previous_response_id: str | None = None
    cached_content: str | None = None
    thinking: dict[str, Any] | None = None
    tool_result_ids: list[str] = field(default_factory=list)
    tool_call_ids: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    # Prefix hashes for cache analysis: the tool list, the system prompt, and each
    # message (cache markers removed), so two requests can be compared without bodies.
    tools_hash: str | None = None
    system_hash: str | None = None
    message_hashes: list[str] = field(default_factory=list)
    message_chars: list[int] = field(default_factory=list)
    # The same prefix in parts, where a protocol lets a request extend the prefix of a
    # response it names (protocols/prefix.py; Responses): None for the others.
    prefix: dict[str, str | None] | None = None
    # the end user the request names (protocols/who_asked.py): text from the client
    end_user: str | None = None


@dataclass(slots=True)
class Exchange:
    """One request and its response, in the canonical shape of SPEC §2."""

    protocol: str
    provider: str | None = None
    streamed: bool = False
    status: int | None = None
    complete: bool = False
    model_requested: str | None = None
    model: str | None = None
    response_id: str | None = None
    finish_reason: FinishReason | None = None
    finish_reason_raw: str | None = None
    usage: Usage | None = None
    usage_raw: Any = None
    usage_provenance: str = "missing"
    usage_check: list[str] = field(default_factory=list)
    text: str = ""
    text_truncated: bool = False
    refusal: str | None = None
    reasoning_blocks: int = 0
    tool_calls: list[ToolCall] = field(default_factory=list)
    server_tool_calls: list[ServerToolCall] = field(default_factory=list)
    error: ApiError | None = None
    # A request that asked for no generation (Responses `generate: false`, as Codex sends
    # to warm a connection): recorded and billed, left out of finish and latency shares.
    warmup: bool = False
    # A background (`background: true`) response's or interaction's status as this payload
    # states it (`queued`, `in_progress`, `completed`, …); None for work not sent to the
    # background. Its poll completes the exchange (SPEC §1; protocols/followups.py).
    background_state: str | None = None
    request: RequestFacts | None = None
    events: int = 0
    # What was served, as far as it changes the price (SPEC §2, §5): the service tier the
    # provider says it served (else the requested one); Anthropic's `usage.inference_geo`
    # and `usage.speed`; counts of provider-run tool uses billed per use, by kind
    # (`web_search`, `web_fetch`, `file_search`, `code_execution`).
    service_tier: str | None = None
    inference_geo: str | None = None
    speed: str | None = None
    server_tool_uses: dict[str, int] = field(default_factory=dict)
    # Why the response stopped short (client hung up, upstream reset), when it did.
    interrupted: str | None = None
    decode_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape `llmtap decode` prints and exports carry.

        Values that came from the payload (`usage_raw`, `arguments`, schemas, params) are
        shared, not copied: `dataclasses.asdict` would recurse into them, and a payload may
        nest deeper than Python recursion goes (`json.loads` accepts ~1,500 levels)."""
        return _fields(self)


def _fields(value: Any) -> dict[str, Any]:
    """A dataclass instance as a dict, recursing only into dataclasses and lists of them."""
    return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _fields(value)
    if isinstance(value, list):
        return [_plain(item) if dataclasses.is_dataclass(item) else item for item in value]
    return value
