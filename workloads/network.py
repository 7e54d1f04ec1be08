"""Sockets on 127.0.0.1 for tests and benches: a free port, `wait_listening` for a child
process's port, and `Forwarder`, a TCP forwarder (to PostgreSQL, say) that refuses and cuts
connections on demand.

Not responsible for what crosses the forwarder (it copies bytes both ways) nor for starting
or stopping the child it waits for.
"""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_listening(port: int, process: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    """Until `process` accepts connections on 127.0.0.1:`port`; a RuntimeError that ends
    with the tail of its `log` when it exits first or has not listened within `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"exited {process.returncode} before it listened on {port}: {_tail(log)}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"port {port} did not open within {timeout} s: {_tail(log)}")


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-2000:] if log.exists() else ""


class Forwarder:
    """A TCP forwarder to PostgreSQL that can refuse and cut connections on demand."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self.up = True
        self._conns: list[socket.socket] = []
        self._server = socket.create_server(("127.0.0.1", self.port))
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            if not self.up:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.close()
                except OSError:
                    pass

    def stop(self) -> None:
        self.up = False
        with self._lock:
            for conn in self._conns:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._conns.clear()

    def start(self) -> None:
        self.up = True
