"""A scripted LLM upstream on 127.0.0.1 for the coding-agent CLIs: HTTP/1.1 (keep-alive,
chunked streams sent event by event) and WebSocket (the handshake and frames written
here, RFC 6455, no extensions), plain or TLS, one server per route of the agent session.

Each request goes to a `Script` (scripts.py), which answers it and notes what it sent,
so a test can compare the proxy's records with the upstream's own account. An upstream
that must refuse the WebSocket upgrade (Codex's HTTP fallback) says so with
`websocket=False`, or decides per handshake: a refused upgrade gets a 426 without
switching.

Not responsible for what the replies say (scripts.py) nor for the proxy in front.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import hashlib
import json
import ssl
import struct
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    transport: str = "http"  # http | websocket

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None


@dataclass
class Answer:
    """An HTTP answer: the body parts are sent as chunks, `delay` apart."""

    status: int = 200
    content_type: str = "application/json"
    parts: list[bytes] = field(default_factory=list)
    headers: list[tuple[str, str]] = field(default_factory=list)
    delay: float = 0.01


class Script(Protocol):
    def http(self, request: Request) -> Answer: ...

    def websocket(self, request: Request, message: Any) -> Iterator[str]: ...


class ScriptedUpstream:
    """`with ScriptedUpstream(script) as up:` serves `up.url`; `up.requests` lists every
    request (a WebSocket message is one, `transport="websocket"`). `websocket` says whether
    to accept an upgrade, or decides per handshake."""

    def __init__(
        self, script: Script, *, websocket: bool | Callable[[Request], bool] = True, tls: ssl.SSLContext | None = None
    ) -> None:
        self.script = script
        self.tls = tls
        self.accept_websocket = websocket
        self.requests: list[Request] = []
        self.refused: list[Request] = []  # the upgrade handshakes answered 426
        self.errors: list[str] = []
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    def __enter__(self) -> ScriptedUpstream:
        self._thread = threading.Thread(target=self._serve, name="agents-upstream", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the scripted upstream did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(5)

    @property
    def url(self) -> str:
        return f"https://localhost:{self.port}" if self.tls else f"http://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        self._loop = asyncio.new_event_loop()
        server = self._loop.run_until_complete(asyncio.start_server(self._connection, "127.0.0.1", 0, ssl=self.tls))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            for task in asyncio.all_tasks(self._loop):
                task.cancel()
            self._loop.run_until_complete(asyncio.sleep(0))
            self._loop.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    return
                if request.headers.get("upgrade", "").lower() == "websocket":
                    accept = self.accept_websocket
                    if accept(request) if callable(accept) else accept:
                        await self._websocket(request, reader, writer)
                        return
                    self.refused.append(request)
                    await _send(writer, Answer(426, parts=[b'{"error":{"message":"websocket refused"}}']))
                    continue
                self.requests.append(request)
                try:
                    answer = self.script.http(request)
                except Exception as exc:  # a script bug: say so in the test, answer 500
                    self.errors.append(f"{request.method} {request.path}: {exc!r}")
                    answer = Answer(500, parts=[json.dumps({"error": {"message": repr(exc)}}).encode()])
                await _send(writer, answer)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        except asyncio.CancelledError:
            return
        finally:
            writer.close()

    async def _websocket(self, request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accept = base64.b64encode(hashlib.sha1(request.headers["sec-websocket-key"].encode() + WS_GUID).digest())
        head = ["HTTP/1.1 101 Switching Protocols", "upgrade: websocket", "connection: Upgrade"]
        head.append(f"sec-websocket-accept: {accept.decode()}")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
        await writer.drain()
        while True:
            opcode, payload = await _read_message(reader)
            if opcode == 0x8:
                writer.write(_frame(0x8, payload[:2]))
                await writer.drain()
                return
            if opcode == 0x9:
                writer.write(_frame(0xA, payload))
                await writer.drain()
                continue
            if opcode not in (0x1, 0x2):
                continue
            message = Request("WS", request.path, request.headers, payload, transport="websocket")
            self.requests.append(message)
            try:
                frames = list(self.script.websocket(message, message.json()))
            except Exception as exc:
                self.errors.append(f"websocket {request.path}: {exc!r}")
                frames = [json.dumps({"type": "error", "error": {"message": repr(exc)}})]
            for text in frames:
                writer.write(_frame(0x1, text.encode()))
                await writer.drain()
                await asyncio.sleep(0.01)


# -- HTTP/1.1 ----------------------------------------------------------------------------------


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
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
            body += (await reader.readexactly(size + 2))[:-2]
    else:
        body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
    return Request(method, path, headers, _decoded(body, headers.get("content-encoding", "")))


def _decoded(body: bytes, encoding: str) -> bytes:
    """A request body as sent before its content encoding (Codex may zstd its requests)."""
    encoding = encoding.lower().strip()
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    if encoding == "zstd":
        from backports import zstd

        return zstd.decompress(body)
    return body


async def _send(writer: asyncio.StreamWriter, answer: Answer) -> None:
    head = [f"HTTP/1.1 {answer.status} {'OK' if answer.status == 200 else 'Status'}"]
    head += [f"content-type: {answer.content_type}", "transfer-encoding: chunked"]
    head += [f"{k}: {v}" for k, v in answer.headers]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
    await writer.drain()
    for index, part in enumerate(p for p in answer.parts if p):
        if index and answer.delay:
            await asyncio.sleep(answer.delay)
        writer.write(b"%x\r\n%s\r\n" % (len(part), part))
        await writer.drain()
    writer.write(b"0\r\n\r\n")
    await writer.drain()


# -- WebSocket frames (RFC 6455 §5) ------------------------------------------------------------


async def _read_message(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """One whole message: its opcode and payload, continuation frames joined, unmasked."""
    opcode, data = 0, b""
    while True:
        b0, b1 = await reader.readexactly(2)
        length = b1 & 0x7F
        if length == 126:
            (length,) = struct.unpack("!H", await reader.readexactly(2))
        elif length == 127:
            (length,) = struct.unpack("!Q", await reader.readexactly(8))
        mask = await reader.readexactly(4) if b1 & 0x80 else b"\0\0\0\0"
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(await reader.readexactly(length)))
        if b0 & 0x0F >= 0x8:  # control frames come whole, even between fragments
            return b0 & 0x0F, payload
        opcode = opcode or b0 & 0x0F
        data += payload
        if b0 & 0x80:
            return opcode, data


def _frame(opcode: int, payload: bytes) -> bytes:
    size = len(payload)
    if size < 126:
        head = struct.pack("!BB", 0x80 | opcode, size)
    elif size < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 126, size)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 127, size)
    return head + payload
