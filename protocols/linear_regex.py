"""Regular expressions from requests, run in linear time with RE2 (SPEC §6).

Requests declare regular expressions in two dialects. JSON Schema's `pattern` and
`patternProperties` are ECMA-262 with the `u` flag, unanchored
(https://json-schema.org/draft/2020-12/json-schema-core#section-6.4); OpenAI applies its
grammars (`regex` syntax, and the regex terminals of a `lark` grammar) with LLGuidance,
whose regexes are Rust's `regex` crate (https://docs.rs/regex/latest/regex/#syntax). Python's
`re` is neither, and it backtracks: `(a|a)*b` takes 2^n steps on n `a`s. Here each dialect
is translated to RE2's syntax token by token (the tables below say how the classes differ)
and run by RE2, whose time is linear in the text for a given pattern.

A construct RE2 cannot run or whose meaning would change (backreferences, lookaround,
Rust's class set operations and nested classes, a Unicode word boundary next to non-ASCII
text, a repetition over 1,000, a program over `MAX_MEM`) raises `Unsupported`: the caller
reports the check `unchecked` and never hands the pattern to a backtracking engine.

Linear is not free: RE2's automaton falls back to simulating every state at once when its
cache overflows, about `NS_PER_STEP` nanoseconds per byte of text per position of the
pattern (measured 10-42 ns on hostile shapes, `(a|b)*a(a|b){999}`). `Regex.worst_seconds`
is that bound, so a caller can refuse a run that could overrun what its exchange has left.

Not responsible for what a check concludes (toolcheck.py, grammar.py, schema_check.py) or
for the time an exchange may spend (budget.py).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Literal

import re2

Dialect = Literal["ecma", "rust"]

MAX_MEM = 4 * 1024 * 1024  # per compiled pattern (RE2's default is 8 MiB), program and caches
MAX_PATTERN = 32 * 1024  # characters of one pattern
NS_PER_STEP = 40.0  # worst seconds per byte per position, in nanoseconds
MAX_COMPILED = 32  # compiled patterns kept (each holds at most MAX_MEM)

# Character classes as each dialect means them, in RE2's syntax: (the class on its own, what
# goes inside `[...]` for it, or None where no member can say it: a negated Unicode class,
# which a class then takes as an alternative of its own).
# ECMA-262 22.2.2.9: \d \w are ASCII (as in RE2); \s is WhiteSpace and LineTerminator.
_ECMA_SPACE = r"\t-\r \p{Zs}\x{2028}\x{2029}\x{feff}"
_ECMA_CLASSES: dict[str, tuple[str, str | None]] = {
    "d": (r"\d", r"\d"),
    "D": (r"\D", r"\D"),
    "w": (r"\w", r"\w"),
    "W": (r"\W", r"\W"),
    "s": (f"[{_ECMA_SPACE}]", _ECMA_SPACE),
    "S": (f"[^{_ECMA_SPACE}]", None),
}
# Rust: \d is \p{Nd}, \w is Alphabetic, Mark, Nd, Pc and Join_Control (Alphabetic taken as
# L and Nl: RE2 has no Other_Alphabetic), \s is White_Space; RE2's own are ASCII.
_RUST_WORD = r"\p{L}\p{M}\p{Nd}\p{Pc}\p{Nl}\x{200c}\x{200d}"
_RUST_SPACE = r"\t-\r\x{85}\p{Z}"
_RUST_CLASSES: dict[str, tuple[str, str | None]] = {
    "d": (r"\p{Nd}", r"\p{Nd}"),
    "D": (r"\P{Nd}", r"\P{Nd}"),
    "w": (f"[{_RUST_WORD}]", _RUST_WORD),
    "W": (f"[^{_RUST_WORD}]", None),
    "s": (f"[{_RUST_SPACE}]", _RUST_SPACE),
    "S": (f"[^{_RUST_SPACE}]", None),
}
_CONTROL = {"n": 0x0A, "r": 0x0D, "t": 0x09, "f": 0x0C, "v": 0x0B}
_ECMA_DOT = r"[^\n\r\x{2028}\x{2029}]"  # `.` stops at every LineTerminator, not only \n
_RE2_META = set("\\.+*?()|[]{}^$")
_CLASS_META = set("\\]^-[")
# Long General_Category names (ECMA and Rust accept them; RE2 only the short ones).
_CATEGORIES = {
    "letter": "L", "casedletter": "LC", "uppercaseletter": "Lu", "lowercaseletter": "Ll",
    "titlecaseletter": "Lt", "modifierletter": "Lm", "otherletter": "Lo", "mark": "M",
    "nonspacingmark": "Mn", "spacingmark": "Mc", "enclosingmark": "Me", "number": "N",
    "decimalnumber": "Nd", "letternumber": "Nl", "othernumber": "No", "punctuation": "P",
    "connectorpunctuation": "Pc", "dashpunctuation": "Pd", "openpunctuation": "Ps",
    "closepunctuation": "Pe", "initialpunctuation": "Pi", "finalpunctuation": "Pf",
    "otherpunctuation": "Po", "symbol": "S", "mathsymbol": "Sm", "currencysymbol": "Sc",
    "modifiersymbol": "Sk", "othersymbol": "So", "separator": "Z", "spaceseparator": "Zs",
    "lineseparator": "Zl", "paragraphseparator": "Zp", "other": "C", "control": "Cc",
    "format": "Cf", "surrogate": "Cs", "privateuse": "Co", "unassigned": "Cn",
}  # fmt: skip
_SHORT_CATEGORIES = {short.lower(): short for short in _CATEGORIES.values()}


class Unsupported(ValueError):
    """The pattern cannot be run in linear time with its meaning kept."""


@dataclass(frozen=True, slots=True)
class Translated:
    """A pattern in RE2's syntax, how many positions its automaton has (repetitions
    expanded), and whether it keeps its meaning only on ASCII text."""

    pattern: str
    positions: int
    ascii_only: bool


class Regex:
    """One compiled pattern; `search` and `fullmatch` take text, say whether it matches."""

    __slots__ = ("ascii_only", "positions", "_re")

    def __init__(self, translated: Translated, *, captures: bool = False) -> None:
        self.positions = max(1, translated.positions)
        self.ascii_only = translated.ascii_only
        self._re = _compile(translated.pattern, captures)

    def worst_seconds(self, size: int) -> float:
        """The most one run over `size` bytes of text can take (see the module's doc)."""
        return self.positions * max(size, 1) * NS_PER_STEP * 1e-9

    def search(self, text: str) -> bool:
        return self._re.search(self.encoded(text)) is not None

    def fullmatch(self, text: str) -> bool:
        return self._re.fullmatch(self.encoded(text)) is not None

    def encoded(self, text: str) -> bytes:
        """The text as RE2 reads it; `Unsupported` where the pattern's meaning would change."""
        if self.ascii_only and not text.isascii():
            raise Unsupported("a Unicode word boundary: RE2's is ASCII only")
        return text.encode("utf-8", "surrogatepass")

    @property
    def compiled(self) -> re2._Regexp:
        return self._re


def _compile(pattern: str, captures: bool) -> re2._Regexp:
    options = re2.Options()
    options.max_mem = MAX_MEM
    options.log_errors = False  # a hostile pattern must not write to the proxy's log
    options.never_capture = not captures
    try:
        compiled = re2.compile(pattern, options)
    except re2.error as exc:
        raise Unsupported(f"RE2 cannot compile it ({_clip(str(exc))})") from None
    # re2.compile keeps 128 patterns of its own, each up to MAX_MEM: only ours are kept.
    re2.purge()
    return compiled


_cache: OrderedDict[tuple[str, str, bool], Regex | Unsupported] = OrderedDict()
_lock = threading.Lock()


def compiled(pattern: str, dialect: Dialect, *, captures: bool = False) -> Regex:
    """The pattern of `dialect`, translated and compiled (kept: the same schemas come
    back); raises `Unsupported`."""
    key = (dialect, pattern, captures)
    with _lock:
        found = _cache.get(key)
        if found is not None:
            _cache.move_to_end(key)
    if found is None:
        try:
            found = Regex(translate(pattern, dialect), captures=captures)
        except Unsupported as exc:
            found = exc
        with _lock:
            _cache[key] = found
            while len(_cache) > MAX_COMPILED:
                _cache.popitem(last=False)
    if isinstance(found, Unsupported):
        raise found
    return found


# -- translation -----------------------------------------------------------------------------


def translate(pattern: str, dialect: Dialect) -> Translated:
    """`pattern` of `dialect` in RE2's syntax; raises `Unsupported`."""
    if len(pattern) > MAX_PATTERN:
        raise Unsupported(f"over {MAX_PATTERN} characters")
    return _Translator(pattern, dialect).run()


class _Translator:
    """One pass over a pattern: escapes and classes rewritten, positions counted with
    each counted repetition multiplying what it repeats."""

    def __init__(self, pattern: str, dialect: Dialect) -> None:
        self.src = pattern
        self.rust = dialect == "rust"
        self.classes = _RUST_CLASSES if self.rust else _ECMA_CLASSES
        self.at = 0
        self.out: list[str] = []
        self.ascii_only = False
        # positions per open group: [total so far, positions of the last atom]
        self.groups: list[list[int]] = [[0, 0]]
        self.alternatives: list[str] = []  # of the class being read

    def run(self) -> Translated:
        while self.at < len(self.src):
            self._token()
        if len(self.groups) != 1:
            raise Unsupported("a group is not closed")
        return Translated("".join(self.out), self.groups[0][0], self.ascii_only)

    def _atom(self, text: str, positions: int = 1) -> None:
        self.out.append(text)
        self.groups[-1][0] += positions
        self.groups[-1][1] = positions

    def _token(self) -> None:
        char = self.src[self.at]
        self.at += 1
        if char == "\\":
            self._escape()
        elif char == "[":
            self._class()
        elif char == "(":
            self._open()
        elif char == ")":
            if len(self.groups) == 1:
                raise Unsupported("an unmatched )")
            inner = self.groups.pop()[0]
            self.out.append(")")
            self.groups[-1][0] += inner
            self.groups[-1][1] = inner
        elif char == "{":
            self._brace()
        elif char in "*+?":
            self.out.append(char)  # a quantifier: its atom's positions stay as they are
        elif char == "|":
            self.out.append("|")
            self.groups[-1][1] = 0
        elif char in "^$":
            self.out.append(char)
            self.groups[-1][1] = 0
        elif char == ".":
            self._atom("." if self.rust else _ECMA_DOT)
        elif char in "]}":
            self._atom("\\" + char)  # a literal bracket or brace (Annex B, and Rust)
        else:
            self._atom(_literal(char))

    def _escape(self) -> None:
        if self.at >= len(self.src):
            raise Unsupported("a trailing backslash")
        char = self.src[self.at]
        self.at += 1
        if char in self.classes:
            self._atom(self.classes[char][0])
        elif char in "bB":
            if self.rust and self.src.startswith("{", self.at):
                raise Unsupported(r"\b{…} word boundaries")
            self.ascii_only = self.ascii_only or self.rust
            self.out.append("\\" + char)
            self.groups[-1][1] = 0
        elif self.rust and char in "Az":
            self.out.append("\\" + char)
            self.groups[-1][1] = 0
        elif char in "pP":
            self._atom(self._property(char))
        else:
            self._atom(_literal(self._character(char)))

    def _character(self, char: str) -> str:
        """The one character an escape (after its backslash and `char`) stands for."""
        if char in _CONTROL:
            return chr(_CONTROL[char])
        if char == "a" and self.rust:
            return "\x07"
        if char == "0" and not self.rust and not self.src[self.at : self.at + 1].isdigit():
            return "\x00"
        if char == "c" and not self.rust and self.src[self.at : self.at + 1].isascii():
            letter = self.src[self.at : self.at + 1]
            if letter.isalpha():
                self.at += 1
                return chr(ord(letter) % 32)
        if char == "x" or char == "u" or (char == "U" and self.rust):
            return self._code_point(char)
        if char.isascii() and not char.isalnum() and not (self.rust and char in "<>"):
            return char  # an escaped punctuation character is itself
        raise Unsupported(f"the escape \\{char}")

    def _code_point(self, kind: str) -> str:
        if self.src.startswith("{", self.at) and (kind != "x" or self.rust):
            end = self.src.find("}", self.at)
            digits = self.src[self.at + 1 : end] if end > 0 else ""
            self.at = end + 1
        else:
            width = {"x": 2, "u": 4, "U": 8}[kind]
            digits = self.src[self.at : self.at + width]
            self.at += width
            if len(digits) != width:
                digits = ""
        if not digits or len(digits) > 8 or any(c not in "0123456789abcdefABCDEF" for c in digits):
            raise Unsupported(f"a malformed \\{kind} escape")
        value = int(digits, 16)
        if not self.rust and kind == "u" and 0xD800 <= value < 0xDC00 and self.src.startswith("\\u", self.at):
            low = self.src[self.at + 2 : self.at + 6]
            if len(low) == 4 and all(c in "0123456789abcdefABCDEF" for c in low) and 0xDC00 <= int(low, 16) < 0xE000:
                self.at += 6
                value = 0x10000 + ((value - 0xD800) << 10) + (int(low, 16) - 0xDC00)
        if value > 0x10FFFF or 0xD800 <= value < 0xE000:
            raise Unsupported("a surrogate or out-of-range code point")
        return chr(value)

    def _property(self, char: str) -> str:
        """`\\p{…}` as RE2 names it: a General_Category by its short name, or a script."""
        if not self.src.startswith("{", self.at):
            if not self.rust or self.at >= len(self.src):
                raise Unsupported(f"\\{char} without braces")
            name = self.src[self.at]
            self.at += 1
        else:
            end = self.src.find("}", self.at)
            if end < 0:
                raise Unsupported(f"an unclosed \\{char}{{")
            name = self.src[self.at + 1 : end]
            self.at = end + 1
        return f"\\{char}{{{_property_name(name, self.rust)}}}"

    def _open(self) -> None:
        rest = self.src[self.at :]
        if not rest.startswith("?"):
            self.out.append("(")
        elif rest.startswith("?:"):
            self.out.append("(?:")
            self.at += 2
        elif rest.startswith(("?<", "?P<")) and not rest.startswith(("?<=", "?<!")):
            end = self.src.find(">", self.at)
            name = self.src[self.src.find("<", self.at) + 1 : end] if end > 0 else ""
            if not name or not all(c.isascii() and (c.isalnum() or c == "_") for c in name):
                raise Unsupported("a group name RE2 cannot take")
            self.out.append(f"(?P<{name}>")
            self.at = end + 1
        elif self.rust and self._flags(rest):
            return  # `(?flags)` sets flags for the rest of the group: no group of its own
        else:
            raise Unsupported("lookaround or a group modifier")
        self.groups.append([0, 0])

    def _flags(self, rest: str) -> bool:
        """Rust's `(?flags)` and `(?flags:…)` (RE2 has i, m, s and U with their meaning);
        True for the first, which opens no group."""
        end = next((i for i, c in enumerate(rest) if c in ":)"), -1)
        flags = rest[1:end] if end > 0 else ""
        if not flags or any(c not in "imsU-" for c in flags):
            raise Unsupported(f"the group (?{flags or rest[1:2]}")
        self.at += end + 1
        self.out.append(f"(?{flags}{rest[end]}")
        if rest[end] == ")":
            self.groups[-1][1] = 0
            return True
        return False

    def _brace(self) -> None:
        """A counted repetition multiplies its atom's positions; a brace that is not one is
        a literal in ECMA (Annex B) and an error in Rust."""
        end = self.src.find("}", self.at)
        body = self.src[self.at : end] if end >= 0 else ""
        low, comma, high = body.partition(",")
        if self.rust and comma and not low:
            low = "0"  # Rust's {,n}
        if end < 0 or not low.isdigit() or (high and not high.isdigit()):
            if self.rust:
                raise Unsupported("a brace that is not a repetition")
            self._atom("\\{")
            return
        self.at = end + 1
        count = max(int(low), int(high) if high else int(low) + (1 if comma else 0))
        if count > 1000:
            raise Unsupported("a repetition over 1,000")
        group = self.groups[-1]
        group[0] += group[1] * (count - 1)
        group[1] *= count
        self.out.append("{" + low + comma + high + "}")

    def _class(self) -> None:
        """`[…]`: one position, whatever it holds. A negated Unicode class inside it (`\\S`
        in `[\\s\\S]`) is an alternative beside the rest: `(?:[…]|[^…])`."""
        negated = self.src.startswith("^", self.at)
        self.at += negated
        members: list[str] = []
        self.alternatives = []
        first = True
        while True:
            if self.at >= len(self.src):
                raise Unsupported("an unclosed character class")
            char = self.src[self.at]
            self.at += 1
            if char == "]" and not (first and self.rust):
                break
            members.append(self._class_member(char))
            first = False
        if not members and not self.alternatives:  # ECMA's [] matches nothing, [^] anything
            members, negated = [r"\x{0}-\x{10ffff}"], not negated
        whole = "[" + "^" * negated + "".join(members) + "]" if members else ""
        if not self.alternatives:
            self._atom(whole)
        elif negated:
            raise Unsupported("a negated class that holds a negated Unicode class")
        else:
            self._atom("(?:" + "|".join([whole] * bool(members) + self.alternatives) + ")")

    def _class_member(self, char: str) -> str:
        if char == "\\":
            if self.at >= len(self.src):
                raise Unsupported("a trailing backslash")
            escape = self.src[self.at]
            self.at += 1
            if escape in self.classes:
                alone, inner = self.classes[escape]
                if inner is None:
                    self.alternatives.append(alone)
                    return ""
                return inner
            if escape in "pP":
                return self._property(escape)
            if escape == "b" and not self.rust:
                return r"\x{8}"
            if escape == "-":
                return r"\-"
            return _class_literal(self._character(escape))
        if char == "[":
            if self.rust and self.src.startswith(":", self.at):
                end = self.src.find(":]", self.at + 1)
                name = self.src[self.at + 1 : end] if end > 0 else ""
                if name.lstrip("^").isalpha():
                    self.at = end + 2
                    return f"[:{name}:]"  # an ASCII class, the same in RE2
            if self.rust:
                raise Unsupported("a nested character class")
            return r"\["
        if self.rust and char in "&~-" and self.src.startswith(char, self.at):
            raise Unsupported("a class set operation")
        if char == "-":
            return "-"
        return _class_literal(char)


def _literal(char: str) -> str:
    if char in _RE2_META:
        return "\\" + char
    return char if char.isprintable() else f"\\x{{{ord(char):x}}}"


def _class_literal(char: str) -> str:
    if char in _CLASS_META:
        return "\\" + char
    return char if char.isprintable() and char != " " else f"\\x{{{ord(char):x}}}"


def _property_name(name: str, rust: bool) -> str:
    """A Unicode property as RE2 spells it: `L`, `Lu`, `Greek`; raises `Unsupported`."""
    key, eq, value = name.partition("=")
    if eq:
        kind = _loose(key)
        if kind not in ("generalcategory", "gc", "script", "sc"):
            raise Unsupported(f"the property {key}")
        name = value
        if kind in ("script", "sc"):
            return _script(value, rust)
    loose = _loose(name)
    if loose in _CATEGORIES:
        return _CATEGORIES[loose]
    if loose in _SHORT_CATEGORIES and (rust or name in _CATEGORIES.values()):
        return _SHORT_CATEGORIES[loose]
    if rust or name in _CATEGORIES.values():
        return _script(name, rust)
    raise Unsupported(f"the property {name}")


def _script(name: str, rust: bool) -> str:
    # RE2 names scripts as Unicode does (`Old_Italic`); Rust matches names loosely.
    if rust:
        name = "_".join(word.capitalize() for word in name.replace("-", " ").replace("_", " ").split())
    if not name.replace("_", "").isalpha():
        raise Unsupported(f"the script {name}")
    return name


def _loose(name: str) -> str:
    return "".join(c for c in name.lower() if c not in " _-")


def _clip(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
