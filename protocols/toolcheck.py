"""Each tool call's status against the tools its own request declared (SPEC §5).

First that applies, in this order: `truncated` (the output hit its token limit inside the
call), `unknown_tool`, `invalid_json`, `args_lost` (a schema with required fields and no
arguments), `schema_violation` (jsonschema), else `valid`. A `custom` call (free-form text)
is never `invalid_json` nor `args_lost`: after `truncated` and `unknown_tool` it is
`schema_violation` when its text breaks the grammar its tool declared, else `valid`.

Not responsible for the checks across a conversation (repeated ids, missing or orphan
results): those need other exchanges and live in the analytics.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from llmtap.protocols import grammar
from llmtap.protocols.canonical import Exchange, ToolCall, ToolSpec

STATUSES = ("valid", "truncated", "unknown_tool", "invalid_json", "args_lost", "schema_violation")


def check_tool_calls(ex: Exchange) -> None:
    """Set `status` and `status_detail` on every tool call of `ex`."""
    # A request that declares no client tools (or whose body we lack) cannot say a name
    # is unknown: stateful APIs may carry the tool list from an earlier turn.
    declared = _declared(ex.request.tools) if ex.request and ex.request.tools else None
    last = len(ex.tool_calls) - 1
    for position, call in enumerate(ex.tool_calls):
        truncated = ex.finish_reason == "max_tokens" and position == last
        call.status, call.status_detail = _status(call, declared, truncated)


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


def _status(call: ToolCall, declared: dict[str, ToolSpec] | None, truncated: bool) -> tuple[str, str | None]:
    if truncated:
        return "truncated", "the output reached its token limit inside this call"
    if declared is not None and call.name not in declared:
        known = ", ".join(sorted({tool.name for tool in declared.values()})) or "none"
        return "unknown_tool", f"{call.name!r} is not among the request's tools ({known})"
    if call.kind == "custom":
        return _custom_status(call, declared)
    if not call.valid_json:
        return "invalid_json", "the arguments are not a JSON object"
    spec = declared.get(call.name) if declared and call.name is not None else None
    schema = spec.schema if spec else None
    if not isinstance(schema, dict) or not schema:
        return "valid", None
    if not call.arguments and _required(schema):
        return "args_lost", f"no arguments arrived; required: {', '.join(_required(schema))}"
    problem = _violation(_schema_key(schema), call.arguments or {})
    if problem:
        return "schema_violation", problem
    return "valid", None


def _custom_status(call: ToolCall, declared: dict[str, ToolSpec] | None) -> tuple[str, str | None]:
    """A free-form call: its input text against the declared grammar where it can be
    checked (`grammar.py`); never `invalid_json`, as it is not JSON."""
    spec = declared.get(call.name) if declared and call.name is not None else None
    if spec is None or spec.type != "custom":
        return "valid", None
    problem = grammar.problem(spec.schema, call.arguments_raw)
    return ("schema_violation", problem) if problem else ("valid", None)


def _required(schema: dict[str, Any]) -> list[str]:
    required = schema.get("required")
    return [str(name) for name in required] if isinstance(required, list) else []


def _schema_key(schema: dict[str, Any]) -> str:
    return json.dumps(schema, sort_keys=True)


@lru_cache(maxsize=512)
def _validator(schema_text: str) -> Any:
    from jsonschema import exceptions as schema_errors  # costly to import; few exchanges need it
    from jsonschema import validators

    schema = json.loads(schema_text)
    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except schema_errors.SchemaError:
        return None  # a request that declared a broken schema cannot be held to it
    return cls(schema)


def _violation(schema_text: str, arguments: dict[str, Any]) -> str | None:
    validator = _validator(schema_text)
    if validator is None:
        return None
    try:
        error = next(iter(validator.iter_errors(arguments)), None)
    except Exception as exc:  # noqa: BLE001 - e.g. an unresolvable $ref: not the call's fault
        return f"schema could not be applied: {exc.__class__.__name__}"
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return f"{where}: {error.message}"[:500]
