"""A custom tool call's input text against the input format its tool declared.

OpenAI Responses `custom` tools take free-form text, optionally constrained by a format:
`{"type": "text"}` (anything), or `{"type": "grammar", "syntax": "lark" | "regex",
"definition": …}` (https://platform.openai.com/docs/guides/function-calling#custom-tools,
https://platform.openai.com/docs/guides/function-calling#context-free-grammars).
`verdict(format, text, clock)` is `valid`, `schema_violation` (with where it broke, in one
line) or `unchecked` (with why).

OpenAI applies the format with its own engine (LLGuidance: Rust regex syntax, a Lark
dialect with extensions). Here a `regex` definition is read as Rust syntax and run by RE2
(`linear_regex`), and a `lark` grammar is parsed by the `lark` package with its terminals
run by RE2 too (`lark_regex`): no input can make either backtrack. What cannot be applied
that way is `unchecked`, never valid: a definition neither engine can load (LLGuidance's
extensions, lookaround), one over `MAX_DEFINITION` characters, an input over `MAX_INPUT`
(Earley: `MAX_EARLEY_INPUT`), a regex whose worst case does not fit in what the exchange's
check clock has left, or an Earley parse (cubic on an ambiguous grammar) still running when
that clock runs out. Lark grammars may import only Lark's own `common` terminals (never a
file). Built parsers are cached by the definition's hash, failures too.

Not responsible for choosing the tool a call names, or for statuses (see `toolcheck.py`).
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from llmtap.protocols import lark_regex, linear_regex
from llmtap.protocols.budget import CheckClock, Overrun
from llmtap.protocols.vocabulary import ToolStatus

MAX_DEFINITION = 32 * 1024
MAX_INPUT = 256 * 1024
MAX_EARLEY_INPUT = 16 * 1024  # Earley parsing is cubic at worst; LALR is linear
MAX_PARSERS = 64
_DETAIL = 200

Verdict = tuple[ToolStatus, str | None]
_VALID: Verdict = ("valid", None)
_cache: OrderedDict[str, Any] = OrderedDict()
_lock = threading.Lock()
_UNPARSED = "no parser could read it"


class _Unloadable:
    """A cached definition that cannot be applied, and why."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def verdict(declared: Any, text: str, clock: CheckClock) -> Verdict:
    """The text against the declared format; `valid` when the format is text or missing."""
    if not isinstance(declared, dict) or declared.get("type") != "grammar":
        return _VALID
    # Responses states syntax and definition beside `type`; Chat Completions nests them
    # in `grammar` (https://platform.openai.com/docs/api-reference/chat/create).
    spec = declared["grammar"] if isinstance(declared.get("grammar"), dict) else declared
    syntax = spec.get("syntax")
    definition = spec.get("definition")
    if not isinstance(definition, str):
        return _VALID  # a grammar without a definition declares nothing to hold the text to
    if syntax not in ("regex", "lark"):
        return "unchecked", f"a grammar of syntax {_clip(str(syntax), 40)!r} is not one this check applies"
    if len(definition) > MAX_DEFINITION:
        return "unchecked", f"the grammar is over {MAX_DEFINITION} characters"
    if len(text) > MAX_INPUT:
        return "unchecked", f"the input is over {MAX_INPUT} characters"
    try:
        if syntax == "regex":
            return _regex_verdict(definition, text, clock)
        return _lark_verdict(definition, text, clock)
    except Overrun as exc:
        return "unchecked", str(exc)
    except linear_regex.Unsupported as exc:
        return "unchecked", _clip(f"the grammar cannot be applied in linear time: {exc}", _DETAIL)
    except RecursionError:
        return "unchecked", "the parse nests deeper than the check goes"


