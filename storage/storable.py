"""Values as both databases can hold them, whatever the wire sent: the column types of
every string and integer the store keeps.

A model name of 300 characters, a Gemini model read from a path, an error code, a tool
name, a Host header: clients and upstreams choose them, and a value PostgreSQL refuses
(longer than its `VARCHAR(n)`, or holding NUL) made the record unstorable there, and one
neither database can encode (a lone surrogate: a request path's undecodable bytes, kept by
`surrogateescape`) lost the whole batch around it on both; so did a token count past what
a 64-bit integer holds on SQLite (`OverflowError`). `StoredString(n)`, `StoredText`,
`StoredInteger` and `StoredBigInteger` are the schema's only string and integer types (a
test checks it); each value bound to them, by an insert, an update or a query, is made one
the column holds:

- text longer than the column: cut to `n - 1` characters and `…` (the same on SQLite,
  which would keep it whole, so both databases store one value);
- NUL: U+FFFD (PostgreSQL's text cannot hold it); a lone surrogate: U+FFFD (UTF-8 cannot);
- an integer out of the column's range (32 or 64 bits, on both databases): NULL, a count
  that is missing rather than a wrong one.

Cutting rather than widening the columns: a migration to TEXT would rebuild SQLite's
`exchanges` table and its fact copy (batch mode copies every row), and a name past the
widths (255 for models and ids, 200 for teams) is not one any provider serves.

Not responsible for JSON columns (their values come from the translators' JSON parser,
which already replaces NUL and lone surrogates: protocols/common.py) or for what a value
means (a cut response id no longer matches a poll's: such ids are no provider's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import BigInteger, Integer, String, Text
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

CUT = "…"


def fit(value: str, length: int | None = None) -> str:
    """`value` as a column of `length` characters (None: any length) can hold it."""
    if "\x00" in value:
        value = value.replace("\x00", "\ufffd")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: each one replaced, the rest kept
            value = value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if length is not None and len(value) > length:
        value = value[: length - len(CUT)] + CUT
    return value


Processor = Callable[[Any], Any]


def _then(first: Processor, inner: Processor | None) -> Processor:
    """`first`, then the implementing type's own processor (none for these types today)."""
    if inner is None:
        return first
    return lambda value: inner(first(value))


class _Stored(TypeDecorator[Any]):
    """A TypeDecorator whose bind processor is one closure: `TypeDecorator`'s own route
    through `process_bind_param` costs two more calls a value, and a row binds some 70 of
    these (bench/ingest.py: the writer into SQLite ×0.8 that way). The implementing type's
    processor still runs after it, as `TypeDecorator.bind_processor` would run it."""

    cache_ok = True

    def fitter(self) -> Processor:
        raise NotImplementedError

    def bind_processor(self, dialect: Dialect) -> Processor:
        return _then(self.fitter(), self.impl_instance.bind_processor(dialect))


class StoredString(_Stored):
    """`VARCHAR(n)` whose bound values are `fit` to it."""

    impl = String
    cache_ok = True

    def __init__(self, length: int) -> None:
        super().__init__(length)
        self.length = length

    def fitter(self) -> Processor:
        length = self.length

        def process(value: Any) -> Any:
            # the common case first, checked in C: short ASCII text without NUL, or None
            if value.__class__ is str and (len(value) > length or not value.isascii() or "\x00" in value):
                return fit(value, length)
            return value

        return process


class StoredText(_Stored):
    """`TEXT` whose bound values are `fit` (any length)."""

    impl = Text
    cache_ok = True

    def fitter(self) -> Processor:
        def process(value: Any) -> Any:
            if value.__class__ is str and (not value.isascii() or "\x00" in value):
                return fit(value)
            return value

        return process


class StoredInteger(_Stored):
    """`INTEGER` (32 bits): a value out of its range is bound as NULL."""

    impl = Integer
    cache_ok = True
    LOW, HIGH = -(1 << 31), (1 << 31) - 1

    def fitter(self) -> Processor:
        low, high = self.LOW, self.HIGH

        def process(value: Any) -> Any:
            if value.__class__ is int and not low <= value <= high:
                return None
            return value

        return process


class StoredBigInteger(StoredInteger):
    """`BIGINT` (64 bits): a value out of its range is bound as NULL."""

    impl = BigInteger
    cache_ok = True
    LOW, HIGH = -(1 << 63), (1 << 63) - 1
