"""Gemini's `x-gemini-service-tier` response header: the tier it served. A request that
asked for `priority` and was served `standard` (Priority falls back quietly) is recorded,
and priced, as standard: by the decoder, by `llmtap decode --served-tier`, by `llmtap
import` of a HAR entry that carries the header, and through `reprocess`, which has no
headers and keeps the stored tier. Prices come from real genai-prices (`calc_price`).

Not responsible for the live proxy (tests/e2e/test_tierheader.py has it).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from genai_prices import Usage, calc_price
from sqlalchemy import select, update

from llmtap.analytics.pricing import Pricer
from llmtap.protocols import ExchangeDecoder, decode_exchange
from llmtap.storage import schema
from llmtap.storage.engine import make_engine
from tests.helpers import llmtap

# genai-prices prices this model with a `service_tier: priority` variant (from 2026-10-15).
MODEL = "gemini-3.8-flash-tts"
HOST = "generativelanguage.googleapis.com"
PATH = f"/v1beta/models/{MODEL}:generateContent"
STREAM_PATH = f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"
AT = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
INPUT, OUTPUT = 12_000, 3_000
REQUEST = {"contents": [{"role": "user", "parts": [{"text": "Read this aloud."}]}], "service_tier": "priority"}


def response(traffic_type: str | None = None) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "promptTokenCount": INPUT,
        "candidatesTokenCount": OUTPUT,
        "totalTokenCount": INPUT + OUTPUT,
    }
    if traffic_type:
        usage["trafficType"] = traffic_type
    candidate = {"content": {"role": "model", "parts": [{"text": "Done."}]}, "finishReason": "STOP", "index": 0}
    return {
        "candidates": [candidate],
        "usageMetadata": usage,
        "modelVersion": MODEL,
        "responseId": "tier-1",
    }


def pico(tier: str | None) -> int:
    """genai-prices' own price of the usage at `tier` (None: standard), in pico-dollars."""
    context = {"service_tier": tier} if tier else None
    price = calc_price(
        Usage(input_tokens=INPUT, output_tokens=OUTPUT),
        MODEL,
        provider_id="google",
        genai_request_timestamp=AT,
        price_context=context,
    )
    return int(price.total_price * Decimal(10**12))


def test_the_model_has_a_dearer_priority_tier():
    assert pico("priority") > pico(None) > 0  # else the tests below could not tell the tiers apart


# -- the decoder ---------------------------------------------------------------------------


def decode(served_tier: str | None, body: dict[str, Any] | None = None, protocol: str = "gemini.generate") -> Any:
    return decode_exchange(
        protocol,
        response=json.dumps(body or response()).encode(),
        request=json.dumps(REQUEST).encode(),
        path=PATH,
        host=HOST,
        status=200,
        content_type="application/json",
        served_tier=served_tier,
    )


@pytest.mark.parametrize(
    ("header", "want"),
    [
        ("standard", "standard"),
        ("Standard", "standard"),
        (" flex ", "flex"),
        (None, "priority"),  # no header: the requested tier
        ("", "priority"),
        ("auto", "priority"),  # names no tier
        ("x" * 17, "priority"),  # not a short plain word: ignored
        ("<b>standard</b>", "priority"),
    ],
)
def test_the_header_is_the_served_tier_when_it_is_a_plain_word(header: str | None, want: str):
    assert decode(header).service_tier == want


def test_the_header_outranks_the_body_statement():
    stated = response("ON_DEMAND_PRIORITY")
    assert decode(None, stated).service_tier == "priority"
    assert decode("standard", stated).service_tier == "standard"


def test_only_gemini_protocols_take_the_header():
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
        "service_tier": "priority",
    }
    ex = decode_exchange(
        "openai.chat",
        response=json.dumps(body).encode(),
        request=b'{"model": "gpt-4o", "messages": []}',
        path="/v1/chat/completions",
        served_tier="standard",
    )
    assert ex.service_tier == "priority"


def test_the_streaming_decoder_takes_it_too():
    event = b"data: " + json.dumps(response()).encode() + b"\r\n\r\n"
    decoder = ExchangeDecoder(
        "gemini.generate",
        request=json.dumps(REQUEST).encode(),
        path=STREAM_PATH,
        host=HOST,
        status=200,
        content_type="text/event-stream",
        served_tier="standard",
    )
    decoder.feed(event)
    ex = decoder.finish()
    assert (ex.streamed, ex.service_tier) == (True, "standard")


# -- `llmtap decode --served-tier` --------------------------------------------------------


def price(record: dict[str, Any]) -> int:
    """The real pricer's total for the decoded record's model, usage and tier."""
    row = {
        "protocol": record["protocol"],
        "provider": record["provider"],
        "model": record["model"],
        "service_tier": record["service_tier"],
        "usage_input_tokens": record["usage"]["input_tokens"],
        "usage_output_tokens": record["usage"]["output_tokens"],
        "started_at": AT,
    }
    cost = Pricer().price_row(row)
    assert cost.status == "priced" and cost.total is not None
    return cost.total