def _cached(syntax: str, definition: str, build: Any) -> Any:
    key = syntax + ":" + hashlib.blake2b(definition.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    with _lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    try:
        built = build(definition)
    except Exception as exc:  # noqa: BLE001 - any definition we cannot load is unchecked
        built = _Unloadable(_clip(str(exc) or exc.__class__.__name__, 120))
    with _lock:
        _cache[key] = built
        while len(_cache) > MAX_PARSERS:
            _cache.popitem(last=False)
    return built


# -- regex ---------------------------------------------------------------------------------


def _regex_verdict(definition: str, text: str, clock: CheckClock) -> Verdict:
    pattern = linear_regex.compiled(definition, "rust")  # raises Unsupported: unchecked
    clock.admit(pattern.worst_seconds(len(text.encode("utf-8", "surrogatepass"))))
    if not pattern.fullmatch(text):
        return "schema_violation", "the input does not match the tool's regex"
    return _VALID


# -- lark ----------------------------------------------------------------------------------

# Only Lark's bundled `common` terminals may be imported: an import names a file to read.
# (Not `^\s*`: with MULTILINE it runs over every blank line after each line start, which
# took 13 s on a definition of 32,000 newlines.)
_IMPORT = re.compile(r"^[ \t]*%import[ \t]+(\S+)", re.MULTILINE)
# An inline regex literal in a rule: `/…/` with its flags.
_INLINE_REGEX = re.compile(r"/((?:\\.|[^/\\\n])+)/([imslux]*)")
_RULE_LINE = re.compile(r"^\s*(?:[?!]?[a-z_][a-z0-9_]*(?:\.\d+)?\s*:|\|)")


def _lark_verdict(definition: str, text: str, clock: CheckClock) -> Verdict:
    clock.excluding(_warm_lark)
    parsers = _cached("lark", definition, _build_lark)
    if isinstance(parsers, _Unloadable):
        return "unchecked", f"the grammar cannot be applied here: {parsers.reason}"
    lalr, earley = parsers
    with lark_regex.bound(clock):
        # LALR first (linear); its lexer picks one terminal where several could match, so
        # only Earley, which tries them all, may call the text wrong when it can run.
        failure = _parse(lalr, text) if lalr is not None else _UNPARSED
        if failure is not None and earley is not None:
            if len(text) <= MAX_EARLEY_INPUT:
                failure = _within(clock, earley, text)
            elif failure == _UNPARSED:
                return "unchecked", f"the input is over {MAX_EARLEY_INPUT} characters for an Earley parse"
    if failure is None:
        return _VALID
    if failure == _UNPARSED:
        return "unchecked", "the grammar loads for no parser"
    return "schema_violation", f"the input does not follow the tool's lark grammar: {_clip(failure, _DETAIL)}"


_LARK_FILES = f"{os.sep}lark{os.sep}"


def _within(clock: CheckClock, parser: Any, text: str) -> str | None:
    """`_parse(parser, text)`, stopped by `Overrun` once the clock is spent. Earley on an
    ambiguous grammar is cubic: 200 characters of `e: e e | "a"` take half a minute. The
    clock is read at every Python call (a trace function) that `lark`'s own code makes: a
    call of anything else meanwhile (a garbage collector's callback) must not be the one
    that raises, where nobody would catch it."""

    def tracer(frame: Any, event: str, arg: Any) -> None:
        if clock.spent() and _LARK_FILES in frame.f_code.co_filename:
            raise Overrun("the grammar's parse did not finish in the time the exchange's checks have")
        return None

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        return _parse(parser, text)
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
    return None


_build_lock = threading.Lock()


@contextmanager
def _lark_regex_module() -> Iterator[None]:
    """`Lark(regex=True)` takes its regex module from `lark.lark.regex`: while a parser is
    built here, that is `lark_regex.LARK_RE` (RE2), and lark's lexers keep it."""
    import lark.lark as lark_module

    with _build_lock:
        saved = (getattr(lark_module, "regex", None), getattr(lark_module, "_has_regex", False))
        lark_module.regex = lark_regex.LARK_RE
        lark_module._has_regex = True
        try:
            yield
        finally:
            lark_module.regex, lark_module._has_regex = saved


@lru_cache(maxsize=1)
def _warm_lark() -> None:
    """`lark` imported and both its parsers built once: a fifth of a CPU second on the first
    grammar of a process (more on a loaded machine), which no exchange's clock should pay,
    or the first custom call a writer checks would come out `unchecked`."""
    _build_lark("start: WORD\nWORD: /[a-z]+/\n")


def _build_lark(definition: str) -> tuple[Any, Any]:
    """(LALR parser, Earley parser), either None where the grammar does not allow it."""
    from lark import Lark

    for module in _IMPORT.findall(definition):
        if not module.startswith("common."):
            raise ValueError(f"%import {module}: only Lark's common terminals are imported")
    grammar = _optional_empty_regexes(_without_blank_lines(definition))
    built: list[Any] = []
    errors: list[str] = []
    with _lark_regex_module():
        for options in ({"parser": "lalr", "lexer": "contextual"}, {"parser": "earley"}):
            try:
                built.append(Lark(grammar, regex=True, **options))
            except Exception as exc:  # noqa: BLE001 - a grammar this engine cannot take
                built.append(None)
                errors.append(str(exc).split("\n", 1)[0] or exc.__class__.__name__)
    if built[0] is None and built[1] is None:
        raise ValueError(errors[-1] if errors else "the grammar does not load")
    return built[0], built[1]


def _without_blank_lines(definition: str) -> str:
    """The grammar without its blank and comment-only lines, which mean nothing to it: lark
    reads a run of them with a backtracking pattern of its own, 0.5 s for 8,000 newlines
    and four times that for each doubling."""
    lines = (line.rstrip() for line in definition.split("\n"))
    return "\n".join(line for line in lines if line.strip() and not line.lstrip().startswith("//"))


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
        empty, nonempty = linear_regex.compiled(body, "rust"), linear_regex.compiled(plus, "rust")
    except linear_regex.Unsupported:
        return match.group(0)
    if not empty.fullmatch("") or nonempty.fullmatch(""):
        return match.group(0)
    return f"/{plus}/{flags}?"


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
