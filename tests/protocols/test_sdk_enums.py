"""Every enum the official SDKs declare (anthropic and its beta namespace, openai,
google-genai, botocore's Bedrock model) against our tables: finish and stop reasons,
service tiers, error types, server-tool kinds. A value an SDK upgrade brings that no table
maps fails here, naming the SDK, the type, the value and the table to extend (the raw value
is kept either way: this is about the canonical one).

Each value is read off the SDK's types (sdk_enums.py), never copied, and where a table
decides canonical output the value is also decoded through `decode_exchange`, so the
table is the one the translator reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import anthropic.types as anthropic_types
import anthropic.types.beta as anthropic_beta
import anthropic.types.beta.message_create_params as anthropic_beta_params
import anthropic.types.message_create_params as anthropic_params
import openai.types.chat as chat_types
import openai.types.chat.completion_create_params as chat_params
import openai.types.responses as responses_types
import openai.types.responses.response_create_params as responses_params
import pytest
from google.genai import types as genai
from google.genai._gaos.types.interactions import interaction as interactions
from google.genai._gaos.types.interactions import tool as interaction_tools
from google.rpc import code_pb2
from openai.types.chat import chat_completion, chat_completion_chunk

from llmtap.analytics import pricing
from llmtap.protocols import (
    anthropic_messages,
    bedrock_converse,
    gemini_generate,
    gemini_interactions,
    openai_chat,
    openai_responses,
)
from llmtap.protocols.canonical import Exchange
from llmtap.protocols.common import tier_word
from llmtap.protocols.error_kinds import ERROR_KINDS
from llmtap.protocols.exchange import decode_exchange
from llmtap.protocols.vocabulary import FINISH_REASONS
from tests.protocols import sdk_enums as sdk


def unmapped(values: Iterable[str], known: Iterable[str]) -> list[str]:
    return sorted(set(values) - set(known))


def check(where: str, values: set[str], known: Iterable[str], table: str) -> None:
    """Every value of `where` (an SDK and its type) is in `known`, or the message says
    which values, and which table to extend."""
    assert values, f"{where}: the SDK declares no values any more (its types moved?): fix sdk_enums.py"
    missing = unmapped(values, known)
    assert not missing, f"{where} declares {missing}, which {table} does not map: add one line each there"


def decode(protocol: str, body: dict[str, Any], request: dict[str, Any] | None = None, path: str = "") -> Exchange:
    return decode_exchange(protocol, response=json.dumps(body).encode(), request=request, path=path)


# --- finish and stop reasons --------------------------------------------------------------


def anthropic_stop_reasons() -> dict[str, set[str]]:
    delta = anthropic_types.RawMessageDeltaEvent.model_fields["delta"].annotation
    beta_delta = anthropic_beta.BetaRawMessageDeltaEvent.model_fields["delta"].annotation
    return {
        "anthropic Message.stop_reason": sdk.field(anthropic_types.Message, "stop_reason"),
        "anthropic RawMessageDeltaEvent.delta.stop_reason": sdk.field(delta, "stop_reason"),
        "anthropic.types.beta BetaMessage.stop_reason": sdk.field(anthropic_beta.BetaMessage, "stop_reason"),
        "anthropic.types.beta BetaRawMessageDeltaEvent.delta.stop_reason": sdk.field(beta_delta, "stop_reason"),
    }


@pytest.mark.parametrize("where", sorted(anthropic_stop_reasons()))
def test_anthropic_stop_reasons(where: str) -> None:
    values = anthropic_stop_reasons()[where]
    check(where, values, anthropic_messages.FINISH, "protocols/anthropic_messages.py FINISH")
    for value in values:
        body = {"type": "message", "role": "assistant", "model": "claude", "content": [], "stop_reason": value}
        ex = decode("anthropic.messages", body)
        assert (ex.finish_reason_raw, ex.finish_reason) == (value, anthropic_messages.FINISH[value])
        assert ex.finish_reason in FINISH_REASONS


def test_anthropic_compaction_pauses_the_turn() -> None:
    # SPEC §2: the server compacted the context and paused the turn for the client.
    body = {"type": "message", "role": "assistant", "content": [{"type": "compaction"}], "stop_reason": "compaction"}
    ex = decode("anthropic.messages", body)
    assert (ex.finish_reason_raw, ex.finish_reason, ex.text) == ("compaction", "pause_turn", "")


@pytest.mark.parametrize(
    ("where", "choice"),
    [
        ("openai chat Choice.finish_reason", chat_completion.Choice),
        ("openai chat ChunkChoice", chat_completion_chunk.Choice),
    ],
)
def test_chat_finish_reasons(where: str, choice: Any) -> None:
    values = sdk.field(choice, "finish_reason")
    check(where, values, openai_chat.FINISH, "protocols/openai_chat.py FINISH")
    for value in values:
        message = {"role": "assistant", "content": "hi"}
        ex = decode(
            "openai.chat", {"model": "gpt", "choices": [{"index": 0, "message": message, "finish_reason": value}]}
        )
        assert (ex.finish_reason_raw, ex.finish_reason) == (value, openai_chat.FINISH[value])


def responses_body(status: str, reason: str | None = None) -> dict[str, Any]:
    details = {"reason": reason} if reason else None
    return {
        "id": "resp_1",
        "object": "response",
        "status": status,
        "model": "gpt",
        "output": [],
        "incomplete_details": details,
    }


def test_responses_statuses() -> None:
    values = sdk.field(responses_types.Response, "status")
    known = [*openai_responses._STATUS, "incomplete", *openai_responses._RUNNING, *openai_responses.FINISH_NULL]
    check("openai Response.status", values, known, "protocols/openai_responses.py _STATUS (or FINISH_NULL)")
    for value in values - {"incomplete"}:
        ex = decode("openai.responses", responses_body(value))
        running = value in openai_responses._RUNNING
        assert ex.finish_reason_raw == (None if running else value)
        assert ex.finish_reason == openai_responses._STATUS.get(value)


def test_responses_incomplete_reasons() -> None:
    values = sdk.field(responses_types.response.IncompleteDetails, "reason")
    known = [*openai_responses._INCOMPLETE, *openai_responses.FINISH_NULL]
    check("openai Response.incomplete_details.reason", values, known, "protocols/openai_responses.py _INCOMPLETE")
    for value in values:
        ex = decode("openai.responses", responses_body("incomplete", value))
        assert (ex.finish_reason_raw, ex.finish_reason) == ("incomplete", openai_responses._INCOMPLETE.get(value))


def gemini_body(finish: str | None = None, blocked: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"candidates": []}
    if finish:
        body["candidates"] = [{"content": {"role": "model", "parts": [{"text": "hi"}]}, "finishReason": finish}]
    if blocked:
        body["promptFeedback"] = {"blockReason": blocked}
    return body


def test_gemini_finish_reasons() -> None:
    values = sdk.members(genai.FinishReason)
    known = [*gemini_generate.FINISH, *gemini_generate.FINISH_NULL]
    check("google-genai types.FinishReason", values, known, "protocols/gemini_generate.py FINISH (or FINISH_NULL)")
    assert not set(gemini_generate.FINISH) & set(gemini_generate.FINISH_NULL)
    for value in values:
        ex = decode(
            "gemini.generate", gemini_body(finish=value), path="/v1beta/models/gemini-2.5-flash:generateContent"
        )
        assert (ex.finish_reason_raw, ex.finish_reason) == (value, gemini_generate.FINISH.get(value))


@pytest.mark.parametrize("value", sorted(sdk.members(genai.BlockedReason)))
def test_gemini_blocked_reasons_are_content_filter(value: str) -> None:
    # SPEC §2: a `promptFeedback.blockReason`, whichever, is `content_filter`.
    ex = decode("gemini.generate", gemini_body(blocked=value), path="/v1beta/models/gemini-2.5-flash:generateContent")
    assert (ex.finish_reason_raw, ex.finish_reason) == (value, "content_filter")


def test_interactions_statuses() -> None:
    values = sdk.key_annotation(interactions.InteractionTypedDict, "status")
    values = sdk.literals(values)
    known = [*gemini_interactions.FINISH, *gemini_interactions.FINISH_NULL, *gemini_interactions._RUNNING]
    check("google-genai Interaction.status", values, known, "protocols/gemini_interactions.py FINISH (or FINISH_NULL)")
    for value in values:
        ex = decode("gemini.interactions", {"id": "v1_1", "status": value, "model": "gemini", "steps": []})
        running = value in gemini_interactions._RUNNING
        assert ex.finish_reason_raw == (None if running else value)
        assert ex.finish_reason == gemini_interactions.FINISH.get(value)


def test_a_queued_interaction_has_not_finished() -> None:
    # As a queued Response: a background POST's answer says how it started, not how it ended.
    body = {"id": "v1_1", "status": "queued", "model": "gemini-2.5-flash"}
    request = {"model": "gemini-2.5-flash", "input": "hi", "background": True}
    ex = decode("gemini.interactions", body, request)
    assert (ex.finish_reason_raw, ex.finish_reason, ex.background_state) == (None, None, "queued")


def test_bedrock_stop_reasons() -> None:
    values = sdk.botocore_enum("bedrock-runtime", "StopReason")
    check(
        "botocore bedrock-runtime StopReason", values, bedrock_converse.FINISH, "protocols/bedrock_converse.py FINISH"
    )
    for value in values:
        body = {"output": {"message": {"role": "assistant", "content": [{"text": "hi"}]}}, "stopReason": value}
        ex = decode("bedrock.converse", body, path="/model/anthropic.claude/converse")
        assert (ex.finish_reason_raw, ex.finish_reason) == (value, bedrock_converse.FINISH[value])


# --- service tiers --------------------------------------------------------------------------


def genai_prices_tiers() -> set[str]:
    """The `service_tier` values genai-prices has price variants for."""
    from genai_prices import data

    found = set()
    for provider in data.providers:
        for model in provider.models:
            for variant in model.price_variants or []:
                found.add(variant.when.get("service_tier"))
    return {tier for tier in found if tier}


def sdk_tiers() -> dict[str, set[str]]:
    """Each SDK's service tiers, as the translators record them (`tier_word`, which keeps
    no tier for `auto`; Anthropic's request `standard_only` is `standard`; Gemini's traffic
    types through the translator's table)."""
    traffic = sdk.members(genai.TrafficType) - set(gemini_generate.TRAFFIC_NULL)
    untranslated = unmapped(traffic, gemini_generate._TRAFFIC_TIERS)
    assert not untranslated, (
        f"google-genai types.TrafficType declares {untranslated}, which protocols/gemini_generate.py "
        "_TRAFFIC_TIERS does not map (or TRAFFIC_NULL): add one line each there"
    )
    return {
        "anthropic Usage.service_tier": sdk.field(anthropic_types.Usage, "service_tier"),
        "anthropic.types.beta BetaUsage.service_tier": sdk.field(anthropic_beta.BetaUsage, "service_tier"),
        "anthropic MessageCreateParams.service_tier": sdk.key(anthropic_params.MessageCreateParamsBase, "service_tier"),
        "anthropic.types.beta MessageCreateParams.service_tier": sdk.key(
            anthropic_beta_params.MessageCreateParamsBase, "service_tier"
        ),
        "openai ChatCompletion.service_tier": sdk.field(chat_types.ChatCompletion, "service_tier"),
        "openai ChatCompletionChunk.service_tier": sdk.field(chat_types.ChatCompletionChunk, "service_tier"),
        "openai chat CompletionCreateParams.service_tier": sdk.key(
            chat_params.CompletionCreateParamsBase, "service_tier"
        ),
        "openai Response.service_tier": sdk.field(responses_types.Response, "service_tier"),
        "openai ResponseCreateParams.service_tier": sdk.key(responses_params.ResponseCreateParamsBase, "service_tier"),
        "google-genai types.ServiceTier": sdk.members(genai.ServiceTier),
        "google-genai types.TrafficType": {gemini_generate._TRAFFIC_TIERS[t] for t in traffic},
        "google-genai Interaction.service_tier": sdk.literals(
            sdk.key_annotation(interactions.InteractionTypedDict, "service_tier")
        ),
        "botocore bedrock-runtime ServiceTierType": sdk.botocore_enum("bedrock-runtime", "ServiceTierType"),
    }


