"""A tool call's arguments against the JSON Schema its request declared, in bounded time.

jsonschema applies the schema (https://python-jsonschema.readthedocs.io), in the dialect
its `$schema` names (2020-12 without one), with what could run away replaced:

- `pattern`, `patternProperties`, and `additionalProperties` (which reads the patterns):
  RE2 through `linear_regex` (ECMA-262), instead of Python's backtracking `re`; a pattern
  RE2 cannot run makes the check `unchecked` when it has to be applied, and only then.
- `uniqueItems`: each item's canonical form in a set, where jsonschema compares unhashable
  items pairwise (20,000 objects: 2 x 10^8 comparisons).
- `unevaluatedProperties` of a schema that has `patternProperties` anywhere: jsonschema
  applies those patterns with `re` itself, so such a call is `unchecked`.
- every keyword, as jsonschema applies it, looks at the exchange's `CheckClock`, so
  references that fan out (each level naming the one below twice: 2^n validations), or a
  huge `enum` per call, stop at the bound: `unchecked`.
- `$ref` resolves inside the schema only: jsonschema's default registry fetches any other
  URI with `urlopen`, without a timeout, from the writer.
- a `$schema` string below the root is dropped: it would make jsonschema apply that
  subschema with the stock keywords of its dialect.

`format` is not asserted (annotations only, as the 2020-12 default says).

Not responsible for the statuses before this one (toolcheck.py) or for regex dialects
(linear_regex.py).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from llmtap.protocols import linear_regex
from llmtap.protocols.budget import CheckClock, Overrun
from llmtap.protocols.vocabulary import ToolStatus

Verdict = tuple[ToolStatus, str | None]
_DETAIL = 500
# Where a `$schema` string is data, not a dialect: left as it is.
_VALUES = frozenset(("const", "enum", "default", "examples"))
META_SECONDS_PER_OBJECT = 0.0005  # the metaschema check's cost per object of a schema (see `_prepared`)


@dataclass(frozen=True, slots=True)
class _Check:
    clock: CheckClock
    patterns_anywhere: bool  # the schema has `patternProperties` somewhere


_current: ContextVar[_Check] = ContextVar("llmtap_schema_check")


class _Unsupported(Exception):
    """The schema needs something this check will not run."""


def verdict(schema_text: str, arguments: dict[str, Any], clock: CheckClock) -> Verdict:
    """`valid`, `schema_violation` (with where and why) or `unchecked` (with why)."""
    clock.excluding(_warm)
    token = _current.set(_Check(clock, False))
    try:
        prepared = _prepared(schema_text)  # not cached when the clock stopped it
    except Overrun as exc:
        return "unchecked", f"the schema itself could not be checked in time: {exc}"[:_DETAIL]
    finally:
        _current.reset(token)
    if prepared is None:
        return "valid", None  # a request that declared a broken schema cannot be held to it
    validator, patterns_anywhere = prepared
    token = _current.set(_Check(clock, patterns_anywhere))
    try:
        clock.check()
        error = next(iter(validator.iter_errors(arguments)), None)
    except Overrun as exc:
        return "unchecked", str(exc)
    except linear_regex.Unsupported as exc:
        return "unchecked", f"a pattern the check cannot run in linear time: {exc}"[:_DETAIL]
    except _Unsupported as exc:
        return "unchecked", str(exc)
    except RecursionError:
        return "unchecked", "the arguments or the schema nest deeper than the check goes"
    except Exception as exc:  # noqa: BLE001 - e.g. a $ref outside the schema: not the call's fault
        return "unchecked", f"the schema could not be applied: {exc.__class__.__name__}"
    finally:
        _current.reset(token)
    if error is None:
        return "valid", None
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return "schema_violation", f"{where}: {error.message}"[:_DETAIL]


@lru_cache(maxsize=1)
def _warm() -> None:
    """jsonschema imported and its metaschemas loaded: the first schema of a process costs
    a few hundred milliseconds of that (more on a loaded machine), which no exchange's clock
    should pay, or the first call a writer checks would come out `unchecked`."""
    from jsonschema import validators

    validators.Draft202012Validator.check_schema({"type": "object", "properties": {"a": {"type": "string"}}})


@lru_cache(maxsize=256)
def _prepared(schema_text: str) -> tuple[Any, bool] | None:
    from jsonschema import exceptions as schema_errors  # costly to import; few exchanges need it
    from jsonschema import validators
    from referencing import Registry

    schema = json.loads(schema_text)
    stock: Any = validators.validator_for(schema, default=validators.Draft202012Validator)
    patterns_anywhere, subschemas = _drop_inner_dialects(schema)
    # The metaschema check costs about the same for every object of the schema (each is
    # walked through the dialect's whole vocabulary: 0.6 ms on a loaded 2-core machine), and
    # runs with jsonschema's own keywords (the metaschema's parts name their dialect, which
    # brings the stock class back), so it is admitted by that estimate, not clocked.
    _current.get().clock.admit(subschemas * META_SECONDS_PER_OBJECT)
    try:
        stock.check_schema(schema, format_checker=None)
    except (schema_errors.SchemaError, RecursionError):
        return None
    return _bounded(stock)(schema, registry=Registry()), patterns_anywhere


def _drop_inner_dialects(schema: Any) -> tuple[bool, int]:
    """Remove every `$schema` string below the root (in place; the schema is our own copy);
    whether `patternProperties` appears anywhere, and how many objects the schema holds.
    Walks with its own stack."""
    found = False
    objects = 0
    stack: list[tuple[Any, bool]] = [(schema, True)]
    while stack:
        node, root = stack.pop()
        if isinstance(node, dict):
            objects += 1
            if not root and isinstance(node.get("$schema"), str):
                del node["$schema"]
            found = found or "patternProperties" in node
            stack.extend((value, False) for key, value in node.items() if key not in _VALUES)
        elif isinstance(node, list):
            stack.extend((value, False) for value in node)
    return found, objects


_classes: dict[type, Any] = {}
_classes_lock = threading.Lock()


def _bounded(stock: Any) -> Any:
    """The stock validator class of a dialect, with the keywords of the module's doc."""
    with _classes_lock:
        if stock in _classes:
            return _classes[stock]
    from jsonschema import validators

    replaced: dict[str, Callable[..., Iterator[Any]]] = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
        "uniqueItems": _unique_items,
    }
    keywords = {name: _clocked(replaced.get(name, function), name) for name, function in stock.VALIDATORS.items()}
    extend: Any = validators.extend  # untyped in jsonschema
    bounded = extend(stock, keywords)
    with _classes_lock:
        _classes[stock] = bounded
    return bounded


