"""Gemini 3 function-call arguments streamed as `partialArgs` (Vertex AI
`streamFunctionCallArguments`): calls open, take pieces and close over several parts, in
SSE streams, JSON-array streams and JSON bodies, and hostile pieces make an invalid call,
never a crash. The recorded cases are in tests/corpus_next/ (test_cli_conformance.py and
test_corpus_next_variants.py run them)."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest

from llmtap.protocols import ExchangeDecoder, decode_exchange
from llmtap.protocols.budget import ExchangeBudget
from llmtap.protocols.partial_args import MAX_DEPTH, MAX_INDEX, MAX_PATH_CHARS, PartialArgs, parse_path

PATH = "/v1/projects/p/locations/global/publishers/google/models/gemini-3-pro-preview:streamGenerateContent"
USAGE = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}


def call(**fields: Any) -> dict[str, Any]:
    return {"functionCall": fields}


def piece(path: str, value: Any = None, more: bool = False, key: str = "stringValue") -> dict[str, Any]:
    out: dict[str, Any] = {"jsonPath": path, key: value}
    if more:
        out["willContinue"] = True
    return out


def chunk(*parts: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
    if finish:
        candidate["finishReason"] = finish
    out: dict[str, Any] = {"candidates": [candidate], "modelVersion": "gemini-3-pro-preview"}
    if finish:
        out["usageMetadata"] = USAGE
    return out


def sse(chunks: list[dict[str, Any]]) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)


def decoded(chunks: list[dict[str, Any]], *, by_byte: bool = False) -> dict[str, Any]:
    body = sse(chunks)
    decoder = ExchangeDecoder("gemini.generate", path=PATH + "?alt=sse", status=200, content_type="text/event-stream")
    for piece_ in [body[i : i + 1] for i in range(len(body))] if by_byte else [body]:
        decoder.feed(piece_)
    return decoder.finish().to_dict()


def calls(got: dict[str, Any]) -> list[tuple[Any, Any, Any]]:
    return [(c["name"], c["arguments"], c["valid_json"]) for c in got["tool_calls"]]


TWO_CALLS = [
    chunk(call(name="getWeather", willContinue=True)),
    chunk(call(partialArgs=[piece("$.location", "New ", more=True)], willContinue=True)),
    chunk(call(partialArgs=[piece("$.location", "York", more=True)], willContinue=True)),
    chunk(call(partialArgs=[piece("$.location", "")], willContinue=True)),
    chunk(call()),
    chunk(call(name="getWeather", willContinue=True)),
    chunk(call(partialArgs=[piece("$.location", "Oslo")], willContinue=True)),
    chunk(call(), finish="STOP"),
]


@pytest.mark.parametrize("by_byte", [False, True])
def test_pieces_make_one_call_each(by_byte: bool) -> None:
    got = decoded(TWO_CALLS, by_byte=by_byte)
    assert calls(got) == [("getWeather", {"location": "New York"}, True), ("getWeather", {"location": "Oslo"}, True)]
    assert [c["arguments_raw"] for c in got["tool_calls"]] == ['{"location":"New York"}', '{"location":"Oslo"}']
    assert (got["finish_reason"], got["complete"], got["decode_error"]) == ("tool_use", True, None)


def test_values_of_every_kind_build_nested_objects_and_arrays() -> None:
    pieces = [
        piece("$.query.text", "ca", more=True),
        piece("$.query.limit", 5, key="numberValue"),
        piece("$.query.text", "ts"),
        piece("$.flags[0].on", True, key="boolValue"),
        piece("$.flags[1].on", False, key="boolValue"),
        piece("$.ratio", 0.5, key="numberValue"),
        piece("$.cursor", "NULL_VALUE", key="nullValue"),
        piece('$[\'odd key\']["x\\"y"]', "q"),
    ]
    got = decoded([chunk(call(name="search", willContinue=True)), chunk(call(partialArgs=pieces), finish="STOP")])
    want = {
        "query": {"text": "cats", "limit": 5},
        "flags": [{"on": True}, {"on": False}],
        "ratio": 0.5,
        "cursor": None,
        "odd key": {'x"y': "q"},
    }
    assert calls(got) == [("search", want, True)]
    assert json.loads(got["tool_calls"][0]["arguments_raw"]) == want


def test_arrays_of_objects_and_strings_with_bare_continuations_between_items() -> None:
    """Vertex marks the step to the next array item with a bare `functionCall
    {willContinue: true}`, and the last piece's part may close the call itself (no `{}`)."""
    got = decoded(
        [
            chunk(call(name="writeItems", willContinue=True)),
            chunk(call(partialArgs=[piece("$.ops[0].action", "add", more=True)], willContinue=True)),
            chunk(call(partialArgs=[piece("$.ops[0].action", "")], willContinue=True)),
            chunk(call(partialArgs=[piece("$.ops[0].price", 0.5, key="numberValue")], willContinue=True)),
            chunk(call(willContinue=True)),
            chunk(call(partialArgs=[piece("$.ops[1].action", "remove")], willContinue=True)),
            chunk(call(partialArgs=[piece("$.steps[0]", "Pre", more=True)], willContinue=True)),
            chunk(call(partialArgs=[piece("$.steps[0]", "heat.")], willContinue=True)),
            chunk(call(willContinue=True)),
            chunk(call(partialArgs=[piece("$.steps[1]", "Bake.")], willContinue=True)),
            chunk(call(partialArgs=[piece("$.ops[1].price", 0.3, key="numberValue")])),
            chunk({"text": ""}, finish="STOP"),
        ]
    )
    want = {
        "ops": [{"action": "add", "price": 0.5}, {"action": "remove", "price": 0.3}],
        "steps": ["Preheat.", "Bake."],
    }
    assert calls(got) == [("writeItems", want, True)]
    assert got["finish_reason"] == "tool_use"


