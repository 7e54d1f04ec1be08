"""Load the recorded corpus cases (tests/corpus/) and compare decoded records with
their `expect`, the way ../shared/tools/conformance.py does."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.corpus_tools import CORPUS, case_folders

USAGE_KEYS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens")


@dataclass(frozen=True)
class Case:
    id: str
    case: dict[str, Any]
    response: bytes
    request: bytes | None

    @property
    def expect(self) -> dict[str, Any]:
        return self.case["expect"]


def load_cases(root: Path = CORPUS) -> list[Case]:
    cases = []
    for folder in case_folders(root):
        meta = folder / "case.json"
        request = folder / "request.json"
        cases.append(
            Case(
                id=folder.name,
                case=json.loads(meta.read_text()),
                response=(folder / "response.body").read_bytes(),
                request=request.read_bytes() if request.exists() else None,
            )
        )
    return cases


def _digest(value: Any) -> str:
    if not isinstance(value, str):
        value = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def differences(expect: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """What differs between an `expect` block and a decoded record's dict."""
    diffs = []

    def check(name: str, want: Any, have: Any) -> None:
        if want != have:
            diffs.append(f"{name}: want {want!r} got {have!r}")

    check("model", expect["model"], got["model"])
    check("finish_reason", expect["finish_reason"], got["finish_reason"])
    if expect["usage"] is None or got["usage"] is None:
        check("usage", expect["usage"], got["usage"])
    else:
        for key in USAGE_KEYS:
            check(f"usage.{key}", expect["usage"][key], got["usage"][key])
    want_calls, got_calls = expect["tool_calls"], got["tool_calls"]
    check("tool_calls.count", len(want_calls), len(got_calls))
    for i, (want, have) in enumerate(zip(want_calls, got_calls, strict=False)):
        check(f"tool_calls[{i}].id", want["id"], have["id"])
        check(f"tool_calls[{i}].name", want["name"], have["name"])
        if want.get("valid_json") is False:
            check(f"tool_calls[{i}].valid_json", False, have["valid_json"])
        elif "arguments_sha256" in want:
            check(f"tool_calls[{i}].arguments", want["arguments_sha256"], _digest(have["arguments"]))
        else:
            check(f"tool_calls[{i}].arguments", want["arguments"], have["arguments"])
    if "text_sha256" in expect:
        check("text", expect["text_sha256"], _digest(got["text"]))
    else:
        check("text", expect["text"], got["text"])
    check("reasoning_blocks", expect["reasoning_blocks"], got["reasoning_blocks"])
    if expect.get("error_type"):
        error = got["error"] or {}
        if expect["error_type"] not in (error.get("type"), error.get("code")):
            diffs.append(f"error: want {expect['error_type']!r} got {error!r}")
    return diffs
