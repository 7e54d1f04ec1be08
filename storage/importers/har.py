"""HAR 1.2 files (browser DevTools and proxy exports) as `HttpExchange`s.

HAR keeps response bodies after content decoding (`content.text`, base64 when
`encoding` says so). Entries missing what an exchange needs are skipped with a reason,
never a crash. Not responsible for decoding or storing.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from llmtap.storage.ingest import HttpExchange

_AUTHORITY_END = re.compile(r"[/?]")


class HarError(ValueError):
    """The file is not a HAR file at all."""


def read_har(path: Path) -> tuple[list[Any], int]:
    """The entries of a HAR file (raises HarError when it is not one)."""
    try:
        data = json.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise HarError(f"{path} is not a HAR file: {str(exc)[:120]}") from None
    entries = data.get("log", {}).get("entries") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise HarError(f"{path} is not a HAR file: no log.entries list")
    return entries, len(entries)


def exchanges(entries: list[Any]) -> Iterator[tuple[HttpExchange | None, str | None]]:
    """Each entry as an exchange, or None with the reason it was skipped."""
    for index, entry in enumerate(entries):
        try:
            yield _exchange(entry), None
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            yield None, f"entry {index}: {exc.__class__.__name__}: {str(exc)[:120]}"


def _exchange(entry: dict[str, Any]) -> HttpExchange:
    request, response = entry["request"], entry.get("response") or {}
    url = request["url"]
    if not isinstance(url, str):
        raise TypeError(f"url is {type(url).__name__}, not text")
    host, path = _split_url(url)
    started = _time(entry.get("startedDateTime"))
    timings = entry.get("timings") or {}
    before_first_byte = sum(max(float(timings.get(k) or 0), 0.0) for k in ("blocked", "dns", "connect", "send", "wait"))
    total = entry.get("time")
    status = response.get("status")
    return HttpExchange(
        method=str(request.get("method") or "GET"),
        host=host,
        path=path,
        request_headers=_headers(request.get("headers")),
        request_body=_post_data(request.get("postData")),
        status=int(status) if isinstance(status, (int, float)) and status > 0 else None,
        response_headers=_headers(response.get("headers")),
        response_body=_content(response.get("content")),
        response_encoded=False,
        started_at=started,
        first_byte_at=started + timedelta(milliseconds=before_first_byte) if timings else None,
        ended_at=started + timedelta(milliseconds=float(total))
        if isinstance(total, (int, float)) and total >= 0
        else None,
    )


def _split_url(url: str) -> tuple[str, str]:
    """The host and the request-target (path and query) of a HAR entry's URL. Not
    `urlsplit`: a client may send a path no URL parser takes (`//[x/v1/messages`), and the
    recorder keeps such an exchange (the live proxy does), so this only cuts the
    authority off at the first `/` or `?` after the scheme."""
    scheme, sep, rest = url.partition("://")
    authority, target = "", url
    if sep:
        cut = _AUTHORITY_END.search(rest)
        authority, target = (rest[: cut.start()], rest[cut.start() :]) if cut else (rest, "")
    target = target.partition("#")[0]  # a fragment never goes on the wire
    host = authority.rpartition("@")[2]
    host = host[1:].partition("]")[0] if host.startswith("[") else host.partition(":")[0]
    return host.lower(), target if target.startswith("/") else "/" + target


def _time(value: Any) -> datetime:
    if not isinstance(value, str):
        return datetime.now(UTC)
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _headers(value: Any) -> list[tuple[str, str]]:
    if not isinstance(value, list):
        return []
    return [
        (str(h["name"]), str(h.get("value", "")))
        for h in value
        if isinstance(h, dict) and isinstance(h.get("name"), str)
    ]


def _post_data(value: Any) -> bytes | None:
    text = value.get("text") if isinstance(value, dict) else None
    if not isinstance(text, str):
        return None
    return text.encode("utf-8", "surrogatepass")


def _content(value: Any) -> bytes | None:
    text = value.get("text") if isinstance(value, dict) else None
    if not isinstance(text, str):
        return None
    if value.get("encoding") == "base64":
        try:
            return base64.b64decode(text)
        except (binascii.Error, ValueError):
            return text.encode("utf-8", "surrogatepass")
    return text.encode("utf-8", "surrogatepass")
