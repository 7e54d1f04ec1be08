"""`protocols/content.py`: every Content-Encoding the SPEC names (§1: gzip, deflate, br,
zstd, stacked), fed whole and in small chunks; unknown codings and corrupt bodies are a
`DecodeError`; compression bombs stop at the output limit with bounded memory."""

from __future__ import annotations

import gzip
import struct
import sys
import tracemalloc
import zlib
from collections.abc import Callable, Iterator

import brotli
import pytest

from llmtap.protocols import DecodeError, ExchangeDecoder
from llmtap.protocols.content import ContentDecoder

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

PAYLOAD = (
    b'data: {"type":"content_block_delta","delta":{"text":"caf\xc3\xa9 \xe2\x9c\x93"}}\n\n' * 40 + bytes(range(256)) * 4
)


def _deflate_raw(data: bytes) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


ENCODERS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "x-gzip": gzip.compress,
    "deflate": zlib.compress,  # RFC 9110 deflate: the zlib format
    "br": brotli.compress,
    "zstd": zstd.compress,
    "identity": lambda data: data,
}


def run(header: str | None, chunks: list[bytes], **kwargs: int) -> bytes:
    decoder = ContentDecoder(header, **kwargs)
    return b"".join(decoder.decode(chunk) for chunk in chunks) + decoder.flush()


def pieces(body: bytes, size: int) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)] or [b""]


@pytest.mark.parametrize("size", [1, 7, 1 << 20], ids=["bytes", "7", "whole"])
@pytest.mark.parametrize("header", ENCODERS)
def test_each_coding(header: str, size: int):
    assert run(header, pieces(ENCODERS[header](PAYLOAD), size)) == PAYLOAD


@pytest.mark.parametrize("size", [1, 2, 3, 1 << 20], ids=["1", "2", "3", "whole"])
@pytest.mark.parametrize("payload", [PAYLOAD, b"", b"x"], ids=["payload", "empty", "one-byte"])
def test_deflate_without_zlib_header(payload: bytes, size: int):
    # Some servers send raw deflate (RFC 1951) under `deflate`; clients accept it. The choice
    # must not depend on where the chunks happen to be cut.
    assert run("deflate", pieces(_deflate_raw(payload), size)) == payload


@pytest.mark.parametrize(
    ("header", "layers"),
    [
        ("gzip, br", ["gzip", "br"]),
        ("br,gzip", ["br", "gzip"]),
        ("GZip ,  ZSTD", ["gzip", "zstd"]),
        ("identity, gzip", ["gzip"]),
        ("deflate, gzip, br", ["deflate", "gzip", "br"]),
    ],
)
def test_stacked_codings_are_undone_in_reverse(header: str, layers: list[str]):
    body = PAYLOAD
    for name in layers:  # applied in the order the header lists them
        body = ENCODERS[name](body)
    assert run(header, pieces(body, 5)) == PAYLOAD


@pytest.mark.parametrize("header", [None, "", "identity", " Identity "])
def test_no_coding_is_identity(header: str | None):
    decoder = ContentDecoder(header)
    assert decoder.identity
    assert decoder.decode(b"abc") + decoder.flush() == b"abc"


@pytest.mark.parametrize("header", ["compress", "sdch", "gzip, rot13", "aes128gcm"])
def test_unknown_coding_is_a_decode_error(header: str):
    with pytest.raises(DecodeError, match="unsupported content-encoding"):
        ContentDecoder(header)


@pytest.mark.parametrize("header", ["gzip", "deflate", "br", "zstd"])
def test_garbage_is_a_decode_error(header: str):
    with pytest.raises(DecodeError, match="content-encoding"):
        run(header, [b"<html>this is not compressed at all</html>" * 3])


def test_unknown_coding_becomes_the_records_decode_error():
    decoder = ExchangeDecoder("openai.chat", path="/v1/chat/completions", content_encoding="compress")
    decoder.feed(b'{"choices": []}')
    record = decoder.finish()
    assert "unsupported content-encoding 'compress'" in (record.decode_error or "")


