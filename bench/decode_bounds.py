"""Hostile answers against the per-exchange bounds (SPEC §6): time and memory per MiB of body.

Each shape is a body built to make decoding or checking do as much as it can per byte (the
findings of issue 24 and the audit after them): Gemini `partialArgs` padding, grounding
queries repeated in every chunk, Responses text parts and items, Chat calls of a bare
index, backtracking schema patterns and grammars, references that fan out, an Earley
grammar that is cubic, `uniqueItems` over many objects. Each runs as the real command
(`llmtap decode`, with the request that declares the tools) under bench/peak_rss.py, beside
a plain text stream of the same size: the figures are CPU seconds per MiB of body and the
peak memory above the plain stream's, per MiB of body.

    uv run python -m llmtap.bench.decode_bounds [--size MIB] [--quick]

Not responsible for finding new shapes (the fuzzing bench does that) or for the proxy.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llmtap.workloads.peak_rss import run_measured

LLMTAP = Path(sys.executable).parent / "llmtap"
GEMINI = "/v1beta/models/gemini-3-pro-preview:streamGenerateContent?alt=sse"
HOSTILE = "a" * 30 + "!"
Shape = tuple[str, bytes, bytes | None, str, str]  # protocol, response, request, path, content type


def _sse(events: list[Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(e, separators=(",", ":")).encode() + b"\n\n" for e in events)


def _until(size: int, make: Callable[[int], Any]) -> list[Any]:
    events, total, n = [], 0, 0
    while total < size:
        event = make(n)
        events.append(event)
        total += len(json.dumps(event, separators=(",", ":"))) + 8
        n += 1
    return events


def plain(size: int) -> Shape:
    events: list[Any] = [{"type": "message_start", "message": {"id": "m", "model": "claude-sonnet-4-5", "usage": {}}}]
    events += [{"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}]
    events += _until(
        size, lambda n: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "word "}}
    )
    events += [{"type": "message_stop"}]
    return "anthropic.messages", _sse(events), None, "/v1/messages", "text/event-stream"


def padding(size: int) -> Shape:
    def chunk(n: int) -> Any:
        pieces = [{"jsonPath": f"$.p{j}[9999]", "boolValue": True} for j in range(9)]
        parts = [{"functionCall": {"name": f"f{n}", "willContinue": True, "partialArgs": pieces}}, {"functionCall": {}}]
        return {"candidates": [{"content": {"role": "model", "parts": parts}}]}

    events = [*_until(size, chunk), {"candidates": [{"finishReason": "STOP", "content": {"parts": [{"text": ""}]}}]}]
    return "gemini.generate", _sse(events), None, GEMINI, "text/event-stream"


def grounding(size: int) -> Shape:
    events = _until(size, lambda n: {"candidates": [{"groundingMetadata": {"webSearchQueries": [f"q{n}"]}}]})
    events.append({"candidates": [{"finishReason": "STOP", "content": {"parts": [{"text": "ok"}]}}]})
    return "gemini.generate", _sse(events), None, GEMINI, "text/event-stream"


def responses_parts(size: int) -> Shape:
    half = _until(
        size // 2, lambda n: {"type": "response.output_text.delta", "output_index": 0, "content_index": n, "delta": "x"}
    )
    items = [
        {"type": "response.output_item.done", "output_index": n + 1, "item": {"type": "reasoning", "id": f"r{n}"}}
        for n in range(len(half))
    ]
    return "openai.responses", _sse([*half, *items]), None, "/v1/responses", "text/event-stream"


def chat_indexes(size: int) -> Shape:
    deltas = [{"index": n} for n in range(size // 14)]
    events = [{"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": deltas}}]}]
    events.append({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    return "openai.chat", _sse(events), None, "/v1/chat/completions", "text/event-stream"


def chat_names(size: int) -> Shape:
    def delta(n: int) -> Any:
        call = {"index": 0, "function": {"name": "ab"[n % 2]}}
        return {"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}

    return "openai.chat", _sse(_until(size, delta)), None, "/v1/chat/completions", "text/event-stream"


def _chat_calls(size: int, tools: list[Any], arguments: Any) -> Shape:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": json.dumps(arguments)}}
    count = max(1, size // len(json.dumps(call)))
    message = {"role": "assistant", "tool_calls": [call] * count}
    body = {"id": "x", "model": "gpt-4o", "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
    request = {"model": "gpt-4o", "messages": [{"role": "user", "content": "go"}], "tools": tools}
    return (
        "openai.chat",
        json.dumps(body).encode(),
        json.dumps(request).encode(),
        "/v1/chat/completions",
        "application/json",
    )


def _function(schema: dict[str, Any]) -> list[Any]:
    return [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", **schema}}}]


def schema_pattern(size: int) -> Shape:
    return _chat_calls(size, _function({"properties": {"s": {"pattern": "^(a+)+$"}}}), {"s": HOSTILE})


def schema_fanout(size: int) -> Shape:
    defs: dict[str, Any] = {"l0": {"type": "string"}}
    for level in range(1, 41):
        defs[f"l{level}"] = {"allOf": [{"$ref": f"#/$defs/l{level - 1}"}] * 2}
    schema = {"$defs": defs, "properties": {"s": {"$ref": "#/$defs/l40"}}}
    return _chat_calls(size, _function(schema), {"s": "x"})


def unique_items(size: int) -> Shape:
    items = [{"i": n} for n in range(size // 10)]
    return _chat_calls(1, _function({"properties": {"xs": {"uniqueItems": True}}}), {"xs": items})


def _custom(size: int, definition: dict[str, Any], text: str) -> Shape:
    tools = [{"type": "custom", "name": "g", "format": {"type": "grammar", **definition}}]
    item = {"type": "custom_tool_call", "call_id": "c", "name": "g", "input": text}
    count = max(1, size // (len(json.dumps(item)) + 2))
    body = {"id": "r", "status": "completed", "model": "gpt-5", "output": [item] * count}
    request = {"model": "gpt-5", "input": "go", "tools": tools}
    return (
        "openai.responses",
        json.dumps(body).encode(),
        json.dumps(request).encode(),
        "/v1/responses",
        "application/json",
    )


def regex_grammar(size: int) -> Shape:
    text = "ab" * min(size // 4, 100_000)
    return _custom(size, {"syntax": "regex", "definition": "(a|b)*a(a|b){20}"}, text)


def earley_grammar(size: int) -> Shape:
    return _custom(size, {"syntax": "lark", "definition": 'start: e\ne: e e | "a"'}, "a" * 200 + "b")


SHAPES: dict[str, Callable[[int], Shape]] = {
    "gemini partialArgs padding": padding,
    "gemini grounding queries": grounding,
    "responses text parts + items": responses_parts,
    "chat bare call indexes": chat_indexes,
    "chat name pieces": chat_names,
    "schema pattern ^(a+)+$": schema_pattern,
    "schema $ref fan-out 2^40": schema_fanout,
    "schema uniqueItems objects": unique_items,
    "regex grammar (a|b)*a(a|b){20}": regex_grammar,
    "lark Earley e: e e | a": earley_grammar,
}


def measure(shape: Shape, folder: Path) -> tuple[int, float, int]:
    protocol, response, request, path, content_type = shape
    (folder / "response").write_bytes(response)
    command = [str(LLMTAP), "decode", "--response", str(folder / "response"), "--path", path]
    command += ["--content-type", content_type]
    if request is not None:
        (folder / "request").write_bytes(request)
        command += ["--request", str(folder / "request")]
    with (folder / "out.json").open("w") as out:
        measured = run_measured(command, stdout=out)
    if measured.code != 0:
        raise SystemExit(f"llmtap decode exited {measured.code} on {protocol}")
    return len(response) + len(request or b""), measured.cpu, measured.peak


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=float, default=1.0, help="MiB of body per shape (default 1)")
    parser.add_argument("--quick", action="store_true", help="a quarter MiB per shape")
    args = parser.parse_args(argv)
    size = int((0.25 if args.quick else args.size) * 1024 * 1024)
    with tempfile.TemporaryDirectory(prefix="llmtap-bounds-") as name:
        folder = Path(name)
        _, base_cpu, base_peak = measure(plain(size), folder)
        print(f"plain text stream: {base_cpu / (size / 2**20):.2f} CPU s/MiB, peak {base_peak / 2**20:.0f} MiB")
        print(f"{'shape':34} {'MiB':>6} {'CPU s/MiB':>10} {'x plain':>8} {'peak+ MiB/MiB':>14}")
        for label, make in SHAPES.items():
            body, cpu, peak = measure(make(size), folder)
            mib = body / 2**20
            extra = max(0, peak - base_peak) / 2**20
            print(f"{label:34} {mib:6.2f} {cpu / mib:10.2f} {cpu / max(base_cpu, 1e-3):8.1f} {extra / mib:14.1f}")


if __name__ == "__main__":
    main()