@pytest.mark.parametrize("where", sorted(sdk_tiers()))
def test_service_tiers_are_ones_the_pricer_knows(where: str) -> None:
    recorded = {tier_word(tier) or "auto" for tier in sdk_tiers()[where]}
    known = [*pricing.STANDARD_TIERS, *pricing.CONTEXT_TIERS, *genai_prices_tiers(), *pricing.TIERS_WITHOUT_PRICES]
    check(where, recorded, known, "analytics/pricing.py STANDARD_TIERS (or TIERS_WITHOUT_PRICES)")


def test_the_pricer_prices_each_kind_of_tier() -> None:
    assert all(pricing.price_context_of(tier, None) == {} for tier in pricing.STANDARD_TIERS)
    assert pricing.price_context_of("batch", None) == {"processing": "batch"}
    for tier in (*genai_prices_tiers(), *pricing.TIERS_WITHOUT_PRICES):
        if tier not in pricing.STANDARD_TIERS:
            assert pricing.price_context_of(tier, None) == {"service_tier": tier}


# --- error types ----------------------------------------------------------------------------


def sdk_error_types() -> dict[str, set[str]]:
    return {
        "anthropic ErrorObject.type": sdk.types_of(sdk.models(anthropic_types.ErrorObject)),
        "anthropic.types.beta BetaErrorObject.type": sdk.types_of(sdk.models(anthropic_types.BetaErrorObject)),
        "openai ResponseError.code": sdk.field(responses_types.ResponseError, "code"),
        # Google's API errors carry a google.rpc.Code name as `error.status`; OK is no error.
        "googleapis-common-protos google.rpc.Code": set(code_pb2.Code.keys()) - {"OK"},
        "botocore bedrock-runtime errors": sdk.botocore_errors("bedrock-runtime"),
    }


