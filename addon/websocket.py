"""OpenAI Responses WebSocket mode: one socket, many responses, each an exchange.

The client sends `response.create` messages; the server answers with the same events as
the SSE stream, as text frames. mitmproxy hands each whole message to `websocket_message`
and forwards it only after the hook returns, so the work here is one JSON parse and a
fold step per message. `flow.websocket.messages` grows for the socket's life; it is
trimmed to the newest message.

Each response is recorded like an HTTP exchange of the same listener: its provider is the
reverse listener's (else the one its host names), its host the server mitmproxy talks to,
and its status the upgrade's (101), since its frames carry no status of their own; an
`error` event is the record's error, as in an SSE stream.

A `response.create` the budget gate refused (addon/budget_gate.py) is never forwarded; it
is recorded as an exchange of its own, status 429, its error the gate's `error` event.

Not responsible for attribution (done once at the upgrade), budgets or storage.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from mitmproxy import http

from llmtap.addon.attribution import Who
from llmtap.addon.tee import ExchangeMeta, PendingExchange
from llmtap.protocols import ExchangeDecoder
from llmtap.protocols.openai_responses import TERMINAL
from llmtap.storage.secrets import Literals, redact_headers, redact_query

log = logging.getLogger("llmtap.addon")
KEEP_MESSAGES = 1


PROTOCOL = "openai.responses"
SWITCHING_PROTOCOLS = 101  # the upgrade's status, when mitmproxy has not kept the response
REFUSED = 429  # the status of a response.create the budget gate refused (addon/budget_gate.py)


@dataclass
class _Session:
    who: Who
    host: str
    path: str
    headers: list[tuple[str, str]]
    provider: str | None = None  # as the recorder names HTTP exchanges (addon/attribution.py)
    status: int = SWITCHING_PROTOCOLS
    decoder: ExchangeDecoder | None = None
    meta: ExchangeMeta | None = None
    secrets: Literals | None = None  # the upgrade's key values, scrubbed from each response's record
    reservation: int | None = None  # the budget gate's, for the response.create it just admitted


class WebSocketSessions:
    def __init__(self, sink: Callable[[PendingExchange], None]) -> None:
        self.sink = sink
        self.sessions: dict[str, _Session] = {}

    def start(
        self, flow: http.HTTPFlow, who: Who, secrets: Literals | None = None, provider: str | None = None
    ) -> None:
        """`provider` is the exchange's, as the recorder names HTTP exchanges."""
        status = flow.response.status_code if flow.response is not None else SWITCHING_PROTOCOLS
        self.sessions[flow.id] = _Session(
            who=who,
            host=flow.request.host,  # the server mitmproxy talks to, as for HTTP exchanges
            path=redact_query(flow.request.path),
            headers=redact_headers(flow.request.headers.items(multi=True)),
            provider=provider,
            status=status,
            secrets=secrets,
        )

    def message(self, flow: http.HTTPFlow) -> None:
        session = self.sessions.get(flow.id)
        if session is None or flow.websocket is None or not flow.websocket.messages:
            return
        message = flow.websocket.messages[-1]
        try:
            # a message the budget gate dropped (and recorded) or the proxy injected (its
            # refusal) belongs to no response of the session
            if message.is_text and not message.dropped and not message.injected:
                self._handle(session, message.content, message.from_client, message.timestamp)
        except Exception:  # noqa: BLE001 - the socket's traffic comes first
            log.exception("llmtap: websocket message not recorded (traffic unaffected)")
        if len(flow.websocket.messages) > KEEP_MESSAGES:
            del flow.websocket.messages[:-KEEP_MESSAGES]

    def _handle(self, session: _Session, content: bytes, from_client: bool, at: float) -> None:
        try:
            event = json.loads(content)
        except (ValueError, RecursionError):
            event = None
        if from_client:
            if isinstance(event, dict) and event.get("type") == "response.create":
                self._finish(session, "a new response.create arrived first")
                self._begin(session, content, at)
            return
        if session.decoder is None or session.meta is None:
            return
        if session.meta.first_byte is None:
            session.meta.first_byte = at
        if session.decoder.feed_message(event) and session.meta.first_token is None:
            session.meta.first_token = at
        if isinstance(event, dict) and event.get("type") in (*TERMINAL, "error"):
            self._finish(session, None)

    def _begin(self, session: _Session, request: bytes, at: float) -> None:
        session.decoder = self._decoder(session, request, session.status)
        session.meta = self._meta(session, request, at, session.status)
        session.meta.reservation, session.reservation = session.reservation, None

    def refused(self, session: _Session, request: bytes, answer: bytes, at: float) -> None:
        """A `response.create` the budget gate answered itself (`answer`, an `error` event)
        and never forwarded: an exchange of its own, status 429 as an HTTP refusal has,
        that leaves the session's response in flight, if any, alone."""
        decoder = self._decoder(session, request, REFUSED)
        meta = self._meta(session, request, at, REFUSED)
        meta.first_byte = meta.ended = time.time()
        decoder.feed_message(json.loads(answer))
        self.sink(PendingExchange(decoder, meta, None))

    @staticmethod
    def _decoder(session: _Session, request: bytes, status: int) -> ExchangeDecoder:
        return ExchangeDecoder(
            PROTOCOL, request=request, path=session.path, host=session.host, status=status, provider=session.provider
        )

    @staticmethod
    def _meta(session: _Session, request: bytes, at: float, status: int) -> ExchangeMeta:
        meta = ExchangeMeta(
            method="WS",
            host=session.host,
            path=session.path,
            protocol=PROTOCOL,
            provider=session.provider,
            status=status,
            team=session.who.team,
            key_fingerprint=session.who.key_fingerprint,
            key_fingerprints=session.who.key_fingerprints,
            key_last4=session.who.key_last4,
            client_addr=session.who.client_addr,
            request_body=None,
            request_headers=session.headers,
            started=at,
            source="websocket",
            secrets=session.secrets,
            attribution=session.who.attribution,
            price_reason=session.who.price_reason,
            destination=session.who.destination,
        )
        meta.request_body = request
        return meta

    def _finish(self, session: _Session, interrupted: str | None) -> None:
        if session.decoder is None or session.meta is None:
            return
        session.meta.ended = time.time()
        self.sink(PendingExchange(session.decoder, session.meta, interrupted))
        session.decoder = session.meta = None

    def end(self, flow: http.HTTPFlow) -> None:
        session = self.sessions.pop(flow.id, None)
        if session is not None:
            self._finish(session, "the websocket closed before the response ended")

    def close_all(self) -> None:
        for session in self.sessions.values():
            self._finish(session, "the proxy shut down before the response ended")
        self.sessions.clear()
