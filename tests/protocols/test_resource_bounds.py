"""Fuzzing as a gate: every translator, framer and checker, fed hostile exchanges, stays
within its resource bound (SPEC §6: time linear in the body's size, memory a small
multiple of it, whatever it contains).

The exchanges come from workloads/fuzz_bodies.py (recorded exchanges amplified, costly tool
checks, framing at its limits); workloads/resource_oracle.py measures each decode's CPU time
and peak memory against a baseline in the same run (the bytes' JSON parsed and held).
This is the bounded run, derandomized, small bodies; `python -m llmtap.bench.fuzz` is the
long one. Beside it, the shapes found so far, each as a fixed case.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from llmtap.workloads.fuzz_bodies import PROTOCOLS, Wire, amplified, framed, load_seeds, sse_body
from llmtap.workloads.fuzz_checks import (
    ROUTES,
    checked,
    conversation_message,
    conversation_request,
    conversations,
    function_request,
    function_response,
)
from llmtap.workloads.resource_oracle import judge

SEEDS = load_seeds()
SCALE = 16 * 1024  # bytes: big enough that a quadratic or exponential cost shows
EXAMPLES = 12
GATE = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],  # a failure prints its exchange; shrinking a slow one takes too long
    suppress_health_check=list(HealthCheck),
)


def _long_conversation(protocol: str, messages: int) -> Wire:
    """The watchdog's costly record: a request of many tiny messages (7 MB of 100,000 took
    40 s to build)."""
    request = conversation_request(
        protocol, [conversation_message(protocol, "user", f"m{n}") for n in range(messages)], 0
    )
    response = json.dumps(function_response(protocol, "t0", {"q": "x"})).encode()
    return Wire("fixed", protocol, ROUTES[protocol], "application/json", response, json.dumps(request).encode())


def _within(wire: Wire) -> None:
    verdict = judge(wire, give_up_s=20)
    assert verdict.within, verdict.explain()


@pytest.mark.parametrize("protocol", [p for p in PROTOCOLS if SEEDS[p]])
@GATE
@given(data=st.data())
def test_recorded_exchanges_amplified_stay_within_bounds(protocol: str, data: st.DataObject) -> None:
    _within(data.draw(amplified(protocol, SEEDS, SCALE)))


@pytest.mark.parametrize("protocol", PROTOCOLS)
@GATE
@given(data=st.data())
def test_costly_tool_checks_stay_within_bounds(protocol: str, data: st.DataObject) -> None:
    _within(data.draw(checked(protocol, SCALE)))


@pytest.mark.parametrize("protocol", PROTOCOLS)
@GATE
@given(data=st.data())
def test_long_requests_stay_within_bounds(protocol: str, data: st.DataObject) -> None:
    _within(data.draw(conversations(protocol, SCALE)))


@pytest.mark.parametrize("protocol", PROTOCOLS)
@GATE
@given(data=st.data())
def test_framing_at_its_limits_stays_within_bounds(protocol: str, data: st.DataObject) -> None:
    _within(data.draw(framed(protocol, SCALE)))


# -- the shapes found, fixed ---------------------------------------------------------------


def _gemini_partial_args(calls: int, pieces: int) -> Wire:
    """The issue's shape: a small streamed answer whose `partialArgs` pad arrays to a far
    index in every call (bounded per call, not per exchange, it made 380 MB of 118 KB)."""
    parts = []
    for _ in range(calls):
        parts.append({"functionCall": {"name": "f", "willContinue": True}})
        for n in range(pieces):
            piece = {"jsonPath": f"$.a{n}[9999]", "nullValue": None}
            parts.append({"functionCall": {"partialArgs": [piece], "willContinue": True}})
        parts.append({"functionCall": {}})
    chunks = [{"candidates": [{"index": 0, "content": {"role": "model", "parts": parts}}]}]
    chunks.append({"candidates": [{"index": 0, "finishReason": "STOP", "content": {"role": "model", "parts": []}}],
                   "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 5}})  # fmt: skip
    path = "/v1beta/models/gemini-3-pro-preview:streamGenerateContent?alt=sse"
    return Wire("fixed", "gemini.generate", path, "text/event-stream", sse_body([("", c) for c in chunks]))


def _schema_call(protocol: str, schema: dict, arguments: object) -> Wire:
    request = json.dumps(function_request(protocol, "lookup", schema)).encode()
    response = json.dumps(function_response(protocol, "lookup", arguments)).encode()
    return Wire("fixed", protocol, ROUTES[protocol], "application/json", response, request)


def _grammar_call(definition: str, syntax: str, text: str) -> Wire:
    tool = {"type": "custom", "name": "t", "format": {"type": "grammar", "syntax": syntax, "definition": definition}}
    request = {"model": "gpt-5", "input": "go", "tools": [tool]}
    response = {"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-5",
                "output": [{"type": "custom_tool_call", "id": "ctc_1", "call_id": "c1", "name": "t", "input": text}],
                "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}  # fmt: skip
    return Wire("fixed", "openai.responses", "/v1/responses", "application/json", json.dumps(response).encode(),
                json.dumps(request).encode())  # fmt: skip


_NESTED_ANY_OF = {
    "$defs": {"t": {"anyOf": [{"type": "array", "items": {"$ref": "#/$defs/t"}}] * 2 + [{"type": "string"}]}},
    "type": "object",
    "properties": {"x": {"$ref": "#/$defs/t"}},
}


def _nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


FOUND = {
    **{f"long_conversation_{p}": (lambda p=p: _long_conversation(p, 5000)) for p in PROTOCOLS},
    "gemini_partial_args_padding": lambda: _gemini_partial_args(calls=120, pieces=9),
    "regex_grammar_alternation": lambda: _grammar_call("(a|a)*b", "regex", "a" * 40),
    "regex_grammar_nested": lambda: _grammar_call("(a+)+b", "regex", "a" * 40),
    "lark_terminal_alternation": lambda: _grammar_call("start: W\nW: /(a|a)*b/", "lark", "a" * 40),
    "schema_pattern": lambda: _schema_call(
        "openai.chat",
        {"type": "object", "properties": {"q": {"type": "string", "pattern": "^(a+)+$"}}},
        {"q": "a" * 40 + "!"},
    ),  # fmt: skip
    "schema_pattern_properties": lambda: _schema_call(
        "anthropic.messages", {"type": "object", "patternProperties": {"^(a|aa)+$": {}}}, {"a" * 40 + "!": 1}
    ),
    "schema_unique_items": lambda: _schema_call(
        "gemini.generate",
        {"type": "object", "properties": {"l": {"type": "array", "uniqueItems": True}}},
        {"l": [[n] for n in range(6000)]},
    ),  # fmt: skip
    "schema_any_of_doubling": lambda: _schema_call("openai.responses", _NESTED_ANY_OF, {"x": _nested(30)}),
}


@pytest.mark.parametrize("shape", sorted(FOUND))
def test_shapes_found_stay_within_bounds(shape: str) -> None:
    _within(FOUND[shape]())
