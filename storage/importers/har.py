"""HAR 1.2 files (browser DevTools and proxy exports) as `HttpExchange`s, read as a stream.

Entries come one at a time from ijson (yajl), so memory holds one entry, never the file;
a guard on the bytes refuses nesting ijson would pay dearly for. HAR keeps response bodies
after content decoding (`content.text`, base64 when `encoding` says so). Entries missing
what an exchange needs are skipped with a reason, never a crash; a file that breaks off
raises HarError after the entries before the break. Not responsible for decoding or storing.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, BinaryIO

import ijson  # type: ignore[import-untyped]

from llmtap.storage.ingest import HttpExchange

_AUTHORITY_END = re.compile(r"[/?]")
MAX_DEPTH = 64  # a HAR is eight levels deep; bodies are strings, their nesting does not count


class HarError(ValueError):
    """The file is not a HAR file, or it breaks off (the message says after which entry)."""


class NestingGuard:
    """A binary file read through to ijson, refusing JSON nested deeper than `limit`.

    ijson keeps a path string per open level (`item.item.item…`), so `[[[[…` a hundred
    thousand deep costs tens of gigabytes before any entry is seen; a HAR is about eight
    levels deep. The bytes are scanned before ijson gets them, strings skipped by regex
    (a body's brackets are text), so the check costs one pass in C over the data. Also
    counts the bytes read, for the progress bar.
    """

    _STRING_REST = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.S)  # up to the closing quote
    _TOKEN = re.compile(rb'[\[\]{}"]')

    def __init__(self, handle: BinaryIO, limit: int = MAX_DEPTH) -> None:
        self.handle = handle
        self.limit = limit
        self.position = 0
        self.depth = 0
        self._in_string = False
        self._string_at = 0  # where the open string began, in the file
        self._escaped = False  # the last chunk ended inside a string on a backslash
        self._refused: str | None = None  # why the next read fails

    def read(self, size: int = -1) -> bytes:
        if self._in_string and size > 0:
            # yajl lexes a token again from its start whenever more of it arrives: reads as
            # long as the open string so far keep a 100 MB body linear, not quadratic
            size = max(size, self.position - self._string_at)
        if self._refused:
            raise HarError(self._refused)
        data = self.handle.read(size)
        cut = self._scan(data, self.position)
        if cut is not None:  # ijson gets what comes before the level too deep (its entries are kept)
            self._refused = f"JSON nested deeper than {self.limit} levels"
            if cut == 0:
                raise HarError(self._refused)
            data = data[:cut]
        self.position += len(data)
        return data

    def _scan(self, data: bytes, offset: int) -> int | None:
        """Follow the nesting through `data`; where it goes too deep, if it does."""
        pos, end = 0, len(data)
        if self._escaped and end:
            pos, self._escaped = 1, False
        while pos < end:
            if self._in_string:
                quote = data.find(b'"', pos)
                if data.find(b"\\", pos, end if quote < 0 else quote) < 0:  # no escapes: memchr speed
                    if quote < 0:
                        return None
                    self._in_string, pos = False, quote + 1
                    continue
                pos = self._STRING_REST.match(data, pos).end()  # type: ignore[union-attr]
                if pos == end:
                    return None
                if data[pos] == 0x22:  # the closing quote
                    self._in_string = False
                    pos += 1
                    continue
                self._escaped = True  # a backslash ends the chunk: its escaped byte comes next
                return None
            token = self._TOKEN.search(data, pos)
            if token is None:
                return None
            pos = token.end()
            char = data[token.start()]
            if char == 0x22:
                self._in_string, self._string_at = True, offset + token.start()
            elif char in b"[{":
                self.depth += 1
                if self.depth > self.limit:
                    return token.start()
            else:
                self.depth -= 1
        return None


def read_har(guard: NestingGuard, name: str) -> Iterator[tuple[HttpExchange | None, str | None]]:
    """Each entry of a HAR file as an exchange (or None with the reason it was skipped),
    read one at a time: memory holds one entry, never the file. Raises HarError when the
    file is not a HAR, or breaks off or turns to garbage after some entries (those were
    yielded already; the message says how many)."""
    index = 0
    try:
        for index, entry in enumerate(ijson.items(guard, "log.entries.item", use_float=True), start=1):
            yield _one(entry, index - 1)
    except (ijson.JSONError, UnicodeDecodeError, HarError) as exc:
        if index == 0:
            raise HarError(f"{name} is not a HAR file: {_one_line(exc)}") from None
        raise HarError(
            f"{name} breaks off after entry {index} ({_one_line(exc)}); the entries before were read"
        ) from None
    if index == 0:
        _check_entries_list(guard, name)


def _check_entries_list(guard: NestingGuard, name: str) -> None:
    """No entry came out: a HAR with an empty `log.entries`, or not a HAR at all."""
    guard.handle.seek(0)
    again = NestingGuard(guard.handle, guard.limit)
    try:
        for prefix, event, _ in ijson.parse(again):
            if prefix == "log.entries" and event == "start_array":
                return
    except (ijson.JSONError, UnicodeDecodeError, HarError) as exc:
        raise HarError(f"{name} is not a HAR file: {_one_line(exc)}") from None
    raise HarError(f"{name} is not a HAR file: no log.entries list")


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:120]


def _one(entry: Any, index: int) -> tuple[HttpExchange | None, str | None]:
    try:
        return _exchange(entry), None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return None, f"entry {index}: {exc.__class__.__name__}: {str(exc)[:120]}"


def _exchange(entry: dict[str, Any]) -> HttpExchange:
    request, response = entry["request"], entry.get("response") or {}
    url = request["url"]
    if not isinstance(url, str):
        raise TypeError(f"url is {type(url).__name__}, not text")
    scheme, host, port, path = _split_url(url)
    started = _time(entry.get("startedDateTime"))
    timings = entry.get("timings") or {}
    before_first_byte = sum(max(float(timings.get(k) or 0), 0.0) for k in ("blocked", "dns", "connect", "send", "wait"))
    total = entry.get("time")
    status = response.get("status")
    return HttpExchange(
        method=str(request.get("method") or "GET"),
        host=host,
        path=path,
        scheme=scheme,
        port=port,
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


def _split_url(url: str) -> tuple[str, str, int | None, str]:
    """The scheme, host, port (None when the URL names none, or none that is a port) and
    request-target (path and query) of a HAR entry's URL. Not `urlsplit`: a client may
    send a path no URL parser takes (`//[x/v1/messages`), and the recorder keeps such an
    exchange (the live proxy does), so this only cuts the authority off at the first `/`
    or `?` after the scheme."""
    scheme, sep, rest = url.partition("://")
    authority, target = "", url
    if sep:
        cut = _AUTHORITY_END.search(rest)
        authority, target = (rest[: cut.start()], rest[cut.start() :]) if cut else (rest, "")
    target = target.partition("#")[0]  # a fragment never goes on the wire
    hostport = authority.rpartition("@")[2]
    if hostport.startswith("["):
        host, _, after = hostport[1:].partition("]")
        port_text = after[1:] if after.startswith(":") else ""
    else:
        host, _, port_text = hostport.partition(":")
    digits = port_text.isascii() and port_text.isdigit() and len(port_text) <= 5
    port = int(port_text) if digits and 0 < int(port_text) < 65536 else None
    return (scheme.lower() if sep else "https"), host.lower(), port, target if target.startswith("/") else "/" + target


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
    text = value.pop("text", None) if isinstance(value, dict) else None  # the entry keeps bytes, not both
    if not isinstance(text, str):
        return None
    return text.encode("utf-8", "surrogatepass")


def _content(value: Any) -> bytes | None:
    text = value.pop("text", None) if isinstance(value, dict) else None  # the entry keeps bytes, not both
    if not isinstance(text, str):
        return None
    if value.get("encoding") == "base64":
        try:
            return base64.b64decode(text)
        except (binascii.Error, ValueError):
            return text.encode("utf-8", "surrogatepass")
    return text.encode("utf-8", "surrogatepass")