def test_a_part_with_pieces_and_no_will_continue_closes_the_call() -> None:
    got = decoded(
        [
            chunk(call(name="a", willContinue=True)),
            chunk(call(partialArgs=[piece("$.x", "1")])),  # closes `a`
            chunk(call(partialArgs=[piece("$.y", "2")])),  # no call open: a call of its own, unnamed
            chunk(call(), finish="STOP"),  # a closer with nothing open
        ]
    )
    assert calls(got) == [("a", {"x": "1"}, True), (None, {"y": "2"}, True)]


def test_complete_calls_between_streamed_ones() -> None:
    got = decoded(
        [
            chunk({"text": "thinking", "thought": True}),
            chunk(call(name="read_theme"), call(name="set", args={"a": 1})),
            chunk(call(name="one_part", partialArgs=[piece("$.id", "A")])),
            chunk(call(name="read_screen", willContinue=True)),
            chunk(call(partialArgs=[piece("$.id", "B")], willContinue=True)),
            chunk(call(name="interrupting", args={"z": 0})),  # a named call closes the open one
            chunk({"text": ""}, finish="STOP"),
        ]
    )
    assert calls(got) == [
        ("read_theme", {}, True),
        ("set", {"a": 1}, True),
        ("one_part", {"id": "A"}, True),
        ("read_screen", {"id": "B"}, True),
        ("interrupting", {"z": 0}, True),
    ]
    assert (got["reasoning_blocks"], got["text"]) == (1, "")


def test_the_opening_args_and_id_are_kept_under_the_pieces() -> None:
    got = decoded(
        [
            chunk(call(id="call-1", name="f", args={"keep": 1, "over": 0}, willContinue=True)),
            chunk(call(partialArgs=[piece("$.over", 2, key="numberValue")], willContinue=True)),
            chunk(call(), finish="STOP"),
        ]
    )
    assert got["tool_calls"][0]["id"] == "call-1"
    assert calls(got) == [("f", {"keep": 1, "over": 2}, True)]


def test_a_stream_cut_inside_a_call_keeps_what_arrived() -> None:
    got = decoded(TWO_CALLS[:3])
    assert calls(got) == [("getWeather", {"location": "New York"}, True)]
    assert (got["complete"], got["finish_reason"]) == (False, None)


def test_a_decoder_holding_pieces_pickles_once_the_response_ended() -> None:
    """The proxy pickles a decoder after `end_response` to finish it in the writer process."""
    decoder = ExchangeDecoder("gemini.generate", path=PATH + "?alt=sse", status=200, content_type="text/event-stream")
    decoder.feed(sse(TWO_CALLS[:6]))  # the second call open, no pieces yet
    decoder.end_response()
    got = pickle.loads(pickle.dumps(decoder)).finish().to_dict()
    assert calls(got) == [("getWeather", {"location": "New York"}, True), ("getWeather", {}, True)]


def test_a_json_array_stream_assembles_the_same() -> None:
    body = json.dumps(TWO_CALLS).encode()
    got = decode_exchange("gemini.generate", response=body, path=PATH, status=200, content_type="application/json")
    got = got.to_dict()
    assert got["streamed"] is True
    assert calls(got) == [("getWeather", {"location": "New York"}, True), ("getWeather", {"location": "Oslo"}, True)]


def test_a_json_body_holding_pieces_is_assembled() -> None:
    parts = [part for c in TWO_CALLS for part in c["candidates"][0]["content"]["parts"]]
    body = {"candidates": [{"content": {"parts": parts}, "finishReason": "STOP"}], "usageMetadata": USAGE}
    got = decode_exchange(
        "gemini.generate",
        response=json.dumps(body).encode(),
        path=PATH.replace("streamGenerateContent", "generateContent"),
        status=200,
    ).to_dict()
    assert calls(got) == [("getWeather", {"location": "New York"}, True), ("getWeather", {"location": "Oslo"}, True)]


