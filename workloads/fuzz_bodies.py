"""Hostile exchanges for the resource fuzzing (tests/protocols/test_resource_bounds.py,
bench/fuzz.py): hypothesis strategies that build whole wire exchanges — a request and a
response as they cross the proxy — shaped to make decoding and checking cost more than
their size.

Four families, each for every translator:

- `amplified`: a recorded exchange (the corpus, its cloud routes, the fixtures) with its
  events re-framed after edits that seek amplification: index fields set to huge or
  negative values (lists padded to an index), events repeated hundreds of times, strings
  grown, and, for Gemini, `partialArgs` calls whose paths pad arrays and nest objects.
- `checked` and `conversations` (workloads/fuzz_checks.py): costly tool checks, and requests
  whose own decoding is the cost.
- `framed`: framing at its limits: SSE of many tiny or unterminated lines and comments, a
  JSON array of many tiny elements, AWS event-stream of many tiny frames.

Every exchange is plain data (`Wire`), so a failing example prints as something to replay
with `llmtap decode`. Sizes are drawn up to a `scale` the caller chooses: CI keeps them
small, the bench grows them.

Not responsible for measuring (workloads/resource_oracle.py) or for judging what a decoder
made of the bytes (the property tests do that).
"""

from __future__ import annotations

import base64
import copy
import json
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from llmtap.protocols import PROTOCOLS  # every translator; bench/fuzz.py takes it from here
from llmtap.protocols.eventstream import EventMessage, EventStreamDecoder
from llmtap.protocols.sse import SSEDecoder

ROOT = Path(__file__).resolve().parent.parent
SEED_FOLDERS = (ROOT / "tests" / "corpus", ROOT / "tests" / "corpus_next", ROOT / "tests" / "protocols" / "fixtures")
EVENTSTREAM = "application/vnd.amazon.eventstream"
SSE = "text/event-stream"


@dataclass(frozen=True)
class Wire:
    """One exchange as it crossed the proxy: enough for `ExchangeDecoder` or `llmtap decode`."""

    family: str
    protocol: str
    path: str
    content_type: str
    response: bytes
    request: bytes | None = None
    host: str = "api.example.com"
    status: int = 200

    @property
    def size(self) -> int:
        return len(self.response) + len(self.request or b"")

    def __repr__(self) -> str:  # what hypothesis prints for a failing example: replayable, and short
        head = self.response[:300].decode("utf-8", "replace")
        return f"Wire({self.family}, {self.protocol}, {self.path}, {self.size} bytes: {head!r}…)"


# -- the seeds: recorded exchanges taken apart into events ---------------------------------


@dataclass(frozen=True)
class Seed:
    protocol: str
    path: str
    host: str
    status: int
    content_type: str
    framing: str  # sse | eventstream | array | json
    events: tuple[Any, ...]  # sse: (name, json); eventstream: (headers, json, wrapped); array/json: json
    request: Any  # the request body as JSON, or None


def _sse_events(body: bytes) -> list[tuple[str, Any]]:
    decoder = SSEDecoder()
    found = []
    for event in decoder.decode(body) + decoder.flush():
        try:
            found.append((event.event, json.loads(event.data)))
        except ValueError:
            found.append((event.event, event.data))  # [DONE] and other raw lines, kept as they were
    return found


def _frames(body: bytes) -> list[tuple[dict[str, Any], Any, bool]]:
    found = []
    message: EventMessage
    for message in EventStreamDecoder().decode(body):
        payload = json.loads(message.payload)
        wrapped = message.event_type == "chunk" and isinstance(payload, dict) and "bytes" in payload
        if wrapped:
            payload = json.loads(base64.b64decode(payload["bytes"]))
        headers = {k: v for k, v in message.headers.items() if isinstance(v, str)}
        found.append((headers, payload, wrapped))
    return found


