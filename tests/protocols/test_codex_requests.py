"""What a Codex CLI-shaped Responses request asks (SPEC §2 `request`, `warmup`): tools
declared in an `additional_tools` input item, developer messages as the system prompt,
`generate: false`; and the system size of Chat's system / developer messages."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from llmtap.protocols import openai_chat, openai_responses
from llmtap.protocols.exchange import ExchangeDecoder, decode_exchange

FIXTURES = Path(__file__).parents[1] / "fixtures" / "codex"


def body(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def decode(request: str, stream: str, **kw: Any) -> Any:
    return decode_exchange(
        "openai.responses",
        request=json.dumps(body(request)).encode(),
        response=(FIXTURES / f"{stream}.sse").read_bytes(),
        path="/v1/responses",
        host="api.openai.com",
        status=200,
        content_type="text/event-stream",
        **kw,
    )


def test_tools_from_additional_tools_and_namespaces() -> None:
    facts = openai_responses.decode_request(body("request_turn1"))
    assert [(t.name, t.type) for t in facts.tools] == [
        ("exec", "custom"),
        ("apply_patch", "custom"),
        ("view_image", "custom"),
        ("note", "custom"),
        ("update_plan", "function"),
        ("collaboration.send_message", "function"),
    ]
    exec_tool = facts.tools[0]
    assert exec_tool.schema is not None and exec_tool.schema["syntax"] == "lark"  # the declared format
    assert facts.tools[-1].schema is not None and facts.tools[-1].schema["required"] == ["target", "message"]
    # the item declares tools; it is no message of any role
    assert facts.messages_by_role == {"developer": 2, "user": 2}
    assert len(facts.message_hashes) == 4


def test_tools_hash_sees_item_declared_tools() -> None:
    first = openai_responses.decode_request(body("request_turn1"))
    changed = body("request_turn1")
    changed["input"][0]["tools"][0]["description"] = "Runs a command (v2)."
    second = openai_responses.decode_request(changed)
    assert first.tools_hash != second.tools_hash
    assert first.system_hash == second.system_hash
    assert first.message_hashes == second.message_hashes
    # the same tools declared at the top level instead: same names, a different request
    top = body("request_turn1")
    top["tools"] = top["input"].pop(0)["tools"]
    moved = openai_responses.decode_request(top)
    assert [t.name for t in moved.tools] == [t.name for t in first.tools]


def test_tools_directly_in_the_item_and_top_level_together() -> None:
    request = {
        "model": "m",
        "tools": [{"type": "function", "name": "a"}, {"type": "web_search"}],
        "input": [
            {"type": "additional_tools", "tools": [{"type": "custom", "name": "b"}, "junk", None]},
            {"type": "additional_tools", "tools": "not a list"},
            {"role": "user", "content": "hi"},
        ],
    }
    facts = openai_responses.decode_request(request)
    assert [t.name for t in facts.tools] == ["a", "b"]
    assert facts.server_tools == ["web_search"]
    assert facts.messages_by_role == {"user": 1}


def test_hashes_unchanged_for_requests_without_codex_shapes() -> None:
    """Records stored before keep comparing alike with new ones (cache causes)."""
    from llmtap.protocols.common import stable_hash

    request = {
        "model": "m",
        "instructions": "Be brief.",
        "tools": [{"type": "function", "name": "a", "parameters": {"type": "object"}}],
        "input": [{"role": "user", "content": "hi"}],
    }
    facts = openai_responses.decode_request(request)
    assert facts.tools_hash == stable_hash(request["tools"])
    assert facts.system_hash == stable_hash("Be brief.")
    assert facts.system_chars == len("Be brief.")


def test_system_size_counts_developer_messages() -> None:
    request = body("request_turn1")
    developer_text = [m["content"][0]["text"] for m in request["input"][1:3]]
    facts = openai_responses.decode_request(request)
    assert facts.system_chars == sum(len(t) for t in developer_text)
    with_instructions = dict(request, instructions="Be brief.")
    assert openai_responses.decode_request(with_instructions).system_chars == facts.system_chars + 9
    # a developer message edited: system_changed can see it
    edited = copy.deepcopy(request)
    edited["input"][2]["content"][0]["text"] += " Network: off."
    assert openai_responses.decode_request(edited).system_hash != facts.system_hash
    # a user message edited: not the system
    edited = copy.deepcopy(request)
    edited["input"][4]["content"][0]["text"] += "!"
    assert openai_responses.decode_request(edited).system_hash == facts.system_hash


def test_chat_system_size_counts_every_system_and_developer_message() -> None:
    request = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "abc"},
            {"role": "user", "content": "hello"},
            {"role": "developer", "content": "defgh"},
            {"role": "assistant", "content": "hi"},
        ],
    }
    facts = openai_chat.decode_request(request)
    assert facts.system_chars == 8
    edited = copy.deepcopy(request)
    edited["messages"][2]["content"] = "changed"
    assert openai_chat.decode_request(edited).system_hash != facts.system_hash
    leading_only = {"model": "m", "messages": request["messages"][:2]}
    assert openai_chat.decode_request(leading_only).system_chars == 3


def test_warmup() -> None:
    warm = decode("request_warmup", "stream_warmup")
    assert warm.warmup is True and warm.decode_error is None
    # what the wire says: a completed response with no output
    assert (warm.finish_reason, warm.finish_reason_raw, warm.complete) == ("end_turn", "completed", True)
    assert warm.usage is not None and warm.usage.input_tokens == 2310  # billed
    assert warm.to_dict()["warmup"] is True
    turn = decode("request_turn1", "stream_turn1_exec")
    assert turn.warmup is False and turn.to_dict()["warmup"] is False
    explicit = body("request_turn1") | {"generate": True}
    assert openai_responses.decode_request(explicit).params["generate"] is True


def test_warmup_over_websocket_frames() -> None:
    """WebSocket mode: `response.create` with the request's fields at the top level."""
    create = {"type": "response.create", **body("request_warmup")}
    decoder = ExchangeDecoder("openai.responses", request=json.dumps(create).encode(), path="/v1/responses")
    sse = (FIXTURES / "stream_warmup.sse").read_text()
    for block in sse.strip().split("\n\n"):
        decoder.feed_message(json.loads(block.split("data: ", 1)[1]))
    ex = decoder.finish()
    assert ex.warmup is True and ex.streamed and ex.complete


