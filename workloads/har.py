"""A big HAR made from the corpus cases, written entry by entry so the maker itself stays
small: every case over and over, one entry per second from 2026-11-02, teams round-robin,
so each entry is an exchange of its own and none is a duplicate of another. Shared by the
streaming import's test (tests/storage/test_import_streaming.py) and bench/import_size.py.

Not responsible for importing it or measuring the import (the test and the bench do).
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from llmtap.workloads.corpus import case_meta, corpus_cases

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("LLMTAP_CORPUS", ROOT / "tests" / "corpus"))
START = datetime(2026, 11, 2, tzinfo=UTC)
TEAMS = ("alpha", "beta", "gamma")


def _template(folder: Path) -> dict[str, Any]:
    """One case as a HAR entry without its time and team (filled per copy)."""
    meta = case_meta(folder)
    body = (folder / "response.body").read_bytes()
    request_file = folder / "request.json"
    request = request_file.read_text() if request_file.exists() else "{}"
    content_type = meta.get("content_type") or "application/json"
    try:
        content: dict[str, Any] = {"size": len(body), "mimeType": content_type, "text": body.decode("utf-8")}
    except UnicodeDecodeError:  # a binary stream (AWS event-stream frames): base64, as HAR allows
        content = {"size": len(body), "mimeType": content_type, "text": base64.b64encode(body).decode()}
        content["encoding"] = "base64"
    return {
        "time": 850.0,
        "request": {
            "method": "POST",
            "url": f"https://{meta['host']}{meta['path']}",
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "content-type", "value": "application/json"}],
            "queryString": [],
            "cookies": [],
            "headersSize": -1,
            "bodySize": len(request),
            "postData": {"mimeType": "application/json", "text": request},
        },
        "response": {
            "status": meta["status"],
            "statusText": "",
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "content-type", "value": content_type}],
            "cookies": [],
            "content": content,
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": len(body),
        },
        "cache": {},
        "timings": {"send": 1, "wait": 600, "receive": 249},
    }


def _entries(templates: list[dict[str, Any]]) -> Iterator[str]:
    index = 0
    while True:
        for template in templates:
            started = (START + timedelta(seconds=index)).isoformat().replace("+00:00", "Z")
            team = {"name": "X-LLMTap-Team", "value": TEAMS[index % len(TEAMS)]}
            entry = template | {"startedDateTime": started}
            entry["request"] = template["request"] | {"headers": [*template["request"]["headers"], team]}
            yield json.dumps(entry, ensure_ascii=False)
            index += 1


def make_har(path: Path, size: int, corpus: Path = CORPUS) -> int:
    """Write a HAR of at least `size` bytes from the corpus; how many entries it holds."""
    templates = [_template(folder) for folder in corpus_cases(corpus)]
    count = 0
    with open(path, "w", encoding="utf-8") as out:
        out.write('{"log": {"version": "1.2", "creator": {"name": "llmtap-bench", "version": "1"}, "entries": [\n')
        written = 0
        for text in _entries(templates):
            if count:
                out.write(",\n")
            written += out.write(text) + 2
            count += 1
            if written >= size:
                break
        out.write("\n]}}\n")
    return count
