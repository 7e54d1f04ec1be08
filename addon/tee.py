"""The stream tee: the callable set on `flow.response.stream` for an LLM exchange.

mitmproxy calls it on its event loop with each response chunk as received (transfer
coding removed, content encoding kept) and once more with `b""` at the end; whatever it
returns is what the client gets. It returns its input unchanged, always: an exception in
here would make mitmproxy drop the chunk from the client's stream (silently), so every
step is guarded. Per chunk it only feeds the incremental decoder (cheap, bounded memory)
and notes the first token's time; the record is finished on the writer's thread.

Not responsible for attribution or storage: it hands a `PendingExchange` to its sink.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from operator import attrgetter
from typing import Any

from llmtap.protocols import ExchangeDecoder, route
from llmtap.protocols.canonical import ApiError, Exchange
from llmtap.protocols.common import parse_json
from llmtap.protocols.content import ContentDecoder
from llmtap.protocols.errors import DecodeError
from llmtap.storage.record import Recorded
from llmtap.storage.secrets import Literals, redact_headers, redact_query, scrub, scrub_record

log = logging.getLogger("llmtap.addon")


def _parsed(body: bytes) -> bytes | dict[str, Any]:
    """The request as the decoder would parse it (`parse_json`, the same rules), or the
    bytes when it is not a JSON object: the decoder then names what is wrong."""
    try:
        value = parse_json(body, "request")
    except DecodeError:
        return body
    return value if isinstance(value, dict) else body


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")  # as mitmproxy's `Headers` reads them


def _moment(timestamp: float | None) -> datetime | None:
    return datetime.fromtimestamp(timestamp, UTC) if timestamp else None


@dataclass(slots=True)
class ExchangeMeta:
    """Who, where and when, gathered on the hooks before the response ends. Anything that
    costs more than a lookup (redaction, decoding) waits for `PendingExchange.build`."""

    method: str
    host: str
    path: str  # as requested: key-bearing query parameters are redacted in `build`
    team: str
    key_fingerprint: str | None
    key_last4: str | None
    client_addr: str | None
    request_body: bytes | None
    request_headers: list[tuple[str, str]]  # redacted
    started: float
    source: str = "proxy"
    protocol: str = ""
    provider: str | None = None  # the exchange's (addon/attribution.py `provider`)
    status: int | None = None
    first_byte: float | None = None
    first_token: float | None = None
    ended: float | None = None
    retry_after_s: float | None = None
    content_type: str | None = None
    content_encoding: str | None = None
    served_tier: str | None = None  # the `x-gemini-service-tier` response header, as sent
    raw_chunks: list[bytes] | None = field(default=None)  # kept only for body mode `full`
    # mitmproxy's header fields as they were forwarded (body mode `full` only): redacted
    # into `request_headers` on the writer's thread, never stored as they are.
    raw_headers: tuple[tuple[bytes, bytes], ...] | None = field(default=None, repr=False)
    attribution: str = "none"  # the rule that named `team` (storage/teams.py)
    price_reason: str | None = None  # `unverified_host`: never priced (protocols/hosts.py)
    destination: str | None = None  # `scheme://host:port` of the server (protocols/hosts.py)
    # The exact key values the request carried: removed from its record in `build` (SPEC §4);
    # in memory until then, never stored (their repr names none of them).
    secrets: Literals | None = field(default=None, repr=False)
    # every credential the request carried, fingerprinted, the key's first (budgets count
    # them all: addon/budget_gate.py); and the budget reservation its gate made, if any
    key_fingerprints: tuple[str, ...] = ()
    tags: dict[str, str] = field(default_factory=dict)  # addon/attribution.py `Who.tags`
    reservation: int | None = None
    # The upstream gave no response: the proxy answered (addon/upstream_failure.py), and this
    # detail (`upstream_unreachable`, `upstream_timeout`) is the record's error code. The
    # record's id is then made early, for the log line that names it.
    upstream_failure: str | None = None
    record_id: str = ""

    def new_decoder(self, request: bytes | dict[str, Any] | None) -> ExchangeDecoder:
        """The incremental decoder for this exchange's response, as the headers describe it."""
        return ExchangeDecoder(
            self.protocol,
            request=request,
            path=self.path,
            host=self.host,
            status=self.status,
            content_type=self.content_type,
            content_encoding=self.content_encoding,
            provider=self.provider,
            served_tier=self.served_tier,
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # As a plain tuple of field values: a fourteenth of what pickling a slotted
        # dataclass costs by default (1 µs rather than 14, on the proxy's side).
        return (ExchangeMeta, _meta_values(self))


_meta_values = attrgetter(*(item.name for item in fields(ExchangeMeta)))


class PendingExchange:
    """What the writer's thread finishes: the decode, the route's body check, the record.

    A streamed response comes with the decoder the tee fed; a response mitmproxy held
    whole comes as `body`, and its decoder is made and fed here, off the event loop."""

    __slots__ = ("decoder", "meta", "interrupted", "body")

    def __init__(
        self,
        decoder: ExchangeDecoder | None,
        meta: ExchangeMeta,
        interrupted: str | None,
        body: bytes | None = None,
    ) -> None:
        self.decoder = decoder
        self.meta = meta
        self.interrupted = interrupted
        self.body = body

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled to be finished in the writer's process: the decoder flushes what its
        # content coding still holds first (it is done with the wire either way).
        if self.decoder is not None:
            self.decoder.end_response(self.interrupted)
        return (PendingExchange, (self.decoder, self.meta, self.interrupted, self.body))

    def build(self) -> Recorded | None:
        meta = self.meta
        request: bytes | dict[str, Any] | None = meta.request_body
        if self.decoder is None and meta.request_body:
            request = _parsed(meta.request_body)  # parsed once, for the route check and the decoder
        if meta.source == "proxy" and request is not None and route(meta.method, meta.path, request) is None:
            return None  # same path, another API's body: not a generation
        exchange = self._decoder(request).finish(self.interrupted)
        if meta.upstream_failure is not None:
            _name_failure(exchange, meta.upstream_failure)
        headers = meta.request_headers
        if meta.raw_headers is not None:
            headers = redact_headers((_text(name), _text(value)) for name, value in meta.raw_headers)
        return self._record(
            exchange,
            path=redact_query(meta.path),
            request_body=meta.request_body,
            response_body=self._response_body(),
            request_headers=headers,
        )

    def follow_up_record(self, request: bytes) -> Recorded:
        """The response decoded as the background work `request` stands for (a poll, a
        resumed stream, a cancel: addon/followups.py), with its who, when and where."""
        exchange = self._decoder(self.meta.request_body or request).finish(self.interrupted)
        return self._record(exchange, path=redact_query(self.meta.path), response_body=self._response_body())

    def salvage(self, error: str, *, bodies: bool = False) -> Recorded:
        """The record of an exchange whose `build` failed (a bug) or overran its bounds:
        who, when and where, with the failure as its decode error, rather than nothing
        (SPEC §6). Only steps that decode nothing: the query string is dropped, not
        redacted. `bodies` keeps the raw bodies too (stored only in body mode `full`,
        whence `reprocess` can decode them later): the writer process asks for them, the
        proxy's own process never does."""
        meta = self.meta
        exchange = Exchange(
            protocol=meta.protocol or "unknown", provider=meta.provider, status=meta.status, decode_error=error
        )
        path = scrub(meta.path.partition("?")[0])
        if not bodies:
            return self._record(exchange, path=path)
        return self._record(exchange, path=path, request_body=meta.request_body, response_body=self._response_body())

    def _record(self, exchange: Exchange, **parts: Any) -> Recorded:
        """The exchange with its who, when and where from the meta (and `parts`: path,
        bodies, headers), the request's own keys scrubbed from all of it."""
        meta = self.meta
        record = Recorded(
            exchange=exchange,
            id=meta.record_id,
            started_at=_moment(meta.started) or datetime.now(UTC),
            first_byte_at=_moment(meta.first_byte),
            first_token_at=_moment(meta.first_token),
            ended_at=_moment(meta.ended),
            team=meta.team,
            attribution=meta.attribution,
            price_reason=meta.price_reason,
            destination=meta.destination,
            tags=meta.tags,
            key_fingerprint=meta.key_fingerprint,
            key_last4=meta.key_last4,
            client_addr=meta.client_addr,
            source=meta.source,
            method=meta.method,
            host=meta.host,
            retry_after_s=meta.retry_after_s,
            response_content_type=meta.content_type,
            **parts,
        )
        return scrub_record(record, meta.secrets)

    def _decoder(self, request: bytes | dict[str, Any] | None) -> ExchangeDecoder:
        if self.decoder is not None:
            return self.decoder
        decoder = self.meta.new_decoder(request)
        if self.body:
            decoder.feed(self.body)
        return decoder

    def _response_body(self) -> bytes | None:
        chunks = self.meta.raw_chunks
        if chunks is None:
            return None
        raw = b"".join(chunks)
        try:
            decoder = ContentDecoder(self.meta.content_encoding)
            return decoder.decode(raw) + decoder.flush()
        except DecodeError:
            return None  # the record already says why it could not be decoded


def _name_failure(exchange: Exchange, detail: str) -> None:
    """The proxy's own answer to an upstream failure: its detail is the error's code, in
    whichever protocol's shape the answer went."""
    if exchange.error is None:
        exchange.error = ApiError(type=None, code=detail, message=None)
    else:
        exchange.error.code = detail


class StreamTee:
    """`flow.response.stream = StreamTee(...)`: sees every byte, changes none."""

    __slots__ = ("decoder", "meta", "sink", "finished", "keep_limit", "kept")

    def __init__(
        self,
        decoder: ExchangeDecoder,
        meta: ExchangeMeta,
        sink: Callable[[PendingExchange], None],
        keep_limit: int | None = None,
    ) -> None:
        self.decoder = decoder
        self.meta = meta
        self.sink = sink
        self.finished = False
        self.keep_limit = keep_limit  # bytes of raw body to keep (body mode `full`)
        self.kept = 0
        if keep_limit:
            meta.raw_chunks = []

    def __call__(self, data: bytes) -> bytes:
        try:
            if data:
                self._take(data)
            else:
                self.finish(None)
        except Exception:  # noqa: BLE001 - never let a chunk be dropped
            log.exception("llmtap: tee failure (traffic unaffected)")
        return data

    def _take(self, data: bytes) -> None:
        if self.finished:
            return
        if self.decoder.feed(data) and self.meta.first_token is None:
            self.meta.first_token = time.time()
        chunks = self.meta.raw_chunks
        if chunks is not None and self.keep_limit is not None:
            if self.kept + len(data) <= self.keep_limit:
                chunks.append(data)
                self.kept += len(data)
            else:
                self.meta.raw_chunks = None  # too big to keep: the record stays, the body not

    def finish(self, interrupted: str | None) -> None:
        """Hand the exchange over, once: at `b""`, or from the error hook."""
        if self.finished:
            return
        self.finished = True
        if interrupted and self.decoder.fold.complete:
            # SDKs hang up once they read the terminal event: the exchange itself ended.
            interrupted = None
        self.meta.ended = time.time()
        self.sink(PendingExchange(self.decoder, self.meta, interrupted))
