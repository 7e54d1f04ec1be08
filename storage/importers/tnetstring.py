"""A reader for tnetstrings, the serialisation of mitmproxy's flow files.

Written here rather than importing `mitmproxy.io` because the import path must not
depend on the addon layer (STYLE.md: only `addon/` imports mitmproxy). Format: `LEN:DATA`
followed by a type tag: `,` bytes, `;` text, `#` int, `^` float, `!` bool, `~` null,
`}` dict, `]` list. Not responsible for what the values mean (see `flows.py`).
"""

from __future__ import annotations

from typing import Any, BinaryIO

MAX_DEPTH = 64
MAX_LENGTH = 1 << 31


class TNetStringError(ValueError):
    pass


def load(stream: BinaryIO) -> Any:
    """Read one value from a stream; raises EOFError at a clean end of file."""
    header = b""
    while True:
        char = stream.read(1)
        if not char:
            if header:
                raise TNetStringError("file ends inside a length prefix")
            raise EOFError
        if char == b":":
            break
        if not char.isdigit() or len(header) > 12:
            raise TNetStringError(f"not a tnetstring length: {header + char!r}")
        header += char
    length = int(header)
    if length > MAX_LENGTH:
        raise TNetStringError("value too large")
    data = stream.read(length)
    tag = stream.read(1)
    if len(data) != length or not tag:
        raise TNetStringError("file ends inside a value")
    return _value(data, tag, 0)


def loads(data: bytes, depth: int = 0) -> tuple[Any, bytes]:
    """Parse one value from the front of `data`; returns it and the rest."""
    colon = data.find(b":", 0, 13)
    if colon <= 0 or not data[:colon].isdigit():
        raise TNetStringError("not a tnetstring length")
    length = int(data[:colon])
    end = colon + 1 + length
    if end >= len(data):
        raise TNetStringError("value runs past its container")
    return _value(data[colon + 1 : end], data[end : end + 1], depth), data[end + 1 :]


def _value(data: bytes, tag: bytes, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise TNetStringError("nested too deeply")
    if tag == b",":
        return data
    if tag == b";":
        return data.decode("utf-8", "surrogateescape")
    if tag == b"#":
        return int(data)
    if tag == b"^":
        return float(data)
    if tag == b"!":
        if data not in (b"true", b"false"):
            raise TNetStringError(f"not a boolean: {data[:20]!r}")
        return data == b"true"
    if tag == b"~":
        return None
    if tag == b"]":
        values = []
        while data:
            value, data = loads(data, depth + 1)
            values.append(value)
        return values
    if tag == b"}":
        mapping = {}
        while data:
            key, data = loads(data, depth + 1)
            value, data = loads(data, depth + 1)
            mapping[key.decode() if isinstance(key, bytes) else key] = value
        return mapping
    raise TNetStringError(f"unknown tnetstring type {tag!r}")