@pytest.mark.parametrize("where", sorted(sdk_error_types()))
def test_error_types_are_classified(where: str) -> None:
    check(where, sdk_error_types()[where], ERROR_KINDS, "protocols/error_kinds.py ERROR_KINDS")


def test_error_kinds_agree_with_anthropic_statuses() -> None:
    # Anthropic's types are the ones whose status the report classifies without them.
    assert ERROR_KINDS["rate_limit_error"] == "rate_limited"
    assert ERROR_KINDS["overloaded_error"] == "overloaded"
    assert {ERROR_KINDS[t] for t in ("api_error", "timeout_error")} == {"server_error"}


# --- server-tool kinds: Anthropic -----------------------------------------------------------


def anthropic_blocks() -> dict[str, set[str]]:
    return {
        "anthropic Message.content": sdk.types_of(
            sdk.models(anthropic_types.Message.model_fields["content"].annotation)
        ),
        "anthropic.types.beta BetaMessage.content": sdk.types_of(
            sdk.models(anthropic_beta.BetaMessage.model_fields["content"].annotation)
        ),
    }


def landed(ex: Exchange) -> str | None:
    """Where a lone block, item, step or part went in the canonical exchange."""
    places = {
        "text": bool(ex.text),
        "reasoning": ex.reasoning_blocks > 0,
        "tool_calls": bool(ex.tool_calls),
        "server_tool_calls": bool(ex.server_tool_calls),
    }
    found = [place for place, there in places.items() if there]
    assert len(found) <= 1, found
    return found[0] if found else None


