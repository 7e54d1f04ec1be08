"""The cloud routes through the real addon hooks (mitmproxy's own test flows, a real writer
on SQLite): Bedrock's binary event streams reach the client byte for byte, as the same
chunk objects, and are recorded as `aws`; token-counting routes of every provider and
cloud are passed through unrecorded (counted as `other`), however much their bodies look
like generations."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from mitmproxy import http

from tests.addon.conftest import Rig, rig  # noqa: F401 - the fixture, for this folder too
from tests.addon.flows import request_flow, respond, start_stream

ROOT = Path(__file__).resolve().parents[2]
NEXT = ROOT / "tests" / "corpus_next"  # the project's copy of ../shared/corpus-next
BEDROCK_HOST = "bedrock-runtime.us-east-1.amazonaws.com"
EVENTSTREAM = "application/vnd.amazon.eventstream"

MESSAGES = {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [{"role": "user", "content": "count me"}]}
COUNTING = [
    ("api.anthropic.com", "/v1/messages/count_tokens?beta=true", MESSAGES),
    ("api.openai.com", "/v1/responses/input_tokens", {"model": "gpt-5", "input": "count me"}),
    ("myres.openai.azure.com", "/openai/v1/responses/input_tokens", {"model": "gpt-5", "input": "count me"}),
    (
        "generativelanguage.googleapis.com",
        "/v1beta/models/gemini-2.5-flash:countTokens",
        {"contents": [{"parts": [{"text": "count me"}]}]},
    ),
    (
        "us-east5-aiplatform.googleapis.com",
        "/v1/projects/p/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict",
        {"anthropic_version": "vertex-2023-10-16", **MESSAGES},
    ),
    (
        BEDROCK_HOST,
        "/model/anthropic.claude-3-haiku-20240307-v1%3A0/count-tokens",
        {"input": {"invokeModel": {"body": json.dumps({"anthropic_version": "bedrock-2023-05-31", **MESSAGES})}}},
    ),
]


def _flow(host: str, path: str, body: bytes) -> http.HTTPFlow:
    flow = request_flow(path, body)
    flow.request.host = host
    return flow


def _feed(tee, chunks: list[bytes]) -> list[bytes]:
    out = [tee(chunk) for chunk in chunks]
    tee(b"")
    return out


def test_token_counting_routes_are_passed_through_unrecorded(rig: Rig) -> None:  # noqa: F811
    for host, path, body in COUNTING:
        flow = _flow(host, path, json.dumps(body).encode())
        rig.recorder.request(flow)
        respond(flow, "application/json")
        rig.recorder.responseheaders(flow)
        assert flow.response is not None and flow.response.stream is False, path  # left to mitmproxy
        flow.response.content = b'{"input_tokens": 12}'
        rig.recorder.response(flow)
        assert flow.response.content == b'{"input_tokens": 12}'
    assert rig.rows() == []
    assert rig.recorder.counts["other"] == len(COUNTING)


def _case(name: str) -> tuple[dict, bytes, bytes]:
    folder = NEXT / name
    return (
        json.loads((folder / "case.json").read_text()),
        (folder / "response.body").read_bytes(),
        (folder / "request.json").read_bytes(),
    )


@pytest.mark.parametrize("name", ["c_bedrock_invoke_stream_tool_use", "c_bedrock_converse_stream_cache_write"])
def test_bedrock_event_stream_passes_byte_for_byte_and_is_recorded(rig: Rig, name: str) -> None:  # noqa: F811
    case, wire, request = _case(name)
    rng = random.Random(15)
    cuts = sorted(rng.sample(range(1, len(wire)), 60))
    chunks = [wire[a:b] for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True)]
    chunks += [wire[i : i + 1] for i in range(0)]
    tee = start_stream(rig.recorder, _flow(case["host"], case["path"], request), EVENTSTREAM)
    out = _feed(tee, chunks)
    assert out == chunks and all(a is b for a, b in zip(out, chunks, strict=True))  # untouched, unheld
    (row,) = rig.rows()
    expect = case["expect"]
    assert (row["protocol"], row["provider"]) == (case["protocol"], "aws")
    assert (row["model"], row["model_requested"]) == (expect["model"], case["notes"]["model_requested"])
    assert (row["finish_reason"], row["complete"], row["decode_error"]) == (expect["finish_reason"], True, None)
    assert row["usage_input_tokens"] == expect["usage"]["input_tokens"]
    assert row["usage_output_tokens"] == expect["usage"]["output_tokens"]
    assert row["usage_cache_creation_input_tokens"] == expect["usage"]["cache_write_tokens"]
    assert row["started_at"] <= row["first_byte_at"] <= row["first_token_at"] <= row["ended_at"]
