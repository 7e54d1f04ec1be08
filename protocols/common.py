"""Small helpers the protocol modules share: counts, tool calls, hashes, bounded text.

Not responsible for any one provider's rules; those live in the protocol modules.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

from llmtap.protocols.budget import MAX_KEPT_CHARS as MAX_KEPT_CHARS
from llmtap.protocols.budget import ExchangeBudget as ExchangeBudget
from llmtap.protocols.budget import new_budget as new_budget
from llmtap.protocols.canonical import ApiError, ToolCall
from llmtap.protocols.errors import DecodeError


def count(value: Any) -> int | None:
    """A token count (or an index) as an int, or None when absent, not a whole number, or
    below zero: a negative count is no count, and must not lower a bill (an import file
    can say anything)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


def first_count(mapping: Any, *keys: str) -> int | None:
    if not isinstance(mapping, dict):
        return None
    for key in keys:
        value = count(mapping.get(key))
        if value is not None:
            return value
    return None


def sub(mapping: Any, key: str) -> dict[str, Any]:
    """`mapping[key]` when it is an object, else an empty one (None-safe drilling)."""
    if isinstance(mapping, dict):
        value = mapping.get(key)
        if isinstance(value, dict):
            return value
    return {}


def items(mapping: Any, key: str) -> list[Any]:
    if isinstance(mapping, dict):
        value = mapping.get(key)
        if isinstance(value, list):
            return value
    return []


def text_of(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def has_counts(usage: Any) -> bool:
    """Whether a usage object carries at least one token count (Vertex sends usage
    objects holding only `trafficType` on a blocked prompt)."""
    if not isinstance(usage, dict):
        return False
    return any(("token" in key.lower()) and count(value) is not None for key, value in usage.items())


# A word of what was served (tier, region, speed): short and plain, as the store keeps it
# (16 characters); anything else from the payload is not a word we can bill by.
_SERVED_WORD = re.compile(r"[a-z0-9][a-z0-9_.-]{0,15}")


def served_word(value: Any) -> str | None:
    """A provider's word for what it served (`us`, `fast`, `priority`), lower-case; None
    when missing, or not a plain word of at most 16 characters."""
    if not isinstance(value, str):
        return None
    word = value.strip().lower()
    return word if _SERVED_WORD.fullmatch(word) else None


def tier_word(value: Any) -> str | None:
    """A service tier as the provider spelt it (see `served_word`); `auto` names no tier
    (the provider chooses, and the response says which)."""
    word = served_word(value)
    return None if word == "auto" else word


def positive_counts(pairs: Any) -> dict[str, int]:
    """`{name: count}` of the (name, raw value) pairs whose value is a count above zero."""
    found: dict[str, int] = {}
    for name, value in pairs:
        number = count(value)
        if number is not None and number > 0:
            found[name] = found.get(name, 0) + number
    return found


def tool_call_from_text(call_id: Any, name: Any, raw: str) -> ToolCall:
    """A tool call whose arguments arrived as a JSON string (Chat, Responses, deltas).

    An empty string means no arguments: Anthropic streams `""` for a tool without input
    and Chat servers send `""` for a parameterless function. It counts as `{}`.
    """
    arguments: dict[str, Any] | None = None
    if raw.strip() == "":
        arguments = {}
    else:
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            arguments = parsed
    return ToolCall(
        id=call_id if isinstance(call_id, str) else None,
        name=name if isinstance(name, str) else None,
        arguments=arguments,
        arguments_raw=raw,
        valid_json=arguments is not None,
    )


def tool_call_from_object(call_id: Any, name: Any, value: Any) -> ToolCall:
    """A tool call whose wire carries the arguments as an object (Anthropic, Gemini)."""
    if value is None:
        value = {}
    raw = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return ToolCall(
        id=call_id if isinstance(call_id, str) else None,
        name=name if isinstance(name, str) else None,
        arguments=value if isinstance(value, dict) else None,
        arguments_raw=raw,
        valid_json=isinstance(value, dict),
    )


def api_error(error: Any, *, type_key: str = "type", code_key: str = "code") -> ApiError | None:
    """An error object as `{type, code, message}`; a bare string becomes the message."""
    if isinstance(error, str):
        return ApiError(type=None, code=None, message=error)
    if not isinstance(error, dict):
        return None
    code = error.get(code_key)
    return ApiError(
        type=_str(error.get(type_key)),
        code=_str(code),
        message=_str(error.get("message")),
    )


def _str(value: Any) -> str | None:
    if value is None or isinstance(value, (dict, list)):
        return None
    return str(value)


def stable_hash(value: Any) -> str:
    """A short digest of a JSON value, independent of key order and whitespace."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def without_cache_markers(value: Any) -> Any:
    """The value with every `cache_control` key removed: moving a cache breakpoint does
    not change the cached prefix, so it must not change the prefix hashes either.

    Walks with its own stack: `json.loads` accepts nesting deeper than Python recursion."""
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    while stack:
        node, parent, key = stack.pop()
        if isinstance(node, dict):
            kept: dict[Any, Any] = dict.fromkeys(k for k in node if k != "cache_control")
            parent[key] = kept
            stack.extend((node[k], kept, k) for k in kept)
        elif isinstance(node, list):
            slots: list[Any] = [None] * len(node)
            parent[key] = slots
            stack.extend((item, slots, i) for i, item in enumerate(node))
        else:
            parent[key] = node
    return root[0]


def json_size(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def instruction_chars(content: Any) -> int:
    """The characters of an instruction's content (a system or developer message, a system
    turn): a string, or its parts' `text` (a part without text by its JSON size)."""
    if isinstance(content, str):
        return len(content)
    total = 0
    for part in content if isinstance(content, list) else []:
        text = part.get("text") if isinstance(part, dict) else None
        total += len(text) if isinstance(text, str) else json_size(part)
    return total


