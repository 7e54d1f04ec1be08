"""Snapshots of the hashes that key stored data: fixed inputs, literal expected digests.

These digests are stored, and the store is read by them: `first_message_hash`,
`message_hashes`, `tools_hash` and `system_hash` (every protocol's `decode_request`,
through `protocols.common.stable_hash`) group exchanges into conversations and decide
cache verdicts; `request_prefix` (protocols/prefix.py) carries a chain's prompt to its
follow-ups; `thread_key` (storage/threads.py) names a session's or a response chain's
conversation; body blobs are content-addressed by sha256 (storage/bodies.py); an
imported entry's id (storage/ids.py `capture_id`) is how a second import of the same
file is recognised.

A change to any expected value here breaks stored conversations: exchanges recorded
before it no longer join those recorded after, cache verdicts compare unequal digests,
and a re-imported file is stored twice. Such a change needs a migration that recomputes
the stored digests (or `reprocess` of every row) and a note in the changelog; do not
update the literals to make this test pass. The expected values were computed once,
from the code as it stood when this file was written.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from llmtap.protocols import (
    anthropic_messages,
    bedrock_converse,
    gemini_generate,
    gemini_interactions,
    openai_chat,
    openai_responses,
    prefix,
)
from llmtap.protocols.common import stable_hash
from llmtap.storage import bodies, ids, threads

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
GREETING = "Héllo ☃ — 你好"  # non-ASCII: the digests hash UTF-8, not escapes

# -- stable_hash ---------------------------------------------------------------------------------

STABLE = [
    ("empty string", "", "fbcad3b4d0be6c48"),
    ("string", GREETING, "5d0255d154b96226"),
    ("empty list", [], "71857576257465c7"),
    ("empty object", {}, "01e7b720ff566d53"),
    ("nested", {"role": "user", "content": [{"type": "text", "text": GREETING}]}, "0f6c1b5a4a8d8e82"),
    ("numbers and null", [1, 2.5, -3, None, True, False], "b5503d707137f98e"),
    ("lone surrogate", "\ud800", "b9874ddb0ea33e50"),
]


@pytest.mark.parametrize(("value", "expected"), [s[1:] for s in STABLE], ids=[s[0] for s in STABLE])
def test_stable_hash_of_fixed_values(value: Any, expected: str) -> None:
    assert stable_hash(value) == expected


def test_stable_hash_ignores_key_order_and_whitespace() -> None:
    assert stable_hash({"b": 1, "a": [1, 2]}) == stable_hash({"a": [1, 2], "b": 1}) == "0fa4e3f719a9ee94"


# -- the request hashes every protocol stores -----------------------------------------------------

BODIES: dict[str, tuple[Any, dict[str, Any], str]] = {
    "anthropic_messages": (
        anthropic_messages,
        {
            "model": "claude-sonnet-4-5",
            "system": "You are terse.",
            "tools": [{"name": "weather", "input_schema": SCHEMA, "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": GREETING},
                {"role": "assistant", "content": [{"type": "text", "text": "Hi."}]},
            ],
        },
        "/v1/messages",
    ),
    "openai_chat": (
        openai_chat,
        {
            "model": "gpt-4o",
            "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": GREETING}],
            "tools": [{"type": "function", "function": {"name": "weather", "parameters": SCHEMA}}],
        },
        "/v1/chat/completions",
    ),
    "openai_responses": (
        openai_responses,
        {
            "model": "gpt-5",
            "instructions": "You are terse.",
            "input": [{"role": "user", "content": GREETING}],
            "tools": [{"type": "function", "name": "weather", "parameters": SCHEMA}],
        },
        "/v1/responses",
    ),
    "gemini_generate": (
        gemini_generate,
        {
            "systemInstruction": {"parts": [{"text": "You are terse."}]},
            "contents": [{"role": "user", "parts": [{"text": GREETING}]}],
            "tools": [{"functionDeclarations": [{"name": "weather", "parameters": SCHEMA}]}],
        },
        "/v1beta/models/gemini-2.5-pro:generateContent",
    ),
    "gemini_interactions": (
        gemini_interactions,
        {
            "model": "gemini-2.5-flash",
            "system_instruction": "You are terse.",
            "input": GREETING,
            "tools": [{"type": "function", "name": "weather", "parameters": SCHEMA}],
        },
        "/v1beta/interactions",
    ),
    "bedrock_converse": (
        bedrock_converse,
        {
            "system": [{"text": "You are terse."}, {"cachePoint": {"type": "default"}}],
            "messages": [{"role": "user", "content": [{"text": GREETING}]}],
            "toolConfig": {"tools": [{"toolSpec": {"name": "weather", "inputSchema": {"json": SCHEMA}}}]},
        },
        "/model/anthropic.claude-3-5-sonnet-20240620-v1:0/converse",
    ),
}

# protocol -> (message_hashes, tools_hash, system_hash); the first message hash is the
# stored `first_message_hash`
REQUEST_HASHES: dict[str, tuple[list[str], str, str]] = {
    # the user turn's digest is the "nested" one above: a string content is hashed as its text block
    "anthropic_messages": (["0f6c1b5a4a8d8e82", "8cef444e155af5ab"], "1b020ba90afb668a", "5c13cd73fa0b318f"),
    "openai_chat": (["fb1a58980c926f84"], "323b82fee730dfa4", "58664c13260367ef"),
    "openai_responses": (["fb1a58980c926f84"], "c2240899e926dd4a", "52193f41a067d180"),
    "gemini_generate": (["fefd441a174d9d6c"], "01c449baeb3a6639", "a2c77847b7582d46"),
    "gemini_interactions": (["5d0255d154b96226"], "c2240899e926dd4a", "52193f41a067d180"),
    "bedrock_converse": (["0363cca48b0ca757"], "db14fabc9ad07e5c", "713d9b1b64245257"),
}


@pytest.mark.parametrize("protocol", list(BODIES))
def test_request_hashes_of_a_fixed_body(protocol: str) -> None:
    module, body, path = BODIES[protocol]
    facts = module.decode_request(body, path)
    assert (facts.message_hashes, facts.tools_hash, facts.system_hash) == REQUEST_HASHES[protocol]


def test_every_protocol_is_pinned() -> None:
    assert set(REQUEST_HASHES) == set(BODIES)


# -- a chained request's prefix (protocols/prefix.py) ---------------------------------------------

CHAIN_PARTS = prefix.parts(tools=[{"name": "weather"}], tool_items=[], instructions="You are terse.", system_items=[])
OWN_PARTS = prefix.parts(tools=None, tool_items=[{"name": "lookup"}], instructions=None, system_items=["Be kind."])
PREFIX_PARTS = {
    "tools": "b1b90600138e815c",
    "tool_items": None,
    "instructions": "52193f41a067d180",
    "system_items": None,
}
OWN_PREFIX_PARTS = {
    "tools": None,
    "tool_items": "f611b183499ef7b8",
    "instructions": None,
    "system_items": "8ea34dcb4ef6df44",
}
FOLLOWED = (
    {
        "tools": "b1b90600138e815c",
        "instructions": "52193f41a067d180",
        "tool_items": "f611b183499ef7b8",
        "system_items": "8ea34dcb4ef6df44",
    },
    "2bc58287c069a807",
    "69bf616477572fd0",
)


def test_prefix_parts_of_a_fixed_request() -> None:
    assert CHAIN_PARTS == PREFIX_PARTS
    assert OWN_PARTS == OWN_PREFIX_PARTS


def test_a_follow_up_extends_its_chain_by_fixed_digests() -> None:
    followed = prefix.follow(CHAIN_PARTS, ("chain-tools", "chain-system"), OWN_PARTS, ("own-tools", "own-system"))
    assert followed == FOLLOWED


# -- thread keys, body blobs, import ids ----------------------------------------------------------

SCOPE = threads.scope("fp_0123456789abcdef", None)


def test_thread_keys_of_a_fixed_session_and_chain() -> None:
    assert threads.session_key(SCOPE, "sess-42") == "se713fc527ca6b635672508b531be9ca"
    assert threads.chain_key(SCOPE, "resp_abc") == "r5a5203dfe106c12ceb2d463ac16f2e5"
    assert threads.session_key(threads.scope(None, "research"), "sess-42") == "s8543d9d323b6631a9eaf9e8f733524e"


def test_body_blobs_are_addressed_by_sha256() -> None:
    assert bodies.blob(GREETING.encode()).hash == "1abd7ca00c39694dba103f15eebf1b3d901915d3f4b397c50b847c3d8fde935d"


def test_a_split_request_names_its_parts_by_fixed_hashes() -> None:
    body = b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}'
    hashes = [piece.hash for piece in bodies.split_request(body, [("content-type", "application/json")], False)]
    assert hashes == [
        "5e706c5452d5d4f2877273562c3f6d5b713926d7d11805ec2d73e74fe2597494",  # the manifest
        "9017285104d1b249960a30732b8e92f6e2fb3acf8d8e4b2a16c116ad0c1ed211",  # the one message
    ]


def test_an_imported_entry_gets_a_fixed_id() -> None:
    found = ids.capture_id(
        datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC),
        method="post",
        host="api.openai.com",
        path="/v1/chat/completions",
        status=200,
        request=b'{"model":"gpt-4o"}',
        response=None,
    )
    assert found == "01KDYAK3SE91P2C6X9KS36RMZQ"
