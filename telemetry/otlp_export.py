"""Spans to an OTLP/HTTP endpoint with the OpenTelemetry SDK: a TracerProvider whose ids
are the ones otlp_spans.py derived, a BatchSpanProcessor with a bounded queue, and the
SDK's protobuf-over-HTTP exporter behind a patient one.

`send` only starts and ends a span (the processor queues it; a thread of the SDK's
exports it), so the writer never waits on the endpoint. While the endpoint is away (it
refuses, or nothing listens) a batch is retried with backoff for up to `hold_s` seconds,
and the spans behind it wait in the processor's queue, at most `max_queue` of them; more
are dropped, counted. An outage is one line in the log when it starts and one when it
ends (how long, how many were dropped), never a line per span or per retry: the SDK's own
warnings are counted and silenced. `close` flushes what is queued within a bounded time.

A collector's answer is read through `_BoundedSession`: at most `ANSWER_LIMIT` bytes as
they came off the wire, never decompressed (the SDK needs only the status and headers), so
a hostile or broken collector (a gzip bomb, an endless body) costs the writer a few KiB.

Not responsible for what a span says (otlp_spans.py) or for which exchanges to send.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import requests
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import SpanKind, Status, StatusCode

from llmtap.telemetry.otlp_config import ExportOptions
from llmtap.telemetry.otlp_spans import SpanParts

__all__ = ["ExportOptions", "ExportStats", "Sender"]

log = logging.getLogger("llmtap.telemetry")
RETRY_MAX_S = 5.0  # the longest wait between two tries of a batch the endpoint refused
ANSWER_LIMIT = 64 << 10  # bytes of a collector's answer read, as sent (an OTLP answer is a few)
# the SDK's loggers: a warning per retry, per failed batch, per span dropped
_SDK_LOGGERS = (
    "opentelemetry.sdk._shared_internal",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.common.http",
)


@dataclass
class ExportStats:
    queued: int = 0
    sent: int = 0
    dropped: int = 0  # the queue was full
    given_up: int = 0  # retried for hold_s, or still queued when close's time ran out
    outages: int = 0
    sent_after_outage: int = 0  # sent once the endpoint was back (the last outage's)


class Sender:
    """One exporting pipeline. `send` is quick and never raises for the endpoint's sake."""

    def __init__(self, options: ExportOptions) -> None:
        self.options = options
        self.stats = ExportStats()
        self._ids = _GivenIds()
        self._patient = _Patient(
            OTLPSpanExporter(
                endpoint=options.endpoint,
                headers=dict(options.headers),
                timeout=options.timeout_s,
                compression=Compression.Gzip if options.compression == "gzip" else Compression.NoCompression,
                session=_BoundedSession(),
            ),
            options,
            self.stats,
        )
        _silence_sdk(self.stats)
        self._processor = BatchSpanProcessor(
            self._patient,
            max_queue_size=options.max_queue,
            max_export_batch_size=min(options.batch_size, options.max_queue),
            schedule_delay_millis=options.delay_ms,
        )
        self._provider = TracerProvider(
            resource=Resource.create({"service.name": options.service_name}), id_generator=self._ids
        )
        self._provider.add_span_processor(self._processor)
        self._tracer = self._provider.get_tracer("llmtap")
        self._root = Context()  # no parent: each exchange a root span of its conversation's trace

    def send(self, parts: SpanParts) -> None:
        self._ids.give(parts.trace_id, parts.span_id)
        span = self._tracer.start_span(
            parts.name,
            context=self._root,
            kind=SpanKind.CLIENT,
            attributes=parts.attributes,
            start_time=parts.start_ns,
            record_exception=False,
            set_status_on_exception=False,
        )
        if parts.error:
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=parts.end_ns)
        self.stats.queued += 1

    def close(self, timeout_s: float = 10.0) -> ExportStats:
        """Sends what is queued, for at most `timeout_s` seconds; the rest is given up."""
        self._patient.closing(timeout_s)
        self._provider.shutdown()
        stats = self.stats
        # exact now: the warnings counted as drops can overcount by a span the SDK's
        # thread took between its check and its append (and a span still queued when
        # the SDK stopped waiting is not sent either)
        stats.dropped = stats.queued - stats.sent - stats.given_up
        return stats


class _BoundedSession(requests.Session):
    """A requests Session whose answers are read only in part: at most ANSWER_LIMIT bytes
    of the body as it came off the wire, never decompressed. A body within the limit is
    read whole (the connection is kept for the next export); a longer one is cut and its
    connection closed. What was read is the response's content only when uncompressed."""

    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        kwargs["stream"] = True
        response = super().request(method, url, *args, **kwargs)
        try:
            body = response.raw.read(ANSWER_LIMIT + 1, decode_content=False) or b""
        except Exception:  # noqa: BLE001 - a broken answer: the status is what counts
            body = b""
        whole = len(body) <= ANSWER_LIMIT
        encoded = response.headers.get("Content-Encoding", "identity").lower() not in ("", "identity")
        response._content = b"" if encoded else body[:ANSWER_LIMIT]
        if whole:
            response._content_consumed = True  # so close() hands the connection back for reuse
        response.close()
        return response


class _GivenIds(IdGenerator):
    """The trace and span id of the span about to start (per thread), else random ones."""

    def __init__(self) -> None:
        self._next = threading.local()
        self._random = RandomIdGenerator()

    def give(self, trace_id: int, span_id: int) -> None:
        self._next.trace_id, self._next.span_id = trace_id, span_id

    def generate_trace_id(self) -> int:
        return getattr(self._next, "trace_id", None) or self._random.generate_trace_id()

    def generate_span_id(self) -> int:
        value = getattr(self._next, "span_id", None)
        self._next.span_id = None  # one span per gift
        return value or self._random.generate_span_id()


class _Patient(SpanExporter):
    """Retries a batch the endpoint did not take, with backoff, for up to hold_s; the
    processor's thread waits here meanwhile, so later spans wait in its bounded queue."""

    def __init__(self, inner: SpanExporter, options: ExportOptions, stats: ExportStats) -> None:
        self.inner = inner
        self.options = options
        self.stats = stats
        self._wake = threading.Event()
        self._deadline: float | None = None  # set by close: no try after it
        self._down_since: float | None = None
        self._dropped_before = 0
        self._cut: threading.Timer | None = None

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        started, backoff = time.monotonic(), 0.5
        while True:
            if self._deadline is not None and time.monotonic() > self._deadline:
                break
            if self.inner.export(spans) is SpanExportResult.SUCCESS:
                self._up(len(spans))
                return SpanExportResult.SUCCESS
            self._down()
            if time.monotonic() - started > self.options.hold_s:
                break
            self._wake.wait(backoff)
            backoff = min(backoff * 2, RETRY_MAX_S)
        self.stats.given_up += len(spans)
        return SpanExportResult.FAILURE

    def closing(self, timeout_s: float) -> None:
        self._deadline = time.monotonic() + timeout_s
        self._wake.set()
        # at the deadline, a try still in its own retries is cut short (the SDK's client
        # stops waiting between retries once it is shut down)
        cut = threading.Timer(timeout_s, self.inner.shutdown)
        cut.daemon = True
        cut.start()
        self._cut = cut

    def shutdown(self) -> None:
        if self._cut is not None:
            self._cut.cancel()
        self.inner.shutdown()  # a second time after the cut only warns (silenced)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    def _down(self) -> None:
        if self._down_since is not None:
            return
        self._down_since = time.monotonic()
        self._dropped_before = self.stats.dropped
        self.stats.outages += 1
        log.warning(
            "llmtap otlp: %s does not take spans; retrying, holding up to %d spans in memory",
            self.options.shown,
            self.options.max_queue,
        )

    def _up(self, count: int) -> None:
        self.stats.sent += count
        if self._down_since is None:
            if self.stats.outages:
                self.stats.sent_after_outage += count
            return
        away = time.monotonic() - self._down_since
        self._down_since = None
        self.stats.sent_after_outage = count
        log.warning(
            "llmtap otlp: %s takes spans again after %.0f s; %d dropped while it was away",
            self.options.shown,
            away,
            self.stats.dropped - self._dropped_before,
        )


class _SdkFilter(logging.Filter):
    """Counts the SDK's 'Queue full' warnings as drops and keeps its per-retry and
    per-batch warnings out of the log (the patient exporter says it once per outage)."""

    def __init__(self, stats: ExportStats) -> None:
        super().__init__()
        self.stats = stats

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if text.startswith("Queue full"):
            self.stats.dropped += 1
        return record.levelno > logging.WARNING and not text.startswith("Failed to export")


def _silence_sdk(stats: ExportStats) -> None:
    for name in _SDK_LOGGERS:
        logger = logging.getLogger(name)
        for old in [f for f in logger.filters if isinstance(f, _SdkFilter)]:
            logger.removeFilter(old)
        # first: the SDK's own DuplicateFilter would hide the repeats this one counts
        logger.filters.insert(0, _SdkFilter(stats))
