"""`[auth]`: each team's proxy credentials, checked before a request goes anywhere (SPEC §4).

Without it, the proxy-auth user name is taken on trust (anyone can name any team). With
it, a request through the proxy (regular or upstream mode: a CONNECT for HTTPS, or the
request itself for plain HTTP) must carry `Proxy-Authorization: Basic` with a team and its
password, else it is answered `407` with `Proxy-Authenticate: Basic realm="llmtap"` and
goes no further. Reverse listeners are not proxies, and clients only change their base
URL to reach them: a request there without credentials keeps the listener's team (or the
key map's), and one that does carry credentials must carry right ones. The check itself
(storage/credentials.py, shared with `llmtap import`) compares the password in constant
time; it goes nowhere: not to the store, the log or the upstream.

Not responsible for attribution itself (`attribution.py`) or for reading the config.
"""

from __future__ import annotations

from collections.abc import Mapping

from mitmproxy import http
from mitmproxy.proxy.mode_specs import RegularMode, UpstreamMode

from llmtap.addon.attribution import REFUSED_KEY, VERIFIED_KEY, Attribution
from llmtap.storage.credentials import ProxyCredentials

REALM = "llmtap"


def required() -> http.Response:
    return http.Response.make(
        407,
        b"llmtap: proxy authentication required\n",
        {"Proxy-Authenticate": f'Basic realm="{REALM}"', "Content-Type": "text/plain"},
    )


class TeamAuth:
    """A mitmproxy addon, added before the recorder when `[auth]` is set."""

    def __init__(self, teams: Mapping[str, str], attribution: Attribution) -> None:
        self.credentials = ProxyCredentials(teams)
        self.attribution = attribution

    def team(self, header: str | None) -> str | None:
        """The team whose credentials these are, or None (storage/credentials.py)."""
        return self.credentials.team(header)

    def http_connect(self, flow: http.HTTPFlow) -> None:
        # The header stays for the recorder, which strips it after reading what it needs
        # (the password's value, to scrub it from the record should a client echo it).
        team = self.team(flow.request.headers.get("proxy-authorization"))
        if team is None:
            flow.response = required()
            return
        self.attribution.verified_connect(flow.client_conn, team)

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if self.attribution.connect_team(flow.client_conn) is not None:
            return  # inside a tunnel whose CONNECT was checked
        header = flow.request.headers.get("proxy-authorization")
        is_proxy = isinstance(flow.client_conn.proxy_mode, (RegularMode, UpstreamMode))
        if header is None and not is_proxy:
            return  # a reverse listener: its own team, or the key map's
        team = self.team(header)
        if team is None:
            flow.metadata[REFUSED_KEY] = True
            flow.response = required()
            return
        flow.metadata[VERIFIED_KEY] = team