def _seed(folder: Path) -> Seed | None:
    meta = json.loads((folder / "case.json").read_text())
    protocol = meta.get("protocol")
    if protocol not in PROTOCOLS:
        return None
    body = (folder / "response.body").read_bytes()
    request_file = folder / "request.json"
    request = json.loads(request_file.read_bytes()) if request_file.exists() else None
    content_type = (meta.get("content_type") or "application/json").lower()
    path = meta["path"]
    events: tuple[Any, ...]
    try:
        if EVENTSTREAM in content_type:
            framing, events = "eventstream", tuple(_frames(body))
        elif SSE in content_type:
            framing, events = "sse", tuple(_sse_events(body))
        elif ":streamGenerateContent" in path and body.lstrip().startswith(b"["):
            framing, events = "array", tuple(json.loads(body))
        else:
            framing, events = "json", (json.loads(body),)
    except (ValueError, KeyError):
        return None  # a fixture of broken bytes: the property tests mangle bytes already
    return Seed(protocol, path, meta.get("host", "api.example.com"), meta.get("status", 200), content_type,
                framing, events, request)  # fmt: skip


def load_seeds(folders: tuple[Path, ...] = SEED_FOLDERS) -> dict[str, list[Seed]]:
    seeds: dict[str, list[Seed]] = {protocol: [] for protocol in PROTOCOLS}
    for root in folders:
        if not root.is_dir():
            continue
        for folder in sorted(p for p in root.iterdir() if (p / "case.json").exists()):
            seed = _seed(folder)
            if seed is not None:
                seeds[seed.protocol].append(seed)
    return seeds


# -- framing the events again --------------------------------------------------------------


def _dumps(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def sse_body(events: list[tuple[str, Any]]) -> bytes:
    out = []
    for name, data in events:
        out.append((f"event: {name}\n" if name else "") + f"data: {_dumps(data)}\n\n")
    return "".join(out).encode()


def _header(name: str, value: str) -> bytes:
    raw = value.encode()
    return bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(raw)) + raw


def frame(payload: bytes, headers: dict[str, str]) -> bytes:
    """One AWS event-stream message with string headers."""
    block = b"".join(_header(k, v) for k, v in headers.items())
    prelude = struct.pack(">II", 12 + len(block) + len(payload) + 4, len(block))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + block + payload
    return body + struct.pack(">I", zlib.crc32(body))


def eventstream_body(events: list[tuple[dict[str, str], Any, bool]]) -> bytes:
    out = []
    for headers, payload, wrapped in events:
        raw = json.dumps(payload).encode()
        if wrapped:
            raw = json.dumps({"bytes": base64.b64encode(raw).decode()}).encode()
        out.append(frame(raw, headers))
    return b"".join(out)


def reframe(seed: Seed, events: list[Any]) -> bytes:
    if seed.framing == "sse":
        return sse_body(events)
    if seed.framing == "eventstream":
        return eventstream_body(events)
    if seed.framing == "array":
        return ("[" + ",\r\n".join(_dumps(e) for e in events) + "]").encode()
    return _dumps(events[0]).encode() if events else b""


# -- family 1: recorded exchanges, amplified ------------------------------------------------

_INDEX_KEYS = frozenset(
    ("index", "output_index", "content_index", "summary_index", "contentBlockIndex", "sequence_number")
)
BIG = st.sampled_from([2, 7, 999, 10_000, 1_000_000, 10**9, 2**31 - 1, 2**53, 10**30, -1, -(10**9)])


def _json_of(seed: Seed, event: Any) -> Any:
    """The JSON value inside one event of the seed's framing (a reference into it)."""
    if seed.framing == "sse":
        return event[1]
    if seed.framing == "eventstream":
        return event[1]
    return event


def _nodes(value: Any) -> list[Any]:
    """Every dict and list inside `value`, the root first."""
    found, stack = [], [value]
    while stack:
        node = stack.pop()
        if isinstance(node, (dict, list)):
            found.append(node)
            stack.extend(node.values() if isinstance(node, dict) else node)
    return found


