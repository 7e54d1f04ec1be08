"""Request facts per protocol (SPEC §2 `request`): stream flag, token limit, tools and their
schemas, tool_choice, messages by role, system size, images, cache breakpoints and TTL,
prompt_cache_key, previous_response_id, thinking settings, tool call and result ids; and the
prefix hashes cache analysis compares, which a moved `cache_control` marker must not change."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from llmtap.protocols import ExchangeDecoder, RequestFacts
from llmtap.protocols.exchange import TRANSLATORS

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city"],
}
LOOKUP = {"type": "object", "properties": {"q": {"type": "string"}}}
PNG = "iVBORw0KGgo="

ANTHROPIC = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 4096,
    "stream": True,
    "thinking": {"type": "enabled", "budget_tokens": 2048},
    "tool_choice": {"type": "auto"},
    "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
    "tools": [
        {"name": "get_weather", "description": "Weather for a city", "input_schema": WEATHER},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 2},
        {"name": "lookup", "input_schema": LOOKUP, "cache_control": {"type": "ephemeral"}},
    ],
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Weather in Paris?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            ],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_A", "name": "get_weather", "input": {"city": "Paris"}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_A",
                    "content": "18°C",
                    "cache_control": {"type": "ephemeral"},
                }
            ],
        },
    ],
}

CHAT = {
    "model": "gpt-4.1",
    "max_completion_tokens": 512,
    "stream": True,
    "stream_options": {"include_usage": True},
    "reasoning_effort": "low",
    "prompt_cache_key": "user-42",
    "tool_choice": "required",
    "tools": [
        {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
        {"type": "custom", "custom": {"name": "apply_patch", "format": {"type": "text"}}},
    ],
    "messages": [
        {"role": "developer", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Weather?"},
                {"type": "image_url", "image_url": {"url": "https://example.org/a.png"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
    ],
}

CHAT_LEGACY = {
    "model": "gpt-3.5-turbo",
    "max_tokens": 100,
    "functions": [{"name": "lookup", "parameters": LOOKUP}],
    "function_call": {"name": "lookup"},
    "messages": [{"role": "system", "content": "abc"}, {"role": "user", "content": "hi"}],
}

RESPONSES = {
    "model": "gpt-5",
    "instructions": "You are terse.",
    "max_output_tokens": 2000,
    "stream": True,
    "store": False,
    "previous_response_id": "resp_abc",
    "prompt_cache_key": "conv-7",
    "prompt_cache_retention": "24h",
    "reasoning": {"effort": "high", "summary": "auto"},
    "tool_choice": "auto",
    "tools": [
        {"type": "function", "name": "get_weather", "parameters": WEATHER, "strict": True},
        {"type": "web_search"},
        {"type": "code_interpreter", "container": {"type": "auto"}},
    ],
    "input": [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Weather?"},
                {"type": "input_image", "image_url": "https://example.org/a.png"},
            ],
        },
        {"type": "function_call", "call_id": "call_9", "name": "get_weather", "arguments": '{"city":"Paris"}'},
        {"type": "function_call_output", "call_id": "call_9", "output": "18C"},
    ],
}

GEMINI = {
    "systemInstruction": {"parts": [{"text": "You are terse."}]},
    "contents": [
        {"role": "user", "parts": [{"text": "Weather?"}, {"inlineData": {"mimeType": "image/png", "data": PNG}}]},
        {
            "role": "model",
            "parts": [{"functionCall": {"id": "fc_1", "name": "get_weather", "args": {"city": "Paris"}}}],
        },
        {
            "role": "user",
            "parts": [{"functionResponse": {"id": "fc_1", "name": "get_weather", "response": {"temp": 18}}}],
        },
    ],
    "tools": [
        {"functionDeclarations": [{"name": "get_weather", "parametersJsonSchema": WEATHER}]},
        {"googleSearch": {}},
    ],
    "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
    "generationConfig": {"maxOutputTokens": 1024, "thinkingConfig": {"thinkingBudget": 512, "includeThoughts": True}},
    "cachedContent": "cachedContents/abc123",
}
VERTEX_STREAM = "/v1/projects/p/locations/l/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse"

INTERACTIONS = {
    "model": "gemini-2.5-flash",
    "stream": True,
    "previous_interaction_id": "v1_prev",
    "system_instruction": "You are terse.",
    "tools": [{"type": "function", "name": "get_weather", "parameters": WEATHER}, {"type": "google_search"}],
    "generation_config": {
        "max_output_tokens": 800,
        "thinking_level": "low",
        "thinking_summaries": "auto",
        "temperature": 0.2,
    },
    "input": [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Weather?"}, {"type": "image", "data": PNG, "mime_type": "image/png"}],
        },
        {
            "role": "model",
            "content": [{"type": "function_call", "id": "fc_2", "name": "get_weather", "arguments": {"city": "Paris"}}],
        },
        {
            "role": "user",
            "content": [{"type": "function_result", "call_id": "fc_2", "name": "get_weather", "result": "18C"}],
        },
    ],
}

CASES: dict[str, tuple[str, str, dict[str, Any], dict[str, Any]]] = {
    "anthropic": (
        "anthropic.messages",
        "/v1/messages",
        ANTHROPIC,
        {
            "model": "claude-sonnet-4-5",
            "stream": True,
            "max_tokens": 4096,
            "tools": [("get_weather", WEATHER), ("lookup", LOOKUP)],
            "server_tools": ["web_search"],
            "tool_choice": {"type": "auto"},
            "messages_by_role": {"user": 2, "assistant": 1},
            "system_chars": len("You are terse."),
            "images": 1,
            "cache_breakpoints": 3,  # system, a tool, a tool_result
            "cache_ttl": "1h",
            "thinking": {"type": "enabled", "budget_tokens": 2048},
            "tool_call_ids": ["toolu_A"],
            "tool_result_ids": ["toolu_A"],
            "message_count": 3,
        },
    ),
    "chat": (
        "openai.chat",
        "/v1/chat/completions",
        CHAT,
        {
            "model": "gpt-4.1",
            "stream": True,
            "max_tokens": 512,
            "tools": [("get_weather", WEATHER), ("apply_patch", {"type": "text"})],
            "server_tools": [],
            "tool_choice": "required",
            "messages_by_role": {"developer": 1, "user": 1, "assistant": 1, "tool": 1},
            "system_chars": len("Be brief."),
            "images": 1,
            "cache_breakpoints": 0,
            "prompt_cache_key": "user-42",
            "thinking": {"reasoning_effort": "low"},
            "tool_call_ids": ["call_1"],
            "tool_result_ids": ["call_1"],
            "message_count": 3,  # the leading developer message is the system prefix
        },
    ),
    "chat legacy functions": (
        "openai.chat",
        "/v1/chat/completions",
        CHAT_LEGACY,
        {
            "stream": None,
            "max_tokens": 100,
            "tools": [("lookup", LOOKUP)],
            "tool_choice": {"name": "lookup"},
            "messages_by_role": {"system": 1, "user": 1},
            "system_chars": 3,
            "thinking": None,
            "message_count": 1,
        },
    ),
    "responses": (
        "openai.responses",
        "/v1/responses",
        RESPONSES,
        {
            "model": "gpt-5",
            "stream": True,
            "max_tokens": 2000,
            "tools": [("get_weather", WEATHER)],
            "server_tools": ["web_search", "code_interpreter"],
            "tool_choice": "auto",
            "messages_by_role": {"user": 1, "tool": 1},
            "system_chars": len("You are terse."),
            "images": 1,
            "cache_ttl": "24h",
            "prompt_cache_key": "conv-7",
            "previous_response_id": "resp_abc",
            "thinking": {"effort": "high", "summary": "auto"},
            "tool_call_ids": ["call_9"],
            "tool_result_ids": ["call_9"],
            "message_count": 3,
        },
    ),
    "responses websocket response.create": (
        "openai.responses",
        "/v1/responses",
        {"type": "response.create", "response": RESPONSES},
        {"model": "gpt-5", "previous_response_id": "resp_abc", "tool_result_ids": ["call_9"]},
    ),
    "gemini vertex": (
        "gemini.generate",
        VERTEX_STREAM,
        GEMINI,
        {
            "model": "gemini-2.5-pro",
            "stream": True,
            "max_tokens": 1024,
            "tools": [("get_weather", WEATHER)],
            "server_tools": ["googleSearch"],
            "tool_choice": {"functionCallingConfig": {"mode": "AUTO"}},
            "messages_by_role": {"user": 2, "model": 1},
            "system_chars": len("You are terse."),
            "images": 1,
            "cached_content": "cachedContents/abc123",
            "thinking": {"thinkingBudget": 512, "includeThoughts": True},
            "tool_call_ids": ["fc_1"],
            "tool_result_ids": ["fc_1"],
            "message_count": 3,
        },
    ),
    "gemini generateContent": (
        "gemini.generate",
        "/v1beta/models/gemini-2.5-flash:generateContent",
        {"contents": [{"parts": [{"text": "hi"}]}]},
        {"model": "gemini-2.5-flash", "stream": False, "messages_by_role": {"user": 1}, "thinking": None},
    ),
    "interactions": (
        "gemini.interactions",
        "/v1beta/interactions",
        INTERACTIONS,
        {
            "model": "gemini-2.5-flash",
            "stream": True,
            "max_tokens": 800,
            "tools": [("get_weather", WEATHER)],
            "server_tools": ["google_search"],
            "messages_by_role": {"user": 2, "model": 1},
            "system_chars": len("You are terse."),
            "images": 1,
            "previous_response_id": "v1_prev",
            "thinking": {"thinking_level": "low", "thinking_summaries": "auto"},
            "tool_call_ids": ["fc_2"],
            "tool_result_ids": ["fc_2"],
            "message_count": 3,
        },
    ),
    "interactions agent, string input": (
        "gemini.interactions",
        "/v1beta/interactions",
        {"agent": "deep-research-pro-preview-12-2025", "input": "Research llamas.", "background": True},
        {"model": "deep-research-pro-preview-12-2025", "messages_by_role": {"user": 1}, "message_count": 1},
    ),
}


def facts_of(protocol: str, path: str, body: dict[str, Any]) -> RequestFacts:
    return TRANSLATORS[protocol].decode_request(copy.deepcopy(body), path)


def view(facts: RequestFacts, key: str) -> Any:
    if key == "tools":
        return [(tool.name, tool.schema) for tool in facts.tools]
    if key == "message_count":
        return len(facts.message_hashes)
    return getattr(facts, key)


@pytest.mark.parametrize(("protocol", "path", "body", "expected"), CASES.values(), ids=CASES.keys())
def test_request_facts(protocol: str, path: str, body: dict[str, Any], expected: dict[str, Any]):
    facts = facts_of(protocol, path, body)
    assert {key: view(facts, key) for key in expected} == expected
    assert len(facts.message_chars) == len(facts.message_hashes)


@pytest.mark.parametrize(("protocol", "path", "body", "expected"), CASES.values(), ids=CASES.keys())
def test_the_record_carries_the_same_facts(protocol: str, path: str, body: dict[str, Any], expected: dict[str, Any]):
    decoder = ExchangeDecoder(protocol, request=body, path=path)
    record = decoder.finish()
    assert record.request == facts_of(protocol, path, body)
    assert record.model_requested == expected.get("model", record.model_requested)


def _move_marker(body: dict[str, Any], frm: int, to: int) -> dict[str, Any]:
    """The same request with its message cache_control marker moved from message `frm`'s
    last content part to message `to`'s."""
    moved = copy.deepcopy(body)
    marker = moved["messages"][frm]["content"][-1].pop("cache_control")
    moved["messages"][to]["content"][-1]["cache_control"] = marker
    return moved


