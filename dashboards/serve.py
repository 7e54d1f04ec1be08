"""`llmtap dashboard --serve`: the dashboard live on 127.0.0.1 (never another address
unless told), its data refreshed from the store on every poll.

Who may read it (SPEC §6) is storage/access.py's rule, the one `/metrics` follows too:
only requests whose `Host` names the address it serves, so a web page that rebinds its
own DNS name to 127.0.0.1 gets a 421 and no data; off loopback, and on loopback when the
store is private to its user, only requests with the server's token (in the URL once,
then a cookie), made there when the caller gave none.

Not responsible for the numbers or the HTML: it serves what `data` and `page` make.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from llmtap.storage.access import Admission, admission, is_ipv6

log = logging.getLogger("llmtap.dashboard")


Route = Callable[[str, dict[str, str]], tuple[int, str, bytes]]


class DashboardServer(ThreadingHTTPServer):
    """The HTTP server, with who its handler admits (storage/access.py)."""

    admission: Admission

    @property
    def url(self) -> str:
        """The address to open, with the token when one is needed."""
        return self.admission.url(str(self.server_address[0]))

    @property
    def any_address(self) -> bool:
        return self.admission.any_address


class _DashboardServer6(DashboardServer):
    address_family = socket.AF_INET6


def make_server(
    host: str,
    port: int,
    collect: Callable[[], dict[str, Any]],
    render: Callable[[dict[str, Any]], str],
    routes: dict[str, Route] | None = None,
    token: str | None = None,
    private: bool = True,
) -> DashboardServer:
    """`routes` maps a path prefix (`exchange/`) to a handler of (rest of path, query).
    Off loopback, and when the store is `private` (storage.access.store_is_private), a
    token is required: `token`, or one made here (`server.url` has it)."""
    lock = threading.Lock()  # one DuckDB query at a time

    class Handler(BaseHTTPRequestHandler):
        server_version = "llmtap"
        server: DashboardServer
        _cookie = ""  # the Set-Cookie of this request's answer, if any

        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            parts = urlsplit(self.path)
            path = parts.path
            self._cookie = ""
            rules = self.server.admission
            if not rules.host_allowed(self.headers.get("Host")):
                self._send(421, "text/plain; charset=utf-8", b"llmtap: this dashboard is not served under that name\n")
                return
            set_cookie = rules.token_check(parts.query, self.headers.get("Cookie"), self.headers.get("Authorization"))
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

    server_class = _DashboardServer6 if is_ipv6(host) else DashboardServer
    server = server_class((host, port), Handler)
    bound, really = str(server.server_address[0]), int(server.server_address[1])
    server.admission = admission(bound, really, host, token, private=private)
    return server
