"""`protocols/jsonarray.py`: Gemini's streamed JSON array (streamGenerateContent without
`alt=sse`), split anywhere, gives the same elements; strings may hold brackets, braces and
escaped quotes; a cut element is `pending`; anything else is a `DecodeError`."""

from __future__ import annotations

import json

import pytest

from llmtap.protocols import DecodeError
from llmtap.protocols.jsonarray import JSONArraySplitter

ELEMENTS = [
    {"candidates": [{"content": {"parts": [{"text": "a [bracket] and {brace}"}]}}]},
    {"text": 'escaped \\" quote, a lone \\\\ and "]}" inside', "n": [1, [2, [3]]]},
    {"text": "é ✓ 日本 😀", "empty": {}, "list": []},
    {"tail": "\\"},
]
# Gemini's own framing: CRLF line ends, `\r\n,\r\n` between pretty-printed elements.
WIRE = ("[" + "\r\n,\r\n".join(json.dumps(e, indent=2, ensure_ascii=False) for e in ELEMENTS) + "\r\n]").encode()


def run(chunks: list[bytes]) -> tuple[list[object], JSONArraySplitter]:
    splitter = JSONArraySplitter()
    found: list[object] = []
    for chunk in chunks:
        found += [json.loads(text) for text in splitter.decode(chunk)]
    return found, splitter


def test_whole():
    found, splitter = run([WIRE])
    assert found == ELEMENTS
    assert splitter.closed and not splitter.pending


def test_byte_by_byte():
    found, splitter = run([WIRE[i : i + 1] for i in range(len(WIRE))])
    assert found == ELEMENTS
    assert splitter.closed


def test_split_in_two_at_every_position():
    for cut in range(1, len(WIRE)):
        assert run([WIRE[:cut], WIRE[cut:]])[0] == ELEMENTS, cut


@pytest.mark.parametrize("size", [2, 3, 5, 17, 64])
def test_fixed_size_chunks(size: int):
    assert run([WIRE[i : i + size] for i in range(0, len(WIRE), size)])[0] == ELEMENTS


@pytest.mark.parametrize(
    ("wire", "elements"),
    [
        (b"[]", []),
        (b"  \r\n[ ]", []),
        (b'[{"a":1},{"b":2}]', [{"a": 1}, {"b": 2}]),
        (b'[{"a":1}\n,\n{"b":2}\n]', [{"a": 1}, {"b": 2}]),
        (b'[[1,2],{"x":"]"}]', [[1, 2], {"x": "]"}]),
        (b'[{"s":"\\\\"}]', [{"s": "\\"}]),
        (b'[{"s":"\\\\\\""}]', [{"s": '\\"'}]),
    ],
)
def test_shapes(wire: bytes, elements: list[object]):
    for chunks in ([wire], [wire[i : i + 1] for i in range(len(wire))]):
        found, splitter = run(chunks)
        assert found == elements
        assert splitter.closed


@pytest.mark.parametrize(
    "cut",
    [
        b'[{"a": 1}, {"b": [1, 2',  # inside an element
        b'[{"a": 1}, {"b": "a string with ] and } in it',  # inside a string
        b'[{"a": 1}, {"b": "ends on a backslash \\',  # inside an escape
    ],
)
def test_cut_element_is_pending(cut: bytes):
    for chunks in ([cut], [cut[i : i + 1] for i in range(len(cut))]):
        found, splitter = run(chunks)
        assert found == [{"a": 1}]
        assert splitter.pending
        assert not splitter.closed


def test_cut_between_elements_is_not_pending():
    found, splitter = run([b'[{"a": 1},\r\n'])
    assert found == [{"a": 1}]
    assert not splitter.pending and not splitter.closed


def test_nothing_after_the_closing_bracket_is_read():
    found, splitter = run([b'[{"a": 1}]', b'{"b": 2}'])
    assert found == [{"a": 1}]
    assert splitter.closed


@pytest.mark.parametrize(
    "wire",
    [
        b'{"not": "an array"}',
        b'data: {"a": 1}\n\n',
        b'["bare string"]',
        b"[1, 2]",
        b'[{"a": 1}} ]',
    ],
)
def test_not_a_stream_of_objects_is_a_decode_error(wire: bytes):
    with pytest.raises(DecodeError):
        run([wire])


def test_one_element_is_bounded():
    splitter = JSONArraySplitter(max_element=1000)
    splitter.decode(b'[{"text": "' + b"x" * 900)
    with pytest.raises(DecodeError, match="exceeds 1000 bytes"):
        splitter.decode(b"x" * 200)


def test_many_small_elements_fit_under_the_element_bound():
    splitter = JSONArraySplitter(max_element=1000)
    assert splitter.decode(b"[") == []
    found = [splitter.decode(b'{"text": "' + b"x" * 500 + b'"},') for _ in range(100)]
    assert all(len(batch) == 1 for batch in found)
