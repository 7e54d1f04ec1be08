"""The two regex dialects requests declare, translated for RE2 (protocols/linear_regex.py):
each case is what the dialect's own engine says (ECMA-262 with the `u` flag as JSON Schema
applies it, checked against V8 when these cases were written; Rust's `regex` crate as
LLGuidance applies it, from its documentation), and what RE2 cannot say with the same
meaning is `Unsupported`, never run by a backtracking engine."""

from __future__ import annotations

import pytest

from llmtap.protocols import lark_regex, linear_regex
from llmtap.protocols.linear_regex import Unsupported, compiled, translate

# (pattern, text, whether ECMA's unanchored search finds it)
ECMA = [
    (r"^\d+$", "123", True),
    (r"^\d+$", "١٢٣", False),  # \d is ASCII
    (r"^\w+$", "héllo", False),  # so is \w
    (r"^\s$", "\u00a0", True),  # \s is Unicode White_Space and line terminators
    (r"^\s$", "\ufeff", True),
    (r"^\s$", "\u2028", True),
    (r"^\s$", "\x85", False),  # NEL is not
    (r"^\S$", "\u3000", False),
    (r"^.$", "\r", False),  # `.` stops at every line terminator
    (r"^.$", "\u2029", False),
    (r"^.$", "é", True),
    (r"^.$", "😀", True),  # a code point, with the u flag
    (r"abc$", "abc\n", False),  # `$` is the end of input, not before a last newline
    (r"^\u00e9$", "é", True),
    (r"^\ud83d\ude00$", "😀", True),  # a surrogate pair is one code point
    (r"^\u{1F600}$", "😀", True),
    (r"^\x41$", "A", True),
    (r"^\cJ$", "\n", True),
    (r"^\/$", "/", True),
    (r"^a{2}$", "aa", True),
    # without the u flag (Annex B, which engines apply to schema patterns that need it)
    (r"^a{,2}$", "a{,2}", True),  # not a quantifier: a literal
    (r"^a{$", "a{", True),
    (r"^]$", "]", True),
    (r"^[]a]$", "a", False),  # [] is an empty class, then `a]`
    (r"^[^]$", "\n", True),  # [^] is any character
    (r"^[\s\S]$", "x", True),
    (r"^[a\S]$", " ", False),
    (r"^[[]$", "[", True),  # `[` inside a class is itself
    (r"^[[:a]+$", ":a[", True),  # no POSIX classes in ECMA
    (r"^[\b]$", "\b", True),  # backspace inside a class
    (r"\bx\b", "a x b", True),
    (r"^\p{L}+$", "héllo", True),
    (r"^\p{Lu}$", "É", True),
    (r"^\p{Letter}+$", "abc", True),
    (r"^\p{Script=Greek}+$", "αβγ", True),
    (r"^(?<year>\d{4})$", "2026", True),
    (r"colou?r", "my colour", True),  # unanchored: a search
    (r"^(a|a)*b$", "a" * 40, False),
    (r"^(a+)+$", "a" * 40 + "!", False),
]

# (pattern, text, whether Rust's full match succeeds, as OpenAI's regex grammars apply it)
RUST = [
    (r"\d+", "١٢٣", True),  # \d is Unicode
    (r"\w+", "héllo", True),
    (r"\s", "\x85", True),  # White_Space
    (r"\s", "\ufeff", False),
    (r".", "\r", True),  # `.` stops only at \n
    (r".", "\n", False),
    (r"(?s).", "\n", True),
    (r"(?i)straße", "STRASSE", False),  # simple case folding only
    (r"(?i)k", "\u212a", True),  # KELVIN SIGN folds to k
    (r"a{,2}", "aa", True),  # {,n} is {0,n}
    (r"[[:alpha:]]+", "abc", True),
    (r"[[:alpha:]]+", "é", False),  # POSIX classes are ASCII
    (r"[\s\S]+", "x y\n", True),
    (r"[]a]+", "]a", True),  # a `]` first in a class is itself
    (r"\pL+", "héllo", True),
    (r"\p{Greek}+", "αβγ", True),
    (r"\p{greek}+", "αβγ", True),  # names are matched loosely
    (r"\p{Lowercase_Letter}+", "abc", True),
    (r"\x{1F600}", "😀", True),
    (r"\u00e9", "é", True),
    (r"(?P<n>\d{3})-\d{4}", "555-1234", True),
    (r"\bword\b", "word", True),
    (r"\A\d\z", "5", True),
    (r"(?U)a+", "aaa", True),
    (r"\#\&\~\ ", "#&~ ", True),  # lark's (Python's) escapes of a literal's punctuation
    (r"(a|a)*b", "a" * 40, False),
]

