"""Gemini 3 streamed function-call arguments (`partialArgs`), assembled into one object.

With `toolConfig.functionCallingConfig.streamFunctionCallArguments` (Vertex AI, Gemini 3)
a call's arguments arrive as `partialArgs` pieces over several `functionCall` parts:
`{jsonPath, stringValue | numberValue | boolValue | nullValue, willContinue?}`. A piece's
`willContinue` says another piece for the same `jsonPath` follows (a string streamed in
pieces); string pieces of one path are joined, the other values are set. `jsonPath` is an
RFC 9535 path such as `$.a.b[0].c`; objects and arrays along it are made as needed.
https://docs.cloud.google.com/ruby/docs/reference/google-cloud-ai_platform-v1/latest/Google-Cloud-AIPlatform-V1-PartialArg

`PartialArgs` keeps one call's pieces in the order their paths first came (string pieces
joined at once, in the exchange's kept-text budget) and builds the object once, at the
end. Pieces that cannot make one JSON object (a path that is not a path, a path through a
string, an absurd index or depth, a value of the wrong type) are no crash: `assemble`
returns the pieces themselves as the call's raw text, and the call is not valid JSON.

What a path makes that the pieces do not carry (null padding up to an index, objects and
arrays along the way) is paid from the exchange's budget (`budget.py`) by the characters
it adds to the arguments' JSON (`NULL_COST` a null, `CONTAINER_COST` an object or array):
every piece adds its own size, so a stream of many calls cannot pad its way past a small
multiple of its own size. A call that would make more than is left is not assembled (its
raw pieces, not valid JSON).

Not responsible for when a call opens or closes (the `functionCall` level `willContinue`
and the empty `functionCall {}`): gemini_generate's fold decides that.
"""

from __future__ import annotations

import json
import re
from typing import Any

from llmtap.protocols.budget import ExchangeBudget
from llmtap.protocols.common import KeptText

# Bounds on the shape of one path; past them the call is invalid. How much all paths of an
# exchange may make together is the exchange's budget (budget.py).
MAX_PATH_CHARS = 1024
MAX_DEPTH = 64
MAX_INDEX = 10_000
NULL_COST = 5  # `null,`
CONTAINER_COST = 8  # `"k":{},` and its memory
PIECE_OVERHEAD = 24  # the characters of a piece besides its path and value: {"jsonPath":…}

# Value keys of a PartialArg (a proto oneof), in the order they are looked for.
_VALUE_KEYS = ("stringValue", "numberValue", "boolValue", "nullValue")
_INDEX = re.compile(r"\[(\d{1,9})\]")
_NAME = re.compile(r"\.([^.\[\]'\"]+)")
_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "/": "/", "\\": "\\", "'": "'", '"': '"'}

Step = str | int


class PartialArgs:
    """One call's `partialArgs` pieces; `add` them in order, then `assemble` once."""

    __slots__ = ("budget", "entries", "where", "truncated")

    def __init__(self, budget: ExchangeBudget) -> None:
        self.budget = budget  # the exchange's, shared with its text and its other calls
        # [path, value-key, value]: a string value is a KeptText; a malformed piece is kept
        # whole under the path "" and the key "piece".
        self.entries: list[list[Any]] = []
        self.where: dict[str, int] = {}  # path -> index in entries
        self.truncated = False

    def add(self, piece: Any) -> None:
        """One piece as the wire has it (any value; a malformed one is kept as it came)."""
        path = piece.get("jsonPath") if isinstance(piece, dict) else None
        key = next((k for k in _VALUE_KEYS if k in piece), None) if isinstance(piece, dict) else None
        if not isinstance(path, str) or (key is not None and not _typed(key, piece[key])):
            size = len(json.dumps(piece, ensure_ascii=False, default=str))
            self.budget.piece(size)
            self._keep(["", "piece", piece], size)
            return
        if key is None:
            return  # a piece with no value sets nothing
        value = piece[key]
        self.budget.piece(PIECE_OVERHEAD + len(path) + (len(value) if isinstance(value, str) else 8))
        if key == "stringValue":
            self._string(path, value)
            return
        at = self.where.get(path)
        if at is not None:
            self.entries[at][1:] = [key, None if key == "nullValue" else value]
        elif self._charge(len(path) + 8):
            self.where[path] = len(self.entries)
            self.entries.append([path, key, None if key == "nullValue" else value])

    def assemble(self, base: Any = None) -> tuple[dict[str, Any] | None, str | None]:
        """(the arguments, None), or (None, the pieces as JSON text) when they do not make
        one object. `base` is the call's own `args`, if it had any: the pieces go over it."""
        root: Any = dict(base) if isinstance(base, dict) else {}
        for path, key, value in self.entries:
            if key == "piece":
                return None, self.raw()
            steps = parse_path(path)
            if steps is None or not steps:
                return None, self.raw()
            if not _put(root, steps, value.value() if isinstance(value, KeptText) else value, self.budget):
                return None, self.raw()
        return root, None

    def raw(self) -> str:
        """The pieces as the model produced them, string pieces of a path joined."""
        pieces = []
        for path, key, value in self.entries:
            if key == "piece":
                pieces.append(value)
            else:
                pieces.append({"jsonPath": path, key: value.value() if isinstance(value, KeptText) else value})
        return json.dumps(pieces, ensure_ascii=False, separators=(",", ":"), default=str)

    def _string(self, path: str, piece: str) -> None:
        at = self.where.get(path)
        if at is None or self.entries[at][1] != "stringValue":
            if not self._charge(len(path)):
                return
            entry = [path, "stringValue", KeptText(self.budget)]
            if at is None:
                at = self.where[path] = len(self.entries)
                self.entries.append(entry)
            else:
                self.entries[at] = entry
        text: KeptText = self.entries[at][2]
        text.add(piece)
        self.truncated = self.truncated or text.truncated

    def _keep(self, entry: list[Any], size: int) -> None:
        if self._charge(size):
            self.entries.append(entry)

    def _charge(self, size: int) -> bool:
        if self.budget.kept <= 0:
            self.truncated = True
            return False
        self.budget.kept -= size
        return True