# -- compression bombs ----------------------------------------------------------------------

BLOCK = 1 << 20
ZEROS = bytes(BLOCK)


def gzip_zeros(total: int) -> Iterator[bytes]:
    """`total` zero bytes (a multiple of BLOCK) gzip'd, produced lazily and cheaply: after a
    full flush the deflate dictionary is reset, so every block of zeros after the first
    compresses to the same bytes and one compressed block is repeated. The CRC of the
    trailer is only computed as far as the stream is consumed."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    first = packer.compress(ZEROS) + packer.flush(zlib.Z_FULL_FLUSH)
    again = packer.compress(ZEROS) + packer.flush(zlib.Z_FULL_FLUSH)
    yield b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + first  # header: no name, no mtime
    crc = zlib.crc32(ZEROS)
    for _ in range(total // BLOCK - 1):
        yield again
        crc = zlib.crc32(ZEROS, crc)
    yield packer.flush() + struct.pack("<II", crc, total & 0xFFFFFFFF)


def test_the_bomb_builder_makes_valid_gzip():
    assert gzip.decompress(b"".join(gzip_zeros(8 * BLOCK))) == bytes(8 * BLOCK)


def test_gzip_bomb_of_2_gb_stops_at_the_limit_in_bounded_memory():
    decoder = ContentDecoder("gzip", max_decoded=64 * BLOCK)
    decoded = 0
    tracemalloc.start()
    try:
        with pytest.raises(DecodeError, match="compression bomb"):
            for chunk in gzip_zeros(2048 * BLOCK):  # 2 GiB of zeros, about 2 MB compressed
                decoded += len(decoder.decode(chunk))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert decoded <= 64 * BLOCK
    assert peak < 16 * BLOCK


@pytest.mark.parametrize("header", ["gzip", "deflate", "br", "zstd", "gzip, br"])
def test_bomb_in_a_single_chunk_is_cut_short(header: str):
    body = bytes(64 * BLOCK)
    for name in (part.strip() for part in header.split(",")):
        body = brotli.compress(body, quality=5) if name == "br" else ENCODERS[name](body)
    assert len(body) < 200_000
    decoder = ContentDecoder(header, max_decoded=4 * BLOCK)
    tracemalloc.start()
    try:
        with pytest.raises(DecodeError, match="compression bomb"):
            decoder.decode(body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * BLOCK


def test_bomb_through_the_exchange_decoder_is_a_record():
    decoder = ExchangeDecoder(
        "anthropic.messages",
        path="/v1/messages",
        content_type="text/event-stream",
        content_encoding="gzip",
    )
    for chunk in gzip_zeros(2048 * BLOCK):
        decoder.feed(chunk)
        if decoder.ex.decode_error:
            break
    record = decoder.finish()
    assert record.decode_error is not None
    assert record.complete is False


@pytest.mark.parametrize("name", ["gzip", "br", "zstd"])
def test_an_encoding_cut_short_is_an_error_only_when_the_body_ended_normally(name: str):
    import gzip as _gzip
    import sys as _sys

    import brotli as _brotli

    if _sys.version_info >= (3, 14):
        from compression import zstd as _zstd
    else:
        from backports import zstd as _zstd
    data = b"data: " + b"x" * 5000 + b"\n\n"
    encoded = {"gzip": _gzip.compress, "br": _brotli.compress, "zstd": _zstd.compress}[name](data)
    cut = encoded[: len(encoded) // 2]
    decoder = ContentDecoder(name)
    decoder.decode(cut)
    decoder.flush()  # a transfer cut short: what arrived is decoded, no error
    decoder = ContentDecoder(name)
    decoder.decode(cut)
    with pytest.raises(DecodeError, match="ended before its end"):
        decoder.flush(strict=True)
    whole = ContentDecoder(name)
    assert whole.decode(encoded) + whole.flush(strict=True) == data
    assert ContentDecoder(name).flush(strict=True) == b""  # an empty body has no end to reach