UNSUPPORTED = [
    ("ecma", r"(?=a)a"),  # lookaround
    ("ecma", r"(?<!a)b"),
    ("ecma", r"(a)\1"),  # backreferences
    ("ecma", r"(?<n>a)\k<n>"),
    ("ecma", r"\A"),  # not an anchor in ECMA
    ("ecma", r"\p{Alphabetic}"),  # a property RE2 does not have
    ("ecma", r"[^\S]"),
    ("ecma", r"a{1001}"),
    ("rust", r"[a-z&&[^aeiou]]"),  # class set operations
    ("rust", r"[a-z--b]"),
    ("rust", r"[a[bc]]"),  # a nested class
    ("rust", r"\b{start}x"),
    ("rust", r"(?x) a"),  # verbose mode
    ("rust", r"(?<=a)b"),
    ("rust", r"a{x}"),
    ("rust", r"\Q.\E"),  # RE2's quoting, not Rust's
    ("rust", "(" * 10),
]


@pytest.mark.parametrize(("pattern", "text", "found"), ECMA)
def test_ecma_patterns_mean_what_ecma_says(pattern: str, text: str, found: bool) -> None:
    assert compiled(pattern, "ecma").search(text) is found


@pytest.mark.parametrize(("pattern", "text", "full"), RUST)
def test_rust_patterns_mean_what_rust_says(pattern: str, text: str, full: bool) -> None:
    assert compiled(pattern, "rust").fullmatch(text) is full


@pytest.mark.parametrize(("dialect", "pattern"), UNSUPPORTED)
def test_what_changes_meaning_is_unsupported(dialect: linear_regex.Dialect, pattern: str) -> None:
    with pytest.raises(Unsupported):
        compiled(pattern, dialect)


def test_a_unicode_word_boundary_is_only_run_on_ascii_text() -> None:
    regex = compiled(r"\bé", "rust")
    assert regex.fullmatch  # compiles
    with pytest.raises(Unsupported):
        regex.search("é")
    assert compiled(r"\bab\b", "rust").fullmatch("ab")


def test_positions_multiply_with_counted_repetitions() -> None:
    assert translate(r"a", "rust").positions == 1
    assert translate(r"(ab|c){10}", "rust").positions == 30
    assert translate(r"(?:[ab]{5}){5}x", "ecma").positions == 26
    assert translate(r"a{2,}", "ecma").positions == 3
    big = compiled(r"(a|b)*a(a|b){999}", "rust")
    assert big.worst_seconds(1024 * 1024) > 1  # its worst case on a MiB is over a second


def test_lark_reads_its_terminals_through_re2() -> None:
    pattern = lark_regex.LARK_RE.compile(r"(?P<A>(a|a)*b)|(?P<N>\d+)")
    text = "x" + "a" * 40 + "b" + "٣٤"
    found = pattern.match(text, 1)
    assert found is not None and (found.group(0), found.lastgroup, found.end()) == ("a" * 40 + "b", "A", 42)
    number = pattern.match(text, 42)
    assert number is not None and (number.group(0), number.lastgroup, number.span()) == ("٣٤", "N", (42, 44))
    assert pattern.match("a" * 40) is None
    with pytest.raises(Unsupported):
        lark_regex.LARK_RE.compile("(?<=a)b")


def test_lark_common_escaped_string_needs_no_lookbehind() -> None:
    string = lark_regex.LARK_RE.compile('".*?(?<!\\\\)(\\\\\\\\)*?"')
    for text, end in [('"a" b"', 3), (r'"a\"b" c', 6), (r'"a\\" b', 5), ('"é\\u00e9"', 9)]:
        found = string.match(text)
        assert found is not None and found.end() == end, text
    assert string.match('"open') is None
