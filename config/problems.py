"""What is wrong with a config file, as one line naming the table, the key and, for a name
the schema does not know, the closest one it does (difflib):

    [budgtes] is not a known table (did you mean [budgets]?)
    [budgets] enforse is not a known key (did you mean enforce?)
    [budgets.teams] search.usd must be a positive number of dollars, not -3
    [[proxy.reverse]] #1 port must be a whole number, not 'x'
    db must be text, not 5

The table and the key come from pydantic's error location read against the schema's own
types: a field that holds a model or a dict is a table, a name under a dict is a key (the
team of `[budgets.teams] search`), an index under a list of models is the entry of an
array of tables. A value is quoted unless it is a secret (a `SecretStr` field, or a key
named like a credential), then only its kind is said.

Not responsible for the file's name in front of it (the caller's) or for the checks.
"""

from __future__ import annotations

import difflib
import re
import types
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, SecretStr, ValidationError
from pydantic_core import ErrorDetails

_BARE = re.compile(r"[A-Za-z0-9_-]+")
# A key whose value is a credential, by its name (pyiceberg's FileIO properties, headers):
# masked wherever settings are shown, never quoted in an error.
_SECRET_NAME = re.compile(r"secret|token|password|passwd|credential|connection-string|account-key|access-key|sas|auth")
_SHOWN_KNOWN = 12  # at most this many known names are listed when none is close
_WORDS = {
    "string_type": "text",
    "int_type": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "bool_type": "true or false",
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
    "list_type": "a list",
}


@dataclass(frozen=True)
class _Step:
    name: str | int
    kind: Literal["table", "key", "index"]
    type: Any  # the schema's type of what this step reaches (Any when unknown)


def problem(error: ValidationError, model: type[BaseModel], where: tuple[str, ...] = ()) -> str:
    """The first thing `error` says is wrong, as one line. `where`: the tables `model`
    sits in (("budgets",) for the model of `[budgets]`)."""
    errors = error.errors(include_url=False)
    first = errors[0]
    loc = tuple(first["loc"])
    if first["type"] == "unknown_key":  # a model's own check of names it allows (lake/settings.py)
        loc = (*loc, first["ctx"]["key"])
    steps = _steps(model, loc, where)
    same = [e for e in errors if _steps(model, tuple(e["loc"]), where) == steps]  # a union's members
    return _say(model, steps, first, same)


def secret_name(name: str) -> bool:
    return _SECRET_NAME.search(name.lower()) is not None


def _steps(model: type[BaseModel], loc: tuple[Any, ...], where: tuple[str, ...]) -> list[_Step]:
    steps = [_Step(name, "table", model if i == len(where) - 1 else Any) for i, name in enumerate(where)]
    current: Any = model
    for part in loc:
        current = _core(current)
        if _is_union(current):  # pydantic names the member it tried: not a key of the file
            current = Any
            continue
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = _field(current, str(part))
            reached = field.annotation if field is not None else Any
            steps.append(_Step(part, "table" if _is_table(reached) else "key", reached))
        elif get_origin(current) is dict:
            reached = get_args(current)[1]
            steps.append(_Step(part, "key", reached))
        elif get_origin(current) is list:
            reached = get_args(current)[0]
            steps.append(_Step(part, "index", reached))
        else:
            reached = Any
            steps.append(_Step(part, "key", reached))
        current = reached
    return steps


def _say(model: type[BaseModel], steps: list[_Step], first: ErrorDetails, same: list[ErrorDetails]) -> str:
    kind = first["type"]
    value = first.get("input") if kind != "unknown_key" else None  # that input is the whole table
    if kind in ("extra_forbidden", "unknown_key"):
        subject, container = steps[-1], steps[:-1]
        known = first["ctx"]["known"] if kind == "unknown_key" else _known(container, model)
        as_table = isinstance(value, dict) and _all_tables(container)
        said = _place(container, subject, as_table)
        what = "table" if as_table else "key"
        return f"{said} is not a known {what} ({_suggest(container, subject, known, as_table)})"
    said = _place(steps[:-1], steps[-1], _all_tables(steps)) if steps else ""
    if kind == "missing":
        return f"{said} is missing".strip()
    if kind == "value_error":
        return f"{said} {first['ctx']['error']}".strip()
    if kind == "literal_error" and len(same) == 1:
        return f"{said} must be one of {first['ctx']['expected']}, not {_shown(value, steps)}".strip()
    words = [_words(e) for e in same]
    return f"{said} must be {' or '.join(dict.fromkeys(words))}, not {_shown(value, steps)}".strip()


