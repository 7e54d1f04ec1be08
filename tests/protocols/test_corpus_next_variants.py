"""The next corpus (tests/corpus_next/: Bedrock, Azure, Vertex partialArgs) through
`ExchangeDecoder` as the proxy feeds it: every case routes to its protocol and decodes to
its `expect` fed whole, line by line, byte by byte and gzip- or br-encoded in small
chunks; SSE streams with CRLF framing; every stream cut short (for AWS event-stream bodies
inside a frame) is no crash, not complete and has no finish reason.

Binary AWS event-stream bodies have no lines: "line by line" feeds them in the arbitrary
chunks `splitlines` makes of their bytes, and they get no CRLF variant.
test_cli_conformance.py runs the same cases through `llmtap decode`."""

from __future__ import annotations

import gzip
import json

import brotli
import pytest

from llmtap.protocols import ExchangeDecoder, route
from llmtap.protocols.providers import provider_of
from tests.corpus_tools import CORPUS_NEXT, EVENTSTREAM, cut_inside_a_frame, frame_ends
from tests.protocols.corpus import Case, differences, load_cases

CASES = load_cases(CORPUS_NEXT)
STREAMS = [c for c in CASES if c.case["streamed"]]
FRAMED = [c for c in CASES if c.case.get("framing") == EVENTSTREAM]


def ids(case: Case) -> str:
    return case.id


def decode(case: Case, chunks: list[bytes], encoding: str | None = None) -> dict:
    meta = case.case
    decoder = ExchangeDecoder(
        meta["protocol"],
        request=case.request,
        path=meta["path"],
        host=meta["host"],
        status=meta["status"],
        content_type=meta.get("content_type"),
        content_encoding=encoding,
        provider=provider_of(meta["protocol"], meta["host"], meta["path"]),  # as it is stored
    )
    for chunk in chunks:
        decoder.feed(chunk)
    return decoder.finish().to_dict()


def lines(body: bytes) -> list[bytes]:
    return body.splitlines(keepends=True)


def single_bytes(body: bytes) -> list[bytes]:
    return [body[i : i + 1] for i in range(len(body))]


def sized(body: bytes, size: int) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)]


def test_the_next_corpus_is_present() -> None:
    assert len(CASES) >= 10
    assert len(FRAMED) >= 3, "AWS event-stream cases are what this corpus adds"


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_routes_to_its_protocol(case: Case) -> None:
    assert route("POST", case.case["path"], case.request) == case.case["protocol"]


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_whole(case: Case) -> None:
    got = decode(case, [case.response])
    assert differences(case.expect, got) == []
    assert (got["protocol"], got["provider"]) == (case.case["protocol"], case.case["provider"])
    assert (got["streamed"], got["complete"], got["decode_error"]) == (case.case["streamed"], True, None)
    assert got["finish_reason_raw"] == case.case["notes"]["finish_reason_raw"]
    if "model_requested" in case.case["notes"]:
        assert got["model_requested"] == case.case["notes"]["model_requested"]


@pytest.mark.parametrize("case", STREAMS, ids=ids)
def test_line_by_line(case: Case) -> None:
    got = decode(case, lines(case.response))
    assert differences(case.expect, got) == []
    assert got["complete"] is True


@pytest.mark.parametrize("case", STREAMS, ids=ids)
def test_byte_by_byte(case: Case) -> None:
    got = decode(case, single_bytes(case.response))
    assert differences(case.expect, got) == []
    assert got["complete"] is True


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_gzip_fed_in_small_chunks(case: Case) -> None:
    got = decode(case, sized(gzip.compress(case.response), 7), encoding="gzip")
    assert differences(case.expect, got) == []


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_brotli_fed_in_small_chunks(case: Case) -> None:
    got = decode(case, sized(brotli.compress(case.response), 13), encoding="br")
    assert differences(case.expect, got) == []


@pytest.mark.parametrize("case", [c for c in STREAMS if b"data:" in c.response], ids=ids)
def test_crlf_framing(case: Case) -> None:
    body = case.response.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    got = decode(case, single_bytes(body))
    assert differences(case.expect, got) == []


@pytest.mark.parametrize("case", STREAMS, ids=ids)
@pytest.mark.parametrize("fraction", [0.2, 0.6, 0.95])
def test_cut_mid_stream(case: Case, fraction: float) -> None:
    if case in FRAMED:
        cut = case.response[: cut_inside_a_frame(case.response, fraction)]
        assert len(cut) not in frame_ends(case.response)  # inside a frame, not at its end
    else:
        cut = case.response[: int(len(case.response) * fraction)]
    got = decode(case, lines(cut))
    assert (got["complete"], got["finish_reason"]) == (False, None)
    assert got["usage_provenance"] in ("partial", "missing")
    json.dumps(got)  # the record is still printable


@pytest.mark.parametrize("case", FRAMED, ids=ids)
def test_a_frame_cut_at_every_point_of_its_prelude_is_no_crash(case: Case) -> None:
    ends = frame_ends(case.response)
    assert ends[-1] == len(case.response)  # whole frames, as recorded
    start = ends[len(ends) // 2 - 1]
    for length in range(start + 1, start + 16):  # inside the prelude and its CRC
        got = decode(case, [case.response[:length]])
        assert (got["complete"], got["finish_reason"]) == (False, None), length


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_usage_invariants(case: Case) -> None:
    got = decode(case, [case.response])
    assert got["usage_check"] == [], got["usage_check"]
    assert got["usage_provenance"] == ("missing" if case.expect["usage"] is None else "reported")
