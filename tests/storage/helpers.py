"""Helpers for the storage tests: records with predictable ids, corpus exchanges as HTTP,
fresh PostgreSQL databases, a SQLite lock holder, a TCP forwarder that can be pulled, and
the `llmtap` command run as a subprocess."""

from __future__ import annotations

import os
import selectors
import socket
import sqlite3
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, func, select
from sqlalchemy.engine import make_url

from llmtap.addon.tee import ExchangeMeta, PendingExchange
from llmtap.protocols.canonical import Exchange, RequestFacts, ToolCall, ToolSpec, Usage
from llmtap.storage import schema
from llmtap.storage.ingest import HttpExchange
from llmtap.storage.record import Recorded
from llmtap.workloads import corpus as bench_corpus
from llmtap.workloads.scratch import scratch_postgres
from tests.helpers import free_port

ROOT = Path(__file__).resolve().parents[2]
POSTGRES_URL = os.environ.get("LLMTAP_TEST_POSTGRES_URL", "").strip() or None
T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


# -- records ---------------------------------------------------------------------------------


def record_id(prefix: str, index: int) -> str:
    """A 26-character id the test can predict (the store only needs it unique)."""
    return f"{prefix}{index:0{26 - len(prefix)}d}"


def make_record(
    index: int,
    *,
    prefix: str = "R",
    response_id: str | None = None,
    started_at: datetime | None = None,
    text_value: str | None = None,
) -> Recorded:
    """A small decoded Anthropic exchange; every third one has a tool call."""
    calls = []
    if index % 3 == 0:
        calls.append(
            ToolCall(
                id=f"toolu_{prefix}_{index}",
                name="get_weather",
                arguments={"city": "Paris"},
                arguments_raw='{"city":"Paris"}',
                valid_json=True,
            )
        )
    exchange = Exchange(
        protocol="anthropic.messages",
        provider="anthropic",
        status=200,
        complete=True,
        model_requested="claude-test",
        model="claude-test",
        response_id=response_id or f"msg_{prefix}_{index}",
        finish_reason="tool_use" if calls else "end_turn",
        finish_reason_raw="tool_use" if calls else "end_turn",
        usage=Usage(input_tokens=100 + index, output_tokens=10),
        usage_raw={"input_tokens": 100 + index, "output_tokens": 10},
        usage_provenance="reported",
        text=text_value if text_value is not None else f"answer {index}",
        tool_calls=calls,
        request=RequestFacts(
            model="claude-test",
            max_tokens=256,
            tools=[ToolSpec(name="get_weather", schema={"type": "object"})],
            messages_by_role={"user": 1},
        ),
    )
    return Recorded(
        exchange=exchange,
        started_at=started_at or T0 + timedelta(seconds=index),
        id=record_id(prefix, index),
        team="team-a",
        host="api.anthropic.com",
        path="/v1/messages",
    )


def corpus_http(case: Path, *, started_at: datetime = T0, **kwargs: Any) -> HttpExchange:
    """One corpus case as the HTTP exchange a file would hold (`bench/corpus.py`), at T0."""
    return bench_corpus.corpus_http(case, started_at=started_at, **kwargs)


# -- looking at the store --------------------------------------------------------------------


def count(engine: Engine, table: Any = schema.exchanges) -> int:
    with engine.connect() as connection:
        return connection.execute(select(func.count()).select_from(table)).scalar_one()


def exchange_ids(engine: Engine) -> list[str]:
    with engine.connect() as connection:
        return list(connection.execute(select(schema.exchanges.c.id)).scalars())


def spool_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("spool-*.jsonl")) if folder.is_dir() else []


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


# -- databases -------------------------------------------------------------------------------


def fresh_postgres_database(admin_url: str | None = None):
    """CREATE DATABASE llmtap_t_<random>, yield its URL, DROP … WITH (FORCE) after."""
    return scratch_postgres(admin_url or POSTGRES_URL or "", "llmtap_t")


def sqlite_path(url: str) -> str:
    database = make_url(url).database
    assert database, url
    return database


