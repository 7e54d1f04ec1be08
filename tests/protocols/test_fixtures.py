"""The project's own fixtures (tests/protocols/fixtures/): edge cases the shared corpus lacks
(mid-stream errors, refusals, error bodies, broken tool arguments, unknown events, legacy
shapes), written by hand in the providers' wire formats. Each one decodes to the `expect` of
its case.json fed whole, line by line and one byte at a time, and so do its transport
variants (gzip, br, CRLF framing; a stream cut at 60 % of its bytes decodes without a
finish reason and is not complete), as ../shared/tools/variants.py makes them.

`expect` keys are optional except model, finish_reason, usage, tool_calls, text and
reasoning_blocks; a key present is compared exactly (`usage`, `error` and `request` compare
the sub-keys they list).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from llmtap.protocols import ExchangeDecoder, route
from llmtap.protocols.providers import provider_of
from tests.corpus_tools import variants_of

FIXTURES = Path(__file__).resolve().parent / "fixtures"
REQUIRED_META = ("protocol", "host", "path", "status", "content_type", "expect")
REQUIRED_EXPECT = ("model", "finish_reason", "usage", "tool_calls", "text", "reasoning_blocks")
SCALARS = (
    "provider",
    "streamed",
    "complete",
    "model",
    "finish_reason",
    "finish_reason_raw",
    "text",
    "refusal",
    "reasoning_blocks",
    "usage_provenance",
    "service_tier",
)
TOOL_KEYS = ("id", "name", "arguments", "arguments_raw", "valid_json", "status")
# Shapes of real credentials; none may appear in a fixture.
SECRET = re.compile(rb"sk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}|AIza[0-9A-Za-z_-]{35}|Bearer\s+[A-Za-z0-9._-]{20,}")


@dataclass(frozen=True)
class Fixture:
    name: str
    meta: dict[str, Any]
    response: bytes
    request: bytes | None

    @property
    def expect(self) -> dict[str, Any]:
        return self.meta["expect"]


def load_fixtures(root: Path = FIXTURES) -> list[Fixture]:
    found = []
    for folder in sorted(p for p in root.iterdir() if (p / "case.json").exists()):
        request = folder / "request.json"
        found.append(
            Fixture(
                name=folder.name,
                meta=json.loads((folder / "case.json").read_text()),
                response=(folder / "response.body").read_bytes(),
                request=request.read_bytes() if request.exists() else None,
            )
        )
    return found


ALL = load_fixtures()
STREAMS = [f for f in ALL if f.expect.get("streamed")]

FEEDS: dict[str, Callable[[bytes], list[bytes]]] = {
    "whole": lambda body: [body],
    "lines": lambda body: body.splitlines(keepends=True),
    "bytes": lambda body: [body[i : i + 1] for i in range(len(body))],
}


def decode(fx: Fixture, chunks: list[bytes], meta: dict[str, Any] | None = None) -> dict[str, Any]:
    meta = fx.meta if meta is None else meta
    decoder = ExchangeDecoder(
        meta["protocol"],
        request=fx.request,
        path=meta["path"],
        host=meta["host"],
        status=meta["status"],
        content_type=meta["content_type"],
        content_encoding=meta.get("content_encoding"),
        provider=provider_of(meta["protocol"], meta["host"], meta["path"]),  # as it is stored
    )
    for chunk in chunks:
        decoder.feed(chunk)
    return decoder.finish().to_dict()


def mismatches(expect: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """Every way `got` (a record's dict) differs from an `expect` block."""
    diffs: list[str] = []

    def check(name: str, want: Any, have: Any) -> None:
        if want != have:
            diffs.append(f"{name}: want {want!r} got {have!r}")

    for key in SCALARS:
        if key in expect:
            check(key, expect[key], got[key])
    check("decode_error", expect.get("decode_error"), got["decode_error"])
    for key in ("usage", "error"):
        if key in expect:
            _check_subset(check, key, expect[key], got[key])
    if "request" in expect:
        _check_subset(check, "request", expect["request"], got["request"], tools_by_name=True)
    check("tool_calls.count", len(expect["tool_calls"]), len(got["tool_calls"]))
    for i, (want, have) in enumerate(zip(expect["tool_calls"], got["tool_calls"], strict=False)):
        for key in TOOL_KEYS:
            if key in want:
                check(f"tool_calls[{i}].{key}", want[key], have[key])
    for key in ("server_tool_calls", "server_tool_uses"):
        if key in expect:
            check(key, expect[key], got[key])
    return diffs


def _check_subset(
    check: Callable[[str, Any, Any], None], name: str, want: Any, have: Any, tools_by_name: bool = False
) -> None:
    if want is None or have is None:
        check(name, want, have)
        return
    for key, value in want.items():
        actual = have.get(key)
        if tools_by_name and key == "tools":
            actual = [tool["name"] for tool in actual]
        check(f"{name}.{key}", value, actual)


def test_fixtures_are_present():
    assert len(ALL) >= 20


@pytest.mark.parametrize("fx", ALL, ids=lambda f: f.name)
def test_case_file_is_well_formed(fx: Fixture):
    missing = [key for key in REQUIRED_META if key not in fx.meta]
    missing += [f"expect.{key}" for key in REQUIRED_EXPECT if key not in fx.expect]
    assert missing == []
    if fx.request is not None:
        assert isinstance(json.loads(fx.request), dict)


@pytest.mark.parametrize("fx", ALL, ids=lambda f: f.name)
def test_no_credentials_in_fixtures(fx: Fixture):
    for blob in (fx.response, fx.request or b"", json.dumps(fx.meta).encode()):
        assert SECRET.search(blob) is None


@pytest.mark.parametrize("fx", ALL, ids=lambda f: f.name)
def test_routes_to_its_protocol(fx: Fixture):
    assert route("POST", fx.meta["path"], fx.request) == fx.meta["protocol"]


@pytest.mark.parametrize("feed", FEEDS)
@pytest.mark.parametrize("fx", ALL, ids=lambda f: f.name)
def test_decodes_to_expect(fx: Fixture, feed: str):
    got = decode(fx, FEEDS[feed](fx.response))
    assert mismatches(fx.expect, got) == []


def _variants() -> list[tuple[str, Fixture, dict[str, Any], bytes]]:
    made = []
    for fx in ALL:
        case = fx.meta | {"streamed": fx.expect.get("streamed", False)}
        made += [(f"{fx.name}__{suffix}", fx, meta, body) for suffix, meta, body in variants_of(case, fx.response)]
    return made


VARIANTS = _variants()


@pytest.mark.parametrize(("name", "fx", "meta", "body"), VARIANTS, ids=[v[0] for v in VARIANTS])
def test_transport_variants(name: str, fx: Fixture, meta: dict[str, Any], body: bytes):
    got = decode(fx, FEEDS["lines"](body), meta)
    if meta.get("cut"):  # not complete, and no finish reason but an error's
        assert (got["complete"], got["finish_reason"] in (None, "error")) == (False, True)
    else:
        assert mismatches(fx.expect, got) == []


@pytest.mark.parametrize("fx", ALL, ids=lambda f: f.name)
def test_usage_keeps_its_invariants(fx: Fixture):
    got = decode(fx, [fx.response])
    assert got["usage_check"] == []
    if got["usage"] is None:
        assert got["usage_provenance"] == "missing"


@pytest.mark.parametrize("fx", STREAMS, ids=lambda f: f.name)
def test_cut_in_half_is_incomplete(fx: Fixture):
    cut = fx.response[: len(fx.response) // 2]
    got = decode(fx, FEEDS["lines"](cut))
    assert got["complete"] is False
    assert got["finish_reason"] in (None, "error")
    json.dumps(got)


def _sse_payloads(body: bytes) -> list[Any]:
    """The JSON of each `data:` line (the fixtures put one payload on one line)."""
    return [
        json.loads(line[5:])
        for line in body.decode("utf-8").splitlines()
        if line.startswith("data:") and line[5:].strip() != "[DONE]"
    ]


@pytest.mark.parametrize("fx", [f for f in STREAMS if f.meta["protocol"] == "openai.responses"], ids=lambda f: f.name)
def test_responses_websocket_frames_decode_like_sse(fx: Fixture):
    """WebSocket mode carries the same events as the SSE stream, one per frame."""
    decoder = ExchangeDecoder(
        "openai.responses",
        request=fx.request,
        path=fx.meta["path"],
        host=fx.meta["host"],
        status=101,
        provider=provider_of("openai.responses", fx.meta["host"], fx.meta["path"]),
    )
    for payload in _sse_payloads(fx.response):
        decoder.feed_message(payload)
    got = decoder.finish().to_dict()
    assert mismatches(fx.expect, got) == []
