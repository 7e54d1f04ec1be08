"""The project's corpora (tests/corpus/, and tests/corpus_next/ with the cloud routes) and
what the tests make of them: a HAR file of every case with a team and a planted key per
entry (and the per-team sums it must import to), and transport variants of every case
(gzip, br, CRLF framing, cut mid-stream or, for AWS event-stream bodies, mid-frame).

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
CORPUS_NEXT = Path(os.environ.get("LLMTAP_CORPUS_NEXT", TESTS / "corpus_next"))
# The team's shared corpora, when the checkout has them beside it (the project keeps copies).
SHARED_CORPUS = ROOT.parent / "shared" / "corpus"
SHARED_CORPUS_NEXT = ROOT.parent / "shared" / "corpus-next"

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
# A cloud's own key, for the protocols it carries: a Bedrock API key is a bearer token
# (`ABSK…`), an Azure OpenAI key rides `api-key`.
PLANTED_CLOUD_KEYS = {
    "aws": ("authorization", "Bearer ABSKHARLEAKCANARY000000000000000000000000000000"),
    "azure": ("api-key", "HARLEAKCANARY0000000000000000000000000000"),
}
# `framing` of a case whose body is binary frames, not text lines (corpus-next README).
EVENTSTREAM = "aws-eventstream"


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


def _har_content(body: bytes, mime: str, binary: bool = False) -> dict[str, Any]:
    """A HAR `content`: text as text, and binary frames (or bytes that are not UTF-8) as
    base64 with `encoding: base64`, as HAR 1.2 keeps them."""
    if not binary:
        try:
            return {"size": len(body), "mimeType": mime, "text": body.decode("utf-8")}
        except UnicodeDecodeError:
            pass
    return {"size": len(body), "mimeType": mime, "text": base64.b64encode(body).decode(), "encoding": "base64"}


def planted_key(case: dict[str, Any]) -> tuple[str, str]:
    """The (header, value) of the fake key a case's HAR entry carries."""
    return PLANTED_CLOUD_KEYS.get(case.get("provider") or "") or PLANTED_KEYS[case["protocol"]]


def har_entry(case: dict[str, Any], body: bytes, request: bytes | None, team: str, started: datetime) -> dict[str, Any]:
    """One HAR 1.2 entry as a browser or proxy export holds it, with the team header and
    the protocol's planted key."""
    key_header, key = planted_key(case)
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
            "content": _har_content(body, mime, binary=case.get("framing") == EVENTSTREAM),
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
    bytes (no crash, not complete, no finish reason; everything else may differ). An AWS
    event-stream body is binary frames: no line ends to change, and its cut falls inside
    a frame."""
    yield "gzip", case | {"content_encoding": "gzip"}, gzip.compress(body)
    yield "br", case | {"content_encoding": "br"}, brotli.compress(body)
    cut = case | {"cut": True, "expect": case["expect"] | {"finish_reason": None}}
    if case.get("framing") == EVENTSTREAM:
        yield "cut", cut, body[: cut_inside_a_frame(body, CUT_AT)]
    elif case["streamed"] and b"data:" in body:
        yield "crlf", case, body.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        yield "cut", cut, body[: int(len(body) * CUT_AT)]


def frame_ends(body: bytes) -> list[int]:
    """Where each AWS event-stream message of `body` ends: its prelude's first 4 bytes
    are the whole message's length (big-endian). Stops at a length that does not fit."""
    ends, at = [], 0
    while at + 12 <= len(body):
        length = int.from_bytes(body[at : at + 4], "big")
        if length < 16 or at + length > len(body):
            break
        at += length
        ends.append(at)
    return ends


def cut_inside_a_frame(body: bytes, fraction: float) -> int:
    """A length near `fraction` of `body` that ends strictly inside a frame (the middle
    of the frame that holds that point), so a decoder sees a partial message."""
    start = 0
    for end in frame_ends(body):
        if end > len(body) * fraction:
            return start + max(1, (end - start) // 2)
        start = end
    return max(1, int(len(body) * fraction))


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
    parser.add_argument("corpus", nargs="?", default=str(CORPUS), type=Path, help="tests/corpus or tests/corpus_next")
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    if args.what == "har":
        print(json.dumps(make_har(args.corpus, args.out), sort_keys=True))
    else:
        print(f"variants: {len(write_variants(args.corpus, args.out))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
