"""A request's prompt prefix in parts, and how a chained request extends the prefix of
the response it names (SPEC §5 Conversation and Cache): the one definition of a chained
request's effective tools and system prompt, which the writer stores as its
`tools_hash` / `system_hash` and every cache rule then reads.

A Responses request chained with `previous_response_id` sends only what is new; the
provider keeps the rest (Codex over WebSocket: a follow-up may carry nothing but a
`function_call_output`). Four parts, each a digest or None where the request has none:

| part | what | for a chained request |
|---|---|---|
| `tools` | the top-level `tools` array (`[]` is a declaration: none) | its own if it sends one, else the chain's |
| `tool_items` | tools declared inside input items (`additional_tools`) | the chain's, then its own appended |
| `instructions` | top-level `instructions` | its own if it sends them, else the chain's |
| `system_items` | `system` / `developer` messages in the input | the chain's, then its own appended |

Input items are history, so the chain's stand and new ones extend them; a top-level field
the request leaves out leaves the chain's standing (SPEC §5: "unless the request itself
declares others"). A request that declares nothing new keeps the tools and system hashes
of the response it names; one whose parts come out as its own (it names a response
that had none) keeps its own; any other gets a digest of its parts.

Not responsible for finding the response a request names (storage/threads.py), for
comparing two requests (protocols/rules.py, storage/verdicts.py), nor for
protocols without chains.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llmtap.protocols.common import stable_hash

Parts = dict[str, str | None]

TOOL_PARTS = ("tools", "tool_items")
SYSTEM_PARTS = ("instructions", "system_items")
_REPLACED = ("tools", "instructions")  # top-level fields: the request's own, else the chain's
_APPENDED = ("tool_items", "system_items")  # input items: the chain's history, then the request's


def parts(*, tools: Any, tool_items: Sequence[Any], instructions: Any, system_items: Sequence[Any]) -> Parts:
    """The parts of one request's own body; None (`tools`, `instructions`) where absent."""
    return {
        "tools": None if tools is None else stable_hash(tools),
        "tool_items": stable_hash(list(tool_items)) if tool_items else None,
        "instructions": None if instructions is None else stable_hash(instructions),
        "system_items": stable_hash(list(system_items)) if system_items else None,
    }


def follow(chain: Any, chain_hashes: tuple[Any, Any], own: Any, own_hashes: tuple[Any, Any]) -> tuple[Parts, Any, Any]:
    """What a chained request stands on: (its effective parts, tools hash, system hash).
    `chain`: the effective parts of the response it names, `chain_hashes` that response's
    (tools_hash, system_hash); `own`, `own_hashes`: the request's own, from its body. Parts
    come from store rows: anything but a mapping of digests counts as none."""
    chain, own = clean(chain), clean(own)
    effective: Parts = {}
    for part in _REPLACED:
        effective[part] = own[part] or chain[part]
    for part in _APPENDED:
        before, new = chain[part], own[part]
        effective[part] = before if new is None else new if before is None else stable_hash([before, new])
    tools = _hash(TOOL_PARTS, effective, chain, own, chain_hashes[0], own_hashes[0])
    system = _hash(SYSTEM_PARTS, effective, chain, own, chain_hashes[1], own_hashes[1])
    return effective, tools, system


def _hash(names: Sequence[str], effective: Parts, chain: Parts, own: Parts, chain_hash: Any, own_hash: Any) -> Any:
    """The chain's hash where the parts are the chain's, the request's own where they are
    its own (it names a response that had none), else a digest of them."""
    if all(effective[name] == chain[name] for name in names):
        return chain_hash
    if all(effective[name] == own[name] for name in names):
        return own_hash
    return stable_hash(["prefix", *(effective[name] for name in names)])


def clean(value: Any) -> Parts:
    """Parts as a store row holds them: each a digest string, anything else (a damaged or
    hostile row, a part this version does not know) None."""
    found = value if isinstance(value, Mapping) else {}
    return {name: _digest(found.get(name)) for name in (*TOOL_PARTS, *SYSTEM_PARTS)}


def _digest(value: Any) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= 32 else None