def test_follow_up_carries_the_custom_call_and_its_result() -> None:
    ex = decode("request_turn2", "stream_turn2_text")
    assert ex.request is not None
    assert ex.request.tool_call_ids == ["call_exec_1"]
    assert ex.request.tool_result_ids == ["call_exec_1"]
    assert ex.request.messages_by_role == {"developer": 2, "user": 2, "tool": 1}
    assert (ex.text, ex.finish_reason, ex.tool_calls) == ("The shell said hi.", "end_turn", [])


def test_streamed_custom_call_whole_and_byte_by_byte() -> None:
    raw = (FIXTURES / "stream_turn1_exec.sse").read_bytes()
    whole = decode("request_turn1", "stream_turn1_exec").to_dict()
    decoder = ExchangeDecoder(
        "openai.responses",
        request=json.dumps(body("request_turn1")).encode(),
        path="/v1/responses",
        host="api.openai.com",
        status=200,
        content_type="text/event-stream",
    )
    for i in range(len(raw)):
        decoder.feed(raw[i : i + 1])
    assert decoder.finish().to_dict() == whole
    [call] = whole["tool_calls"]
    assert (call["name"], call["kind"], call["arguments"], call["arguments_raw"]) == ("exec", "custom", None, "echo hi")
    assert (call["valid_json"], call["status"]) == (False, "valid")
    assert whole["finish_reason"] == "tool_use"


def test_custom_call_assembled_from_deltas_when_the_terminal_event_has_no_output() -> None:
    events = [
        {"type": "response.created", "response": {"id": "r", "status": "in_progress", "output": []}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "custom_tool_call", "call_id": "c1", "name": "exec", "input": ""},
        },
        {"type": "response.custom_tool_call_input.delta", "output_index": 0, "delta": "echo "},
        {"type": "response.custom_tool_call_input.delta", "output_index": 0, "delta": "hi"},
        {"type": "response.completed", "response": {"id": "r", "status": "completed", "usage": None}},
    ]
    sse = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()
    ex = decode_exchange("openai.responses", response=sse, request=body("request_turn1"), path="/v1/responses")
    [call] = ex.tool_calls
    assert (call.kind, call.arguments_raw, call.status) == ("custom", "echo hi", "valid")


