"""The llmtap mitmproxy addon: route each flow, tee LLM responses, hand records to the writer.

Traffic first. mitmproxy's own `Save` addon crashes on purpose when it cannot write; this
addon does the opposite: a decoder or database failure is logged and becomes a record's
`decode_error` (or waits in the spool), and the client still gets every byte as the
server sent it, when the server sent it. Hooks do O(1) work: routing by method and path,
attribution from headers, a key fingerprint, and setting the stream tee (or, for a small
body whose length is known, letting mitmproxy hold it as it would without us). Decoding
finishes, and rows are written, on the writer's thread.

Not responsible for decoding payloads (protocols), storing rows (storage), or starting
mitmproxy (see `proxy.py`).
"""

from __future__ import annotations

import gc
import logging
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from mitmproxy import ctx, http

from llmtap.addon.answering import FAILURE_KEY, TIMEOUT_OPTION, WATCH_KEY
from llmtap.addon.attribution import REFUSED_KEY, Attribution
from llmtap.addon.followups import PendingFollowUp
from llmtap.addon.tee import ExchangeMeta, PendingExchange, StreamTee
from llmtap.addon.upstream_failure import Failure, answer
from llmtap.addon.websocket import PROTOCOL, WebSocketSessions
from llmtap.protocols import route
from llmtap.protocols.exchange import SERVED_TIER_HEADER
from llmtap.protocols.followups import CONTINUES, FollowUpRoute, follow_up
from llmtap.protocols.headers import retry_after, session_headers
from llmtap.protocols.routing import may_be_json_object, websocket_protocol
from llmtap.storage.ids import new_id
from llmtap.storage.secrets import Literals, request_secrets
from llmtap.storage.sink import RecordSink

log = logging.getLogger("llmtap.addon")

META_KEY = "llmtap_meta"
WHO_KEY = "llmtap_who"  # a WebSocket upgrade's attribution, read before its headers are stripped
SECRETS_KEY = "llmtap_secrets"  # a WebSocket upgrade's key values, read before Proxy-Authorization goes
HELD_KEY = "llmtap_held"  # a small whole body left to mitmproxy (not streamed), recorded at `response`
FOLLOW_KEY = "llmtap_follow_up"  # a poll, resumed stream or cancel of background work (addon/followups.py)
SWITCH_INTERVAL = 0.001  # seconds; see `Recorder.running`
HOLD_LIMIT = 64 * 1024  # the largest Content-Length body left to mitmproxy rather than streamed
DEFAULT_KEEP = 32 * 1024 * 1024  # raw response bytes kept per exchange in body mode `full`
_SERVED_TIER = SERVED_TIER_HEADER.encode()
_WANTED = frozenset(
    (b"content-type", b"content-encoding", b"content-length", b"retry-after", b"retry-after-ms", _SERVED_TIER)
)


def _headers(fields: tuple[tuple[bytes, bytes], ...]) -> dict[bytes, str]:
    """The response headers the recorder reads, in one pass (the first of each name)."""
    found: dict[bytes, str] = {}
    for raw_name, raw_value in fields:
        name = raw_name.lower()
        if name in _WANTED and name not in found:
            found[name] = raw_value.decode("utf-8", "surrogateescape")
    return found


def _whole(found: dict[bytes, str], limit: int) -> bool:
    """A body mitmproxy may hold: its length known and small, and not an event stream."""
    length = found.get(b"content-length", "").strip()
    if not length.isdigit() or int(length) > limit:
        return False
    return "event-stream" not in (found.get(b"content-type") or "").lower()


def _request_body(request: http.Request) -> bytes | None:
    """The request body without its content coding (SDKs rarely compress requests)."""
    if not any(name.lower() == b"content-encoding" for name, _ in request.headers.fields):
        return request.raw_content
    try:
        return request.get_content(strict=True)
    except ValueError:
        return request.raw_content


# Opens the writer and attribution maps from mitmproxy's `llmtap_*` options (the
# mitmdump script passes one: llmtap.cli.mitmdump_script).
OptionsOpener = Callable[[Any], tuple[RecordSink, Attribution]]


