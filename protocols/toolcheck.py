"""Each tool call's status against the tools its own request declared (SPEC §5).

First that applies, in this order: `truncated` (the output hit its token limit inside the
call), `unknown_tool`, `invalid_json`, `args_lost` (a schema with required fields and no
arguments), then the check against the declared schema: `schema_violation`, or
`unchecked` when that check cannot be run within its bound, else `valid`. A `custom` call
(free-form text) is never `invalid_json` nor `args_lost`: after `truncated` and
`unknown_tool` its text is checked against the grammar its tool declared
(`schema_violation`, `unchecked` or `valid`).

`unchecked` is not a malformed call: it says the call was not verified. It comes from a
declaration no linear-time engine can apply (a regex with lookaround or backreferences, a
grammar that `lark` cannot load, a `$ref` outside the schema) or from the exchange's
check clock (`budget.CheckClock`: every check of one exchange shares one bound, so many
costly calls cannot add up; once it is spent, the calls after are `unchecked` at once).

Not responsible for the checks across a conversation (repeated ids, missing or orphan
results): those need other exchanges and live in the analytics. Nor for how a schema or
a grammar is applied (schema_check.py, grammar.py).
"""

from __future__ import annotations

import json
from typing import Any

from llmtap.protocols import grammar, schema_check
from llmtap.protocols.budget import CheckClock
from llmtap.protocols.canonical import Exchange, ToolCall, ToolSpec
from llmtap.protocols.vocabulary import TOOL_STATUSES, ToolStatus

STATUSES = TOOL_STATUSES  # the name telemetry and older tests import


def check_tool_calls(ex: Exchange, clock: CheckClock | None = None) -> None:
    """Set `status` and `status_detail` on every tool call of `ex`, all of its checks
    within `clock` (by default the clock of an exchange as big as the calls' own text: a
    caller without the exchange's bytes, such as a follow-up's completion)."""
    clock = clock or CheckClock.for_size(sum(len(call.arguments_raw or "") for call in ex.tool_calls))
    # A request that declares no client tools (or whose body we lack) cannot say a name
    # is unknown: stateful APIs may carry the tool list from an earlier turn.
    declared = _declared(ex.request.tools) if ex.request and ex.request.tools else None
    keys: dict[int, str] = {}  # each declared schema's text, made once per exchange
    last = len(ex.tool_calls) - 1
    for position, call in enumerate(ex.tool_calls):
        truncated = ex.finish_reason == "max_tokens" and position == last
        call.status, call.status_detail = _status(call, declared, truncated, clock, keys)


def _declared(tools: list[ToolSpec]) -> dict[str, ToolSpec]:
    """The declared tools by every name a call may give them. A tool of a namespace is
    declared as `namespace.tool`; Responses calls name the bare tool (and carry the
    namespace beside it), and Codex spells it flat as `namespace__tool` where it must."""
    found = {tool.name: tool for tool in tools}
    for tool in tools:
        namespace, dot, bare = tool.name.rpartition(".")
        if dot and namespace and bare:
            found.setdefault(bare, tool)
            found.setdefault(f"{namespace}__{bare}", tool)
    return found


def _status(
    call: ToolCall, declared: dict[str, ToolSpec] | None, truncated: bool, clock: CheckClock, keys: dict[int, str]
) -> tuple[ToolStatus, str | None]:
    if truncated:
        return "truncated", "the output reached its token limit inside this call"
    if declared is not None and call.name not in declared:
        known = ", ".join(sorted({tool.name for tool in declared.values()})) or "none"
        return "unknown_tool", f"{call.name!r} is not among the request's tools ({known})"
    spec = declared.get(call.name) if declared and call.name is not None else None
    if call.kind == "custom":
        if spec is None or spec.type != "custom":
            return "valid", None
        return grammar.verdict(spec.schema, call.arguments_raw, clock)
    if not call.valid_json:
        return "invalid_json", "the arguments are not a JSON object"
    schema = spec.schema if spec else None
    if not isinstance(schema, dict) or not schema:
        return "valid", None
    if not call.arguments and _required(schema):
        return "args_lost", f"no arguments arrived; required: {', '.join(_required(schema))}"
    key = keys.get(id(schema))
    if key is None:
        key = keys[id(schema)] = json.dumps(schema, sort_keys=True)
    return schema_check.verdict(key, call.arguments or {}, clock)


def _required(schema: dict[str, Any]) -> list[str]:
    required = schema.get("required")
    return [str(name) for name in required] if isinstance(required, list) else []
