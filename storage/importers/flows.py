"""mitmproxy flow files (`mitmdump -w`, the web UI's export) as `HttpExchange`s.

Flow files keep bodies as they came off the wire (still content-encoded); they are
decoded here with the translators' bounded decoder. A streamed response recorded without
`store_streamed_bodies` has no body and is imported with what remains.
Not responsible for decoding LLM payloads or storing.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from llmtap.protocols.content import ContentDecoder
from llmtap.protocols.errors import DecodeError
from llmtap.storage.importers import tnetstring
from llmtap.storage.ingest import HttpExchange


class FlowFileError(ValueError):
    """The file is not a mitmproxy flow file."""


def looks_like_flows(path: Path) -> bool:
    with open(path, "rb") as handle:
        head = handle.read(16)
    return bool(head) and head.split(b":", 1)[0].isdigit()


def read_flows(handle: BinaryIO) -> Iterator[tuple[HttpExchange | None, str | None]]:
    """Each HTTP flow as an exchange, or None with the reason it was skipped."""
    index = 0
    while True:
        try:
            flow = tnetstring.load(handle)
        except EOFError:
            return
        except ValueError as exc:
            if index == 0:
                raise FlowFileError(f"not a mitmproxy flow file: {exc}") from None
            yield None, f"flow {index}: {exc} (the rest of the file is unreadable)"
            return
        index += 1
        if not isinstance(flow, dict) or flow.get("type") != "http":
            continue
        try:
            yield _exchange(flow), None
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            yield None, f"flow {index}: {exc.__class__.__name__}: {str(exc)[:120]}"


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return str(value) if value is not None else ""


def _headers(value: Any) -> list[tuple[str, str]]:
    return [(_text(k), _text(v)) for k, v in value or []]


def _when(value: Any) -> datetime | None:
    return datetime.fromtimestamp(float(value), UTC) if isinstance(value, (int, float)) else None


def _exchange(flow: dict[str, Any]) -> HttpExchange:
    request = flow["request"]
    response = flow.get("response") or {}
    response_headers = _headers(response.get("headers"))
    body, encoded = _decoded(response.get("content"), response_headers)
    client = flow.get("client_conn") or {}
    peer = client.get("peername") or client.get("address")
    error = flow.get("error") or {}
    host = _text(request.get("host"))
    port = request.get("port")
    return HttpExchange(
        method=_text(request.get("method")),
        host=host,
        path=_text(request.get("path")),
        scheme=_text(request.get("scheme")) or "https",
        port=port if isinstance(port, int) and not isinstance(port, bool) else None,
        request_headers=_headers(request.get("headers")),
        request_body=request.get("content") if isinstance(request.get("content"), bytes) else None,
        status=response.get("status_code") if isinstance(response.get("status_code"), int) else None,
        response_headers=response_headers,
        response_body=body,
        response_encoded=encoded,
        started_at=_when(request.get("timestamp_start")) or datetime.now(UTC),
        first_byte_at=_when(response.get("timestamp_start")),
        ended_at=_when(response.get("timestamp_end")),
        client_addr=_text(peer[0]) if isinstance(peer, list) and peer else None,
        interrupted=_text(error.get("msg")) if isinstance(error, dict) and error.get("msg") else None,
    )


def _decoded(content: Any, headers: list[tuple[str, str]]) -> tuple[bytes | None, bool]:
    if not isinstance(content, bytes):
        return None, False
    encoding = next((v for k, v in headers if k.lower() == "content-encoding"), None)
    if not encoding:
        return content, False
    try:
        decoder = ContentDecoder(encoding)
        return decoder.decode(content) + decoder.flush(), False
    except DecodeError:
        return content, True  # the translators record the decode error on the exchange