@contextmanager
def sqlite_exclusive(url: str) -> Iterator[None]:
    """Hold `BEGIN EXCLUSIVE` on a SQLite file from another connection."""
    connection = sqlite3.connect(sqlite_path(url), isolation_level=None, timeout=10)
    try:
        connection.execute("BEGIN EXCLUSIVE")
        yield
        connection.execute("COMMIT")
    finally:
        connection.close()


class LockInThread:
    """Takes `BEGIN EXCLUSIVE` in a thread of its own when started, holds it `hold` seconds."""

    def __init__(self, url: str, hold: float) -> None:
        self.url, self.hold = url, hold
        self.taken, self.released = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.thread.start()
        assert self.taken.wait(10), "could not lock the SQLite file"

    def _run(self) -> None:
        with sqlite_exclusive(self.url):
            self.taken.set()
            time.sleep(self.hold)
        self.released.set()


# -- a TCP forwarder that can be pulled ------------------------------------------------------


class Forwarder:
    """127.0.0.1:<port> → target, on threads. `stop()` refuses new connections and resets
    the open ones (RST, like a crashed server or a cut cable); `start()` serves again on
    the same port."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._running = threading.Event()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.connections = 0

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.05)
        self._listener = listener
        self._running.set()
        self._spawn(self._accept, listener)

    def stop(self) -> None:
        self._running.clear()
        for thread in self._threads:
            thread.join(5)
        self._threads = []
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for sock in pair:
                _reset(sock)

    def _spawn(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self, listener: socket.socket) -> None:
        try:
            while self._running.is_set():
                try:
                    client, _ = listener.accept()
                except TimeoutError:
                    continue
                try:
                    upstream = socket.create_connection(self.target, timeout=5)
                except OSError:
                    _reset(client)
                    continue
                self.connections += 1
                with self._lock:
                    self._pairs.append((client, upstream))
                self._spawn(self._pump, client, upstream)
        finally:
            listener.close()

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        peers = {client: upstream, upstream: client}
        with selectors.DefaultSelector() as selector:
            for sock in peers:
                selector.register(sock, selectors.EVENT_READ)
            while self._running.is_set():
                try:
                    for key, _ in selector.select(0.05):
                        data = key.fileobj.recv(65536)
                        if not data:
                            raise ConnectionError
                        peers[key.fileobj].sendall(data)
                except (OSError, ValueError, ConnectionError):
                    break
        if self._running.is_set():  # one side hung up: close both
            with self._lock:
                if (client, upstream) in self._pairs:
                    self._pairs.remove((client, upstream))
            client.close()
            upstream.close()


def _reset(sock: socket.socket) -> None:
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


def held_exchange(index: int, *, request: bytes, answer: bytes, team: str = "team-held") -> PendingExchange:
    """What the proxy hands its writer for a small JSON Anthropic answer: the metadata and
    the raw body, not yet decoded (the writer, or its process, finishes it)."""
    meta = ExchangeMeta(
        method="POST",
        host="api.anthropic.com",
        path="/v1/messages",
        team=team,
        key_fingerprint=None,
        key_last4=None,
        client_addr="127.0.0.1",
        request_body=request,
        request_headers=[],
        started=1_780_000_000.0 + index,
        protocol="anthropic.messages",
        status=200,
        first_byte=1_780_000_000.2 + index,
        ended=1_780_000_000.3 + index,
        content_type="application/json",
    )
    return PendingExchange(None, meta, None, body=answer)


def write_batches(
    engine: Engine, spool_dir: Path, batches: list[list[tuple[dict[str, Any], list[dict[str, Any]]]]]
) -> None:
    """Each batch of (exchange row, its tool-call rows) through the real writer, one
    commit each (copies: the writer fills the rows in)."""
    import copy

    from llmtap.storage.rows import RowSet
    from llmtap.storage.writer import Writer

    writer = Writer(engine, spool_dir=spool_dir, max_delay=0.01, batch_size=10_000)
    try:
        for batch in batches:
            rows = copy.deepcopy(batch)
            writer.submit(RowSet(exchanges=[r for r, _ in rows], tool_calls=[c for _, cs in rows for c in cs]))
            assert writer.flush(timeout=60)
    finally:
        writer.close()