HOSTILE = [
    pytest.param([piece("$.a", "x"), piece("$.a.b", "y")], id="path through a string"),
    pytest.param([piece("$.a[0]", "x"), piece("$.a.b", "y")], id="name into an array"),
    pytest.param([piece("$.a.b", "x"), piece("$.a[0]", "y")], id="index into an object"),
    pytest.param([piece(f"$.a[{MAX_INDEX + 1}]", "x")], id="absurd index"),
    pytest.param([piece("$.a[99999999999999999999]", "x")], id="huge index"),
    pytest.param([piece("$" + ".a" * (MAX_DEPTH + 1), "x")], id="absurd depth"),
    pytest.param([piece("$." + "a" * MAX_PATH_CHARS, "x")], id="absurd path length"),
    pytest.param([piece("$..a", "x")], id="descendant segment"),
    pytest.param([piece("$.a[*]", "x")], id="wildcard"),
    pytest.param([piece("$.a[-1]", "x")], id="negative index"),
    pytest.param([piece("a.b", "x")], id="no root"),
    pytest.param([piece("$['a", "x")], id="unclosed quote"),
    pytest.param([piece("$", "x")], id="the root itself"),
    pytest.param([piece("$.a", 5)], id="string value not a string"),
    pytest.param([piece("$.a", "5", key="numberValue")], id="number value not a number"),
    pytest.param([piece("$.a", "true", key="boolValue")], id="bool value not a bool"),
    pytest.param([{"stringValue": "x"}], id="no jsonPath"),
    pytest.param(["not an object"], id="piece not an object"),
]


@pytest.mark.parametrize("pieces", HOSTILE)
def test_pieces_that_make_no_object_are_an_invalid_call(pieces: list[Any]) -> None:
    got = decoded([chunk(call(name="f", willContinue=True)), chunk(call(partialArgs=pieces), finish="STOP")])
    assert got["decode_error"] is None
    [only] = got["tool_calls"]
    assert (only["name"], only["arguments"], only["valid_json"], only["status"]) == ("f", None, False, "invalid_json")
    assert json.loads(only["arguments_raw"])  # the pieces as they came, as JSON text
    json.dumps(got)


def test_many_nulls_padding_arrays_are_bounded() -> None:
    pieces = [piece(f"$.a{i}[{MAX_INDEX}]", "x") for i in range(20)]
    got = decoded([chunk(call(name="f", willContinue=True)), chunk(call(partialArgs=pieces), finish="STOP")])
    assert [c["valid_json"] for c in got["tool_calls"]] == [False]


def test_partial_args_not_a_list_is_ignored() -> None:
    got = decoded([chunk(call(name="f", partialArgs="junk", willContinue=True)), chunk(call(), finish="STOP")])
    assert calls(got) == [("f", {}, True)]


def test_parse_path() -> None:
    assert parse_path("$.a.b[0].c") == ["a", "b", 0, "c"]
    assert parse_path("$['a b'][\"c\"][12]") == ["a b", "c", 12]
    assert parse_path("$['it\\'s'].n\\u00e9") == ["it's", "n\\u00e9"]
    assert parse_path("$['\\u00e9\\n']") == ["\u00e9\n"]
    assert parse_path("$.données") == ["données"]
    assert parse_path("$") == []
    for bad in ("", "a", "$.", "$.a.", "$[a]", "$['a']x", "$['\\q']", "$.a[1.5]"):
        assert parse_path(bad) is None, bad


def test_string_pieces_count_against_the_kept_text_budget() -> None:
    budget = ExchangeBudget()
    budget.kept = len("$.text") + 8  # the path is charged too
    pieces = PartialArgs(budget)
    for _ in range(5):
        pieces.add(piece("$.text", "abcd", more=True))
    args, raw = pieces.assemble()
    assert (args, raw, pieces.truncated) == ({"text": "abcdabcd"}, None, True)
    pieces.add(piece("$.other", 1, key="numberValue"))  # no budget left: dropped, not kept
    assert pieces.assemble() == ({"text": "abcdabcd"}, None)


def test_a_value_set_twice_keeps_the_last() -> None:
    pieces = PartialArgs(ExchangeBudget())
    pieces.add(piece("$.n", 1, key="numberValue"))
    pieces.add(piece("$.n", "two"))
    pieces.add(piece("$.s", "x"))
    pieces.add(piece("$.s", 3, key="numberValue"))
    assert pieces.assemble() == ({"n": "two", "s": 3}, None)
