"""A custom tool call's input text against the input format its tool declared.

OpenAI Responses `custom` tools take free-form text, optionally constrained by a format:
`{"type": "text"}` (anything), or `{"type": "grammar", "syntax": "lark" | "regex",
"definition": …}` (https://platform.openai.com/docs/guides/function-calling#custom-tools,
https://platform.openai.com/docs/guides/function-calling#context-free-grammars).
`problem(format, text)` says, in one line, how the text breaks a format it can check, and
None when the text fits or the format cannot be checked here.

What "cannot be checked" means, on purpose lenient: OpenAI applies the format with its own
engine (LLGuidance: Rust regex syntax, a Lark dialect with extensions), so a definition
Python's `re` or the `lark` package cannot load, or one that would be costly to apply, is
unchecked and the call counts as valid. Bounds, as a client declares the grammar and the
writer's thread applies it: definitions over `MAX_DEFINITION` characters and inputs over
`MAX_INPUT` (Earley: `MAX_EARLEY_INPUT`) are unchecked; a regex, or a Lark terminal, whose
quantifiers nest (the shape that backtracks exponentially) is unchecked; Earley parsing
(cubic on an ambiguous grammar) gives up after `EARLEY_SECONDS`; Lark grammars may import
only Lark's own `common` terminals (never a file). Built parsers are cached by the
definition's hash, failures too. The nesting check walks the pattern as `re` parses it
(`re._parser`, private but stable since 3.11; any failure there means unchecked).

Not responsible for choosing the tool a call names, or for statuses (see `toolcheck.py`).
"""

from __future__ import annotations

import hashlib
import re
import sys
import threading
import time
from collections import OrderedDict
from typing import Any

MAX_DEFINITION = 32 * 1024
MAX_INPUT = 256 * 1024
MAX_EARLEY_INPUT = 16 * 1024  # Earley parsing is cubic at worst; LALR is linear
EARLEY_SECONDS = 0.5  # and then given up on (unchecked)
MAX_PARSERS = 64
_DETAIL = 200

_UNCHECKED = object()  # a cached definition that cannot be checked
_cache: OrderedDict[str, Any] = OrderedDict()
_lock = threading.Lock()


def problem(declared: Any, text: str) -> str | None:
    """How `text` breaks the declared format, in one line; None when it fits or when the
    format is text, missing, or not one this module can apply."""
    if not isinstance(declared, dict) or declared.get("type") != "grammar":
        return None
    # Responses states syntax and definition beside `type`; Chat Completions nests them
    # in `grammar` (https://platform.openai.com/docs/api-reference/chat/create).
    spec = declared["grammar"] if isinstance(declared.get("grammar"), dict) else declared
    syntax = spec.get("syntax")
    definition = spec.get("definition")
    if not isinstance(definition, str) or len(definition) > MAX_DEFINITION or len(text) > MAX_INPUT:
        return None
    if syntax == "regex":
        return _regex_problem(definition, text)
    if syntax == "lark":
        return _lark_problem(definition, text)
    return None