def test_a_real_codex_0171_request() -> None:
    """Codex CLI 0.171.0's own body: every tool in a namespace of `additional_tools`, its
    `exec` a custom tool with a Lark grammar; its calls name the bare tool."""
    facts = openai_responses.decode_request(body("request_codex0171_turn1"))
    names = [t.name for t in facts.tools]
    assert names[:2] == ["functions.exec", "functions.wait"] and "collaboration.spawn_agent" in names
    assert facts.tools[0].type == "custom" and facts.tools[0].schema is not None
    assert facts.tools[0].schema["syntax"] == "lark"
    assert facts.messages_by_role == {"developer": 4, "user": 2}
    assert facts.system_chars > 1000
    events = [
        {
            "type": "response.completed",
            "response": {
                "id": "r",
                "status": "completed",
                "output": [
                    {"type": "custom_tool_call", "call_id": "c1", "name": "exec", "input": "echo hi"},
                    {"type": "custom_tool_call", "call_id": "c2", "name": "exec", "input": ""},
                    {"type": "custom_tool_call", "call_id": "c3", "name": "functions.exec", "input": "ls"},
                ],
                "usage": {"input_tokens": 100, "output_tokens": 5},
            },
        }
    ]
    sse = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()
    request = body("request_codex0171_turn1")
    ex = decode_exchange("openai.responses", response=sse, request=request, path="/v1/responses")
    assert [(c.name, c.kind, c.status) for c in ex.tool_calls] == [
        ("exec", "custom", "valid"),
        ("exec", "custom", "schema_violation"),  # its grammar wants at least one character
        ("functions.exec", "custom", "valid"),
    ]
    follow_up = openai_responses.decode_request(body("request_codex0171_turn2"))
    assert follow_up.tool_call_ids == ["call_1"] and follow_up.tool_result_ids == ["call_1"]
    assert follow_up.tools_hash == facts.tools_hash and follow_up.system_hash == facts.system_hash


def test_prefix_parts_tell_absent_from_empty() -> None:
    """What a follow-up chained to this request extends (protocols/prefix.py): a part the
    request does not send is None, an empty `tools` array is a declaration of none."""
    root = openai_responses.decode_request(body("request_codex0171_turn1"))
    assert root.prefix is not None
    assert root.prefix["tools"] is None and root.prefix["instructions"] is None  # Codex sends neither
    assert root.prefix["tool_items"] and root.prefix["system_items"]
    bare = openai_responses.decode_request({"model": "m", "previous_response_id": "r", "input": []})
    assert bare.prefix == dict.fromkeys(("tools", "tool_items", "instructions", "system_items"))
    empty = openai_responses.decode_request({"model": "m", "tools": [], "instructions": "", "input": []})
    assert empty.prefix is not None and empty.prefix["tools"] and empty.prefix["instructions"]
    assert empty.tools_hash == bare.tools_hash  # the hashes of a body, as before


def test_a_websocket_follow_up_states_what_it_names_and_declares_nothing() -> None:
    """Codex over WebSocket: `response.create` with the fields beside `type`, the follow-up
    carrying only the tool's output."""
    message = {"type": "response.create", "model": "gpt-5", "previous_response_id": "resp_1",
               "input": [{"type": "custom_tool_call_output", "call_id": "call_1", "output": "hi"}]}  # fmt: skip
    facts = openai_responses.decode_request(message)
    assert facts.previous_response_id == "resp_1" and facts.tool_result_ids == ["call_1"]
    assert facts.prefix == dict.fromkeys(("tools", "tool_items", "instructions", "system_items"))


def test_a_chained_request_extends_the_prefix_it_names() -> None:
    """protocols/prefix.py: top-level parts replaced when sent, input-item parts appended."""
    from llmtap.protocols import prefix

    root = openai_responses.decode_request(
        dict(body("request_codex0171_turn1"), instructions="Be brief.", tools=[{"type": "function", "name": "a"}])
    )
    assert root.prefix is not None
    hashes = (root.tools_hash, root.system_hash)

    def follow(request: dict[str, Any]) -> tuple[Any, Any]:
        own = openai_responses.decode_request({"model": "m", "previous_response_id": "r", **request})
        assert own.prefix is not None
        _effective, tools, system = prefix.follow(root.prefix, hashes, own.prefix, (own.tools_hash, own.system_hash))
        return tools, system

    output = {"type": "custom_tool_call_output", "call_id": "c", "output": "ok"}
    assert follow({"input": [output]}) == hashes  # nothing declared: the chain's stand
    assert follow({"instructions": "Be brief.", "tools": [{"type": "function", "name": "a"}]}) == hashes
    tools, system = follow({"tools": [{"type": "function", "name": "b"}], "input": [output]})
    assert tools != hashes[0] and system == hashes[1]
    tools, system = follow({"input": [{"type": "additional_tools", "tools": [{"type": "custom", "name": "c"}]}]})
    assert tools != hashes[0] and system == hashes[1]
    tools, system = follow({"input": [{"role": "developer", "content": "Approval: never."}, output]})
    assert tools == hashes[0] and system != hashes[1]
    assert follow({"instructions": "Be thorough."})[1] != hashes[1]
    assert prefix.follow({"tools": 7, "x": "y"}, ("t", "s"), root.prefix, hashes)[1:] == hashes  # a damaged row
