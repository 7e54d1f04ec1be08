"""A local stand-in for the LLM providers: an HTTP/1.1 server on 127.0.0.1 that plays
recorded responses, chunk by chunk with a delay between them, optionally gzip or br
encoded (flushed per chunk), chunked or with a Content-Length, over TLS or not, and can
reset the connection mid-stream. Used by the end-to-end tests, the benchmarks and the
demo; it never talks to the network.

Not responsible for what the responses say: callers hand it a router that turns each
`Seen` request into a `Reply` (`provider.SimulatedProvider` is one); it imports nothing
else of the simulator.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import brotli


@dataclass
class Reply:
    status: int = 200
    content_type: str = "application/json"
    chunks: list[bytes] = field(default_factory=list)
    delay: float = 0.0  # seconds between chunks
    encoding: str | None = None  # gzip | br
    chunked: bool = True
    reset_after: int | None = None  # send this many chunks, then reset the connection
    headers: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float
    sent: list[tuple[float, bytes]] = field(default_factory=list)  # this reply's body chunks
    finished: bool = False  # the whole reply went out (not reset, not cut by the client)


Router = Callable[[Seen], Reply]


class Upstream:
    """`with Upstream(router) as up: ... up.port ...`; `up.seen` lists requests received
    (with `remember=False` nothing is kept, for a server that runs for hours: `llmtap
    simulate`). A port it cannot listen on raises the OSError from `__enter__`."""

    def __init__(
        self, router: Router, *, tls: ssl.SSLContext | None = None, port: int = 0, remember: bool = True
    ) -> None:
        self.router = router
        self.tls = tls
        self.port = port
        self.remember = remember
        self.seen: list[Seen] = []
        self.sent: list[tuple[float, bytes]] = []  # (time, payload) of every body chunk sent
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._failed: OSError | None = None

    def __enter__(self) -> Upstream:
        self._thread = threading.Thread(target=self._serve, name="llmtap-upstream", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the local upstream did not start")
        if self._failed is not None:
            raise self._failed
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._server is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(5)

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)
        try:
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._connection, "127.0.0.1", self.port, ssl=self.tls)
            )
        except OSError as exc:  # the port is taken, or not ours to take
            self._failed = exc
            self._loop.close()
            self._ready.set()
            return
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._server.close()
            pending = [t for t in asyncio.all_tasks(self._loop) if not t.done()]
            for task in pending:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.run_until_complete(self._server.wait_closed())
            self._loop.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                seen = await _read_request(reader)
                if seen is None:
                    break
                if self.remember:
                    self.seen.append(seen)
                reply = self.router(seen)
                if not await self._send(reply, writer, seen):
                    return
                seen.finished = True
                if seen.headers.get("connection", "").lower() == "close":
                    break
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        except asyncio.CancelledError:
            return  # shutting down; returning (not re-raising) keeps asyncio's callback quiet
        finally:
            writer.close()

    async def _send(self, reply: Reply, writer: asyncio.StreamWriter, seen: Seen) -> bool:
        encode = _encoder(reply.encoding)
        chunks = [encode(chunk) for chunk in reply.chunks]
        if reply.encoding:
            chunks.append(encode(None))
        chunks = [c for c in chunks if c]
        head = [f"HTTP/1.1 {reply.status} {_reason(reply.status)}", f"content-type: {reply.content_type}"]
        if reply.encoding:
            head.append(f"content-encoding: {reply.encoding}")
        if reply.chunked:
            head.append("transfer-encoding: chunked")
        else:
            head.append(f"content-length: {sum(len(c) for c in chunks)}")
        head += [f"{k}: {v}" for k, v in reply.headers]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
        await writer.drain()
        for index, chunk in enumerate(chunks):
            if reply.reset_after is not None and index >= reply.reset_after:
                writer.transport.abort()
                return False
            if index and reply.delay:
                await asyncio.sleep(reply.delay)
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if reply.chunked else chunk)
            await writer.drain()
            if self.remember:
                sent = (time.time(), chunk)
                self.sent.append(sent)
                seen.sent.append(sent)
        if reply.chunked:
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        return True


async def _read_request(reader: asyncio.StreamReader) -> Seen | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip().split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            body += await reader.readexactly(size + 2)
            body = body[:-2]
    else:
        body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
    return Seen(method, path, headers, body, time.time())


def _encoder(name: str | None) -> Callable[[bytes | None], bytes]:
    if name == "gzip":
        gzip = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return lambda data: gzip.flush() if data is None else gzip.compress(data) + gzip.flush(zlib.Z_SYNC_FLUSH)
    if name == "br":
        br = brotli.Compressor()
        return lambda data: br.finish() if data is None else br.process(data) + br.flush()
    return lambda data: b"" if data is None else data


def _reason(status: int) -> str:
    return {
        200: "OK",
        400: "Bad Request",
        404: "Not Found",
        429: "Too Many Requests",
        500: "Internal Server Error",
        529: "Overloaded",
    }.get(status, "Status")


def sse_chunks(body: bytes) -> list[bytes]:
    """An SSE body split into one chunk per event, as a provider flushes them."""
    normalized = body.replace(b"\r\n", b"\n")
    events = [e + b"\n\n" for e in normalized.split(b"\n\n") if e.strip()]
    return events or [body]
