"""The project's corpus (tests/corpus/) and what the tests make of it: a HAR file of every
case with a team and a planted key per entry (and the per-team sums it must import to),
and transport variants of every case (gzip, br, CRLF framing, cut mid-stream).

Also a command, for .ci/run and by hand:
    python -m tests.corpus_tools har [CORPUS] --out FILE.har     (prints the sums as JSON)
    python -m tests.corpus_tools variants [CORPUS] --out DIR

Not responsible for decoding or comparing: tests/protocols/corpus.py does that.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import os
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import brotli

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
CORPUS = Path(os.environ.get("LLMTAP_CORPUS", TESTS / "corpus"))
# The team's shared corpus, when the checkout has it beside it (the project keeps a copy).
SHARED_CORPUS = ROOT.parent / "shared" / "corpus"

USAGE_KEYS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens")
TEAMS = ("alpha", "beta", "gamma")
HAR_START = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
HAR_STEP = timedelta(minutes=7)

# One fake key per protocol, in the header its clients send it in: none may reach the store.
PLANTED_KEYS = {
    "anthropic.messages": ("x-api-key", "sk-ant-api03-HARLEAKCANARY0000000000000000000000000000"),
    "openai.chat": ("authorization", "Bearer sk-proj-HARLEAKCANARY000000000000000000000000"),
    "openai.responses": ("authorization", "Bearer sk-proj-HARLEAKCANARY000000000000000000000000"),
    "gemini.generate": ("x-goog-api-key", "AIzaHARLEAKCANARY00000000000000000000000"),
    "gemini.interactions": ("x-goog-api-key", "AIzaHARLEAKCANARY00000000000000000000000"),
}


def case_folders(root: Path = CORPUS) -> list[Path]:
    """Every case folder under `root`, in name order. A missing corpus is an error, not an
    empty list: a test run that silently found nothing would prove nothing."""
    if not root.is_dir():
        raise FileNotFoundError(f"the corpus is not at {root}")
    return sorted(folder for folder in root.iterdir() if (folder / "case.json").is_file())


def read_case(folder: Path) -> tuple[dict[str, Any], bytes, bytes | None]:
    """(case.json, response body, request body or None) of one case folder."""
    request = folder / "request.json"
    return (
        json.loads((folder / "case.json").read_text()),
        (folder / "response.body").read_bytes(),
        request.read_bytes() if request.is_file() else None,
    )


# -- a HAR of the corpus ------------------------------------------------------------------


def _har_content(body: bytes, mime: str) -> dict[str, Any]:
    try:
        return {"size": len(body), "mimeType": mime, "text": body.decode("utf-8")}
    except UnicodeDecodeError:
        return {"size": len(body), "mimeType": mime, "text": base64.b64encode(body).decode(), "encoding": "base64"}


def har_entry(case: dict[str, Any], body: bytes, request: bytes | None, team: str, started: datetime) -> dict[str, Any]:
    """One HAR 1.2 entry as a browser or proxy export holds it, with the team header and
    the protocol's planted key."""
    key_header, key = PLANTED_KEYS[case["protocol"]]
    sent = request if request is not None else b"{}"
    mime = case.get("content_type") or "application/json"
    return {
        "startedDateTime": started.isoformat().replace("+00:00", "Z"),
        "time": 850.0,
        "request": {
            "method": "POST",
            "url": f"https://{case['host']}{case['path']}",
            "httpVersion": "HTTP/1.1",
            "headers": [
                {"name": "content-type", "value": "application/json"},
                {"name": key_header, "value": key},
                {"name": "X-LLMTap-Team", "value": team},
            ],
            "queryString": [],
            "cookies": [],
            "headersSize": -1,
            "bodySize": len(sent),
            "postData": {"mimeType": "application/json", "text": sent.decode("utf-8")},
        },
        "response": {
            "status": case["status"],
            "statusText": "",
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "content-type", "value": mime}],
            "cookies": [],
            "content": _har_content(body, mime),
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": len(body),
        },
        "cache": {},
        "timings": {"send": 1, "wait": 600, "receive": 249},
    }


def make_har(corpus: Path, out: Path, teams: tuple[str, ...] = TEAMS) -> dict[str, dict[str, int]]:
    """Write a HAR of every case (teams round-robin, one entry every 7 minutes from
    HAR_START) and return what each team's rows must add up to, from the cases' `expect`."""
    entries, sums = [], {}
    for index, folder in enumerate(case_folders(corpus)):
        case, body, request = read_case(folder)
        team = teams[index % len(teams)]
        entries.append(har_entry(case, body, request, team, HAR_START + index * HAR_STEP))
        total = sums.setdefault(team, {"requests": 0, "usage_missing": 0} | dict.fromkeys(USAGE_KEYS, 0))
        total["requests"] += 1
        usage = case["expect"]["usage"]
        if usage is None:
            total["usage_missing"] += 1
            continue
        for key in USAGE_KEYS:
            total[key] += usage[key] or 0
    har = {"log": {"version": "1.2", "creator": {"name": "llmtap-tests", "version": "1"}, "entries": entries}}
    out.write_text(json.dumps(har, ensure_ascii=False))
    return sums


# -- transport variants -------------------------------------------------------------------

CUT_AT = 0.6


def variants_of(case: dict[str, Any], body: bytes) -> Iterator[tuple[str, dict[str, Any], bytes]]:
    """(suffix, case.json, body) of each way the same exchange may reach the recorder: gzip
    and br on the wire; for SSE streams, CRLF line ends and the stream cut at 60 % of its
    bytes (no crash, not complete, no finish reason; everything else may differ)."""
    yield "gzip", case | {"content_encoding": "gzip"}, gzip.compress(body)
    yield "br", case | {"content_encoding": "br"}, brotli.compress(body)
    if case["streamed"] and b"data:" in body:
        yield "crlf", case, body.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        cut = case | {"cut": True, "expect": case["expect"] | {"finish_reason": None}}
        yield "cut", cut, body[: int(len(body) * CUT_AT)]


def write_variants(corpus: Path, out: Path) -> list[Path]:
    """Write every case's variants as case folders `<id>__<variant>` under `out`."""
    made = []
    for folder in case_folders(corpus):
        case, body, _ = read_case(folder)
        for suffix, variant, data in variants_of(case, body):
            target = out / f"{folder.name}__{suffix}"
            target.mkdir(parents=True, exist_ok=True)
            (target / "case.json").write_text(json.dumps(variant | {"id": target.name}, indent=1, ensure_ascii=False))
            (target / "response.body").write_bytes(data)
            if (folder / "request.json").is_file():
                shutil.copyfile(folder / "request.json", target / "request.json")
            made.append(target)
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.corpus_tools", description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["har", "variants"])
    parser.add_argument("corpus", nargs="?", default=str(CORPUS), type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    if args.what == "har":
        print(json.dumps(make_har(args.corpus, args.out), sort_keys=True))
    else:
        print(f"variants: {len(write_variants(args.corpus, args.out))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
