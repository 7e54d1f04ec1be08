"""The `/metrics` endpoint, in the proxy's own process: prometheus-client's WSGI app on a
threading server of its own, serving the counters the writer's process keeps in this run's
multiprocess folder (metrics_count.py) and, read at each scrape, the health of recording
itself from the proxy's WriterProcess: records waiting to be written, records in the spool,
rejected records, and writer-process restarts.

Who it answers is the dashboard server's rule (storage/access.py, SPEC §6): a request
whose `Host` names another address than the one it listens on gets a 421 (no DNS
rebinding), and off loopback, or when the store is private to its user, a scrape without
the token gets a 401. Prometheus sends the token as `Authorization: Bearer` (its
`authorization` setting) or as `?token=` (its `params`).

A scrape reads the folder's files and the writer's in-memory figures; it never touches the
store or the relay path (the server's thread only).

Not responsible for counting exchanges (metrics_count.py) or for the settings (metrics.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from llmtap.storage.access import Admission, admission, is_ipv6
from llmtap.storage.private import private_dir


class WriterHealth:
    """A collector of the writer's figures, read when Prometheus scrapes."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        stats = self.writer.stats
        yield GaugeMetricFamily(
            "llmtap_writer_queue_records",
            "Records handed to the writer and not yet committed, spooled or rejected",
            value=self.writer.backlog,
        )
        yield GaugeMetricFamily(
            "llmtap_spool_records",
            "Records this run put in the spool (the database was away) and has not replayed yet",
            value=max(stats.spooled - stats.replayed, 0),
        )
        yield CounterMetricFamily(
            "llmtap_spooled_records", "Records put in the spool since the proxy started", value=stats.spooled
        )
        yield CounterMetricFamily(
            "llmtap_rejected_records",
            "Records the store refused for their content (kept in rejected.jsonl)",
            value=stats.rejected,
        )
        yield CounterMetricFamily(
            "llmtap_writer_restarts",
            "Times the writer process exited and was started again",
            value=getattr(self.writer, "restarts", 0),
        )


def clear_stale(parent: Path, keep: str) -> None:
    """Remove the folders earlier runs left (named by their proxy's pid) whose process is gone."""
    if not parent.is_dir():
        return
    for folder in parent.iterdir():
        pid = folder.name.split("-", 1)[0]
        if folder.name == keep or not pid.isdigit() or _alive(int(pid)):
            continue
        shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class Serving:
    """A running endpoint: who it admits, where it really listens, and what stops it."""

    admission: Admission
    host: str  # the address it is bound to
    stop: Callable[[], None]

    @property
    def url(self) -> str:
        return self.admission.url(self.host, "/metrics")


def serve(folder: Path, host: str, port: int, writer: Any, *, token: str | None, private: bool) -> Serving:
    """Start the endpoint; `stop` stops it and removes the run's folder. A token is asked
    for off loopback or when `private`: `token`, or one made here. Raises OSError when the
    address cannot be listened on."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.exposition import ThreadingWSGIServer, make_wsgi_app
    from prometheus_client.multiprocess import MultiProcessCollector

    private_dir(folder)  # team and model names: private like the spool beside it
    clear_stale(folder.parent, keep=folder.name)
    registry = CollectorRegistry(auto_describe=False)
    MultiProcessCollector(registry, path=str(folder))
    registry.register(WriterHealth(writer))

    class Server(ThreadingWSGIServer):
        address_family = socket.AF_INET6 if is_ipv6(host) else socket.AF_INET

    server = make_server(host.strip("[]"), port, _refused, Server, handler_class=_Quiet)
    bound, really = str(server.server_address[0]), int(server.server_address[1])
    rules = admission(bound, really, host, token, private=private)
    server.set_app(_admitted(make_wsgi_app(registry), rules))
    thread = threading.Thread(target=server.serve_forever, name="llmtap-metrics", daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(5)
        with contextlib.suppress(OSError):
            shutil.rmtree(folder)

    return Serving(rules, bound, stop)


Wsgi = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def _admitted(app: Wsgi, rules: Admission) -> Wsgi:
    """`app` behind the Host and token checks."""

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if not rules.host_allowed(environ.get("HTTP_HOST")):
            return _refuse(
                start_response, "421 Misdirected Request", b"llmtap: metrics are not served under that name\n"
            )
        given = rules.token_check(
            environ.get("QUERY_STRING", ""), environ.get("HTTP_COOKIE"), environ.get("HTTP_AUTHORIZATION")
        )
        if given is None:
            return _refuse(
                start_response,
                "401 Unauthorized",
                b"llmtap: scrape with the token llmtap printed (Authorization: Bearer TOKEN)\n",
                [("WWW-Authenticate", 'Bearer realm="llmtap metrics"')],
            )
        return app(environ, start_response)

    return guarded


def _refuse(
    start_response: Callable[..., Any], status: str, body: bytes, extra: list[tuple[str, str]] | None = None
) -> list[bytes]:
    headers = [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))]
    start_response(status, headers + (extra or []))
    return [body]


def _refused(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
    """Until the admission rules are set (the real port known): nothing is served."""
    return _refuse(start_response, "503 Service Unavailable", b"llmtap: starting\n")


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass
