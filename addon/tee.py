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
from dataclasses import dataclass, field
from datetime import UTC, datetime

from llmtap.protocols import ExchangeDecoder, route
from llmtap.protocols.content import ContentDecoder
from llmtap.protocols.errors import DecodeError
from llmtap.storage.record import Recorded

log = logging.getLogger("llmtap.addon")


def _moment(timestamp: float | None) -> datetime | None:
    return datetime.fromtimestamp(timestamp, UTC) if timestamp else None


@dataclass(slots=True)
class ExchangeMeta:
    """Who, where and when, gathered on the hooks before the response ends."""

    method: str
    host: str
    path: str  # redacted
    team: str
    key_fingerprint: str | None
    key_last4: str | None
    client_addr: str | None
    request_body: bytes | None
    request_headers: list[tuple[str, str]]  # redacted
    started: float
    source: str = "proxy"
    first_byte: float | None = None
    first_token: float | None = None
    ended: float | None = None
    retry_after_s: float | None = None
    content_type: str | None = None
    content_encoding: str | None = None
    raw_chunks: list[bytes] | None = field(default=None)  # kept only for body mode `full`


class PendingExchange:
    """What the writer's thread finishes: the decode, the route's body check, the record."""

    __slots__ = ("decoder", "meta", "interrupted")

    def __init__(self, decoder: ExchangeDecoder, meta: ExchangeMeta, interrupted: str | None) -> None:
        self.decoder = decoder
        self.meta = meta
        self.interrupted = interrupted

    def build(self) -> Recorded | None:
        meta = self.meta
        exchange = self.decoder.finish(self.interrupted)
        body_says_other = meta.source == "proxy" and meta.request_body is not None
        if body_says_other and route(meta.method, meta.path, meta.request_body) is None:
            return None  # same path, another API's body: not a generation
        return Recorded(
            exchange=exchange,
            started_at=_moment(meta.started) or datetime.now(UTC),
            first_byte_at=_moment(meta.first_byte),
            first_token_at=_moment(meta.first_token),
            ended_at=_moment(meta.ended),
            team=meta.team,
            key_fingerprint=meta.key_fingerprint,
            key_last4=meta.key_last4,
            client_addr=meta.client_addr,
            source=meta.source,
            method=meta.method,
            host=meta.host,
            path=meta.path,
            retry_after_s=meta.retry_after_s,
            request_body=meta.request_body,
            response_body=self._response_body(),
            response_content_type=meta.content_type,
            request_headers=meta.request_headers,
        )

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
