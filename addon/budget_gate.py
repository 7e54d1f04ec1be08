"""The budget gate as mitmproxy addons: a generation whose estimate does not fit its team's
or one of its keys' budgets is answered by the proxy itself, in the protocol's own error
shape, and never reaches the provider; one that fits reserves its estimate until its
record is handed to the writer and counted (the gate: llmtap.telemetry.budget_gate).

- HTTP (`BudgetGate`, after the recorder in the `request` hook): it reads the team and
  every key fingerprint the recorder's attribution found (`ExchangeMeta`), so both agree
  on who sent a request and on the [auth] check before it; a refusal is HTTP 429, and is
  recorded like any response (mitmproxy calls `responseheaders` and `response` for a
  response an addon made). A WebSocket upgrade is refused the same way while a limit is
  reached: its `response.create` messages are each admitted on their own.
- WebSocket (`WebSocketBudgetGate`, before the recorder in `websocket_message`): each
  `response.create` is admitted or refused before the recorder starts its exchange. A
  refused one is dropped (never forwarded), answered with a Responses `error` event, and
  recorded as an exchange of its own (addon/websocket.py).

Background follow-ups (polls, resumed streams, cancels of work already started) are let
through: they continue work admitted before. The gate answers from memory: no I/O on the
event loop. A gate that fails (a bug) lets the request through and says so once per
request in the log: traffic first.

Not responsible for knowing who is over budget, estimates, or the refusal's shape (the
gate).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from mitmproxy import ctx, http

from llmtap.addon.recorder import FOLLOW_KEY, META_KEY, WHO_KEY
from llmtap.addon.tee import ExchangeMeta
from llmtap.addon.websocket import PROTOCOL, WebSocketSessions
from llmtap.protocols.routing import websocket_protocol

log = logging.getLogger("llmtap.addon")

Refusal = tuple[int, list[tuple[str, str]], bytes]  # status, headers, body


class Gate(Protocol):
    """What the CLI hands in (llmtap.telemetry.budget_gate.ProxyGate)."""

    def admit(
        self, *, team: str | None, fingerprints: Sequence[str], protocol: str, path: str, host: str | None,
        body: bytes | None, provider: str | None = None, price_reason: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> tuple[Refusal | None, int | None]: ...  # fmt: skip

    def admit_message(
        self, *, team: str | None, fingerprints: Sequence[str], protocol: str, path: str, host: str | None,
        body: bytes, provider: str | None = None, price_reason: str | None = None, stream_id: Any = None,
        tags: Mapping[str, str] | None = None,
    ) -> tuple[bytes | None, int | None]: ...  # fmt: skip

    def over(
        self, *, team: str | None, fingerprints: Sequence[str], protocol: str, path: str,
        tags: Mapping[str, str] | None = None,
    ) -> Refusal | None: ...  # fmt: skip

    def ended(self, token: int) -> None: ...


def _fingerprints(meta: ExchangeMeta) -> tuple[str, ...]:
    if meta.key_fingerprints:
        return meta.key_fingerprints
    return (meta.key_fingerprint,) if meta.key_fingerprint else ()


def _answer(flow: http.HTTPFlow, refusal: Refusal) -> None:
    status, headers, body = refusal
    flow.response = http.Response.make(status, body, dict(headers))


class BudgetGate:
    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self.refused = 0

    def handed(self, meta: ExchangeMeta) -> None:
        """The recorder handed this exchange's record to the writer (`Recorder.on_handed`)."""
        if meta.reservation is not None:
            self.gate.ended(meta.reservation)

    def websockets(self, sessions: WebSocketSessions) -> WebSocketBudgetGate:
        """The addon to add before the recorder, for its WebSocket sessions."""
        return WebSocketBudgetGate(self, sessions)

    def request(self, flow: http.HTTPFlow) -> None:
        if flow.response is not None or FOLLOW_KEY in flow.metadata:
            return
        meta: ExchangeMeta | None = flow.metadata.get(META_KEY)
        try:
            if meta is None:
                self._upgrade(flow)
                return
            refusal, token = self.gate.admit(
                team=meta.team, fingerprints=_fingerprints(meta), protocol=meta.protocol, path=meta.path,
                host=meta.host, body=meta.request_body, provider=meta.provider, price_reason=meta.price_reason,
                tags=meta.tags,
            )  # fmt: skip
        except Exception:  # noqa: BLE001 - a gate's bug never stops traffic
            log.exception("llmtap: the budget gate failed; request let through")
            return
        if refusal is not None:
            _answer(flow, refusal)
            self.refused += 1
        else:
            meta.reservation = token

    def _upgrade(self, flow: http.HTTPFlow) -> None:
        """A WebSocket upgrade (the recorder noted who sent it) while a limit is reached."""
        who = flow.metadata.get(WHO_KEY)
        request = flow.request
        protocol = websocket_protocol(request.path)
        if who is None or protocol is None or request.headers.get("upgrade", "").lower() != "websocket":
            return
        refusal = self.gate.over(
            team=who.team, fingerprints=who.key_fingerprints, protocol=protocol, path=request.path, tags=who.tags
        )
        if refusal is not None:
            _answer(flow, refusal)
            self.refused += 1

    def done(self) -> None:
        if self.refused:
            log.info("llmtap: %d requests refused over budget", self.refused)


class WebSocketBudgetGate:
    """Before the recorder: admits or refuses each `response.create` of a session the
    recorder follows (its who, host and path are the session's)."""

    def __init__(self, parent: BudgetGate, sessions: WebSocketSessions) -> None:
        self.parent = parent
        self.sessions = sessions

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        session = self.sessions.sessions.get(flow.id)
        if session is None or flow.websocket is None or not flow.websocket.messages:
            return
        message = flow.websocket.messages[-1]
        if (
            not message.from_client
            or message.injected
            or not message.is_text
            or b"response.create" not in message.content
        ):
            return
        try:
            event = json.loads(message.content)
            if not isinstance(event, dict) or event.get("type") != "response.create":
                return
            who = session.who
            refusal, token = self.parent.gate.admit_message(
                team=who.team, fingerprints=who.key_fingerprints, protocol=PROTOCOL, path=session.path,
                host=session.host, body=message.content, provider=session.provider, price_reason=who.price_reason,
                stream_id=event.get("stream_id"), tags=who.tags,
            )  # fmt: skip
        except (ValueError, RecursionError):
            return
        except Exception:  # noqa: BLE001 - a gate's bug never stops traffic
            log.exception("llmtap: the budget gate failed; response.create let through")
            return
        if refusal is None:
            session.reservation = token  # the recorder puts it on the exchange it starts next
            return
        message.drop()
        ctx.master.commands.call("inject.websocket", flow, True, refusal, True)
        self.sessions.refused(session, message.content, refusal, message.timestamp)
        self.parent.refused += 1
