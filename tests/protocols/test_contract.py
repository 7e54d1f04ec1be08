"""The translator contract (protocols/contract.py): a fold's extras travel beside the body.

A fold once passed its state to `decode_body` as `_llmtap_*` keys inside the provider's
dict, so a JSON response carrying such keys could replace its own tool input or mark its
text truncated. Now the extras are a `FoldExtras` value, and a body's keys are only its own.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmtap.protocols import Exchange, decode_exchange
from llmtap.protocols.budget import ExchangeBudget
from llmtap.protocols.contract import FoldExtras
from llmtap.protocols.exchange import TRANSLATORS

PATHS = {
    "anthropic.messages": "/v1/messages",
    "openai.chat": "/v1/chat/completions",
    "openai.responses": "/v1/responses",
    "gemini.generate": "/v1beta/models/gemini-2.5-flash:generateContent",
    "gemini.interactions": "/v1beta/interactions",
}


def decode(protocol: str, body: dict[str, Any]) -> Exchange:
    return decode_exchange(
        protocol,
        response=json.dumps(body).encode(),
        path=PATHS[protocol],
        status=200,
        content_type="application/json",
    )


def test_a_json_anthropic_body_with_fold_keys_keeps_its_own_tool_input() -> None:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [
            {"type": "text", "text": "Checking.", "_llmtap_truncated": True},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "get_weather",
                "input": {"city": "Paris"},
                "_llmtap_raw_input": '{"city": "Elsewhere"',
            },
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 10, "output_tokens": 5},
        "_llmtap_truncated": True,
    }
    ex = decode("anthropic.messages", body)
    assert [(c.name, c.arguments, c.arguments_raw, c.valid_json) for c in ex.tool_calls] == [
        ("get_weather", {"city": "Paris"}, '{"city":"Paris"}', True)
    ]
    assert ex.text == "Checking."
    assert ex.text_truncated is False


def test_a_json_interaction_with_fold_keys_keeps_its_own_arguments() -> None:
    body = {
        "id": "int_1",
        "status": "requires_action",
        "model": "gemini-3-pro-preview",
        "outputs": [
            {
                "type": "function_call",
                "id": "call_1",
                "name": "lookup",
                "arguments": {"q": "llmtap"},
                "_llmtap_raw_arguments": "not json",
            }
        ],
        "usage": {"total_input_tokens": 10, "total_output_tokens": 5},
        "_llmtap_truncated": True,
    }
    ex = decode("gemini.interactions", body)
    assert [(c.arguments, c.arguments_raw, c.valid_json) for c in ex.tool_calls] == [
        ({"q": "llmtap"}, '{"q":"llmtap"}', True)
    ]
    assert ex.text_truncated is False


TRUNCATION_MARKED = {
    "openai.chat": {
        "id": "chatcmpl-1",
        "model": "gpt-4.1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi."}, "finish_reason": "stop"}],
        "_llmtap_truncated": True,
    },
    "openai.responses": {
        "id": "resp_1",
        "status": "completed",
        "model": "gpt-5",
        "output": [{"type": "message", "content": [{"type": "output_text", "text": "Hi."}]}],
        "_llmtap_truncated": True,
    },
    "gemini.generate": {
        "candidates": [{"content": {"parts": [{"text": "Hi."}]}, "finishReason": "STOP"}],
        "modelVersion": "gemini-2.5-flash",
        "_llmtap_truncated": True,
    },
}


@pytest.mark.parametrize("protocol", sorted(TRUNCATION_MARKED))
def test_a_json_body_cannot_mark_its_own_text_truncated(protocol: str) -> None:
    ex = decode(protocol, TRUNCATION_MARKED[protocol])
    assert ex.text == "Hi."
    assert ex.text_truncated is False
    assert ex.decode_error is None


def test_the_streamed_tool_input_still_travels_in_the_extras() -> None:
    """The fold's raw argument text is what decode_body uses, beside an untouched body."""
    module = TRANSLATORS["anthropic.messages"]
    fold = module.Fold(ExchangeBudget())
    events = [
        {"type": "message_start", "message": {"id": "msg_1", "model": "claude", "usage": {"input_tokens": 3}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "f"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"a": '}},
        {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 2}},
        {"type": "message_stop"},
    ]
    for event in events:
        fold.feed(event)
    folded = fold.result()
    assert folded.extras == FoldExtras(truncated=False, raw_arguments={0: '{"a": '})
    assert folded.body["content"] == [{"type": "tool_use", "id": "t", "name": "f"}]
    ex = Exchange(protocol=module.PROTOCOL)
    module.decode_body(folded.body, ex, folded.extras)
    assert (ex.tool_calls[0].arguments_raw, ex.tool_calls[0].valid_json) == ('{"a": ', False)
