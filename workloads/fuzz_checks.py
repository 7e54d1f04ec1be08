"""Hostile exchanges of the second family for the resource fuzzing (workloads/fuzz_bodies.py has
the others): a tool call whose request declares a costly check — a JSON Schema `pattern` or
`patternProperties` that backtracks, `uniqueItems` over many unhashable items, an `enum`
checked against every item of a long array, `anyOf` branches that double at every level of
a nested argument, a recursive `$ref`, a schema of thousands of properties, or a custom
tool's regex or Lark grammar — and an argument built to trigger it; and requests whose own
decoding is the cost (thousands of messages, tools and system parts).

Not responsible for measuring (workloads/resource_oracle.py).
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from llmtap.workloads.fuzz_bodies import Wire

ROUTES = {
    "anthropic.messages": "/v1/messages",
    "openai.chat": "/v1/chat/completions",
    "openai.responses": "/v1/responses",
    "gemini.generate": "/v1beta/models/gemini-2.5-flash:generateContent",
    "gemini.interactions": "/v1beta/interactions",
    "bedrock.converse": "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse",
}


def function_request(protocol: str, name: str, schema: dict[str, Any]) -> dict[str, Any]:
    if protocol == "anthropic.messages":
        return {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "go"}],
                "tools": [{"name": name, "input_schema": schema}]}  # fmt: skip
    if protocol == "openai.chat":
        return {"model": "gpt-4o", "messages": [{"role": "user", "content": "go"}],
                "tools": [{"type": "function", "function": {"name": name, "parameters": schema}}]}  # fmt: skip
    if protocol == "openai.responses":
        return {"model": "gpt-5", "input": "go", "tools": [{"type": "function", "name": name, "parameters": schema}]}
    if protocol == "gemini.generate":
        return {"contents": [{"role": "user", "parts": [{"text": "go"}]}],
                "tools": [{"functionDeclarations": [{"name": name, "parameters": schema}]}]}  # fmt: skip
    if protocol == "gemini.interactions":
        return {"model": "gemini-2.5-flash", "input": "go",
                "tools": [{"type": "function", "name": name, "parameters": schema}]}  # fmt: skip
    return {"messages": [{"role": "user", "content": [{"text": "go"}]}],
            "toolConfig": {"tools": [{"toolSpec": {"name": name, "inputSchema": {"json": schema}}}]}}  # fmt: skip


def function_response(protocol: str, name: str, arguments: Any) -> dict[str, Any]:
    text = json.dumps(arguments)
    if protocol == "anthropic.messages":
        return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": name, "input": arguments}],
                "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 10}}  # fmt: skip
    if protocol == "openai.chat":
        call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": text}}
        return {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o",
                "choices": [{"index": 0, "finish_reason": "tool_calls",
                             "message": {"role": "assistant", "content": None, "tool_calls": [call]}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}  # fmt: skip
    if protocol == "openai.responses":
        return {"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-5",
                "output": [{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": name,
                            "arguments": text, "status": "completed"}],
                "usage": {"input_tokens": 10, "output_tokens": 10, "total_tokens": 20}}  # fmt: skip
    if protocol == "gemini.generate":
        return {"candidates": [{"index": 0, "finishReason": "STOP",
                                "content": {"role": "model", "parts": [{"functionCall": {"name": name,
                                                                                         "args": arguments}}]}}],
                "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 10},
                "modelVersion": "gemini-2.5-flash"}  # fmt: skip
    if protocol == "gemini.interactions":
        return {"id": "int_1", "status": "requires_action", "model": "gemini-2.5-flash",
                "outputs": [{"type": "function_call", "id": "c1", "name": name, "arguments": arguments}],
                "usage": {"total_input_tokens": 10, "total_output_tokens": 10}}  # fmt: skip
    return {"output": {"message": {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": name,
                                                                                 "input": arguments}}]}},
            "stopReason": "tool_use", "usage": {"inputTokens": 10, "outputTokens": 10, "totalTokens": 20}}  # fmt: skip


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


BACKTRACKING = ["^(a+)+$", "^(a|a)*b$", "^(a|aa)+$", "^(\\w+\\s?)*$", "(x+x+)+y", "^(.*a){12}$"]


@st.composite
def costly_schema(draw: st.DrawFn, scale: int) -> tuple[dict[str, Any], Any]:
    """A schema whose check is costly, and arguments that make it so."""
    kind = draw(st.sampled_from(["pattern", "pattern_props", "unique", "enum", "any_of", "ref", "many_props"]))
    n = draw(st.integers(8, max(8, scale)))
    if kind == "pattern":
        pattern = draw(st.sampled_from(BACKTRACKING))
        text = "a" * draw(st.integers(20, max(20, min(n, 5000)))) + "!"
        return {"type": "object", "properties": {"q": {"type": "string", "pattern": pattern}}}, {"q": text}
    if kind == "pattern_props":
        key = "a" * draw(st.integers(20, max(20, min(n, 5000)))) + "!"
        return {"type": "object", "patternProperties": {"^(a|aa)+$": {"type": "string"}}}, {key: "v"}
    if kind == "unique":
        count = max(2, n // 6)
        return {"type": "object", "properties": {"l": {"type": "array", "uniqueItems": True}}}, {
            "l": [[i] for i in range(count)]
        }
    if kind == "enum":
        words = [f"w{i}" for i in range(max(2, n // 12))]
        return {"type": "object", "properties": {"l": {"type": "array", "items": {"enum": words}}}}, {
            "l": [words[-1]] * max(2, n // 8)
        }
    if kind == "any_of":
        branch = {"type": "array", "items": {"$ref": "#/$defs/t"}}
        schema = {"$defs": {"t": {"anyOf": [branch, dict(branch), {"type": "string"}]}},
                  "type": "object", "properties": {"x": {"$ref": "#/$defs/t"}}}  # fmt: skip
        return schema, {"x": _nested(draw(st.integers(8, 40)), 1)}
    if kind == "ref":
        schema = {"$defs": {"n": {"type": "object", "properties": {"c": {"$ref": "#/$defs/n"}}}},
                  "type": "object", "properties": {"c": {"$ref": "#/$defs/n"}}}  # fmt: skip
        chain: Any = {}
        for _ in range(min(n // 8, 800)):  # json.dumps itself recurses
            chain = {"c": chain}
        return schema, chain
    count = max(1, n // 16)
    return {"type": "object", "properties": {f"p{i}": {"type": "integer", "minimum": 0} for i in range(count)}}, {
        f"p{i}": i for i in range(count)
    }


@st.composite
def costly_grammar(draw: st.DrawFn, scale: int) -> tuple[dict[str, Any], str]:
    """A custom tool's grammar (Responses shape) and an input that makes checking it costly."""
    n = draw(st.integers(20, max(20, min(scale, 20_000))))
    kind = draw(st.sampled_from(["regex", "regex", "lark_ambiguous", "lark_terminal"]))
    if kind == "regex":
        definition = draw(st.sampled_from(["(a|a)*b", "(a+)+b", "(a|aa)+$", "((a*)*)*b", "(.*a){20}"]))
        return {"type": "grammar", "syntax": "regex", "definition": definition}, "a" * n
    if kind == "lark_ambiguous":
        return {"type": "grammar", "syntax": "lark", "definition": 'start: e\ne: e e | "a"'}, "a" * min(n, 4000)
    return {"type": "grammar", "syntax": "lark", "definition": "start: W\nW: /(a|a)*b/"}, "a" * n