def test_anthropic_moving_a_cache_marker_keeps_every_hash():
    before = facts_of("anthropic.messages", "/v1/messages", ANTHROPIC)
    after = facts_of("anthropic.messages", "/v1/messages", _move_marker(ANTHROPIC, 2, 0))
    assert after.message_hashes == before.message_hashes
    assert (after.tools_hash, after.system_hash) == (before.tools_hash, before.system_hash)
    assert after.cache_breakpoints == before.cache_breakpoints


def test_anthropic_dropping_the_tool_and_system_markers_keeps_their_hashes():
    bare = copy.deepcopy(ANTHROPIC)
    del bare["system"][0]["cache_control"], bare["tools"][2]["cache_control"]
    before = facts_of("anthropic.messages", "/v1/messages", ANTHROPIC)
    after = facts_of("anthropic.messages", "/v1/messages", bare)
    assert (after.tools_hash, after.system_hash) == (before.tools_hash, before.system_hash)
    assert after.cache_breakpoints == 1
    assert after.cache_ttl == "5m"


def test_anthropic_string_content_hashes_like_one_text_block():
    as_string = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
    as_blocks = {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]}
    assert (
        facts_of("anthropic.messages", "", as_string).message_hashes
        == facts_of("anthropic.messages", "", as_blocks).message_hashes
    )


