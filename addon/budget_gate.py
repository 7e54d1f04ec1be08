"""The budget gate as a mitmproxy addon: a generation from a team (or key) over its
budget is answered by the proxy itself, HTTP 429 in the protocol's own error shape, and
never reaches the provider.

It runs after the recorder in the `request` hook and reads the team and key fingerprint
the recorder's attribution found (`ExchangeMeta`), so both agree on who sent a request
and on the [auth] check before it. The refusal is recorded like any response: mitmproxy
calls `responseheaders` and `response` for a response an addon made, and the recorder
stores the exchange (status 429, the error type of the body). The gate answers from
memory (the CLI's `gate`, llmtap.telemetry.budgets): no I/O on the event loop.

Background follow-ups (polls, resumed streams, cancels of work already started) and
WebSocket sessions are let through: only new generations are refused.

Not responsible for knowing who is over budget or for the refusal's shape (the gate).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from mitmproxy import http

from llmtap.addon.recorder import FOLLOW_KEY, META_KEY
from llmtap.addon.tee import ExchangeMeta

log = logging.getLogger("llmtap.addon")

# (team, key fingerprint, protocol, path) -> None, or (status, headers, body)
Gate = Callable[[str | None, str | None, str | None, str], Any]


class BudgetGate:
    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self.refused = 0

    def request(self, flow: http.HTTPFlow) -> None:
        meta: ExchangeMeta | None = flow.metadata.get(META_KEY)
        if meta is None or flow.response is not None or FOLLOW_KEY in flow.metadata:
            return
        answer = self.gate(meta.team, meta.key_fingerprint, meta.protocol, meta.path)
        if answer is None:
            return
        status, headers, body = answer
        flow.response = http.Response.make(status, body, dict(headers))
        self.refused += 1

    def done(self) -> None:
        if self.refused:
            log.info("llmtap: %d requests refused over budget", self.refused)