@st.composite
def _amplify_one(draw: st.DrawFn, seed: Seed, events: list[Any], scale: int) -> None:
    if not events:
        return
    at = draw(st.integers(0, len(events) - 1))
    edit = draw(st.sampled_from(["index", "index", "repeat", "repeat_all", "grow", "nest"]))
    if edit == "repeat":
        times = draw(st.integers(1, max(1, scale // max(1, len(_dumps(_json_of(seed, events[at])))))))
        events[at + 1 : at + 1] = [copy.deepcopy(events[at]) for _ in range(min(times, 5000))]
        return
    if edit == "repeat_all":
        middle = events[1:-1] or events
        times = max(1, min(200, scale // max(1, len(reframe(seed, middle)))))
        events[1:-1] = [copy.deepcopy(e) for _ in range(draw(st.integers(1, times))) for e in middle]
        return
    nodes = _nodes(_json_of(seed, events[at]))
    dicts = [n for n in nodes if isinstance(n, dict)]
    if edit == "index":
        for node in dicts:
            for key in node:
                if key in _INDEX_KEYS and draw(st.booleans()):
                    node[key] = draw(BIG)
        return
    if not dicts:
        return
    node = draw(st.sampled_from(dicts))
    strings = [k for k, v in node.items() if isinstance(v, str)]
    if edit == "grow" and strings:
        key = draw(st.sampled_from(strings))
        node[key] = node[key] * draw(st.integers(2, max(2, scale // max(1, len(node[key]) or 1))))
    elif edit == "nest" and node:
        key = draw(st.sampled_from(list(node)))
        value: Any = node[key]
        for _ in range(draw(st.integers(1, 200))):
            value = [value]
        node[key] = value


def _partial_args_chunk(calls: list[list[dict[str, Any]]]) -> dict[str, Any]:
    parts = []
    for pieces in calls:
        parts.append({"functionCall": {"name": "f", "willContinue": True}})
        parts.extend({"functionCall": {"partialArgs": [piece], "willContinue": True}} for piece in pieces)
        parts.append({"functionCall": {}})
    return {"candidates": [{"index": 0, "content": {"role": "model", "parts": parts}}]}


@st.composite
def json_paths(draw: st.DrawFn) -> str:
    steps = draw(
        st.lists(
            st.sampled_from(["[0]", "[1]", "[99]", "[9999]", "[1000000]", ".a", ".b", "['k']", "[*]"])
            | st.integers(0, 50_000).map(lambda n: f"[{n}]")
            | st.text("abcxyz", min_size=1, max_size=3).map(lambda s: "." + s),
            min_size=1,
            max_size=40,
        )
    )
    return "$" + "".join(steps)


@st.composite
def partial_args_pieces(draw: st.DrawFn, scale: int) -> list[list[dict[str, Any]]]:
    """Calls of pieces that pad arrays to far indices and nest objects: few small pieces per
    call, each path new or repeated, so the bytes stay small while a naive assembly grows
    (a bound per call alone lets every call of the exchange grow to it)."""
    paths = draw(st.lists(json_paths(), min_size=1, max_size=6))
    padding = [f"$.k{n}[{draw(st.sampled_from([999, 9999, 9999, 99999]))}]" for n in range(draw(st.integers(1, 12)))]
    mixed = draw(st.booleans())  # else every piece pads: the calls stay valid and grow the most
    calls: list[list[dict[str, Any]]] = []
    budget = scale
    while budget > 0 and len(calls) < 2000:
        pieces: list[dict[str, Any]] = []
        for _ in range(draw(st.integers(1, 12))):
            path = draw(st.sampled_from(padding) | st.sampled_from(paths)) if mixed else draw(st.sampled_from(padding))
            value: dict[str, Any] = draw(st.sampled_from([{"nullValue": None}, {"numberValue": 1}, {"stringValue": "x"},
                                          {"boolValue": True}]))  # fmt: skip
            pieces.append({"jsonPath": path, **(value if mixed else {"nullValue": None})})
            budget -= len(path) + 80
        calls.append(pieces)
    return calls


@st.composite
def amplified(draw: st.DrawFn, protocol: str, seeds: dict[str, list[Seed]], scale: int) -> Wire:
    """A recorded exchange of `protocol`, re-framed after a few amplifying edits."""
    pool = seeds[protocol]
    seed = draw(st.sampled_from(pool))
    events = copy.deepcopy(list(seed.events))
    for _ in range(draw(st.integers(1, 4))):
        draw(_amplify_one(seed, events, scale))
    if protocol == "gemini.generate" and seed.framing in ("sse", "array") and draw(st.booleans()):
        chunk = _partial_args_chunk(draw(partial_args_pieces(scale)))  # after the edits: left as drawn
        at = draw(st.integers(0, len(events)))
        events.insert(at, ("", chunk) if seed.framing == "sse" else chunk)
    request = json.dumps(seed.request).encode() if seed.request is not None else None
    return Wire("amplified", protocol, seed.path, seed.content_type, reframe(seed, events), request,
                seed.host, seed.status)  # fmt: skip


# -- family 3: framing at its limits -------------------------------------------------------

STREAM_ROUTES = {
    "anthropic.messages": ("/v1/messages", SSE),
    "openai.chat": ("/v1/chat/completions", SSE),
    "openai.responses": ("/v1/responses", SSE),
    "gemini.generate": ("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", SSE),
    "gemini.interactions": ("/v1beta/interactions", SSE),
    "bedrock.converse": ("/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream", EVENTSTREAM),
}


@st.composite
def framed(draw: st.DrawFn, protocol: str, scale: int) -> Wire:
    path, content_type = STREAM_ROUTES[protocol]
    n = draw(st.integers(16, max(16, scale)))
    if content_type == EVENTSTREAM:
        kind = draw(st.sampled_from(["tiny_frames", "big_payload"]))
        if kind == "tiny_frames":
            body = b"".join(frame(b"{}", {":event-type": "ping", ":message-type": "event"}) for _ in range(n // 40))
        else:
            body = frame(json.dumps({"contentBlockDelta": {"delta": {"text": "x" * n}}}).encode(),
                         {":event-type": "contentBlockDelta", ":message-type": "event"})  # fmt: skip
        return Wire("framed", protocol, path, content_type, body)
    kind = draw(st.sampled_from(["tiny_events", "one_long_line", "data_lines", "comments", "cr_flood", "array"]))
    if kind == "tiny_events":
        body = b"data: {}\n\n" * (n // 10)
    elif kind == "one_long_line":
        body = b"data: " + b"x" * n  # never ends
    elif kind == "data_lines":
        body = b"data: [\n" + b"data: 1,\n" * (n // 9) + b"data: 1]\n\n"
    elif kind == "comments":
        body = b":" + b"\n:".join([b"c"] * (n // 3)) + b"\n"
    elif kind == "cr_flood":
        body = b"\r" * n
    else:
        if protocol != "gemini.generate":
            return Wire("framed", protocol, path, content_type, b"data: " + b"[" * min(n, 100_000) + b"\n\n")
        path = path.split("?")[0]
        content_type = "application/json"
        body = b"[" + b",".join([b"{}"] * (n // 3)) + b"]"
    return Wire("framed", protocol, path, content_type, body)


def exchanges(protocol: str, seeds: dict[str, list[Seed]], scale: int) -> st.SearchStrategy[Wire]:
    """Every family for one translator."""
    from llmtap.workloads.fuzz_checks import checked, conversations

    families = [checked(protocol, scale), conversations(protocol, scale), framed(protocol, scale)]
    if seeds.get(protocol):
        families.insert(0, amplified(protocol, seeds, scale))
    return st.one_of(*families)
