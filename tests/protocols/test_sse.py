"""`protocols/sse.py` against the WHATWG event-stream parsing rules
(https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):
each wire is fed whole, one byte at a time, and split at every position, and must give the
same events, and one event's size is bounded."""

from __future__ import annotations

import pytest

from llmtap.protocols import DecodeError
from llmtap.protocols.sse import SSEDecoder, SSEEvent


def run(chunks: list[bytes]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    for chunk in chunks:
        events += decoder.decode(chunk)
    return events + decoder.flush()


def splits(wire: bytes) -> list[list[bytes]]:
    """The wire whole, byte by byte, and cut in two at every position."""
    ways = [[wire], [wire[i : i + 1] for i in range(len(wire))]]
    ways += [[wire[:i], wire[i:]] for i in range(1, len(wire))]
    return ways


CASES = {
    "lf": (b"data: a\n\ndata: b\n\n", [SSEEvent("a"), SSEEvent("b")]),
    "crlf": (b"data: a\r\n\r\ndata: b\r\n\r\n", [SSEEvent("a"), SSEEvent("b")]),
    "cr": (b"data: a\r\rdata: b\r\r", [SSEEvent("a"), SSEEvent("b")]),
    "mixed line ends": (b"data: a\r\n\ndata: b\r\r\ndata: c\n\r", [SSEEvent("a"), SSEEvent("b"), SSEEvent("c")]),
    "multi-line data joins with LF": (b"data: one\ndata: two\ndata:\ndata: four\n\n", [SSEEvent("one\ntwo\n\nfour")]),
    "one leading space is removed, not more": (b"data:  x\ndata:y\n\n", [SSEEvent(" x\ny")]),
    "comments are ignored": (b": hello\ndata: a\n: middle\n\n:\n\n", [SSEEvent("a")]),
    "event name": (b"event: message_start\ndata: {}\n\n", [SSEEvent("{}", "message_start")]),
    "event name resets after dispatch": (b"event: x\ndata: 1\n\ndata: 2\n\n", [SSEEvent("1", "x"), SSEEvent("2")]),
    "event without data is not dispatched": (b"event: ping\n\ndata: a\n\n", [SSEEvent("a")]),
    "event name of an undispatched event is dropped": (b"event: lost\n\ndata: a\n\n", [SSEEvent("a")]),
    "id is kept for later events": (b"id: 7\ndata: a\n\ndata: b\n\n", [SSEEvent("a", id="7"), SSEEvent("b", id="7")]),
    "id with NUL is ignored": (
        b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n",
        [SSEEvent("a", id="1"), SSEEvent("b", id="1")],
    ),
    "retry and unknown fields are ignored": (b"retry: 3000\nfoo: bar\ndata: a\n\n", [SSEEvent("a")]),
    "a field name alone is a field with an empty value": (b"data\ndata\n\n", [SSEEvent("\n")]),
    "no space after colon": (b"event:x\ndata:a\n\n", [SSEEvent("a", "x")]),
    "last event without a trailing blank line": (b"data: a\n\ndata: last", [SSEEvent("a"), SSEEvent("last")]),
    "last event ended by one line end only": (b"data: last\r\n", [SSEEvent("last")]),
    "leading BOM is stripped": (b"\xef\xbb\xbfdata: a\n\n", [SSEEvent("a")]),
    "a BOM on a line of its own": (b"\xef\xbb\xbf\ndata: a\n\n", [SSEEvent("a")]),
    "BOM only at the start of the stream": (b"data: a\n\n\xef\xbb\xbfdata: b\n\n", [SSEEvent("a")]),
    "BOM after a leading blank line is not stripped": (b"\n\xef\xbb\xbfdata: a\n\n", []),
    "multi-byte UTF-8": ("data: 13 × 17 = 221 — ✓ 日本\n\n".encode(), [SSEEvent("13 × 17 = 221 — ✓ 日本")]),
    "blank lines only": (b"\n\n\r\n\r", []),
    "empty stream": (b"", []),
}


@pytest.mark.parametrize(("wire", "expected"), CASES.values(), ids=CASES.keys())
def test_events(wire: bytes, expected: list[SSEEvent]):
    for chunks in splits(wire):
        assert run(chunks) == expected, chunks


def test_cr_at_chunk_end_then_lf_is_one_line_end():
    # "\r" ends the first chunk; the "\n" that opens the next belongs to it, so the
    # blank line after it is the only dispatch point.
    assert run([b"data: a\r", b"\n", b"\r", b"\ndata: b\r\n\r\n"]) == [SSEEvent("a"), SSEEvent("b")]
    assert run([b"data: a\r", b"\ndata: b\r", b"\n\r\n"]) == [SSEEvent("a\nb")]


def test_split_inside_a_utf8_character():
    wire = "data: é€😀\n\n".encode()
    for cut in range(1, len(wire)):
        assert run([wire[:cut], wire[cut:]]) == [SSEEvent("é€😀")]


def test_invalid_utf8_is_replaced_not_raised():
    assert run([b"data: \xff\xfe ok\n\n"]) == [SSEEvent("\ufffd\ufffd ok")]


def test_flush_dispatches_a_pending_event_once():
    decoder = SSEDecoder()
    assert decoder.decode(b"data: a\ndata: b") == []
    assert decoder.flush() == [SSEEvent("a\nb")]
    assert decoder.flush() == []


def test_a_line_that_never_ends_is_bounded():
    decoder = SSEDecoder(max_event=1000)
    decoder.decode(b"data: " + b"x" * 900)
    with pytest.raises(DecodeError, match="exceeds 1000 bytes"):
        decoder.decode(b"x" * 200)


def test_an_event_of_many_data_lines_is_bounded():
    decoder = SSEDecoder(max_event=1000)
    with pytest.raises(DecodeError):
        for _ in range(200):
            decoder.decode(b"data: 0123456789\n")


class _Searched:
    """Bytes searched for a line end, by every buffer and chunk the decoder is given."""

    def __init__(self) -> None:
        self.bytes = 0


def _counting(kind: type, searched: _Searched) -> type:
    """A bytes or bytearray whose searches add their length to `searched`."""

    def counted(name: str) -> object:
        def method(self: bytes, *args: object, **kwargs: object) -> object:
            searched.bytes += len(self)
            return getattr(kind, name)(self, *args, **kwargs)

        return method

    names = ("find", "rfind", "index", "rindex", "count", "split", "splitlines", "partition", "__contains__")
    return type(f"Counting{kind.__name__}", (kind,), {name: counted(name) for name in names})


def test_a_long_line_in_small_chunks_stays_linear():
    # 4 MiB in 4 KiB chunks: each chunk's bytes are searched a bounded number of times;
    # rescanning the unfinished line at each chunk would search ~2 GiB.
    searched = _Searched()
    chunk_type = _counting(bytes, searched)
    decoder = SSEDecoder()
    decoder._buffer = _counting(bytearray, searched)()  # the unfinished line grows in place
    chunk = chunk_type(b"y" * 4096)
    assert decoder.decode(chunk_type(b"data: ")) == []
    for _ in range(1024):
        decoder.decode(chunk)
    assert decoder.decode(chunk_type(b"\n\n")) == [SSEEvent("y" * 4096 * 1024)]
    fed = 6 + 4096 * 1024 + 2
    assert fed <= searched.bytes <= 4 * fed  # every byte looked at, none over and over