def test_decode_served_tier_records_and_prices_standard(tmp_path: Path):
    (tmp_path / "req.json").write_text(json.dumps(REQUEST))
    (tmp_path / "resp.json").write_text(json.dumps(response()))
    args = ["decode", "--request", str(tmp_path / "req.json"), "--response", str(tmp_path / "resp.json")]
    args += ["--path", PATH, "--host", HOST]
    served = llmtap(*args, "--served-tier", "standard")
    asked = llmtap(*args)
    assert served.code == asked.code == 0, served.err + asked.err
    served_record, asked_record = json.loads(served.out), json.loads(asked.out)
    assert (served_record["service_tier"], asked_record["service_tier"]) == ("standard", "priority")
    assert (price(served_record), price(asked_record)) == (pico(None), pico("priority"))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--served-tier", "pri ority"], "not a service tier"),
        (["--served-tier", "auto"], "not a service tier"),
        (["--served-tier", "standard", "--path", "/v1/messages"], "no such header"),
    ],
)
def test_decode_served_tier_bad_input_is_one_line(tmp_path: Path, extra: list[str], message: str):
    (tmp_path / "resp.json").write_text(json.dumps(response()))
    result = llmtap("decode", "--response", str(tmp_path / "resp.json"), "--path", PATH, *extra)
    assert result.code != 0 and result.out == ""
    assert message in result.err and "Traceback" not in result.err
    assert len(result.err.strip().splitlines()) == 1


def test_decode_help_names_the_flag():
    result = llmtap("decode", "--help", process=True)
    assert "--served-tier" in result.out and "x-gemini-service-tier" in result.out


# -- `llmtap import` of a HAR, then `llmtap reprocess` -------------------------------------


def har_entry(minute: int, headers: list[tuple[str, str]]) -> dict[str, Any]:
    def named(pairs: list[tuple[str, str]]) -> list[dict[str, str]]:
        return [{"name": name, "value": value} for name, value in pairs]

    text = json.dumps(response())
    return {
        "startedDateTime": AT.replace(minute=minute).isoformat(),
        "time": 900,
        "request": {
            "method": "POST",
            "url": f"https://{HOST}{PATH}",
            "headers": named([("content-type", "application/json"), ("x-goog-api-key", f"AIzaSyTIER{minute:04d}")]),
            "postData": {"mimeType": "application/json", "text": json.dumps(REQUEST)},
        },
        "response": {
            "status": 200,
            "headers": named([("content-type", "application/json"), *headers]),
            "content": {"size": len(text), "mimeType": "application/json", "text": text},
        },
    }


def stored(url: str) -> dict[str, dict[str, Any]]:
    """The stored rows by the minute they started."""
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(select(schema.exchanges)).mappings().all()
    finally:
        engine.dispose()
    return {row["started_at"].minute: dict(row) for row in rows}


def test_import_of_a_har_takes_the_header_and_reprocess_keeps_it(tmp_path: Path):
    har = tmp_path / "tiers.har"
    entries = [
        har_entry(1, [("X-Gemini-Service-Tier", "standard")]),  # priority asked, standard served
        har_entry(2, []),  # no header: what was asked
    ]
    har.write_text(json.dumps({"log": {"version": "1.2", "entries": entries}}))
    url = f"sqlite:///{tmp_path / 'store.db'}"
    result = llmtap("import", str(har), "--bodies", "full", "--db", url, process=True)
    assert result.code == 0, result.err

    rows = stored(url)
    assert (rows[1]["service_tier"], rows[2]["service_tier"]) == ("standard", "priority")
    assert (rows[1]["price_status"], rows[2]["price_status"]) == ("priced", "priced")
    assert (rows[1]["cost_total_pico"], rows[2]["cost_total_pico"]) == (pico(None), pico("priority"))

    # `reprocess` has the bodies but no headers: the stored tier stays, however it was known.
    engine = make_engine(url)
    try:
        with engine.begin() as connection:  # as if the row had been decoded differently before
            connection.execute(update(schema.exchanges).values(usage_output_tokens=1))
    finally:
        engine.dispose()
    result = llmtap("reprocess", "--db", url, process=True)
    assert result.code == 0, result.err
    assert result.out.startswith("reprocessed 2 exchanges (2 changed)")
    again = stored(url)
    assert (again[1]["service_tier"], again[2]["service_tier"]) == ("standard", "priority")
    assert again[1]["usage_output_tokens"] == again[2]["usage_output_tokens"] == OUTPUT
    report = llmtap("reprice", "--db", url, process=True)
    assert report.code == 0, report.err
    priced = stored(url)
    assert (priced[1]["cost_total_pico"], priced[2]["cost_total_pico"]) == (pico(None), pico("priority"))
