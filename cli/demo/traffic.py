"""The demo's traffic: three teams driving the official SDKs through the proxy.

- `agents` runs a coding agent on Anthropic: a cached system prompt, tool loops, a tool
  call that breaks its schema, one with broken JSON, a restart with an edited system
  prompt (a cache miss), an overloaded error and a stream that fails halfway.
- `search` uses OpenAI: a long streamed chat whose later turns hit the automatic cache,
  a Responses tool loop on a reasoning model, a rate limit, and a fine-tuned model no
  price list knows (reported as unpriced, never as $0).
- `support` uses Gemini: streamed answers with thoughts, a function call, a blocked
  prompt, and the Interactions API.

Each step calls `tick()` once. Errors the script provokes are expected and swallowed;
anything else propagates. Not responsible for starting servers (see `run.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:  # the SDKs are the `demo` extra: imported where they are used
    from anthropic.types import TextBlockParam, ToolParam
    from openai.types.chat import ChatCompletionMessageParam
    from openai.types.responses import FunctionToolParam

TEAM_HEADER = "X-LLMTap-Team"
KEYS = {  # fake keys: the proxy stores only their fingerprints and last four
    "agents": "sk-ant-api03-demo-agents-key-000000000000000000000000000000000001",
    "search": "sk-proj-demo-search-key-00000000000000000000000000000000000000002",
    "support": "AIzaDemoSupportKey00000000000000000000003",
}
GUIDE = (
    "You are a careful senior engineer working in a Python repository. Read files before changing them, "
    "run the tests after every change, explain each change in one sentence, and never invent APIs. "
) * 30
HANDBOOK = (
    "Search assistant handbook: cite sources, prefer primary documentation, answer in at most five sentences, "
    "say when you are unsure, and keep a neutral tone. "
) * 30
TOOLS_ANTHROPIC: list[ToolParam] = [
    {
        "name": "read_file",
        "description": "Read a file of the repository",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "query": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["path"],
        },
    },
    {
        "name": "run_tests",
        "description": "Run a test target",
        "input_schema": {
            "type": "object",
            "properties": {"target": {"type": "string"}, "verbose": {"type": "boolean"}},
            "required": ["target"],
            "additionalProperties": False,
        },
    },
]


def _expected(call: Callable[[], Any], tick: Callable[[], None]) -> None:
    """A call the script makes to provoke an error: the error is the point."""
    try:
        call()
    except Exception:  # noqa: BLE001 - the SDK raises for the 429/529 the script asked for
        pass
    tick()


def agents(base_url: str, tick: Callable[[], None]) -> None:
    import anthropic

    client = anthropic.Anthropic(
        base_url=base_url, api_key=KEYS["agents"], max_retries=0, default_headers={TEAM_HEADER: "agents"}
    )
    model = "claude-sonnet-4-5-20250929"
    system: list[TextBlockParam] = [{"type": "text", "text": GUIDE, "cache_control": {"type": "ephemeral"}}]
    task = "The test test_totals fails after the refactor. Find out why. [tool:read_file]"

    def turn(messages: list[dict[str, Any]], stream: bool, system_blocks: Any = system) -> Any:
        marked = [dict(m) for m in messages]
        last = marked[-1]
        if isinstance(last["content"], str):
            last["content"] = [{"type": "text", "text": last["content"], "cache_control": {"type": "ephemeral"}}]
        kwargs = {
            "model": model,
            "max_tokens": 1024,
            "system": system_blocks,
            "tools": TOOLS_ANTHROPIC,
            "messages": marked,
        }
        if stream:
            with client.messages.stream(**kwargs) as events:
                message = events.get_final_message()
        else:
            message = client.messages.create(**kwargs)
        tick()
        return message

    for run in range(3):  # the same task three times: the later runs read the cache
        messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
        reply = turn(messages, stream=run % 2 == 0)
        messages += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]}]
        calls = [b for b in reply.content if b.type == "tool_use"]
        messages += [
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": c.id, "content": "def totals(rows): return sum(rows)"}
                    for c in calls
                ],
            }
        ]
        turn(messages, stream=True)
    # A tool call whose arguments break run_tests' schema (no `target`), then its result.
    messages = [{"role": "user", "content": "Now run the unit tests. [tool:run_tests]"}]
    reply = turn(messages, stream=True)
    messages += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": b.id, "content": "3 passed"}
                for b in reply.content
                if b.type == "tool_use"
            ],
        },
    ]
    turn(messages, stream=False)
    # A call with broken JSON arguments; the agent moves on without sending its result.
    messages = [{"role": "user", "content": "Run them verbosely this time. [malformed]"}]
    reply = turn(messages, stream=True)
    messages += [
        {"role": "assistant", "content": [{"type": "text", "text": "(retrying)"}]},
        {"role": "user", "content": "Never mind, summarise the fix instead."},
    ]
    turn(messages, stream=False)
    # The same task restarted with a timestamp pasted into the system prompt: a cache miss.
    stamped = [{"type": "text", "text": GUIDE + " Current time: 09:41:07.", "cache_control": {"type": "ephemeral"}}]
    turn([{"role": "user", "content": task}], stream=True, system_blocks=stamped)
    # The task again with one more tool declared: the cached prefix starts with the tools.
    client.messages.create(
        model=model,
        max_tokens=1024,
        system=system,
        messages=[{"role": "user", "content": task}],
        tools=[
            *TOOLS_ANTHROPIC,
            {
                "name": "git_diff",
                "description": "Show the working diff",
                "input_schema": {"type": "object", "properties": {}},
            },
        ],
    )
    tick()
    _expected(lambda: turn([{"role": "user", "content": "Refactor the module. [error:529]"}], stream=False), tick)
    _expected(lambda: turn([{"role": "user", "content": "Explain the diff. [midstream-error]"}], stream=True), tick)


def search(base_url: str, tick: Callable[[], None]) -> None:
    import openai

    client = openai.OpenAI(
        base_url=f"{base_url}/v1", api_key=KEYS["search"], max_retries=0, default_headers={TEAM_HEADER: "search"}
    )
    messages: list[ChatCompletionMessageParam] = [{"role": "system", "content": HANDBOOK}]
    for question in (
        "What is prompt caching?",
        "How long does a cached prefix live?",
        "Which requests can share a cache?",
        "How do I see cache hits in usage?",
    ):
        messages.append({"role": "user", "content": question})
        stream = client.chat.completions.create(
            model="gpt-4o-mini", messages=messages, stream=True, stream_options={"include_usage": True}
        )
        answer = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        messages.append({"role": "assistant", "content": answer})
        tick()
    client.chat.completions.create(model="gpt-4o-mini", messages=messages[:2])
    tick()
    client.chat.completions.create(model="ft:gpt-4o-mini:acme:support:demo01", messages=messages[:2])
    tick()
    _expected(
        lambda: client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Summarise this week's releases. [error:429]"}]
        ),
        tick,
    )
    # `strict` left out, as clients may (the API defaults it); the SDK's type requires it
    tools = cast(
        "list[FunctionToolParam]",
        [
            {
                "type": "function",
                "name": "search_docs",
                "description": "Search the documentation",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "query": {"type": "string"},
                        "limit": {"type": "integer"},
                    },
                    "required": ["query"],
                },
            }
        ],
    )
    entries: list[Any] = [{"role": "user", "content": "Find the retry policy in the docs. [tool:search_docs]"}]
    first = client.responses.create(model="o4-mini", instructions=HANDBOOK, input=entries, tools=tools)
    tick()
    for item in first.output:
        if item.type == "function_call":
            entries += [
                item.model_dump(exclude_none=True),
                {"type": "function_call_output", "call_id": item.call_id, "output": "Retry 3 times."},
            ]
    with client.responses.stream(model="o4-mini", instructions=HANDBOOK, input=entries, tools=tools) as events:
        events.get_final_response()
    tick()


def support(base_url: str, tick: Callable[[], None]) -> None:
    from google import genai
    from google.genai import types

    client = genai.Client(
        api_key=KEYS["support"], http_options=types.HttpOptions(base_url=base_url, headers={TEAM_HEADER: "support"})
    )
    thinking = types.GenerateContentConfig(thinking_config=types.ThinkingConfig(include_thoughts=True))
    history: list[Any] = []
    for question in (
        "My order has not arrived. What can I do?",
        "It was order 4411, placed last Monday.",
        "Can you check where it is now? [tool:track_order]",
    ):
        history.append(types.Content(role="user", parts=[types.Part(text=HANDBOOK + question)]))
        text = ""
        for chunk in client.models.generate_content_stream(model="gemini-2.5-flash", contents=history, config=thinking):
            for candidate in chunk.candidates or []:
                parts = candidate.content.parts if candidate.content else None
                text += "".join(p.text or "" for p in parts or [] if not p.thought)
        history.append(types.Content(role="model", parts=[types.Part(text=text or "(tool call)")]))
        tick()
    client.models.generate_content(model="gemini-2.5-pro", contents="Write a haiku about late parcels.")
    tick()
    client.models.generate_content(model="gemini-2.5-flash", contents="Tell me something forbidden. [blocked]")
    tick()
    client.interactions.create(model="gemini-2.5-flash", input="Thank the customer for their patience.")
    tick()
    for _ in client.interactions.create(model="gemini-2.5-flash", input="Draft a short apology.", stream=True):
        pass
    tick()


STEPS = {"agents": 14, "search": 9, "support": 7}  # tick() calls per team, for the progress bar
TEAMS: dict[str, Callable[[str, Callable[[], None]], None]] = {"agents": agents, "search": search, "support": support}