def test_anthropic_an_edited_message_changes_only_its_hash():
    edited = copy.deepcopy(ANTHROPIC)
    edited["messages"][2]["content"][0]["content"] = "19°C"
    before = facts_of("anthropic.messages", "/v1/messages", ANTHROPIC).message_hashes
    after = facts_of("anthropic.messages", "/v1/messages", edited).message_hashes
    assert [a == b for a, b in zip(before, after, strict=True)] == [True, True, False]


def test_anthropic_system_turn_counts_in_the_size_and_stays_a_message():
    """A `role: "system"` turn inside `messages` (Claude Code sends one) adds its text to the
    system size; it stays a message of its position for the prefix hashes, so editing it is
    a changed message, and `system_hash` stays the top-level `system`'s."""
    body = copy.deepcopy(ANTHROPIC)
    body["messages"].insert(1, {"role": "system", "content": "Plan mode."})
    facts = facts_of("anthropic.messages", "/v1/messages", body)
    plain = facts_of("anthropic.messages", "/v1/messages", ANTHROPIC)
    assert facts.system_chars == plain.system_chars + len("Plan mode.")
    assert facts.messages_by_role == plain.messages_by_role | {"system": 1}
    assert facts.system_hash == plain.system_hash
    edited = copy.deepcopy(body)
    edited["messages"][1]["content"] = [{"type": "text", "text": "Plan mode: no edits."}]
    after = facts_of("anthropic.messages", "/v1/messages", edited)
    assert after.system_chars == plain.system_chars + len("Plan mode: no edits.")
    same = [a == b for a, b in zip(facts.message_hashes, after.message_hashes, strict=True)]
    assert same == [True, False, True, True]


def test_anthropic_top_level_automatic_cache_marker_counts():
    body = {"model": "m", "cache_control": {"type": "ephemeral"}, "messages": [{"role": "user", "content": "hi"}]}
    facts = facts_of("anthropic.messages", "", body)
    assert (facts.cache_breakpoints, facts.cache_ttl) == (1, "5m")


def test_chat_moving_a_cache_marker_keeps_every_hash():
    # OpenRouter and Anthropic-compatible servers take Anthropic's markers on content parts.
    body = {
        "model": "anthropic/claude-sonnet-4.5",
        "messages": [
            {
                "role": "system",
                "content": [{"type": "text", "text": "Long rules.", "cache_control": {"type": "ephemeral"}}],
            },
            {
                "role": "user",
                "content": [{"type": "text", "text": "First.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "Ok."}]},
            {"role": "user", "content": [{"type": "text", "text": "Second."}]},
        ],
    }
    before = facts_of("openai.chat", "/api/v1/chat/completions", body)
    after = facts_of("openai.chat", "/api/v1/chat/completions", _move_marker(body, 1, 3))
    assert (before.cache_breakpoints, before.cache_ttl) == (2, "1h")
    assert after.message_hashes == before.message_hashes
    assert after.system_hash == before.system_hash
