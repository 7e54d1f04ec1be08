"""Recorded HTTP traffic → stored records, for every source that is not the live proxy.

An `HttpExchange` is one request/response as a file holds it (HAR entry, flow). `to_record`
routes it (SPEC §1), decodes it through the translators, attributes it to a team (SPEC §4)
and strips its secrets; `to_follow_up` decodes a poll, resumed stream or cancel of
background work, which the writer applies to the exchange it continues.

Who sent it is decided here as the proxy would decide it, never taken from what a file
claims of itself: with `[auth]` (`credentials`) only a captured `Proxy-Authorization`
whose password checks names a team and the `X-LLMTap-Team` header names no one; the key
map applies; `import_team` (`llmtap import --team`) names the team of an entry no rule
names. Its provider and whether its destination may bill are decided by
protocols/providers.py on the host the entry went to (with the config's `[[providers]]`).

Not responsible for reading files (see `importers/`) nor for writing rows (the writer).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from llmtap.protocols import decode_exchange, route
from llmtap.protocols.api_keys import request_keys
from llmtap.protocols.canonical import Exchange
from llmtap.protocols.exchange import SERVED_TIER_HEADER
from llmtap.protocols.followups import CONTINUES, follow_up
from llmtap.protocols.headers import TEAM_HEADER, proxy_auth_user, retry_after
from llmtap.protocols.hosts import UNVERIFIED_HOST, destination
from llmtap.protocols.providers import DEFAULT, ProviderNames
from llmtap.protocols.who_asked import TAGS_HEADER, parse_tags
from llmtap.storage.credentials import ProxyCredentials
from llmtap.storage.followups import FollowUp
from llmtap.storage.ids import capture_id
from llmtap.storage.record import Recorded
from llmtap.storage.secrets import (
    KeyFingerprinter,
    redact_headers,
    redact_query,
    request_secrets,
    scrub_record,
)
from llmtap.storage.teams import attribute


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
    scheme: str = "https"  # of the URL the request went to
    port: int | None = None  # the URL's, when it names one (else the scheme's default)

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


def _decoded(
    http: HttpExchange, protocol: str, request: bytes | dict[str, Any] | None, providers: ProviderNames
) -> Exchange:
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
        provider=providers.name(protocol, http.host, http.path),
    )
    if http.interrupted and not exchange.interrupted:
        exchange.interrupted = http.interrupted
    return exchange


@dataclass(frozen=True, slots=True)
class Sender:
    """Who sent an imported exchange and whether where it went may bill, decided once."""

    team: str
    attribution: str
    key: str | None
    fingerprint: str | None
    last4: str | None
    price_reason: str | None
    destination: str | None


def trusted_host(host: str | None, providers: ProviderNames = DEFAULT) -> str | None:
    """The `price_reason` an import gives traffic to `host` (SPEC §4): None for a
    provider's API host or a `[[providers]]` host, else `unverified_host`, whatever the
    file says of it."""
    return None if providers.billable(host) else UNVERIFIED_HOST


def sender_of(
    http: HttpExchange,
    *,
    fingerprinter: KeyFingerprinter,
    key_teams: Mapping[str, str] | None = None,
    listener_team: str | None = None,
    credentials: ProxyCredentials | None = None,
    import_team: str | None = None,
    protocol: str | None = None,
    providers: ProviderNames = DEFAULT,
) -> Sender:
    """SPEC §4 for an entry of a file (see the module's docstring). The key is the one its
    destination reads (`protocol`: the route's), as the proxy takes it: one key, one
    fingerprint; the key map tries it first, then the other credentials it carries."""
    query = http.path.partition("?")[2]  # any path a client sent: `//[x/…` is no URL, yet recorded
    provider = providers.name(protocol, http.host, http.path) if protocol else None
    keys = request_keys(
        http.request_headers, query, protocol=protocol, host=http.host, path=http.path, provider=provider
    )
    key = keys[0] if keys else None
    fingerprints = tuple(fingerprinter.fingerprint(k) for k in keys)
    fingerprint = fingerprints[0] if fingerprints else None
    proxy_auth = http.header("proxy-authorization")
    if credentials is None:
        proxy_user, team_header = proxy_auth_user(proxy_auth), http.header(TEAM_HEADER)
    else:  # only credentials that check name a team; a header anyone can write does not
        proxy_user, team_header = credentials.team(proxy_auth), None
    team, attribution = attribute(
        proxy_user=proxy_user,
        team_header=team_header,
        listener_team=listener_team,
        fingerprint=fingerprint,
        key_teams=key_teams or {},
        secrets=keys,
        import_team=import_team,
        carried=fingerprints[1:],
    )
    return Sender(
        team=team,
        attribution=attribution,
        key=key,
        fingerprint=fingerprint,
        last4=fingerprinter.last4(key) if key else None,
        price_reason=trusted_host(http.host, providers),
        destination=destination(http.scheme, http.host, http.port),
    )


def to_record(
    http: HttpExchange,
    *,
    fingerprinter: KeyFingerprinter,
    key_teams: Mapping[str, str] | None = None,
    source: str = "import",
    listener_team: str | None = None,
    credentials: ProxyCredentials | None = None,
    import_team: str | None = None,
    providers: ProviderNames = DEFAULT,
) -> Recorded | None:
    """The stored record of one HTTP exchange, or None when it is not an LLM generation.
    `providers`: the names and billable hosts with the config's `[[providers]]`."""
    protocol = route(http.method, http.path, http.request_body)
    if protocol is None:
        return None
    content_type = http.header("content-type", "response")
    exchange = _decoded(http, protocol, http.request_body, providers)
    sender = sender_of(
        http,
        fingerprinter=fingerprinter,
        key_teams=key_teams,
        listener_team=listener_team,
        credentials=credentials,
        import_team=import_team,
        protocol=protocol,
        providers=providers,
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
        team=sender.team,
        attribution=sender.attribution,
        key_fingerprint=sender.fingerprint,
        key_last4=sender.last4,
        key_secret_id=fingerprinter.secret_id if sender.key else None,
        client_addr=http.client_addr,
        source=source,
        # a file says where its traffic went; only a provider's own host is billed by it
        price_reason=sender.price_reason,
        method=http.method.upper(),
        host=http.host,
        destination=sender.destination,
        # the tags the captured request carried (a file is the client's word, like its team header)
        tags=parse_tags(http.header(TAGS_HEADER)),
        path=path,
        retry_after_s=retry_after(http.header("retry-after", "response"), http.header("retry-after-ms", "response")),
        request_body=http.request_body,
        response_body=None if http.response_encoded else http.response_body,
        response_content_type=content_type,
        request_headers=redact_headers(
            [(k, v) for k, v in http.request_headers if k.lower() not in (TEAM_HEADER, TAGS_HEADER)]
        ),
    )
    # the exact key values the file's headers and URL hold, whatever their shape (SPEC §4)
    return scrub_record(record, request_secrets(http.request_headers, http.path.partition("?")[2]))


def to_follow_up(
    http: HttpExchange,
    *,
    fingerprinter: KeyFingerprinter,
    key_teams: Mapping[str, str] | None = None,
    source: str = "import",
    credentials: ProxyCredentials | None = None,
    import_team: str | None = None,
    providers: ProviderNames = DEFAULT,
) -> FollowUp | None:
    """A poll, resumed stream or cancel of background work (SPEC §1), decoded as the work
    it continues, with who sent it and where it went (decided as for a record: the writer
    applies it only to an exchange of the same destination and team or key)."""
    continued = follow_up(http.method, http.path)
    if continued is None:
        return None
    content_type = http.header("content-type", "response")
    exchange = _decoded(http, continued.protocol, CONTINUES, providers)
    sender = sender_of(
        http,
        fingerprinter=fingerprinter,
        key_teams=key_teams,
        credentials=credentials,
        import_team=import_team,
        protocol=continued.protocol,
        providers=providers,
    )
    record = Recorded(
        exchange=exchange,
        started_at=http.started_at,
        first_byte_at=http.first_byte_at,
        ended_at=http.ended_at,
        team=sender.team,
        attribution=sender.attribution,
        key_fingerprint=sender.fingerprint,
        key_last4=sender.last4,
        client_addr=http.client_addr,
        source=source,
        price_reason=sender.price_reason,
        method=http.method.upper(),
        host=http.host,
        destination=sender.destination,
        path=redact_query(http.path),
        response_body=None if http.response_encoded else http.response_body,
        response_content_type=content_type,
    )
    return FollowUp(continued, scrub_record(record, request_secrets(http.request_headers, http.path.partition("?")[2])))