class Recorder:
    """Add to mitmproxy as an addon; give it a started `Writer`, or a function that opens
    one from the `llmtap_*` options when mitmdump loads it as a script."""

    def __init__(
        self,
        writer: RecordSink | None = None,
        attribution: Attribution | None = None,
        open_from_options: OptionsOpener | None = None,
        on_handed: Callable[[ExchangeMeta], None] | None = None,
    ) -> None:
        """`on_handed` is told of each exchange's meta once its record is handed to the
        writer (the budget gate releases what the exchange reserved)."""
        self.writer = writer
        self.on_handed = on_handed
        self.attribution = attribution or Attribution()
        self.open_from_options = open_from_options
        self.own_writer = writer is None
        self.websockets = WebSocketSessions(self._submit)
        self.hold_limit = HOLD_LIMIT
        # `follow_ups`: polls, resumed streams and cancels of background work, which change
        # the exchange they continue and are never recorded as generations
        self.counts = {"recorded": 0, "other": 0, "interrupted": 0, "follow_ups": 0}
        self.in_flight: dict[str, http.HTTPFlow] = {}  # LLM flows whose record is not handed over yet
        self._connect_auth: dict[str, str] = {}  # client connection id -> its CONNECT's Proxy-Authorization

    # -- options (only used when loaded as a script) -------------------------------------

    def load(self, loader: Any) -> None:
        loader.add_option("llmtap_db", str, "", "SQLAlchemy URL of the llmtap store")
        loader.add_option(
            "llmtap_bodies",
            str,
            "",
            "what to keep of bodies: none, metadata, full (default: the config's, else metadata)",
        )
        loader.add_option("llmtap_home", str, "", "llmtap's folder (spool, fingerprint secret, config.toml)")
        loader.add_option("llmtap_config", str, "", "llmtap TOML config file, as `llmtap proxy --config` takes it")
        loader.add_option(
            "llmtap_listener_teams", Sequence[str], [], "PORT=TEAM: the team of a reverse listener's traffic"
        )
        loader.add_option(
            TIMEOUT_OPTION,
            float,
            0.0,
            "seconds an LLM request waits for the upstream's response headers before its client gets a 504 "
            "(0: no limit; addon/answering.py)",
        )

    def configure(self, updated: set[str]) -> None:
        if not self.own_writer or self.writer is not None or self.open_from_options is None:
            return
        if not any(name.startswith("llmtap_") for name in updated) and updated:
            return
        self.writer, self.attribution = self.open_from_options(ctx.options)

    def running(self) -> None:
        # Everything imported by now (mitmproxy, SQLAlchemy, the decoders: ~130k objects)
        # lives as long as the process; freezing it keeps the collector from walking it
        # again at every full collection, which mitmproxy's per-request garbage triggers.
        # Measured with bench/proxy_overhead.py: 6-7 % more requests/s at concurrency 16.
        gc.freeze()
        # A writer thread (the in-process `Writer`) shares the GIL with mitmproxy's event
        # loop; a thread that wants it back waits up to the switch interval (5 ms by
        # default) before asking. 1 ms bounds what such a thread can add to a response
        # (with a busy writer, the loop's longest stall was 9-34 ms at 5 ms, 2-7 ms at 1 ms).
        if sys.getswitchinterval() > SWITCH_INTERVAL:
            sys.setswitchinterval(SWITCH_INTERVAL)

    def done(self) -> None:
        # Flows still open at shutdown get neither `b""` nor an error hook: record them
        # as cut short, so a SIGTERM loses nothing that was under way.
        for flow in list(self.in_flight.values()):
            self._finish_cut(flow, "the proxy shut down before the response ended")
        self.in_flight.clear()
        self.websockets.close_all()
        if self.writer is not None:
            self.writer.close()  # which says what it could not write in time, and where it is
            log.info("llmtap: %s", self.counts)

    # -- HTTP --------------------------------------------------------------------------------

    def http_connect(self, flow: http.HTTPFlow) -> None:
        # HTTPS through the proxy: its password rides the CONNECT only, which drops it
        auth = flow.request.headers.get("proxy-authorization")
        if auth:
            self._connect_auth[flow.client_conn.id] = auth
        self.attribution.remember_connect(flow)

    def client_disconnected(self, client: Any) -> None:
        self._connect_auth.pop(client.id, None)
        self.attribution.forget(client)

    def request(self, flow: http.HTTPFlow) -> None:
        # Routed here rather than at `requestheaders`: one hook fewer for mitmproxy to
        # dispatch on every request, and nothing before this needs the route.
        protocol = route(flow.request.method, flow.request.path)
        if flow.metadata.get(REFUSED_KEY):  # answered by the proxy itself (a 407 from auth.py): no exchange
            self.counts["other"] += 1
            self.attribution.strip(flow)
            return
        if protocol is None:
            continued = follow_up(flow.request.method, flow.request.path)
            if continued is not None:
                self._follow(flow, continued)
                return
            socket_protocol = websocket_protocol(flow.request.path)
            if socket_protocol is None:
                self.counts["other"] += 1
            else:
                # A possible WebSocket upgrade: `websocket_start` comes after forwarding,
                # when X-LLMTap-Team is gone. `identify` strips it, as below.
                flow.metadata[SECRETS_KEY] = self._secrets(flow)
                flow.metadata[WHO_KEY] = self.attribution.identify(flow, socket_protocol)
            self.attribution.strip(flow)  # never forward our own headers upstream
            return
        request = flow.request
        body = _request_body(request)
        if not may_be_json_object(body):  # a form post, or no body: not a generation (SPEC §1)
            self.counts["other"] += 1
            self.attribution.strip(flow)
            return
        self._track(
            flow,
            protocol,
            body,
            # only a client's session-id header (conversation identity, storage/threads.py);
            # body mode `full` keeps every header, redacted, from raw_headers instead
            session_headers(request.headers.fields),
            raw_headers=request.headers.fields if self._keep_bodies() else None,
        )

    def _track(
        self,
        flow: http.HTTPFlow,
        protocol: str,
        request_body: bytes | None,
        request_headers: list[tuple[str, str]],
        raw_headers: tuple[tuple[bytes, bytes], ...] | None = None,
    ) -> None:
        """Start the flow's `ExchangeMeta` (who, where, when) for its response hooks."""
        request = flow.request
        secrets = self._secrets(flow)  # before `identify` strips Proxy-Authorization
        who = self.attribution.identify(flow, protocol)
        flow.metadata[META_KEY] = ExchangeMeta(
            method=request.method,
            # the server mitmproxy talks to (`pretty_host` re-validates the Host header: half this hook's time)
            host=request.host,
            path=request.path,
            team=who.team,
            key_fingerprint=who.key_fingerprint,
            key_fingerprints=who.key_fingerprints,
            key_last4=who.key_last4,
            client_addr=who.client_addr,
            request_body=request_body,
            request_headers=request_headers,
            raw_headers=raw_headers,
            started=request.timestamp_start or time.time(),
            protocol=protocol,
            provider=self.attribution.provider(flow, protocol),
            attribution=who.attribution,
            price_reason=who.price_reason,
            destination=who.destination,
            tags=who.tags,
            secrets=secrets,
        )
        self.in_flight[flow.id] = flow
        flow.metadata[WATCH_KEY] = True  # the upstream timeout applies (addon/answering.py)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        """Tee the response, unless mitmproxy may hold it: a small body whose length is
        known up front (a JSON answer) is whole before it is worth reading, and streaming
        it costs mitmproxy a quarter to a third more CPU per request (bench/proxy_overhead.py).
        Event streams, bodies of unknown length and big bodies are always streamed."""
        meta: ExchangeMeta | None = flow.metadata.get(META_KEY)
        if meta is None or flow.response is None:
            return
        response = flow.response
        meta.first_byte = response.timestamp_start or time.time()
        meta.status = response.status_code
        found = _headers(response.headers.fields)
        meta.content_type = found.get(b"content-type")
        meta.content_encoding = found.get(b"content-encoding")
        meta.retry_after_s = retry_after(found.get(b"retry-after"), found.get(b"retry-after-ms"))
        meta.served_tier = found.get(_SERVED_TIER)
        if not response.stream and _whole(found, self.hold_limit):  # (stream_large_bodies may have said stream)
            flow.metadata[HELD_KEY] = True
            return
        decoder = meta.new_decoder(meta.request_body)
        keep = DEFAULT_KEEP if self._keep_bodies() else None
        response.stream = StreamTee(decoder, meta, self._sink(flow), keep_limit=keep)

    def response(self, flow: http.HTTPFlow) -> None:
        """Runs after the tee's `b""` (the client's end of stream waits for it) or, for a
        held body, before mitmproxy sends it: O(1) either way, decoding is the writer's."""
        self.in_flight.pop(flow.id, None)
        tee = self._tee(flow)
        if tee is not None:
            if not tee.finished:
                # A response with no body is never streamed: the tee saw nothing.
                if flow.response is not None and flow.response.raw_content:
                    tee(flow.response.raw_content)
                tee.finish(None)
            return
        meta: ExchangeMeta | None = flow.metadata.get(META_KEY)
        if meta is None or not flow.metadata.pop(HELD_KEY, False) or flow.response is None:
            return
        body = flow.response.raw_content
        meta.ended = time.time()
        if body is not None and self._keep_bodies() and len(body) <= DEFAULT_KEEP:
            meta.raw_chunks = [body]
        flow.metadata.pop(META_KEY, None)
        self._sink(flow)(PendingExchange(None, meta, None, body=body))

    def error(self, flow: http.HTTPFlow) -> None:
        """A client or server disconnect skips the `b""` call: finish the partial record.
        An upstream that gave no response at all (addon/answering.py named the failure)
        is answered instead, in the protocol's error shape, and recorded with it."""
        self.in_flight.pop(flow.id, None)
        failed: Failure | None = flow.metadata.get(FAILURE_KEY)
        meta: ExchangeMeta | None = flow.metadata.get(META_KEY)
        # (the body's shape is checked here, on the loop: a rare event, and an answer in an
        # LLM API's shape to a request of another API sharing the path would mislead)
        if failed is not None and meta is not None and flow.response is None and self._generation(meta):
            self._answer_failure(flow, meta, failed)
            return
        self._finish_cut(flow, flow.error.msg if flow.error else "connection closed")

    @staticmethod
    def _generation(meta: ExchangeMeta) -> bool:
        body = meta.request_body
        return body is None or body is CONTINUES or route(meta.method, meta.path, body) is not None

    def _answer_failure(self, flow: http.HTTPFlow, meta: ExchangeMeta, failed: Failure) -> None:
        """The client's 502 or 504, the exchange recorded with it, and one line on stderr."""
        status, body, headers = answer(meta.protocol, failed)
        flow.response = http.Response.make(status, body, headers)
        flow.metadata.pop(META_KEY, None)
        meta.status = status
        meta.content_type = headers["content-type"]
        meta.ended = time.time()
        meta.upstream_failure = failed.detail
        meta.record_id = new_id(int(meta.started * 1000))
        if self._keep_bodies():
            meta.raw_chunks = [body]
        continued: FollowUpRoute | None = flow.metadata.get(FOLLOW_KEY)
        if continued is None:
            self._submit(PendingExchange(None, meta, None, body=body))
            recorded = f"recorded as {meta.record_id}" if self.writer is not None else "not recorded (no writer)"
        else:  # a poll that reached nobody changes nothing of the work it continues
            recorded = "not recorded (a follow-up of background work)"
        # on stderr, as the proxy's other words for a person (mitmproxy's log goes to stdout)
        print(f"{failed.message()} -> {status} to the client, {recorded}", file=sys.stderr, flush=True)

    def _finish_cut(self, flow: http.HTTPFlow, message: str) -> None:
        tee = self._tee(flow)
        if tee is not None:
            if not tee.finished:
                self.counts["interrupted"] += 1
                tee.finish(message)
            return
        meta: ExchangeMeta | None = flow.metadata.pop(META_KEY, None)
        if meta is not None:  # no response at all (upstream unreachable), or a held one cut short
            flow.metadata.pop(HELD_KEY, None)
            meta.ended = time.time()
            self.counts["interrupted"] += 1
            self._sink(flow)(PendingExchange(None, meta, message))

    # -- background work: polls, resumed streams, cancels (SPEC §1) -----------------------

    def _follow(self, flow: http.HTTPFlow, continued: FollowUpRoute) -> None:
        """Tee or hold its response as an exchange's; the writer applies it to the
        exchange it continues (storage/followups.py) rather than storing a row."""
        flow.metadata[FOLLOW_KEY] = continued
        self._track(flow, continued.protocol, CONTINUES, [])  # decoded as the background work it continues

    def _sink(self, flow: http.HTTPFlow) -> Callable[[PendingExchange], None]:
        """Where a flow's finished response goes: the writer, as an exchange or a follow-up."""
        continued: FollowUpRoute | None = flow.metadata.get(FOLLOW_KEY)
        return self._submit if continued is None else partial(self._submit_follow_up, continued)

    def _submit_follow_up(self, continued: FollowUpRoute, pending: PendingExchange) -> None:
        if self.writer is None:
            log.error("llmtap: no writer configured; background follow-up not applied")
            return
        self.counts["follow_ups"] += 1
        self.writer.submit(PendingFollowUp(continued, pending))

    # -- WebSocket (OpenAI Responses WebSocket mode) ---------------------------------------

    def websocket_start(self, flow: http.HTTPFlow) -> None:
        if websocket_protocol(flow.request.path) is not None:
            secrets = flow.metadata.pop(SECRETS_KEY, None) or self._secrets(flow)
            who = flow.metadata.pop(WHO_KEY, None) or self.attribution.identify(flow, PROTOCOL)
            self.websockets.start(flow, who, secrets, provider=self.attribution.provider(flow, PROTOCOL))

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        self.websockets.message(flow)

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        self.websockets.end(flow)

    # -- plumbing --------------------------------------------------------------------------

    @staticmethod
    def _tee(flow: http.HTTPFlow) -> StreamTee | None:
        stream = flow.response.stream if flow.response is not None else None
        return stream if isinstance(stream, StreamTee) else None

    def _secrets(self, flow: http.HTTPFlow) -> Literals:
        """The exact key values this request carried, to scrub from its record."""
        request = flow.request
        path = request.path
        return request_secrets(
            request.headers.fields,
            path.partition("?")[2],
            proxy_auth=self._connect_auth.get(flow.client_conn.id),
        )

    def _keep_bodies(self) -> bool:
        return self.writer is not None and self.writer.body_mode == "full"

    def _submit(self, pending: PendingExchange) -> None:
        if self.writer is None:
            log.error("llmtap: no writer configured; exchange not recorded")
            return
        self.counts["recorded"] += 1
        self.writer.submit(pending)
        if self.on_handed is not None:
            self.on_handed(pending.meta)
