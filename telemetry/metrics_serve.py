"""The `/metrics` endpoint, in the proxy's own process: prometheus-client's HTTP server on
a thread of its own, serving the counters the writer's process keeps in this run's
multiprocess folder (metrics_count.py) and, read at each scrape, the health of recording
itself from the proxy's WriterProcess: records waiting to be written, records in the spool,
rejected records, and writer-process restarts.

A scrape reads the folder's files and the writer's in-memory figures; it never touches the
store or the relay path (the server's thread only).

Not responsible for counting exchanges (metrics_count.py) or for the settings (metrics.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

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


def serve(folder: Path, host: str, port: int, writer: Any) -> Callable[[], None]:
    """Start the endpoint; returns what stops it and removes the run's folder.
    Raises OSError when the address cannot be listened on."""
    from prometheus_client import CollectorRegistry, start_http_server
    from prometheus_client.multiprocess import MultiProcessCollector

    private_dir(folder)  # team and model names: private like the spool beside it
    clear_stale(folder.parent, keep=folder.name)
    registry = CollectorRegistry(auto_describe=False)
    MultiProcessCollector(registry, path=str(folder))
    registry.register(WriterHealth(writer))
    server, thread = start_http_server(port, addr=host, registry=registry)

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(5)
        with contextlib.suppress(OSError):
            shutil.rmtree(folder)

    return stop
