"""A real OTLP/HTTP traces receiver for the tests: an HTTP server on 127.0.0.1 that
decodes each POST to /v1/traces as an `ExportTraceServiceRequest` (opentelemetry-proto),
gunzipped when the exporter compressed it, and keeps every span it took, with its
attributes as plain Python values and the request's headers.

It can be told to refuse (answer 503, which an exporter retries) and be stopped and
started again on the same port (nothing listens meanwhile: connection refused); a hostile
one answers each export with a body of its own (`answer`: headers and chunks), a gzip
bomb say, after it took the spans.

Not responsible for what the spans should say (the tests are).
"""

from __future__ import annotations

import gzip
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tests.helpers import free_port


@dataclass
class Received:
    trace_id: str  # hex
    span_id: str
    parent_span_id: str
    name: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status_code: int
    resource: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def value(any_value: AnyValue) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [value(v) for v in any_value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value(kv.value) for kv in any_value.kvlist_value.values}
    return None if kind is None else getattr(any_value, kind)


Answer = tuple[dict[str, str], list[bytes]]  # headers, and the body's chunks as sent


class Receiver:
    def __init__(self, port: int | None = None, answer: Answer | None = None) -> None:
        self.port = port or free_port()
        self.answer = answer
        self.spans: list[Received] = []
        self.requests = 0
        self.refused = 0
        self.refuse = False
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/traces"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if receiver.refuse or self.path != "/v1/traces":
                    with receiver._lock:
                        receiver.refused += 1
                    self.send_response(503 if receiver.refuse else 404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest.FromString(body)
                receiver._take(request, {k.lower(): v for k, v in self.headers.items()})
                if receiver.answer is not None:
                    self._hostile(*receiver.answer)
                    return
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def _hostile(self, headers: dict[str, str], chunks: list[bytes]) -> None:
                self.send_response(200)
                for name, header in headers.items():
                    self.send_header(name, header)
                self.send_header("Content-Length", str(sum(len(chunk) for chunk in chunks)))
                self.end_headers()
                try:
                    for chunk in chunks:
                        self.wfile.write(chunk)
                except OSError:  # the exporter read what it wanted and hung up
                    pass

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's name
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def __enter__(self) -> Receiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _take(self, request: ExportTraceServiceRequest, headers: dict[str, str]) -> None:
        taken = []
        for resource_spans in request.resource_spans:
            resource = {kv.key: value(kv.value) for kv in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    taken.append(
                        Received(
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            name=span.name,
                            kind=span.kind,
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                            attributes={kv.key: value(kv.value) for kv in span.attributes},
                            status_code=span.status.code,
                            resource=resource,
                            headers=headers,
                        )
                    )
        with self._lock:
            self.requests += 1
            self.spans.extend(taken)

    def taken(self) -> list[Received]:
        with self._lock:
            return list(self.spans)

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Received]:
        """The spans, once at least `count` have arrived (AssertionError after `timeout`)."""
        deadline = time.monotonic() + timeout
        while len(self.taken()) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(self.taken())} spans arrived within {timeout}s, not {count}")
            time.sleep(0.05)
        return self.taken()
