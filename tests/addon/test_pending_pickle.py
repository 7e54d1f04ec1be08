"""A record finished in the writer's process is the record finished in the proxy's.

The proxy pickles each `PendingExchange` (its metadata, and for a stream the decoder the
tee fed) and the writer process finishes it. For every corpus case, whole and streamed in
small chunks, plain and gzip, complete and cut short, the record built after a pickle
round trip must equal the one built without it, field for field."""

from __future__ import annotations

import gzip
import pickle
import time

import pytest

from llmtap.addon.tee import ExchangeMeta, PendingExchange
from llmtap.protocols import ExchangeDecoder
from tests.protocols.corpus import load_cases

CASES = load_cases()
NOW = time.time()


def _meta(case, encoding: str | None) -> ExchangeMeta:
    info = case.case
    now = NOW
    return ExchangeMeta(
        method="POST",
        host=info["host"],
        path=info["path"],
        team="team-a",
        key_fingerprint="f" * 32,
        key_last4="abcd",
        client_addr="127.0.0.1",
        request_body=case.request,
        request_headers=[("content-type", "application/json")],
        started=now - 1,
        protocol=info["protocol"],
        status=info["status"],
        first_byte=now - 0.5,
        ended=now,
        content_type=info.get("content_type"),
        content_encoding=encoding,
    )


def _streamed(case, encoding: str | None, cut: float | None) -> PendingExchange:
    """As the tee leaves it: the decoder fed in 97-byte chunks, then handed over."""
    body = gzip.compress(case.response) if encoding == "gzip" else case.response
    if cut is not None:
        body = body[: int(len(body) * cut)]
    meta = _meta(case, encoding)
    decoder = meta.new_decoder(meta.request_body)  # as the recorder makes it
    for start in range(0, len(body), 97):
        decoder.feed(body[start : start + 97])
    return PendingExchange(decoder, meta, "client disconnected" if cut is not None else None)


def _comparable(pending: PendingExchange) -> dict:
    record = pending.build()
    assert record is not None
    out = record.exchange.to_dict()
    out["started_at"], out["ended_at"], out["team"] = record.started_at, record.ended_at, record.team
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
@pytest.mark.parametrize(
    "encoding,cut", [(None, None), ("gzip", None), (None, 0.6)], ids=["plain", "gzip", "cut-at-60%"]
)
def test_a_streamed_record_survives_the_trip_to_the_writer_process(case, encoding, cut) -> None:
    here = _comparable(_streamed(case, encoding, cut))
    there = _comparable(pickle.loads(pickle.dumps(_streamed(case, encoding, cut))))
    assert there == here


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_held_body_survives_the_trip_to_the_writer_process(case) -> None:
    def held() -> PendingExchange:
        return PendingExchange(None, _meta(case, None), None, body=case.response)

    assert _comparable(pickle.loads(pickle.dumps(held()))) == _comparable(held())


def test_a_decoder_still_reading_is_not_shipped() -> None:
    """Only a decoder whose response has ended may be pickled: half-way, its zlib state
    would be lost without a word."""
    decoder = ExchangeDecoder("anthropic.messages", content_encoding="gzip")
    decoder.feed(gzip.compress(b'event: ping\ndata: {"type": "ping"}\n\n')[:10])
    with pytest.raises(TypeError, match="end_response"):
        pickle.dumps(decoder)
    decoder.end_response("cut")
    assert pickle.loads(pickle.dumps(decoder)).finish("cut").interrupted == "cut"


def test_metadata_pickles_as_its_field_values() -> None:
    assert CASES, "no corpus case: the parametrized tests above ran none"
    meta = _meta(CASES[0], "br")
    meta.raw_headers = ((b"x-api-key", b"sk-secret"),)
    assert pickle.loads(pickle.dumps(meta)) == meta
