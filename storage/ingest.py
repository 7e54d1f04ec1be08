"""Recorded HTTP traffic → stored records, for every source that is not the live proxy.

An `HttpExchange` is one request/response as a file holds it (HAR entry, flow). `to_record`
routes it (SPEC §1), decodes it through the translators, attributes it to a team (SPEC §4)
and strips its secrets; `to_follow_up` decodes a poll, resumed stream or cancel of
background work, which the writer applies to the exchange it continues. Not responsible
for reading files (see `importers/`) nor for writing rows (the writer).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import unquote

from llmtap.protocols import decode_exchange, route
from llmtap.protocols.canonical import Exchange
from llmtap.protocols.exchange import SERVED_TIER_HEADER
from llmtap.protocols.followups import CONTINUES, follow_up
from llmtap.storage.followups import FollowUp
from llmtap.storage.hosts import UNVERIFIED_HOST, provider_host
from llmtap.storage.ids import capture_id
from llmtap.storage.record import Recorded
from llmtap.storage.secrets import (
    KeyFingerprinter,
    api_key,
    redact_headers,
    redact_query,
    request_secrets,
    scrub_record,
)
from llmtap.storage.teams import attribute

TEAM_HEADER = "x-llmtap-team"


@dataclass(slots=True)
class HttpExchange:
    method: str
    host: str
    path: str  # with the query string
    request_headers: list[tuple[str, str]]
    request_body: bytes | None
    status: int | None
    response_headers: list[tuple[str, str]]
    response_body: bytes | None
    response_encoded: bool  # the body is still Content-Encoding encoded (flow files)
    started_at: datetime
    first_byte_at: datetime | None = None
    ended_at: datetime | None = None
    client_addr: str | None = None
    interrupted: str | None = None
    extra: dict[str, str] = field(default_factory=dict)

    def header(self, name: str, which: str = "request") -> str | None:
        headers = self.request_headers if which == "request" else self.response_headers
        for key, value in headers:
            if key.lower() == name:
                return value
        return None


def attribute_team(
    *,
    proxy_user: str | None,
    team_header: str | None,
    listener_team: str | None,
    fingerprint: str | None,
    key_teams: Mapping[str, str],
) -> str:
    """SPEC §4, first match wins: proxy-auth user, X-LLMTap-Team, the reverse listener's
    team, the key-fingerprint map; else `unattributed` (see `teams.attribute`)."""
    return attribute(
        proxy_user=proxy_user,
        team_header=team_header,
        listener_team=listener_team,
        fingerprint=fingerprint,
        key_teams=key_teams,
    )[0]


def proxy_auth_user(value: str | None) -> str | None:
    """The user name of a `Proxy-Authorization: Basic …` header."""
    if not value:
        return None
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user = base64.b64decode(token.strip(), validate=False).decode("utf-8", "replace")
    except ValueError:
        return None
    return unquote(user.partition(":")[0]) or None


def retry_after(seconds: str | None, milliseconds: str | None = None) -> float | None:
    """`retry-after-ms` (OpenAI) or `retry-after` in seconds; an HTTP date is left out."""
    for value, scale in ((milliseconds, 1000.0), (seconds, 1.0)):
        if value:
            try:
                return max(float(value.strip()) / scale, 0.0)
            except ValueError:
                continue
    return None


def _decoded(http: HttpExchange, protocol: str, request: bytes | dict[str, Any] | None) -> Exchange:
    """The response decoded as `protocol` (with `request` as what it answers), as it came
    off the wire: still content-encoded where the file kept it so."""
    exchange = decode_exchange(
        protocol,
        response=http.response_body or b"",
        request=request,
        path=http.path,
        host=http.host,
        status=http.status,
        content_type=http.header("content-type", "response"),
        content_encoding=http.header("content-encoding", "response") if http.response_encoded else None,
        served_tier=http.header(SERVED_TIER_HEADER, "response"),
    )
    if http.interrupted and not exchange.interrupted:
        exchange.interrupted = http.interrupted
    return exchange


def to_record(
    http: HttpExchange,
    *,
    fingerprinter: KeyFingerprinter,
    key_teams: Mapping[str, str] | None = None,
    source: str = "import",
    listener_team: str | None = None,
) -> Recorded | None:
    """The stored record of one HTTP exchange, or None when it is not an LLM generation."""
    protocol = route(http.method, http.path, http.request_body)
    if protocol is None:
        return None
    content_type = http.header("content-type", "response")
    exchange = _decoded(http, protocol, http.request_body)
    query = http.path.partition("?")[2]  # any path a client sent: `//[x/…` is no URL, yet recorded
    key = api_key(http.request_headers, query)
    fingerprint = fingerprinter.fingerprint(key) if key else None
    team, attribution = attribute(
        proxy_user=proxy_auth_user(http.header("proxy-authorization")),
        team_header=http.header(TEAM_HEADER),
        listener_team=listener_team,
        fingerprint=fingerprint,
        key_teams=key_teams or {},
        secrets=(key,) if key else (),
    )
    path = redact_query(http.path)
    record = Recorded(
        exchange=exchange,
        # the same entry imported twice is the same record (SPEC §6): an id of what was captured
        id=capture_id(
            http.started_at,
            method=http.method,
            host=http.host,
            path=path,
            status=http.status,
            request=http.request_body,
            response=http.response_body,
        ),
        started_at=http.started_at,
        first_byte_at=http.first_byte_at,
        ended_at=http.ended_at,
        team=team,
        attribution=attribution,
        key_fingerprint=fingerprint,
        key_last4=fingerprinter.last4(key) if key else None,
        client_addr=http.client_addr,
        source=source,
        # a file says where its traffic went; only a provider's own host is billed by it
        price_reason=None if provider_host(http.host) else UNVERIFIED_HOST,
        method=http.method.upper(),
        host=http.host,
        path=path,
        retry_after_s=retry_after(http.header("retry-after", "response"), http.header("retry-after-ms", "response")),
        request_body=http.request_body,
        response_body=None if http.response_encoded else http.response_body,
        response_content_type=content_type,
        request_headers=redact_headers([(k, v) for k, v in http.request_headers if k.lower() != TEAM_HEADER]),
    )
    # the exact key values the file's headers and URL hold, whatever their shape (SPEC §4)
    return scrub_record(record, request_secrets(http.request_headers, query))


def to_follow_up(http: HttpExchange, *, fingerprinter: KeyFingerprinter, source: str = "import") -> FollowUp | None:
    """A poll, resumed stream or cancel of background work (SPEC §1), decoded as the work
    it continues, for the writer to apply to that exchange; None for anything else."""
    continued = follow_up(http.method, http.path)
    if continued is None:
        return None
    content_type = http.header("content-type", "response")
    exchange = _decoded(http, continued.protocol, CONTINUES)
    query = http.path.partition("?")[2]
    key = api_key(http.request_headers, query)
    record = Recorded(
        exchange=exchange,
        started_at=http.started_at,
        first_byte_at=http.first_byte_at,
        ended_at=http.ended_at,
        key_fingerprint=fingerprinter.fingerprint(key) if key else None,
        client_addr=http.client_addr,
        source=source,
        method=http.method.upper(),
        host=http.host,
        path=redact_query(http.path),
        response_body=None if http.response_encoded else http.response_body,
        response_content_type=content_type,
    )
    return FollowUp(continued, scrub_record(record, request_secrets(http.request_headers, query)))
