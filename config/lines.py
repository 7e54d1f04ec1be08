"""Where in a TOML text each key is written, for `llmtap config` to say `file PATH:LINE`.

A line scan, not a parser (tomllib keeps no positions): table headers (`[a.b]`,
`[[a.b]]`, whose entries are numbered from 0) and `key =` lines, bare, quoted or dotted.
A key it cannot place (inside a multi-line string or array, or an inline table's own keys)
has no line; its nearest enclosing key's line stands for it. The file has been parsed by
tomllib before, so nothing here judges whether the text is TOML.

Not responsible for values.
"""

from __future__ import annotations

import re

_PART = r'(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|\'[^\']*\')'
_DOTTED = rf"{_PART}(?:\s*\.\s*{_PART})*"
_HEADER = re.compile(rf"\s*(\[\[?)\s*({_DOTTED})\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(rf"\s*({_DOTTED})\s*=")
_PARTS = re.compile(_PART)

Path = tuple[str | int, ...]


def key_lines(text: str) -> dict[Path, int]:
    """Each key's path (("proxy", "reverse", 0, "port")) -> its 1-based line."""
    found: dict[Path, int] = {}
    table: Path = ()
    arrays: dict[Path, int] = {}
    in_string = False  # inside a multi-line string: no keys there
    for number, line in enumerate(text.splitlines(), 1):
        quotes = line.count('"""') + line.count("'''")
        if in_string:
            in_string = quotes % 2 == 0
            continue
        in_string = quotes % 2 == 1  # this line's key still counts
        header = _HEADER.match(line)
        if header:
            parts = _parts(header[2])
            table = parts
            if header[1] == "[[":
                arrays[parts] = arrays.get(parts, -1) + 1
                found.setdefault(parts, number)
                table = (*parts, arrays[parts])
            found.setdefault(table, number)
            continue
        key = _KEY.match(line)
        if key:
            found.setdefault((*table, *_parts(key[1])), number)
    return found


def line_of(lines: dict[Path, int], path: Path) -> int | None:
    """The line of `path`, else of the nearest key that holds it."""
    for end in range(len(path), 0, -1):
        if path[:end] in lines:
            return lines[path[:end]]
    return None


def _parts(dotted: str) -> tuple[str, ...]:
    out = []
    for part in _PARTS.findall(dotted):
        if part.startswith('"'):
            part = part[1:-1].encode().decode("unicode_escape") if "\\" in part else part[1:-1]
        elif part.startswith("'"):
            part = part[1:-1]
        out.append(part)
    return tuple(out)