@pytest.mark.parametrize("where", sorted(anthropic_blocks()))
def test_anthropic_content_blocks(where: str) -> None:
    uncounted = anthropic_messages._UNCOUNTED_BLOCKS
    kinds = anthropic_blocks()[where]
    assert kinds & set(anthropic_messages._SERVER_CALL_BLOCKS), f"{where}: the SDK declares no server tool blocks"
    for kind in sorted(kinds):
        block = {"type": kind, "id": "b1", "name": "web_search", "input": {}, "text": "t", "thinking": "t"}
        place = landed(decode("anthropic.messages", {"type": "message", "content": [block]}))
        if kind in anthropic_messages._SERVER_CALL_BLOCKS:
            assert place == "server_tool_calls", kind
        assert (place is None) == (kind in uncounted), (
            f"{where} declares {kind!r}, which protocols/anthropic_messages.py decodes nowhere and "
            "_UNCOUNTED_BLOCKS does not list: decode it, or add it there"
            if place is None
            else f"{kind!r} is decoded into {place} but listed in _UNCOUNTED_BLOCKS"
        )


def anthropic_request_tools() -> dict[str, set[str]]:
    def tool_types(params: Any) -> set[str]:
        return sdk.types_of(sdk.models(sdk.key_annotation(params, "tools")))

    return {
        "anthropic MessageCreateParams.tools": tool_types(anthropic_params.MessageCreateParamsBase),
        "anthropic.types.beta MessageCreateParams.tools": tool_types(anthropic_beta_params.MessageCreateParamsBase),
    }


@pytest.mark.parametrize("where", sorted(anthropic_request_tools()))
def test_anthropic_request_tool_types(where: str) -> None:
    server, client = anthropic_messages._SERVER_TOOL_PREFIXES, anthropic_messages._CLIENT_TOOL_PREFIXES
    values = anthropic_request_tools()[where]
    known = [v for v in values if v.startswith(server) != v.startswith(client)]
    check(where, values, known, "protocols/anthropic_messages.py _SERVER_TOOL_PREFIXES or _CLIENT_TOOL_PREFIXES (one)")
    for kind in values:
        facts = decode("anthropic.messages", {"content": []}, {"tools": [{"type": kind, "name": "t"}]}).request
        assert facts is not None
        assert (facts.server_tools == ["t"]) == kind.startswith(server), kind
        assert ([tool.type for tool in facts.tools] == [kind]) == kind.startswith(client), kind


