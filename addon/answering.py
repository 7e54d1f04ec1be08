"""Let the `error` hook answer a request whose upstream gave no response, and give up on an
upstream that does not answer in time: the part of mitmproxy 12's HTTP layer llmtap
extends so that an unreachable, refusing or silent upstream is a 502 or 504 the client
can read (addon/upstream_failure.py), not a connection closed without a word.

mitmproxy 12.3 sends its own `502 Bad Gateway` (text/html) after the `error` hook of a
failed server connection, whatever the hook did (setting `flow.response` there is
mitmproxy/mitmproxy#7999, open), and it has no timeout for a response, only `tcp_timeout`
for a connection idle as a whole (600 s), after which the client's connection is closed
with nothing sent. So each HTTP layer mitmproxy picks is made an `AnsweringHttpLayer`
(`next_layer` hook), whose streams:

- on a server-side failure before any response (the connection failed, or closed before
  response headers came), name the failure on the flow (`FAILURE_KEY`), run the `error`
  hook as mitmproxy would, and send the hook's `flow.response` if it set one; if not,
  mitmproxy's own 502 goes, as before;
- for a flow marked `WATCH_KEY` (an LLM exchange the recorder tracks), ask for a wakeup
  `llmtap_upstream_timeout` seconds after the request goes upstream (0: never); if no
  response headers came by then, drop the upstream's stream (its connection, in HTTP/1)
  and fail the flow as above, with a timeout as its failure.

The connection must be made in the HTTP layer for a flow to exist when it fails: with
mitmproxy's default `connection_strategy=eager`, a reverse listener connects upstream as
the client connects and closes the client's connection when that fails, before any
request is read. So an HTTP(S) reverse listener's connections connect when a request
needs it (`LazyReverseProxy`, swapped in at `client_connected` through the proxyserver's
`connections`, as mitmproxy's own `inject` commands find a connection). The global option
stays as it is: `lazy` everywhere would also stop the regular proxy from mirroring the
upstream's TLS ALPN to its clients (an HTTP/1.1-only upstream would be HTTP/2 to curl).
A regular proxy's HTTPS request whose CONNECT cannot reach the upstream gets mitmproxy's
502 to the CONNECT, as before: no LLM request was read to shape an answer for.

Not responsible for what the answer says or whether there is one (the recorder's `error`
hook decides, with upstream_failure.py).
"""

from __future__ import annotations

import time
from typing import Any

from mitmproxy import ctx
from mitmproxy import flow as mflow
from mitmproxy.connection import Client
from mitmproxy.proxy import commands, events, layer
from mitmproxy.proxy.layers.http import DropStream, HttpErrorHook, HttpLayer, HttpStream, SendHttp
from mitmproxy.proxy.layers.http._events import (
    ErrorCode,
    RequestProtocolError,
    ResponseData,
    ResponseHeaders,
    ResponseProtocolError,
)
from mitmproxy.proxy.layers.modes import ReverseProxy
from mitmproxy.proxy.mode_specs import ReverseMode

from llmtap.addon.upstream_failure import failure, timed_out

FAILURE_KEY = "llmtap_upstream_failure"  # flow.metadata: the Failure, once the upstream failed
WATCH_KEY = "llmtap_watch"  # flow.metadata: True for a flow the upstream timeout applies to
TIMEOUT_OPTION = "llmtap_upstream_timeout"
TICK = 5.0  # seconds: the longest single wakeup of the upstream timeout (see `_arm`)


