"""The billing fixtures (tests/fixtures/billing/): hand-written exchanges, each following a
provider's doc page, that carry what changes a price: the service tier served, Anthropic
`usage.iterations` (compaction, advisor, fallback), `inference_geo` and `speed`, per-use
server tools, per-modality tokens and long context.

Each decodes through `llmtap decode` (the command, in-process) to the `expect` of its
case.json, and so do its transport variants (gzip, br, CRLF); a stream cut at 60 % still
decodes, without a finish reason. Not responsible for prices: analytics' tests price these
same fixtures.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llmtap.protocols import route
from tests.corpus_tools import case_folders, read_case, variants_of
from tests.helpers import llmtap
from tests.protocols.test_fixtures import SECRET

BILLING = Path(__file__).resolve().parents[1] / "fixtures" / "billing"
FOLDERS = case_folders(BILLING)
EXPECT_KEYS = ("model", "finish_reason", "usage", "service_tier", "server_tool_uses", "inference_geo", "speed")
USAGE_KEYS = (
    "input_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "output_tokens",
    "reasoning_tokens",
    "modalities",
    "sub_usages",
)
# The cases the issue asks for, each named by what it shows.
CASES = {
    "openai_responses_flex",
    "openai_responses_priority_stream",
    "openai_responses_auto_default",
    "openai_responses_auto_priority_stream",
    "openai_chat_auto_default",
    "openai_chat_audio",
    "anthropic_web_search_10",
    "anthropic_compaction_stream",
    "anthropic_advisor",
    "anthropic_fallback",
    "anthropic_geo_us_fast",
    "gemini_grounded_25",
    "gemini_grounded_3_stream",
    "gemini_long_context",
}


def decode(tmp_path: Path, case: dict[str, Any], body: bytes, request: bytes | None) -> dict[str, Any]:
    """The record `llmtap decode` prints for one exchange."""
    response = tmp_path / "response.body"
    response.write_bytes(body)
    argv = ["decode", "--response", str(response), "--path", case["path"], "--host", case["host"]]
    argv += ["--status", str(case["status"]), "--content-type", case["content_type"]]
    if case.get("content_encoding"):
        argv += ["--content-encoding", case["content_encoding"]]
    if request is not None:
        (tmp_path / "request.json").write_bytes(request)
        argv += ["--request", str(tmp_path / "request.json")]
    result = llmtap(*argv)
    assert result.code == 0, result.err
    record: dict[str, Any] = json.loads(result.out)
    return record


def mismatches(expect: dict[str, Any], got: dict[str, Any]) -> list[str]:
    diffs = []
    for key, want in expect.items():
        if key == "usage":
            have = None if got["usage"] is None else {k: got["usage"][k] for k in want}
        elif key in ("notes",):
            continue
        else:
            have = got[key]
        if want != have:
            diffs.append(f"{key}: want {want!r} got {have!r}")
    return diffs


def variants() -> list[tuple[str, dict[str, Any], bytes, bytes | None]]:
    made = []
    for folder in FOLDERS:
        case, body, request = read_case(folder)
        for suffix, variant, data in variants_of(case, body):
            made.append((f"{folder.name}__{suffix}", variant, data, request))
    return made


VARIANTS = variants()


def test_every_case_is_there():
    assert {folder.name for folder in FOLDERS} == CASES


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: f.name)
def test_case_file_is_complete(folder: Path):
    case, body, request = read_case(folder)
    assert [key for key in EXPECT_KEYS if key not in case["expect"]] == []
    assert [key for key in USAGE_KEYS if key not in case["expect"]["usage"]] == []
    assert "https://" in case["notes"], "every fixture names the doc page it follows"
    assert request is not None and isinstance(json.loads(request), dict)
    assert route("POST", case["path"], request) == case["protocol"]
    for blob in (body, request, json.dumps(case).encode()):
        assert SECRET.search(blob) is None


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: f.name)
def test_decodes_to_expect(folder: Path, tmp_path: Path):
    case, body, request = read_case(folder)
    got = decode(tmp_path, case, body, request)
    assert mismatches(case["expect"], got) == []
    assert got["decode_error"] is None
    assert got["complete"] is True
    assert got["usage_check"] == []


@pytest.mark.parametrize(("name", "case", "body", "request_body"), VARIANTS, ids=[v[0] for v in VARIANTS])
def test_variants_keep_working(
    name: str, case: dict[str, Any], body: bytes, request_body: bytes | None, tmp_path: Path
):
    got = decode(tmp_path, case, body, request_body)
    assert got["decode_error"] is None
    if case.get("cut"):
        assert got["complete"] is False
        assert got["finish_reason"] is None
        return
    assert mismatches(case["expect"], got) == []
    assert got["complete"] is True