def test_anthropic_server_tool_names_are_server_tools() -> None:
    names = anthropic_messages._SERVER_TOOL_NAMES
    assert set(names.values()) <= set(anthropic_messages._SERVER_TOOL_PREFIXES)
    for where, block in [
        ("anthropic ServerToolUseBlock.name", anthropic_types.ServerToolUseBlock),
        ("anthropic.types.beta BetaServerToolUseBlock.name", anthropic_beta.BetaServerToolUseBlock),
    ]:
        check(where, sdk.field(block, "name"), names, "protocols/anthropic_messages.py _SERVER_TOOL_NAMES")


def test_anthropic_usage_counters() -> None:
    for where, usage in [
        ("anthropic ServerToolUsage", anthropic_types.ServerToolUsage),
        ("anthropic.types.beta BetaServerToolUsage", anthropic_beta.BetaServerToolUsage),
    ]:
        check(
            where,
            set(usage.model_fields),
            anthropic_messages._SERVER_TOOL_COUNTS,
            "protocols/anthropic_messages.py _SERVER_TOOL_COUNTS",
        )
    iterations = sdk.types_of(sdk.models(anthropic_beta.BetaUsage.model_fields["iterations"].annotation))
    known = [
        *anthropic_messages._EXECUTOR_ITERATIONS,
        anthropic_messages._ADVISOR_ITERATION,
        anthropic_messages._FALLBACK_ITERATION,
    ]
    check(
        "anthropic.types.beta BetaUsage.iterations[].type",
        iterations,
        known,
        "protocols/anthropic_messages.py _EXECUTOR_ITERATIONS",
    )


# --- server-tool kinds: OpenAI Responses ----------------------------------------------------

_CLIENT_CALL_ITEMS = ("function_call", "custom_tool_call", *openai_responses._CLIENT_ACTION_ITEMS)


def test_responses_output_items() -> None:
    values = sdk.types_of(sdk.models(responses_types.Response.model_fields["output"].annotation))
    assert values, "openai Response.output declares no item types any more: fix sdk_enums.py"
    for kind in sorted(values):
        item = {
            "type": kind,
            "id": "i1",
            "call_id": "c1",
            "name": "f",
            "arguments": "{}",
            "input": "x",
            "action": {},
            "status": "completed",
            "content": [{"type": "output_text", "text": "t"}],
        }
        place = landed(decode("openai.responses", {"status": "completed", "output": [item]}))
        expected = {
            "server_tool_calls": openai_responses._SERVER_ITEMS,
            "tool_calls": _CLIENT_CALL_ITEMS,
            "text": ("message",),
            "reasoning": ("reasoning",),
            None: openai_responses._UNCOUNTED_ITEMS,
        }[place]
        assert kind in expected, (
            f"openai Response.output declares {kind!r}, which protocols/openai_responses.py decodes into "
            f"{place or 'nothing'} by no table of its own: add it to _SERVER_ITEMS, _CLIENT_ACTION_ITEMS "
            "or _UNCOUNTED_ITEMS"
        )


def test_responses_request_tool_types() -> None:
    values = sdk.types_of(sdk.models(responses_types.Response.model_fields["tools"].annotation))
    values |= sdk.types_of(sdk.models(sdk.key_annotation(responses_params.ResponseCreateParamsBase, "tools")))
    server, client = openai_responses._SERVER_TOOL_TYPES, openai_responses._CLIENT_TOOL_TYPES
    known = [v for v in values if (v in server) != (v in client)]
    check(
        "openai Response.tools", values, known, "protocols/openai_responses.py _SERVER_TOOL_TYPES or _CLIENT_TOOL_TYPES"
    )
    for kind in values - {"namespace"}:
        facts = decode("openai.responses", {"status": "completed"}, {"tools": [{"type": kind, "name": "t"}]}).request
        assert facts is not None
        assert (facts.server_tools == [kind]) == (kind in server), kind


# --- server-tool kinds: Gemini ---------------------------------------------------------------

GEMINI_PATH = "/v1beta/models/gemini-3-flash:generateContent"


