"""Who runs a Responses built-in tool's call (SPEC §2 `tool_calls` / `server_tool_calls`):
the client (computer use, local shell, shell in a local environment, apply_patch, a
client-executed tool search) or the provider (web and file search, code interpreter, image
generation, MCP, hosted tool search, and a shell call whose output comes back in the same
response). The fixtures (tests/protocols/fixtures/responses_json_computer_call, …) hold
the documented shapes; these are the variations around them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmtap.protocols import decode_exchange
from llmtap.protocols.canonical import Exchange
from llmtap.protocols.openai_responses import decode_request


def responses(output: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Exchange:
    body = {"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-5.5", "output": output}
    request = {"model": "gpt-5.5", "input": "hi"} | ({"tools": tools} if tools else {})
    return decode_exchange(
        "openai.responses",
        response=json.dumps(body).encode(),
        request=json.dumps(request).encode(),
        path="/v1/responses",
        host="api.openai.com",
    )


def who(ex: Exchange) -> tuple[list[str | None], list[str]]:
    return [call.name for call in ex.tool_calls], [call.type for call in ex.server_tool_calls]


@pytest.mark.parametrize(
    ("item", "client", "server"),
    [
        ({"type": "local_shell_call", "call_id": "c1", "action": {"type": "exec"}}, ["local_shell"], []),
        ({"type": "shell_call", "call_id": "c1", "action": {"commands": ["ls"]}}, ["shell"], []),
        ({"type": "apply_patch_call", "call_id": "c1", "operation": {"type": "delete_file"}}, ["apply_patch"], []),
        ({"type": "tool_search_call", "call_id": "c1", "execution": "client", "arguments": {}}, ["tool_search"], []),
        ({"type": "tool_search_call", "id": "ts1", "execution": "server", "arguments": {}}, [], ["tool_search_call"]),
        ({"type": "tool_search_call", "id": "ts1", "arguments": {"q": "x"}}, [], ["tool_search_call"]),
        ({"type": "mcp_call", "id": "m1", "name": "echo", "arguments": "{}", "server_label": "s"}, [], ["mcp_call"]),
        ({"type": "image_generation_call", "id": "ig1", "status": "completed"}, [], ["image_generation_call"]),
        ({"type": "mcp_approval_request", "id": "ap1", "name": "echo", "arguments": "{}"}, [], []),
    ],
)
def test_each_item_goes_to_whoever_runs_it(item: dict[str, Any], client: list[str], server: list[str]):
    assert who(responses([item])) == (client, server)


def test_a_client_call_answered_in_its_own_response_was_the_providers():
    call = {"type": "shell_call", "id": "sh1", "call_id": "c1", "action": {"commands": ["ls"]}}
    answer = {"type": "shell_call_output", "id": "sho1", "call_id": "c1", "output": []}
    assert who(responses([call, answer])) == ([], ["shell_call"])
    other = dict(answer, call_id="c2")  # an output for some other call proves nothing
    assert who(responses([call, other])) == (["shell"], [])


def test_a_batched_computer_call_keeps_its_actions():
    actions = [{"type": "click", "button": "left", "x": 1, "y": 2}, {"type": "type", "text": "hi"}]
    ex = responses([{"type": "computer_call", "call_id": "c1", "actions": actions}], tools=[{"type": "computer"}])
    (call,) = ex.tool_calls
    assert (call.name, call.arguments, call.status) == ("computer", {"actions": actions}, "valid")


def test_a_computer_call_answers_the_preview_tool_it_was_declared_as():
    tools = [{"type": "computer_use_preview", "display_width": 1, "display_height": 1, "environment": "browser"}]
    ex = responses([{"type": "computer_call", "call_id": "c1", "action": {"type": "screenshot"}}], tools=tools)
    assert [(c.name, c.status) for c in ex.tool_calls] == [("computer", "valid")]


def test_a_tool_search_output_is_the_result_of_its_call():
    facts = decode_request(
        {
            "model": "gpt-5.5",
            "input": [
                {"type": "tool_search_call", "call_id": "c1", "execution": "client", "arguments": {"q": "x"}},
                {"type": "tool_search_output", "call_id": "c1", "execution": "client", "tools": []},
            ],
        }
    )
    assert (facts.tool_call_ids, facts.tool_result_ids) == (["c1"], ["c1"])
