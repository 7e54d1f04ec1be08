"""Who sent an exchange (SPEC §4), read from the flow on the hooks, plus header hygiene,
and whether its destination may bill anyone.

First match wins: the proxy-auth user name (`HTTPS_PROXY=http://TEAM:secret@host:port`,
taken from the CONNECT request for HTTPS or from the request itself for plain HTTP), the
`X-LLMTap-Team` header, the reverse listener's team, the key-fingerprint map; else
`unattributed` (storage/teams.py). With `[auth]` credentials the proxy-auth user counts
only once `auth.py` has checked its password, and the header rule is off.
`X-LLMTap-Team`, `X-LLMTap-Tags` and `Proxy-Authorization` are removed before the request is forwarded.
API keys become a keyed fingerprint and their last four characters here; the key itself
goes no further.

A destination is trusted to report what it bills when the flow came in on a reverse
listener (its upstream is fixed by the operator: mitmproxy ignores the client's Host
there), went to a configured upstream or a host of a `[[providers]]` entry, or went to
a provider's own API host (protocols/hosts.py); any other exchange carries
`price_reason = unverified_host`. Its `provider` is the reverse listener's when it names
one, else as protocols/providers.py names it (`[[providers]]`, genai-prices' list, the
route). Its `destination` is the server mitmproxy talks to (`scheme://host:port`; in
reverse mode the listener's upstream, whatever the client's Host said): a follow-up of
background work continues only a POST with the same one.

Not responsible for loading the maps (the CLI or `script_setup` builds them), nor for
refusing requests (`auth.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from mitmproxy import connection, http
from mitmproxy.proxy.mode_specs import ReverseMode

from llmtap.protocols.api_keys import request_keys
from llmtap.protocols.headers import TEAM_HEADER, proxy_auth_user
from llmtap.protocols.hosts import UNVERIFIED_HOST, destination
from llmtap.protocols.providers import DEFAULT, ProviderNames
from llmtap.protocols.who_asked import TAGS_HEADER, merged, parse_tags
from llmtap.storage.secrets import KeyFingerprinter
from llmtap.storage.teams import attribute

_TEAM = TEAM_HEADER.encode()
_TAGS = TAGS_HEADER.encode()
_PROXY_AUTH = b"proxy-authorization"
_KEY_HEADERS = frozenset((b"x-api-key", b"x-goog-api-key", b"api-key", b"authorization"))  # what `request_keys` reads
VERIFIED_KEY = "llmtap_proxy_team"  # flow.metadata: the team whose [auth] credentials `auth.py` checked
REFUSED_KEY = "llmtap_refused"  # flow.metadata: `auth.py` answered it (407); it is no exchange


@dataclass(slots=True)
class Who:
    team: str
    key_fingerprint: str | None
    key_last4: str | None
    client_addr: str | None
    attribution: str = "none"  # the rule that named the team
    price_reason: str | None = None  # `unverified_host` when the destination may not bill
    destination: str | None = None  # `scheme://host:port` of the server it goes to
    # every credential the request carried, fingerprinted: the key's (`key_fingerprint`)
    # first, then the others (protocols/api_keys.py); budgets count them all
    key_fingerprints: tuple[str, ...] = ()
    # the request's X-LLMTap-Tags under its listener's and key's configured tags (who_asked.py)
    tags: dict[str, str] = field(default_factory=dict)


@dataclass
class Attribution:
    fingerprinter: KeyFingerprinter | None = None
    key_teams: Mapping[str, str] = field(default_factory=dict)
    listener_teams: Mapping[int, str] = field(default_factory=dict)  # listen port -> team
    # the operator's tags, over any a client sends: per listen port, per key fingerprint
    listener_tags: Mapping[int, Mapping[str, str]] = field(default_factory=dict)
    key_tags: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # listen port -> provider, for reverse listeners that name one (`--reverse openai=8082`)
    # in front of an upstream whose host does not say it (a gateway, a local stand-in)
    listener_providers: Mapping[int, str] = field(default_factory=dict)
    # [auth]: team -> proxy password. Set, the proxy-auth user is a team only once its
    # password is checked (`auth.py` calls `verified_connect` or sets VERIFIED_KEY).
    credentials: Mapping[str, str] | None = None
    # (host, port) of the upstreams the operator configured: billed like a provider's host
    trusted_upstreams: frozenset[tuple[str, int]] = frozenset()
    # provider names and billable hosts, with the config's [[providers]] entries
    providers: ProviderNames = DEFAULT
    _connect_users: dict[str, str] = field(default_factory=dict)  # client connection id -> user

    def remember_connect(self, flow: http.HTTPFlow) -> None:
        """HTTPS through the proxy: the credentials ride the CONNECT request only."""
        if self.credentials is None:
            user = proxy_auth_user(flow.request.headers.get("proxy-authorization"))
            if user:
                self._connect_users[flow.client_conn.id] = user
        flow.request.headers.pop("proxy-authorization", None)

    def verified_connect(self, client: connection.Client, team: str) -> None:
        self._connect_users[client.id] = team

    def connect_team(self, client: connection.Client) -> str | None:
        return self._connect_users.get(client.id)

    def forget(self, client: connection.Client) -> None:
        self._connect_users.pop(client.id, None)

    def price_reason(self, flow: http.HTTPFlow) -> str | None:
        """None when the destination may bill (see the module's docstring)."""
        if isinstance(flow.client_conn.proxy_mode, ReverseMode):
            return None
        request = flow.request
        if self.providers.billable(request.host) or (request.host.lower(), request.port) in self.trusted_upstreams:
            return None
        return UNVERIFIED_HOST

    @staticmethod
    def strip(flow: http.HTTPFlow) -> None:
        flow.request.headers.pop(TEAM_HEADER, None)
        flow.request.headers.pop(TAGS_HEADER, None)
        flow.request.headers.pop("proxy-authorization", None)

    def identify(self, flow: http.HTTPFlow, protocol: str | None = None) -> Who:
        """Who sent this request; strips our headers on the way. One pass over the raw
        header fields: each `Headers` lookup is a scan of its own, on the event loop.
        `protocol` (the route's) says which credential is the key: the one its destination
        reads (protocols/api_keys.py), whatever else the request carries."""
        request = flow.request
        team_values: list[str] = []
        tag_values: list[str] = []
        auth_values: list[str] = []
        key_pairs: list[tuple[str, str]] = []
        for raw_name, raw_value in request.headers.fields:
            name = raw_name.lower()
            if name == _TEAM:
                team_values.append(raw_value.decode("utf-8", "surrogateescape"))
            elif name == _TAGS:
                tag_values.append(raw_value.decode("utf-8", "replace"))
            elif name == _PROXY_AUTH:
                auth_values.append(raw_value.decode("utf-8", "surrogateescape"))
            elif name in _KEY_HEADERS:
                key_pairs.append((name.decode("latin-1"), raw_value.decode("utf-8", "surrogateescape")))
        if team_values or auth_values or tag_values:
            self.strip(flow)
        user = self._connect_users.get(flow.client_conn.id)
        if self.credentials is None:
            # Repeated headers read as mitmproxy's `Headers.get` reads them: joined with ", ".
            user = user or proxy_auth_user(", ".join(auth_values))
            team_header = ", ".join(team_values) or None
        else:  # only checked credentials name a team; a header anyone can send does not
            user = user or flow.metadata.get(VERIFIED_KEY)
            team_header = None
        path = request.path
        keys = request_keys(
            key_pairs,
            path.partition("?")[2] if "?" in path else "",
            protocol=protocol,
            host=request.host,
            path=path,
            provider=self.provider(flow, protocol) if protocol else None,
        )
        key = keys[0] if keys else None
        fingerprinter = self.fingerprinter
        fingerprints = tuple(fingerprinter.fingerprint(k) for k in keys) if fingerprinter else ()
        fingerprint = fingerprints[0] if fingerprints else None
        team, rule = attribute(
            proxy_user=user,
            team_header=team_header,
            listener_team=self._listener_team(flow),
            fingerprint=fingerprint,
            key_teams=self.key_teams,
            secrets=keys,
            carried=fingerprints[1:],
        )
        peer = flow.client_conn.peername
        return Who(
            team=team,
            key_fingerprint=fingerprint,
            key_last4=KeyFingerprinter.last4(key) if key else None,
            client_addr=str(peer[0]) if peer else None,
            attribution=rule,
            price_reason=self.price_reason(flow),
            destination=destination(request.scheme, request.host, request.port),
            key_fingerprints=fingerprints,
            tags=self._tags(flow, fingerprint, tag_values),
        )

    def _tags(self, flow: http.HTTPFlow, fingerprint: str | None, values: list[str]) -> dict[str, str]:
        """The client's tags under the key's, under the listener's (the operator's win)."""
        configured: dict[str, str] = {}
        sockname = flow.client_conn.sockname
        port = sockname[1] if sockname and len(sockname) > 1 else None
        if port is not None and port in self.listener_tags:
            configured.update(self.listener_tags[port])
        if fingerprint is not None and fingerprint in self.key_tags:
            configured.update(self.key_tags[fingerprint])
        return merged(parse_tags(values), configured)

    def provider(self, flow: http.HTTPFlow, protocol: str) -> str:
        """The exchange's `provider`: the reverse listener's, else as its host (or, for
        a cloud route, its path) names it."""
        request = flow.request
        return self.providers.name(protocol, request.host, request.path, self.listener_provider(flow))

    def listener_provider(self, flow: http.HTTPFlow) -> str | None:
        sockname = flow.client_conn.sockname
        port = sockname[1] if sockname and len(sockname) > 1 else None
        return self.listener_providers.get(port) if port is not None else None

    def _listener_team(self, flow: http.HTTPFlow) -> str | None:
        sockname = flow.client_conn.sockname
        port = sockname[1] if sockname and len(sockname) > 1 else None
        return self.listener_teams.get(port) if port is not None else None