def _words(error: ErrorDetails) -> str:
    if error["type"] == "literal_error":
        return str(error["ctx"]["expected"]).lower()
    return _WORDS.get(error["type"], str(error["msg"]).removeprefix("Input should be ").lower())


def _place(container: list[_Step], subject: _Step, as_table: bool) -> str:
    """`[a.b] c.d`, `[[a.b]] #2 c`, or `[a.b.c]` when the subject is itself a table."""
    head, key = _split(container, subject, as_table)
    return f"{head} {key}".strip()


def _split(container: list[_Step], subject: _Step, as_table: bool) -> tuple[str, str]:
    """The table part and the key part of a place."""
    if as_table:
        return "[" + ".".join(toml_key(s.name) for s in [*container, subject]) + "]", ""
    tables: list[str] = []
    rest = list(container)
    while rest and rest[0].kind == "table":
        tables.append(toml_key(rest.pop(0).name))
    head = ""
    if rest and rest[0].kind == "index":
        head = f"[[{'.'.join(tables)}]] #{int(rest.pop(0).name) + 1}"
    elif tables:
        head = f"[{'.'.join(tables)}]"
    if subject.kind == "index":
        return head, ".".join(toml_key(s.name) for s in rest) + f" #{int(subject.name) + 1}"
    return head, ".".join(toml_key(s.name) for s in [*rest, subject])


def _suggest(container: list[_Step], subject: _Step, known: list[str], as_table: bool) -> str:
    close = difflib.get_close_matches(str(subject.name), known, n=1, cutoff=0.6)
    if close:
        head, key = _split(container, _Step(close[0], subject.kind, Any), as_table)
        return f"did you mean {key or head}?"
    if not known:
        return "this table takes no keys"
    listed = ", ".join(toml_key(name) for name in sorted(known)[:_SHOWN_KNOWN])
    return f"known: {listed}{', …' if len(known) > _SHOWN_KNOWN else ''}"


def _known(container: list[_Step], model: type[BaseModel]) -> list[str]:
    parent = _core(container[-1].type) if container else model
    if isinstance(parent, type) and issubclass(parent, BaseModel):
        return [field.alias or name for name, field in parent.model_fields.items()]
    return []


def _shown(value: Any, steps: list[_Step]) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str) and _secret(steps):
        return "a text that is not shown (a secret)"
    return repr(value)


def _secret(steps: list[_Step]) -> bool:
    if any(_core(step.type) is SecretStr for step in steps[-1:]):
        return True
    return any(secret_name(str(step.name)) for step in steps)


def toml_key(name: str | int) -> str:
    """A key as TOML writes it: bare when it can be, else quoted."""
    text = str(name)
    return text if _BARE.fullmatch(text) else '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _all_tables(steps: list[_Step]) -> bool:
    return all(step.kind == "table" for step in steps)


def _field(model: type[BaseModel], name: str) -> Any:
    for key, field in model.model_fields.items():
        if (field.alias or key) == name:
            return field
    return None


def _core(kind: Any) -> Any:
    """`kind` without Annotated metadata and without `| None`."""
    origin = get_origin(kind)
    if origin is Annotated:
        return _core(get_args(kind)[0])
    if origin in (Union, types.UnionType):
        members = [m for m in get_args(kind) if m is not type(None)]
        if len(members) == 1:
            return _core(members[0])
    return kind


def _is_union(kind: Any) -> bool:
    return get_origin(kind) in (Union, types.UnionType)


def _is_table(kind: Any) -> bool:
    core = _core(kind)
    if isinstance(core, type) and issubclass(core, BaseModel):
        return True
    if get_origin(core) is dict:
        return True
    return get_origin(core) is list and _is_table(get_args(core)[0])
