"""The values the official SDKs declare, read off their types: the `Literal` arguments of
pydantic fields and TypedDict keys (through unions, `Optional`, `Annotated`, lists), the
members of `enum.Enum`s, and botocore's service model. Nothing here is a list copied by
hand: an SDK upgrade that adds a value adds it here.

Not responsible for judging the values: test_sdk_enums.py checks them against the tables.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Iterable
from typing import Any

# The genai SDK's stand-in for a type it does not know (its open unions' `UnknownStep`,
# `UnknownTool`): no wire value.
SDK_SENTINELS = frozenset({"UNKNOWN"})
_UNIONS = (typing.Union, types.UnionType)


def literals(annotation: Any) -> set[str]:
    """The string `Literal` values an annotation allows, wherever they stand in it."""
    if typing.get_origin(annotation) is typing.Literal:
        return {value for value in typing.get_args(annotation) if isinstance(value, str)}
    found: set[str] = set()
    for arg in typing.get_args(annotation):
        if not isinstance(arg, (str, int)):  # Annotated's metadata may be a plain value
            found |= literals(arg)
    return found - SDK_SENTINELS


def models(annotation: Any) -> list[type]:
    """The classes (pydantic models, TypedDicts) an annotation names: a union's members,
    a list's items."""
    if isinstance(annotation, type) and typing.get_origin(annotation) is None:
        return [annotation]
    found: list[type] = []
    for arg in typing.get_args(annotation):
        if not isinstance(arg, (str, int)) and arg is not type(None):
            found += models(arg)
    return found


def field(model: Any, name: str) -> set[str]:
    """The `Literal` values of a pydantic model's field."""
    return literals(model.model_fields[name].annotation)


def key(typed_dict: Any, name: str) -> set[str]:
    """The `Literal` values of a TypedDict's key."""
    return literals(typing.get_type_hints(typed_dict, include_extras=True)[name])


def key_annotation(typed_dict: Any, name: str) -> Any:
    return typing.get_type_hints(typed_dict, include_extras=True)[name]


def types_of(classes: Iterable[Any]) -> set[str]:
    """The `type` discriminators of a union's members (pydantic models or TypedDicts)."""
    found: set[str] = set()
    for cls in classes:
        fields = getattr(cls, "model_fields", None)
        if fields is not None:
            found |= field(cls, "type") if "type" in fields else set()
        elif "type" in typing.get_type_hints(cls, include_extras=True):
            found |= key(cls, "type")
    return found - SDK_SENTINELS


def members(enum_type: type[enum.Enum]) -> set[str]:
    return {str(member.value) for member in enum_type}


def wire_fields(model: Any) -> set[str]:
    """A genai model's fields as the REST API spells them (camelCase aliases)."""
    return {info.alias or name for name, info in model.model_fields.items()}


def botocore_enum(service: str, shape: str) -> set[str]:
    import botocore.session

    return set(botocore.session.get_session().get_service_model(service).shape_for(shape).enum)


def botocore_errors(service: str) -> set[str]:
    import botocore.session

    return {error.name for error in botocore.session.get_session().get_service_model(service).error_shapes}
