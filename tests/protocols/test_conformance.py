"""The recorded corpus as a conformance suite: every case decodes to its `expect`, with
streams fed whole, line by line and one byte at a time, and in transport variants
(gzip, br, CRLF framing) and cut mid-event."""

from __future__ import annotations

import gzip
import json

import brotli
import pytest

from llmtap.protocols import ExchangeDecoder, route
from tests.protocols.corpus import Case, differences, load_cases

CASES = load_cases()
STREAMS = [c for c in CASES if c.case["streamed"]]


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
    )
    for chunk in chunks:
        decoder.feed(chunk)
    return decoder.finish().to_dict()


def lines(body: bytes) -> list[bytes]:
    return body.splitlines(keepends=True)


def single_bytes(body: bytes) -> list[bytes]:
    return [body[i : i + 1] for i in range(len(body))]


def test_corpus_is_present():
    assert len(CASES) >= 49, "the corpus should hold at least 49 cases"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_routes_to_its_protocol(case: Case):
    assert route("POST", case.case["path"], case.request) == case.case["protocol"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_whole(case: Case):
    got = decode(case, [case.response])
    assert differences(case.expect, got) == []
    assert got["streamed"] == case.case["streamed"]
    assert got["complete"] is True
    assert got["decode_error"] is None


@pytest.mark.parametrize("case", STREAMS, ids=lambda c: c.id)
def test_line_by_line(case: Case):
    got = decode(case, lines(case.response))
    assert differences(case.expect, got) == []


@pytest.mark.parametrize("case", STREAMS, ids=lambda c: c.id)
def test_byte_by_byte(case: Case):
    got = decode(case, single_bytes(case.response))
    assert differences(case.expect, got) == []
    assert got["complete"] is True


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_gzip_fed_in_small_chunks(case: Case):
    body = gzip.compress(case.response)
    got = decode(case, [body[i : i + 7] for i in range(0, len(body), 7)], encoding="gzip")
    assert differences(case.expect, got) == []


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_brotli(case: Case):
    body = brotli.compress(case.response)
    got = decode(case, [body[i : i + 13] for i in range(0, len(body), 13)], encoding="br")
    assert differences(case.expect, got) == []


@pytest.mark.parametrize("case", [c for c in STREAMS if b"data:" in c.response], ids=lambda c: c.id)
def test_crlf_framing(case: Case):
    body = case.response.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    got = decode(case, single_bytes(body))
    assert differences(case.expect, got) == []


@pytest.mark.parametrize("case", STREAMS, ids=lambda c: c.id)
@pytest.mark.parametrize("fraction", [0.2, 0.6, 0.95])
def test_cut_mid_stream(case: Case, fraction: float):
    cut = case.response[: int(len(case.response) * fraction)]
    got = decode(case, lines(cut))
    assert got["complete"] is False
    assert got["finish_reason"] is None
    assert got["usage_provenance"] in ("partial", "missing")
    json.dumps(got)  # the record is still printable


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_usage_invariants(case: Case):
    got = decode(case, [case.response])
    assert got["usage_check"] == [], got["usage_check"]
    if case.expect["usage"] is None:
        assert got["usage_provenance"] == "missing"
    else:
        assert got["usage_provenance"] == "reported"