class AnsweringStream(HttpStream):
    """An `HttpStream` whose server-side failures the `error` hook may answer."""

    _deadline: commands.RequestWakeup | None = None  # the wakeup this stream waits for
    _timeout: float = 0.0  # seconds, as the option said when the request went upstream
    _give_up_at: float = 0.0  # time.monotonic() past which no response headers is a timeout

    def passthrough(self, event: events.Event) -> layer.CommandGenerator[None]:
        if isinstance(event, events.Wakeup) and event.command is self._deadline:
            return  # upgraded (a WebSocket): the response came
        yield from super().passthrough(event)

    def _handle_event(self, event: events.Event) -> layer.CommandGenerator[None]:
        if self._deadline is not None and isinstance(event, events.Wakeup) and event.command is self._deadline:
            self._deadline = None
            yield from self._tick()
            return
        yield from super()._handle_event(event)

    def make_server_connection(self) -> layer.CommandGenerator[bool]:
        seconds = float(getattr(self.context.options, TIMEOUT_OPTION, 0) or 0)
        if seconds > 0 and self.flow.metadata.get(WATCH_KEY):
            self._timeout, self._give_up_at = seconds, time.monotonic() + seconds
            yield from self._arm()
        return (yield from super().make_server_connection())

    def _arm(self) -> layer.CommandGenerator[None]:
        # mitmproxy cannot cancel a wakeup: each is a task until it fires. In steps of at most
        # TICK seconds, one that is no longer needed ends soon after the response came, so a
        # busy keep-alive connection holds a few, not one per request of the last 10 minutes.
        self._deadline = commands.RequestWakeup(max(min(self._give_up_at - time.monotonic(), TICK), 0.001))
        yield self._deadline

    def _tick(self) -> layer.CommandGenerator[None]:
        if self.flow.response is not None or self.server_state != self.state_wait_for_response_headers:
            return  # answered, or failed already
        if time.monotonic() < self._give_up_at:
            yield from self._arm()
            return
        request = self.flow.request
        self.flow.metadata[FAILURE_KEY] = found = timed_out(request.host, request.port, self._timeout)
        yield from self.handle_protocol_error(
            ResponseProtocolError(self.stream_id, found.message(), ErrorCode.GENERIC_SERVER_ERROR)
        )
        # the upstream may still be working on it: stop waiting (HTTP/1 closes the connection)
        yield SendHttp(RequestProtocolError(self.stream_id, found.message(), ErrorCode.CANCEL), self.context.server)

    def handle_protocol_error(
        self, event: RequestProtocolError | ResponseProtocolError
    ) -> layer.CommandGenerator[None]:
        answerable = (
            isinstance(event, ResponseProtocolError)
            and self.flow.response is None
            and self.client_state == self.state_done  # the whole request read: a response may follow
            and self.server_state not in (self.state_done, self.state_errored)
        )
        if not answerable:
            yield from super().handle_protocol_error(event)
            return
        request = self.flow.request
        if FAILURE_KEY not in self.flow.metadata:
            self.flow.metadata[FAILURE_KEY] = failure(request.host, request.port, event.message)
        self.flow.error = mflow.Error(event.message)
        yield HttpErrorHook(self.flow)
        if (yield from self.check_killed(False)):
            return
        if self.flow.response is None:  # nobody answered: mitmproxy's own 502, as without llmtap
            self.server_state = self.state_errored
            yield SendHttp(event, self.context.client)
            self.flow.live = False
            yield DropStream(self.stream_id)
            return
        yield from self._send_answer()

    def _send_answer(self) -> layer.CommandGenerator[None]:
        """The hook's response to the client, as mitmproxy sends one an addon made (without
        a `response` hook: this flow had its `error`)."""
        response = self.flow.response
        assert response is not None
        now = time.time()
        response.timestamp_start = response.timestamp_start or now
        response.timestamp_end = now
        self.server_state = self.state_done
        content = response.raw_content
        yield SendHttp(ResponseHeaders(self.stream_id, response, not content), self.context.client)
        if content:
            yield SendHttp(ResponseData(self.stream_id, content), self.context.client)
        yield from self.flow_done()


class AnsweringHttpLayer(HttpLayer):
    """An `HttpLayer` whose streams are `AnsweringStream`s."""

    def make_stream(self, stream_id: int) -> layer.CommandGenerator[None]:
        context = self.context.fork()
        self.streams[stream_id] = AnsweringStream(context, stream_id)
        yield from self.event_to_child(self.streams[stream_id], events.Start())


class LazyReverseProxy(ReverseProxy):
    """A reverse listener's connection that connects upstream when a request needs it
    (what `connection_strategy=lazy` does), for the HTTP schemes: a `tcp` or `tls`
    listener may wait for a server's greeting, and stays eager."""

    def finish_start(self) -> layer.CommandGenerator[str | None]:
        spec = self.context.client.proxy_mode
        if not (isinstance(spec, ReverseMode) and spec.scheme in ("http", "https")):
            return (yield from super().finish_start())
        self._handle_event = self.child_layer.handle_event
        yield from self.child_layer.handle_event(events.Start())
        return None


class UpstreamAnswers:
    """The addon that makes mitmproxy's HTTP layers ours (the recorder declares
    `llmtap_upstream_timeout`: a plain mitmdump knows it from the script's first addon)."""

    def client_connected(self, client: Client) -> None:
        if not isinstance(client.proxy_mode, ReverseMode):
            return
        server = ctx.master.addons.get("proxyserver")
        handler = getattr(server, "connections", {}).get(client.id)
        top = getattr(handler, "layer", None)
        if type(top) is ReverseProxy:
            top.__class__ = LazyReverseProxy  # not started yet: it starts after this hook

    def next_layer(self, nextlayer: layer.NextLayer) -> None:
        if nextlayer.layer is None:
            # A script's addons run before mitmproxy's own `next_layer` addon: decide now, as it
            # would (it leaves a layer another addon has set alone).
            chooser = ctx.master.addons.get("nextlayer")
            if chooser is not None:
                chooser.next_layer(nextlayer)
        node: Any = nextlayer.layer
        while node is not None:
            if type(node) is HttpLayer:
                node.__class__ = AnsweringHttpLayer  # not started yet: only its streams differ
            node = getattr(node, "child_layer", None)