def test_gemini_part_fields() -> None:
    values = sdk.wire_fields(genai.Part)
    assert values, "google-genai types.Part declares no fields any more"
    for name in sorted(values):
        value: Any = {"name": "f", "args": {}, "code": "x", "toolType": "GOOGLE_SEARCH_WEB", "id": "c1"}
        value = {"text": "t", "thought": True, "thoughtSignature": "sig"}.get(name, value)
        body = {"candidates": [{"content": {"role": "model", "parts": [{name: value}]}, "finishReason": "STOP"}]}
        place = landed(decode("gemini.generate", body, path=GEMINI_PATH))
        assert (place is None) == (name in gemini_generate._UNCOUNTED_PART_FIELDS), (
            f"google-genai types.Part declares {name!r}, which protocols/gemini_generate.py decodes nowhere and "
            "_UNCOUNTED_PART_FIELDS does not list: decode it, or add it there"
            if place is None
            else f"{name!r} is decoded into {place} but listed in _UNCOUNTED_PART_FIELDS"
        )


def test_gemini_server_side_tool_calls() -> None:
    values = sdk.members(genai.ToolType)
    check(
        "google-genai types.ToolType",
        values,
        gemini_generate._TOOL_CALL_TYPES,
        "protocols/gemini_generate.py _TOOL_CALL_TYPES",
    )
    parts = [{"toolCall": {"id": "s1", "toolType": "GOOGLE_SEARCH_WEB", "args": {"queries": ["q"]}}}]
    parts += [{"toolResponse": {"id": "s1", "toolType": "GOOGLE_SEARCH_WEB", "response": {}}}, {"text": "Utqiagvik."}]
    grounding = {"webSearchQueries": ["q"], "groundingChunks": [{"web": {"uri": "https://example.com"}}]}
    candidate = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "groundingMetadata": grounding}
    ex = decode("gemini.generate", {"candidates": [candidate], "modelVersion": "gemini-3-flash"}, path=GEMINI_PATH)
    # The toolCall part is the call; the grounding it brought does not count it again.
    assert [(c.type, c.id, c.name) for c in ex.server_tool_calls] == [("google_search", "s1", "GOOGLE_SEARCH_WEB")]
    assert (ex.text, ex.server_tool_uses) == ("Utqiagvik.", {"web_search": 1})


def test_gemini_request_tool_fields() -> None:
    values = sdk.wire_fields(genai.Tool)
    functions, server = gemini_generate._FUNCTION_TOOL_FIELDS, gemini_generate._SERVER_TOOL_FIELDS
    check("google-genai types.Tool", values, [*functions, *server], "protocols/gemini_generate.py _SERVER_TOOL_FIELDS")
    for name in values - set(functions):
        facts = decode("gemini.generate", gemini_body(finish="STOP"), {"tools": [{name: {}}]}, GEMINI_PATH).request
        assert facts is not None and facts.server_tools == [name]


def test_interactions_steps() -> None:
    values = sdk.types_of(sdk.models(interactions.Interaction.model_fields["steps"].annotation))
    assert values, "google-genai Interaction.steps declares no step types any more"
    for kind in sorted(values):
        step = {
            "type": kind,
            "id": "s1",
            "name": "f",
            "arguments": {},
            "text": "t",
            "content": [{"type": "text", "text": "t"}],
        }
        place = landed(decode("gemini.interactions", {"status": "completed", "steps": [step]}))
        expected = {
            "server_tool_calls": gemini_interactions._SERVER_STEPS,
            "tool_calls": ("function_call",),
            "text": ("text", "model_output"),
            "reasoning": ("thought",),
            None: gemini_interactions._UNCOUNTED_STEPS,
        }[place]
        assert kind in expected, (
            f"google-genai Interaction.steps declares {kind!r}, which protocols/gemini_interactions.py decodes "
            f"into {place or 'nothing'} by no table of its own: add it to _SERVER_STEPS or _UNCOUNTED_STEPS"
        )


def test_interactions_request_tool_types() -> None:
    values = sdk.types_of(sdk.models(interaction_tools.Tool))
    server, client = gemini_interactions._SERVER_TOOLS, gemini_interactions._CLIENT_TOOLS
    known = [v for v in values if (v in server) != (v in client)]
    check(
        "google-genai interactions Tool",
        values,
        known,
        "protocols/gemini_interactions.py _SERVER_TOOLS or _CLIENT_TOOLS",
    )
    for kind in values:
        facts = decode("gemini.interactions", {"status": "completed"}, {"tools": [{"type": kind, "name": "t"}]}).request
        assert facts is not None
        assert (facts.server_tools == [kind]) == (kind in server), kind
