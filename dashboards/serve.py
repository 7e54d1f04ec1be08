"""`llmtap dashboard --serve`: the dashboard live on 127.0.0.1 (never another address
unless told), its data refreshed from the store on every poll.

Not responsible for the numbers or the HTML: it serves what `data` and `page` make.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

log = logging.getLogger("llmtap.dashboard")


Route = Callable[[str, dict[str, str]], tuple[int, str, bytes]]


def make_server(
    host: str,
    port: int,
    collect: Callable[[], dict[str, Any]],
    render: Callable[[dict[str, Any]], str],
    routes: dict[str, Route] | None = None,
) -> ThreadingHTTPServer:
    """`routes` maps a path prefix (`exchange/`) to a handler of (rest of path, query)."""
    lock = threading.Lock()  # one DuckDB query at a time

    class Handler(BaseHTTPRequestHandler):
        server_version = "llmtap"

        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            parts = urlsplit(self.path)
            path = parts.path
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
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
            log.debug(format, *args)

    return ThreadingHTTPServer((host, port), Handler)