def _clocked(keyword: Callable[..., Iterator[Any]], name: str) -> Callable[..., Iterator[Any]]:
    def applied(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        check = _current.get()
        check.clock.check()
        if name == "unevaluatedProperties" and check.patterns_anywhere and isinstance(instance, dict) and instance:
            raise _Unsupported("jsonschema applies patternProperties with Python's re under unevaluatedProperties")
        yield from keyword(validator, value, instance, schema)

    return applied


def _search(pattern: str, text: str) -> bool:
    regex = linear_regex.compiled(pattern, "ecma")
    _current.get().clock.admit(regex.worst_seconds(len(text.encode("utf-8", "surrogatepass"))))
    return regex.search(text)


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and isinstance(pattern, str) and not _search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object") or not isinstance(patterns, dict):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    extras = [
        key for key in instance if key not in properties and not any(_search(pattern, key) for pattern in patterns)
    ]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif additional is False and extras:
        listed = ", ".join(repr(extra) for extra in sorted(extras))
        if patterns:
            verb = "does" if len(extras) == 1 else "do"
            regexes = ", ".join(repr(pattern) for pattern in sorted(patterns))
            yield ValidationError(f"{listed} {verb} not match any of the regexes: {regexes}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(f"Additional properties are not allowed ({listed} {verb} unexpected)")


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not unique or not validator.is_type(instance, "array"):
        return
    clock = _current.get().clock
    # Only each item's hash is kept (its canonical form is as big as the item); items whose
    # hashes meet are compared in full.
    seen: dict[int, list[int]] = {}
    for position, item in enumerate(instance):
        if position % 256 == 0:
            clock.check()
        key = _canonical(item)
        earlier = seen.setdefault(hash(key), [])
        if any(_canonical(instance[other]) == key for other in earlier):
            yield ValidationError(f"{instance!r} has non-unique elements"[:_DETAIL])
            return
        earlier.append(position)


def _canonical(value: Any) -> Any:
    """A hashable form in which two JSON values are equal exactly when JSON Schema says
    they are: numbers by value (1 and 1.0 alike), booleans apart from numbers, objects
    whatever their key order."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, (int, float)):
        return ("n", value)
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, list):
        return ("a", tuple(_canonical(item) for item in value))
    if isinstance(value, dict):
        return ("o", frozenset((key, _canonical(item)) for key, item in value.items()))
    return ("z", None)