def _cached(syntax: str, definition: str, build: Any) -> Any:
    key = syntax + ":" + hashlib.blake2b(definition.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    with _lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    try:
        built = build(definition)
    except Exception:  # noqa: BLE001 - any definition we cannot load is unchecked
        built = _UNCHECKED
    with _lock:
        _cache[key] = built
        while len(_cache) > MAX_PARSERS:
            _cache.popitem(last=False)
    return built


# -- regex ---------------------------------------------------------------------------------


def _regex_problem(definition: str, text: str) -> str | None:
    pattern = _cached("regex", definition, _compile_regex)
    if pattern is _UNCHECKED:
        return None
    if pattern.fullmatch(text) is None:
        return "the input does not match the tool's regex"
    return None


def _compile_regex(definition: str) -> re.Pattern[str]:
    pattern = re.compile(definition)  # Rust-only syntax fails here: unchecked
    if _nested_repeat(re._parser.parse(definition)):
        raise ValueError("nested quantifiers: may backtrack exponentially")
    return pattern


_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")


def _nested_repeat(tree: Any, inside: bool = False) -> bool:
    """Whether a repeated piece of the parsed pattern holds another open-ended repeat."""
    for op, arg in tree:
        name = str(op)
        if name in _REPEATS:
            low, high, sub = arg
            unbounded = high is re._constants.MAXREPEAT or high > 1
            if inside and unbounded:
                return True
            if _nested_repeat(sub, inside or unbounded):
                return True
        elif name == "SUBPATTERN":
            if _nested_repeat(arg[-1], inside):
                return True
        elif name == "BRANCH":
            if any(_nested_repeat(branch, inside) for branch in arg[1]):
                return True
        elif name in ("ASSERT", "ASSERT_NOT"):
            if _nested_repeat(arg[1], inside):
                return True
    return False


# -- lark ----------------------------------------------------------------------------------

# Only Lark's bundled `common` terminals may be imported: an import names a file to read.
_IMPORT = re.compile(r"^\s*%import\s+(\S+)", re.MULTILINE)
# An inline regex literal in a rule: `/…/` with its flags.
_INLINE_REGEX = re.compile(r"/((?:\\.|[^/\\\n])+)/([imslux]*)")
_RULE_LINE = re.compile(r"^\s*(?:[?!]?[a-z_][a-z0-9_]*(?:\.\d+)?\s*:|\|)")


def _lark_problem(definition: str, text: str) -> str | None:
    parsers = _cached("lark", definition, _build_lark)
    if parsers is _UNCHECKED:
        return None
    lalr, earley = parsers
    # LALR first (linear); its lexer picks one terminal where several could match, so
    # only Earley, which tries them all, may call the text wrong when it can run.
    failure = _parse(lalr, text) if lalr is not None else "unparsed"
    if failure is not None and earley is not None and len(text) <= MAX_EARLEY_INPUT:
        failure = _within(EARLEY_SECONDS, _parse, earley, text)  # None: it fits, or it took too long
    if failure is None or failure == "unparsed":
        return None
    return f"the input does not follow the tool's lark grammar: {_clip(failure, _DETAIL)}"


class _TookTooLong(Exception):
    pass


def _within(seconds: float, parse: Any, parser: Any, text: str) -> str | None:
    """`parse(parser, text)`, given up after `seconds` (None then). Earley on an ambiguous
    grammar is cubic: 200 characters of `e: e e | "a"` take half a minute. The deadline is
    checked at every Python call (a trace function), which only `lark` code makes here."""
    deadline = time.monotonic() + seconds

    def tracer(frame: Any, event: str, arg: Any) -> None:
        if time.monotonic() > deadline:
            raise _TookTooLong
        return None

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        return parse(parser, text)  # type: ignore[no-any-return]
    except _TookTooLong:
        return None
    finally:
        sys.settrace(previous)


def _parse(parser: Any, text: str) -> str | None:
    from lark.exceptions import LarkError

    try:
        parser.parse(text)
    except LarkError as exc:
        # Where, never what: the message would quote the input, which body mode `none` keeps out.
        line, column = getattr(exc, "line", None), getattr(exc, "column", None)
        if isinstance(line, int) and isinstance(column, int) and line > 0:
            return f"{type(exc).__name__} at line {line}, column {column}"
        return type(exc).__name__
    except RecursionError:
        return None
    return None


def _build_lark(definition: str) -> tuple[Any, Any]:
    """(LALR parser, Earley parser), either None where the grammar does not allow it."""
    from lark import Lark

    for module in _IMPORT.findall(definition):
        if not module.startswith("common."):
            raise ValueError(f"%import {module}: only Lark's common terminals are imported")
    grammar = _optional_empty_regexes(definition)
    built: list[Any] = []
    for options in ({"parser": "lalr", "lexer": "contextual"}, {"parser": "earley"}):
        try:
            built.append(Lark(grammar, **options))
        except Exception:  # noqa: BLE001 - a grammar this engine cannot take
            built.append(None)
    if built[0] is None and built[1] is None:
        raise ValueError("the grammar does not load")
    terminals = (built[0] or built[1]).terminals
    if any(_nested_repeat(re._parser.parse(t.pattern.to_regexp())) for t in terminals):
        raise ValueError("a terminal's regex nests quantifiers: may backtrack exponentially")
    return built[0], built[1]


def _optional_empty_regexes(definition: str) -> str:
    """The grammar with each inline regex of a rule that may match nothing, `/(X*)/`,
    written `/(X+)/?`: the same language, which `lark` accepts (its lexers refuse
    zero-width terminals; LLGuidance, which OpenAI applies, does not). Codex's own
    apply_patch grammar has `/(.*)/`. Other shapes are left as they are."""
    return "\n".join(
        _INLINE_REGEX.sub(_non_empty, line) if _RULE_LINE.match(line) else line for line in definition.split("\n")
    )


def _non_empty(match: re.Match[str]) -> str:
    body, flags = match.group(1), match.group(2)
    stars = [i for i, ch in enumerate(body) if ch == "*" and (i == 0 or body[i - 1] != "\\")]
    if len(stars) != 1 or any(ch in body for ch in "?{|"):
        return match.group(0)
    plus = body[: stars[0]] + "+" + body[stars[0] + 1 :]
    try:
        if re.fullmatch(body, "") is None or re.fullmatch(plus, "") is not None:
            return match.group(0)
    except re.error:
        return match.group(0)
    return f"/{plus}/{flags}?"


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
