"""What decoding assembles is bounded per exchange (SPEC §6; issue 24): memory a small
multiple of the body, time linear in its size, whatever the body contains.

A Gemini answer of 118 KB became 380 MB of stored arguments (`partialArgs` padding was
bounded per call, not per exchange), and a 236 KB one took the writer down. Folds that
scanned everything they held at every event were quadratic. The module's timeout is what
fails the quadratic shapes on the code before, not a speed assertion; their speed, as
ratios, is in bench/decode_bounds.py.

Not responsible for the checks of tool calls (test_bounded_checks.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llmtap.protocols import decode_exchange
from llmtap.protocols.budget import MAX_TOOL_CALLS
from llmtap.workloads.peak_rss import run_measured
from tests.helpers import CONSOLE_SCRIPT

pytestmark = pytest.mark.timeout(120)

GEMINI = "/v1beta/models/gemini-3-pro-preview:streamGenerateContent?alt=sse"
SSE = "text/event-stream"


def sse(events: list[Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(e, separators=(",", ":")).encode() + b"\n\n" for e in events)


def padding_parts(calls: int) -> list[dict[str, Any]]:
    """Calls whose every piece pads an array to its largest index: 45 bytes of piece asked
    for 10,000 nulls, nine to a call (under the bound each call had on its own)."""
    parts: list[dict[str, Any]] = []
    for n in range(calls):
        pieces = [{"jsonPath": f"$.p{j}[9999]", "boolValue": True} for j in range(9)]
        parts.append({"functionCall": {"name": f"f{n}", "willContinue": True, "partialArgs": pieces}})
        parts.append({"functionCall": {}})
    return parts


def padding_stream(size: int) -> bytes:
    """A Gemini stream of about `size` bytes of padding calls, a few calls per chunk."""
    events: list[Any] = []
    body = 0
    while body < size:
        event = {"candidates": [{"content": {"role": "model", "parts": padding_parts(4)}}]}
        events.append(event)
        body += len(json.dumps(event, separators=(",", ":"))) + 8
    events.append({"candidates": [{"finishReason": "STOP", "content": {"parts": [{"text": ""}]}}]})
    return sse(events)


def stored_arguments(ex: Any) -> int:
    return sum(len(call.arguments_raw) + len(json.dumps(call.arguments or {})) for call in ex.tool_calls)


@pytest.mark.parametrize("size", [120_000, 240_000])
def test_padding_calls_in_a_stream_stay_within_a_small_multiple_of_the_body(size: int) -> None:
    body = padding_stream(size)
    ex = decode_exchange("gemini.generate", response=body, path=GEMINI, status=200, content_type=SSE)
    assert ex.decode_error is None and ex.complete
    assert len(ex.tool_calls) == body.count(b'"willContinue":true')  # every call kept
    assert stored_arguments(ex) < 8 * len(body)
    assert not ex.tool_calls[-1].valid_json  # the last ones are their raw pieces
    assert json.loads(ex.tool_calls[-1].arguments_raw)[0]["jsonPath"] == "$.p0[9999]"


def test_padding_calls_in_a_json_body_share_the_same_budget() -> None:
    candidate = {"content": {"role": "model", "parts": padding_parts(400)}, "finishReason": "STOP"}
    body = json.dumps({"candidates": [candidate]}).encode()
    ex = decode_exchange("gemini.generate", response=body, path=GEMINI.split(":")[0] + ":generateContent", status=200)
    assert ex.decode_error is None and len(ex.tool_calls) == 400
    assert stored_arguments(ex) < 8 * len(body)


def test_many_text_parts_and_items_of_a_responses_stream_decode_in_linear_time() -> None:
    """Each `output_item.done` looked at every text part kept so far: 40,000 of each were
    1.6 x 10^9 steps."""
    n = 40_000
    events: list[Any] = [{"type": "response.created", "response": {"id": "r", "status": "in_progress"}}]
    events += [
        {"type": "response.output_text.delta", "output_index": 0, "content_index": i, "delta": "x"} for i in range(n)
    ]
    events += [
        {"type": "response.output_item.done", "output_index": i + 1, "item": {"type": "reasoning", "id": f"rs{i}"}}
        for i in range(n)
    ]
    events.append({"type": "response.output_item.done", "output_index": 0, "item": {"type": "message"}})
    ex = decode_exchange("openai.responses", response=sse(events), path="/v1/responses", status=200, content_type=SSE)
    assert ex.decode_error is None and ex.reasoning_blocks == n


def test_many_grounding_chunks_of_a_gemini_stream_decode_in_linear_time() -> None:
    """Each chunk's search queries were merged with all those before: 80,000 chunks were
    3.2 x 10^9 steps."""
    n = 80_000
    events: list[Any] = [{"candidates": [{"groundingMetadata": {"webSearchQueries": [f"q{i}"]}}]} for i in range(n)]
    events.append(
        {
            "candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}],
            "modelVersion": "gemini-3-pro-preview",
        }
    )
    ex = decode_exchange("gemini.generate", response=sse(events), path=GEMINI, status=200, content_type=SSE)
    assert ex.decode_error is None and ex.text == "ok"
    assert ex.server_tool_uses == {"web_search": n}


def test_a_chat_stream_of_bare_call_indexes_keeps_a_bounded_number_of_calls() -> None:
    """`{"index": N}` is 13 bytes of stream and was a call of its own: a row, a check and
    about 1 KB of memory each, whatever the body's size."""
    n = MAX_TOOL_CALLS + 5_000
    deltas = [{"index": i} for i in range(n)]
    events = [{"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": deltas}}]}]
    events.append({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    ex = decode_exchange("openai.chat", response=sse(events), path="/v1/chat/completions", status=200, content_type=SSE)
    assert len(ex.tool_calls) == MAX_TOOL_CALLS
    assert ex.decode_error is not None and "5000 tool calls" in ex.decode_error


def test_a_chat_call_name_streamed_in_pieces_is_kept_text() -> None:
    """A server that streams a name in pieces has them joined; one that repeats the name
    whole in every delta, not; either way the name is kept text, under its budget."""
    events = [
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"name": part}}]}}]}
        for part in ("get_", "weather", "weather")
    ]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    ex = decode_exchange("openai.chat", response=sse(events), path="/v1/chat/completions", status=200, content_type=SSE)
    assert [call.name for call in ex.tool_calls] == ["get_weatherweather"]
    repeated = [
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"name": "get_weather"}}]}}]}
    ] * 3
    ex = decode_exchange(
        "openai.chat", response=sse([*repeated, events[-1]]), path="/v1/chat/completions", status=200, content_type=SSE
    )
    assert [call.name for call in ex.tool_calls] == ["get_weather"]


@pytest.mark.slow
def test_llmtap_decode_of_a_padding_stream_uses_memory_bounded_by_its_body(tmp_path: Path) -> None:
    """The real command, its peak resident memory against a small answer's."""
    if not CONSOLE_SCRIPT.exists():
        pytest.skip(f"the llmtap console script is not at {CONSOLE_SCRIPT}")
    hostile, small = tmp_path / "hostile.sse", tmp_path / "small.sse"
    hostile.write_bytes(padding_stream(236_000))
    small.write_bytes(padding_stream(1))
    peaks = {}
    for path in (small, hostile):
        command = [str(CONSOLE_SCRIPT), "decode", "--response", str(path), "--path", GEMINI, "--content-type", SSE]
        with (tmp_path / f"{path.stem}.json").open("w") as out:
            measured = run_measured(command, stdout=out)
        assert measured.code == 0
        peaks[path.stem] = measured.peak
    body = hostile.stat().st_size
    assert peaks["hostile"] - peaks["small"] < 100 * body, {k: v / 1e6 for k, v in peaks.items()}
    printed = json.loads((tmp_path / "hostile.json").read_text())
    assert sum(len(call["arguments_raw"]) for call in printed["tool_calls"]) < 8 * body
