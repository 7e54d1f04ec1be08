"""`llmtap dashboard --serve`: the dashboard live on 127.0.0.1 (never another address
unless told), its data refreshed from the store on every poll.

Who may read it (SPEC §6): only requests whose `Host` names the address it serves, so a
web page that rebinds its own DNS name to 127.0.0.1 gets a 421 and no data; off loopback,
only requests with the server's token (in the URL once, then a cookie), made here when
the caller gave none.

Not responsible for the numbers or the HTML: it serves what `data` and `page` make.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import secrets
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from email.message import Message
from http.cookies import CookieError, SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

log = logging.getLogger("llmtap.dashboard")


Route = Callable[[str, dict[str, str]], tuple[int, str, bytes]]


COOKIE = "llmtap_token"


class DashboardServer(ThreadingHTTPServer):
    """The HTTP server, with what its handler checks: the Host names it answers to and
    the token it asks for (None on loopback unless the caller gave one)."""

    token: str | None = None
    hosts: frozenset[str] = frozenset()
    any_address: bool = False  # bound off loopback: any IP literal is a name of ours too

    @property
    def url(self) -> str:
        """The address to open, with the token when one is needed."""
        host, port = self.server_address[:2]
        name = str(host)
        if ipaddress.ip_address(name).is_unspecified:
            name = socket.gethostname()
        elif ":" in name:
            name = f"[{name}]"
        return f"http://{name}:{port}/" + (f"?token={quote(self.token)}" if self.token else "")


class _DashboardServer6(DashboardServer):
    address_family = socket.AF_INET6


def make_server(
    host: str,
    port: int,
    collect: Callable[[], dict[str, Any]],
    render: Callable[[dict[str, Any]], str],
    routes: dict[str, Route] | None = None,
    token: str | None = None,
) -> DashboardServer:
    """`routes` maps a path prefix (`exchange/`) to a handler of (rest of path, query).
    Off loopback a token is required: `token`, or one made here (`server.url` has it)."""
    lock = threading.Lock()  # one DuckDB query at a time

    class Handler(BaseHTTPRequestHandler):
        server_version = "llmtap"
        server: DashboardServer
        _cookie = ""  # the Set-Cookie of this request's answer, if any

        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            parts = urlsplit(self.path)
            path = parts.path
            self._cookie = ""
            if not _host_allowed(self.headers.get("Host"), self.server):
                self._send(421, "text/plain; charset=utf-8", b"llmtap: this dashboard is not served under that name\n")
                return
            set_cookie = _token_check(self.headers, parts.query, self.server.token)
            if set_cookie is None:
                self._send(401, "text/plain; charset=utf-8", b"llmtap: open the URL with the token llmtap printed\n")
                return
            self._cookie = set_cookie
            try:
                for prefix, route in (routes or {}).items():
                    if path.startswith("/" + prefix):
                        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
                        with lock:
                            status, content_type, body = route(unquote(path[len(prefix) + 1 :]), query)
                        self._send(status, content_type, body)
                        return
                if path in ("/", "/index.html"):
                    with lock:
                        body = render(collect()).encode("utf-8")
                    self._send(200, "text/html; charset=utf-8", body)
                elif path == "/data.json":
                    with lock:
                        body = json.dumps(collect(), default=str).encode("utf-8")
                    self._send(200, "application/json", body)
                else:
                    self._send(404, "text/plain; charset=utf-8", b"not found\n")
            except Exception as exc:  # noqa: BLE001 - the page says so; the server goes on
                log.exception("dashboard request failed")
                self._send(500, "text/plain; charset=utf-8", f"llmtap: {exc.__class__.__name__}\n".encode())

        def _send(self, status: int, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Referrer-Policy", "no-referrer")  # the URL may carry the token
            if self._cookie:
                self.send_header("Set-Cookie", self._cookie)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
            log.debug(format, *args)

    server_class = _DashboardServer6 if _is_ipv6(host) else DashboardServer
    server = server_class((host, port), Handler)
    _admit(server, host, token)
    return server


@dataclass(frozen=True)
class Admission:
    """Who a server bound to one address answers: the `Host` values it takes, whether any
    IP literal is one of its names (off loopback), and the token it asks for."""

    hosts: frozenset[str]
    any_address: bool
    token: str | None


def admission(bound: str, port: int, host: str, token: str | None) -> Admission:
    """For a server bound to `bound`:`port` (asked for as `host`): the Host names of the
    address it really listens on, and off loopback a token (made when none was given)."""
    address = ipaddress.ip_address(bound)
    names = {"localhost", f"[{address}]" if address.version == 6 else str(address)}
    if not address.is_loopback:
        names |= {socket.gethostname().lower(), socket.getfqdn().lower(), host.lower()}
    with_port = {f"{name}:{port}" for name in names}
    return Admission(
        hosts=frozenset(with_port | names if port == 80 else with_port),
        any_address=not address.is_loopback,
        token=token or (None if address.is_loopback else secrets.token_urlsafe(24)),
    )


def _admit(server: DashboardServer, host: str, token: str | None) -> None:
    rules = admission(str(server.server_address[0]), int(server.server_address[1]), host, token)
    server.hosts, server.any_address, server.token = rules.hosts, rules.any_address, rules.token


def _token_check(headers: Message, query: str, expected: str | None) -> str | None:
    """None: refused. Else the Set-Cookie value to send ("" for none): a token that came
    in the URL becomes a cookie, so the page's own fetches and links carry it."""
    if expected is None:
        return ""
    given = parse_qs(query).get("token", [""])[-1]
    if given and _same(given, expected):
        return f"{COOKIE}={expected}; Path=/; HttpOnly; SameSite=Strict"
    try:
        cookie = SimpleCookie(headers.get("Cookie") or "").get(COOKIE)
    except CookieError:
        cookie = None
    if cookie is not None and _same(cookie.value, expected):
        return ""
    bearer = headers.get("Authorization") or ""
    if bearer.startswith("Bearer ") and _same(bearer[7:].strip(), expected):
        return ""
    return None


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def _is_ipv6(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).version == 6
    except ValueError:
        return False


def _host_allowed(header: str | None, server: DashboardServer) -> bool:
    """A `Host` of ours. A page whose DNS name was rebound to this address sends its own
    name: refused. Off loopback an IP literal is ours too (a rebinding page has a name,
    never a literal), and the token stands behind it."""
    if not header:
        return False
    value = header.strip().lower()
    if value in server.hosts:
        return True
    if not server.any_address:
        return False
    name, port = _split_host(value)
    if (port or 80) != server.server_address[1]:
        return False
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return True


def _split_host(value: str) -> tuple[str, int | None]:
    """`name[:port]` or `[v6][:port]` as (name, port); a port that is not a number is -1."""
    if value.startswith("["):
        name, _, rest = value.partition("]")
        name, port = name + "]", rest.removeprefix(":") if rest.startswith(":") else ""
    elif value.count(":") == 1:
        name, _, port = value.partition(":")
    else:
        name, port = value, ""
    if not port:
        return name, None
    return name, int(port) if port.isdigit() else -1
