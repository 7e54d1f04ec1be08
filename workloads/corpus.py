"""The recorded corpus (../shared/corpus) as HTTP exchanges, for the benchmarks and the
storage tests: one case folder in, the `HttpExchange` a HAR or flow file would give.

Not responsible for decoding or storing them (storage.ingest does).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from llmtap.storage.ingest import HttpExchange


def corpus_cases(corpus: Path) -> list[Path]:
    return sorted(p for p in corpus.iterdir() if (p / "case.json").exists())


def case_meta(case: Path) -> dict[str, Any]:
    return json.loads((case / "case.json").read_text())


def corpus_http(
    case: Path,
    *,
    started_at: datetime,
    headers: list[tuple[str, str]] | None = None,
    path: str | None = None,
    first_byte_ms: float = 200,
    ended_ms: float = 800,
) -> HttpExchange:
    """One corpus case as the HTTP exchange a file would hold (body already decoded)."""
    meta = case_meta(case)
    request = case / "request.json"
    return HttpExchange(
        method="POST",
        host=meta["host"],
        path=path or meta["path"],
        request_headers=[("content-type", "application/json"), *(headers or [])],
        request_body=request.read_bytes() if request.exists() else None,
        status=meta["status"],
        response_headers=[("content-type", meta.get("content_type") or "application/json")],
        response_body=(case / "response.body").read_bytes(),
        response_encoded=False,
        started_at=started_at,
        first_byte_at=started_at + timedelta(milliseconds=first_byte_ms),
        ended_at=started_at + timedelta(milliseconds=ended_ms),
    )