@st.composite
def checked(draw: st.DrawFn, protocol: str, scale: int) -> Wire:
    """A tool call of `protocol` whose declared check is costly."""
    name = "lookup"
    if protocol in ("openai.responses", "openai.chat") and draw(st.integers(0, 3)) == 0:
        fmt, text = draw(costly_grammar(scale))
        if protocol == "openai.responses":
            request = {"model": "gpt-5", "input": "go", "tools": [{"type": "custom", "name": name, "format": fmt}]}
            response = {"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-5",
                        "output": [{"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_1", "name": name,
                                    "input": text, "status": "completed"}],
                        "usage": {"input_tokens": 10, "output_tokens": 10, "total_tokens": 20}}  # fmt: skip
        else:
            grammar = {"type": "grammar", "grammar": {"syntax": fmt["syntax"], "definition": fmt["definition"]}}
            request = {"model": "gpt-5", "messages": [{"role": "user", "content": "go"}],
                       "tools": [{"type": "custom", "custom": {"name": name, "format": grammar}}]}  # fmt: skip
            call = {"id": "call_1", "type": "custom", "custom": {"name": name, "input": text}}
            response = {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-5",
                        "choices": [{"index": 0, "finish_reason": "tool_calls",
                                     "message": {"role": "assistant", "content": None, "tool_calls": [call]}}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}  # fmt: skip
    else:
        schema, arguments = draw(costly_schema(scale))
        request = function_request(protocol, name, schema)
        response = function_response(protocol, name, arguments)
    return Wire("checked", protocol, ROUTES[protocol], "application/json", json.dumps(response).encode(),
                json.dumps(request).encode())  # fmt: skip


def conversation_message(protocol: str, role: str, text: str) -> dict[str, Any]:
    if protocol.startswith("gemini"):
        return {"role": "model" if role == "assistant" else "user", "parts": [{"text": text}]}
    if protocol == "bedrock.converse":
        return {"role": role, "content": [{"text": text}]}
    if protocol == "openai.responses":
        return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}
    return {"role": role, "content": text}


def conversation_request(protocol: str, messages: list[dict[str, Any]], tools: int) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    body = function_request(protocol, "t0", schema)
    declared = [function_request(protocol, f"t{n}", schema) for n in range(tools)]
    if protocol == "anthropic.messages":
        body.update(messages=messages, tools=[d["tools"][0] for d in declared] or body["tools"])
    elif protocol == "openai.chat":
        body.update(messages=messages, tools=[d["tools"][0] for d in declared] or body["tools"])
    elif protocol == "openai.responses":
        body.update(input=messages, tools=[d["tools"][0] for d in declared] or body["tools"])
    elif protocol == "gemini.generate":
        body["contents"] = messages
    elif protocol == "gemini.interactions":
        body["input"] = messages
    else:
        body["messages"] = messages
    return body


@st.composite
def conversations(draw: st.DrawFn, protocol: str, scale: int) -> Wire:
    """A request of many small messages (or tools), answered by a plain tool call: its
    decoding (message counts, prefixes for the cache analysis, system size) is the cost."""
    count = draw(st.integers(2, max(2, scale // 40)))
    roles = draw(st.sampled_from([("user", "assistant"), ("user",), ("system", "user"), ("developer", "user")]))
    messages = [conversation_message(protocol, roles[n % len(roles)], f"m{n}") for n in range(count)]
    tools = draw(st.sampled_from([0, 0, max(1, count // 4)]))
    request = conversation_request(protocol, messages, tools)
    response = function_response(protocol, "t0", {"q": "x"})
    return Wire("conversations", protocol, ROUTES[protocol], "application/json", json.dumps(response).encode(),
                json.dumps(request).encode())  # fmt: skip