# Pieces a KeptText joins into one string: a stream of one-word deltas would otherwise
# keep a str object (~50 bytes of overhead) per word, ~10x the text it holds.
_JOIN_EVERY = 1024


class KeptText:
    """Concatenates text pieces up to the exchange's kept-text budget (`budget.py`);
    remembers whether it cut."""

    __slots__ = ("parts", "budget", "truncated", "_loose")

    def __init__(self, budget: ExchangeBudget) -> None:
        self.parts: list[str] = []
        self.budget = budget  # shared by every KeptText of an exchange
        self.truncated = False
        self._loose = 0  # pieces appended since the last join

    def add(self, piece: Any) -> None:
        if not isinstance(piece, str) or not piece:
            return
        left = self.budget.kept
        if left <= 0:
            self.truncated = True
            return
        if len(piece) > left:
            piece = piece[:left]
            self.truncated = True
        self.budget.kept = left - len(piece)
        self.parts.append(piece)
        self._loose += 1
        if self._loose == _JOIN_EVERY:
            self.parts[-_JOIN_EVERY:] = ["".join(self.parts[-_JOIN_EVERY:])]
            self._loose = 0

    def value(self) -> str:
        if len(self.parts) > 1:
            self.parts = ["".join(self.parts)]
            self._loose = 0
        return self.parts[0] if self.parts else ""


def parse_json(data: str | bytes, where: str) -> Any:
    """`json.loads` whose every failure is a `DecodeError` naming `where`.

    Stricter than `json.loads` where a store needs it: `NaN` and `Infinity` are not JSON
    (and PostgreSQL refuses them), and strings with a lone surrogate escape (`"\\ud800"`)
    or a NUL (`"\\u0000"`) cannot be written as UTF-8 or into PostgreSQL text; such
    characters become U+FFFD.
    """
    try:
        value = json.loads(data, parse_constant=_reject_constant, parse_float=_finite_float)
    except RecursionError as exc:
        raise DecodeError("JSON nested too deeply", where) from exc
    except UnicodeDecodeError as exc:
        raise DecodeError(f"invalid UTF-8 ({exc.reason})", where) from exc
    except ValueError as exc:
        raise DecodeError(f"invalid JSON ({exc})", where) from exc
    if _UNSAFE_ESCAPE.search(data if isinstance(data, str) else data.decode("latin-1")):
        value = _replace_unsafe(value)
    return value


_UNSAFE_ESCAPE = re.compile(r"\\u(?:[dD][89a-fA-F][0-9a-fA-F]{2}|0000)")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf):
        raise ValueError(f"{text[:20]} is too large for a number")
    return value


def _clean(text: str) -> str:
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _replace_unsafe(value: Any) -> Any:
    """`value` with every string cleaned; iterative, as deep nesting is allowed here."""
    if isinstance(value, str):
        return _clean(value)
    root = [value]
    stack: list[Any] = [root]
    while stack:
        container = stack.pop()
        pairs = list(container.items()) if isinstance(container, dict) else list(enumerate(container))
        for key, item in pairs:
            if isinstance(item, str):
                container[key] = _clean(item)
            elif isinstance(item, (dict, list)):
                stack.append(item)
            if isinstance(container, dict) and isinstance(key, str) and _clean(key) != key:
                container[_clean(key)] = container.pop(key)
    return root[0]