def _typed(key: str, value: Any) -> bool:
    if key == "stringValue":
        return isinstance(value, str)
    if key == "numberValue":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if key == "boolValue":
        return isinstance(value, bool)
    return True  # nullValue: "NULL_VALUE" (or anything: it stands for null)


def parse_path(path: str) -> list[Step] | None:
    """The steps of an RFC 9535 path of names and indexes (`$.a['b c'][0]`); None for
    anything else (wildcards, slices, filters, negative indexes) or past the bounds."""
    if len(path) > MAX_PATH_CHARS or not path.startswith("$"):
        return None
    steps: list[Step] = []
    at = 1
    while at < len(path):
        if len(steps) >= MAX_DEPTH:
            return None
        name = _NAME.match(path, at)
        index = _INDEX.match(path, at)
        if name:
            steps.append(name.group(1))
            at = name.end()
        elif index:
            if int(index.group(1)) > MAX_INDEX:
                return None
            steps.append(int(index.group(1)))
            at = index.end()
        elif path.startswith(("['", '["'), at):
            quoted = _quoted(path, at + 1)
            if quoted is None:
                return None
            steps.append(quoted[0])
            at = quoted[1]
        else:
            return None
    return steps


def _quoted(path: str, at: int) -> tuple[str, int] | None:
    """The name quoted at `path[at]` and the index after its closing `]`."""
    quote, at = path[at], at + 1
    out: list[str] = []
    while at < len(path):
        char = path[at]
        if char == quote:
            return ("".join(out), at + 2) if path.startswith("]", at + 1) else None
        if char == "\\":
            escape = path[at + 1 : at + 2]
            if escape == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", path[at + 2 : at + 6]):
                out.append(chr(int(path[at + 2 : at + 6], 16)))
                at += 6
                continue
            if escape not in _ESCAPES:
                return None
            out.append(_ESCAPES[escape])
            at += 2
            continue
        out.append(char)
        at += 1
    return None


def _put(root: dict[str, Any], steps: list[Step], value: Any, budget: ExchangeBudget) -> bool:
    """Set `value` at `steps` under `root`, making objects and arrays on the way; False
    when the path runs through a value of another kind or past the bounds."""
    node: Any = root
    for step, after in zip(steps, [*steps[1:], None], strict=True):
        if isinstance(node, dict) and isinstance(step, str):
            child = node.get(step)
        elif isinstance(node, list) and isinstance(step, int) and _reach(node, step, budget):
            child = node[step]
        else:
            return False  # a name into an array, an index into an object, or past the bounds
        if after is None:
            child = value
        elif child is None:
            if not budget.make(CONTAINER_COST):
                return False
            child = [] if isinstance(after, int) else {}
        elif not isinstance(child, (dict, list)):
            return False  # through a string, a number or a bool
        _set(node, step, child)
        node = child
    return True


def _reach(array: list[Any], index: int, budget: ExchangeBudget) -> bool:
    """Pad `array` with nulls up to `index`, within the exchange's bound on made nodes."""
    missing = index + 1 - len(array)
    if missing > 0:
        if not budget.make(missing * NULL_COST):
            return False
        array.extend([None] * missing)
    return True


def _set(container: Any, step: Step, value: Any) -> None:
    container[step] = value
