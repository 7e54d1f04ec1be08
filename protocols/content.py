"""Incremental Content-Encoding decoding: identity, gzip, deflate, br and zstd, stacked.

`ContentDecoder(header).decode(chunk)` returns the decoded bytes of that chunk, bounded:
no single call expands one chunk past the output limit, so a compression bomb becomes a
`DecodeError` instead of gigabytes in memory.

Not responsible for transfer coding (chunked framing is removed before bytes get here)
nor for what the bytes mean.
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Callable
from typing import Protocol

import brotli

from llmtap.protocols.errors import DecodeError

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

# Decoded bytes one exchange may produce before we call it a bomb. Real LLM responses are
# far below this; a recorder that stops decoding still passes every byte through.
DEFAULT_MAX_DECODED = 512 * 1024 * 1024
_STEP = 1024 * 1024  # bytes of output taken from a decompressor per step


class _Zlib:
    def __init__(self, wbits: int) -> None:
        self._d = zlib.decompressobj(wbits)
        # `deflate` may come without its zlib header (raw deflate). zlib judges the header
        # on its first 2 bytes, which may arrive in separate chunks: keep them to replay.
        self._head: bytes | None = b"" if wbits == zlib.MAX_WBITS | 32 else None

    def step(self, data: bytes) -> bytes:
        try:
            out = self._d.decompress(data, _STEP)
        except zlib.error:
            if self._head is None:
                raise
            self._d = zlib.decompressobj(-zlib.MAX_WBITS)
            data, self._head = self._head + data, None
            out = self._d.decompress(data, _STEP)
        if self._head is not None:
            self._head += data
            if len(self._head) >= 2:
                self._head = None  # the header was accepted: this is zlib or gzip
        return out

    def more(self) -> bytes:
        tail = self._d.unconsumed_tail
        return self._d.decompress(tail, _STEP) if tail else b""

    def end(self) -> bytes:
        return self._d.flush()

    def ended(self) -> bool:
        return self._d.eof


class _BrotliDecompressor(Protocol):
    """What we use of `brotli.Decompressor`; the brotli package ships no types."""

    def process(self, data: bytes, output_buffer_limit: int = ...) -> bytes: ...
    def can_accept_more_data(self) -> bool: ...
    def is_finished(self) -> bool: ...


class _Brotli:
    def __init__(self) -> None:
        self._d: _BrotliDecompressor = brotli.Decompressor()

    def step(self, data: bytes) -> bytes:
        return self._d.process(data, output_buffer_limit=_STEP)

    def more(self) -> bytes:
        if self._d.can_accept_more_data() or self._d.is_finished():
            return b""
        return self._d.process(b"", output_buffer_limit=_STEP)

    def end(self) -> bytes:
        return b""

    def ended(self) -> bool:
        return self._d.is_finished()


class _Zstd:
    def __init__(self) -> None:
        self._d = zstd.ZstdDecompressor()

    def step(self, data: bytes) -> bytes:
        if self._d.eof:
            return b""  # trailing bytes after the frame are ignored, as by clients
        return self._d.decompress(data, _STEP)

    def more(self) -> bytes:
        if self._d.eof or self._d.needs_input:
            return b""
        return self._d.decompress(b"", _STEP)

    def end(self) -> bytes:
        return b""

    def ended(self) -> bool:
        return self._d.eof


_FACTORIES: dict[str, Callable[[], _Zlib | _Brotli | _Zstd]] = {
    "gzip": lambda: _Zlib(16 + zlib.MAX_WBITS),
    "x-gzip": lambda: _Zlib(16 + zlib.MAX_WBITS),
    "deflate": lambda: _Zlib(32 + zlib.MAX_WBITS),
    "br": _Brotli,
    "zstd": _Zstd,
}


def encodings(header: str | None) -> list[str]:
    """The codings of a Content-Encoding header, in the order they were applied."""
    names = [part.strip().lower() for part in (header or "").split(",")]
    return [name for name in names if name and name != "identity"]


class ContentDecoder:
    """Undo a Content-Encoding chunk by chunk, innermost coding last."""

    def __init__(self, header: str | None, max_decoded: int = DEFAULT_MAX_DECODED) -> None:
        names = encodings(header)
        unknown = [name for name in names if name not in _FACTORIES]
        if unknown:
            raise DecodeError(f"unsupported content-encoding {unknown[0]!r}", "content-encoding")
        # Applied in header order, so undone in reverse.
        self._stages = [_FACTORIES[name]() for name in reversed(names)]
        self._names = list(reversed(names))
        self._max = max_decoded
        self.decoded_bytes = 0
        self._fed = False  # whether any encoded byte arrived (an empty body has no end to reach)

    @property
    def identity(self) -> bool:
        return not self._stages

    def decode(self, chunk: bytes) -> bytes:
        self._fed = self._fed or bool(chunk)
        if not self._stages:
            return self._count(chunk)
        parts = [chunk]
        for name, stage in zip(self._names, self._stages, strict=True):
            parts = self._run(name, stage, parts)
        return self._count(b"".join(parts))

    def flush(self, strict: bool = False) -> bytes:
        """The rest of the output. `strict`: the body ended normally, so an encoding that
        has not reached its own end is an error (a cut transfer is not one)."""
        parts: list[bytes] = []
        for name, stage in zip(self._names, self._stages, strict=True):
            parts = self._run(name, stage, parts)
            try:
                parts.append(stage.end())
            except (zlib.error, brotli.error, zstd.ZstdError, EOFError) as exc:
                raise DecodeError(f"{name} stream is corrupt: {exc}", "content-encoding") from exc
            if strict and self._fed and not stage.ended():
                raise DecodeError(f"{name} stream ended before its end", "content-encoding")
        return self._count(b"".join(parts))

    def _run(self, name: str, stage: _Zlib | _Brotli | _Zstd, parts: list[bytes]) -> list[bytes]:
        out: list[bytes] = []
        size = 0
        try:
            for part in parts:
                if not part:
                    continue
                piece = stage.step(part)
                while piece:
                    out.append(piece)
                    size += len(piece)
                    self._guard(self.decoded_bytes + size)
                    piece = stage.more()
        except (zlib.error, brotli.error, zstd.ZstdError, EOFError) as exc:
            raise DecodeError(f"{name} stream is corrupt: {exc}", "content-encoding") from exc
        return out

    def _guard(self, total: int) -> None:
        if total > self._max:
            raise DecodeError(f"decoded body exceeds {self._max} bytes (compression bomb?)", "content-encoding")

    def _count(self, data: bytes) -> bytes:
        self.decoded_bytes += len(data)
        self._guard(self.decoded_bytes)
        return data
