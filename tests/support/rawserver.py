"""A TCP server on 127.0.0.1 that misbehaves on purpose, byte by byte.

:class:`RawServer` hands every accepted connection to a script, a function of
``(connection, server)`` running in a thread of its own, which may write anything at any pace:
headers at one byte a second, headers that never end, an endless chunked body, nothing at all.
Friendly HTTP servers (tests/support/httpserver.py) cannot misbehave that much.

Scripts must end on their own: :meth:`RawServer.sleep` returns False once the server is stopped
or the script's time is up (``lifetime``), so a client that never gives up (the defect a test
looks for) still sees the connection closed after ``lifetime`` seconds instead of hanging the
test run. Writes to a client that has gone raise OSError, which ends the script quietly.

Usage::

    def drip(conn: socket.socket, server: RawServer) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\\r\\n")
        while server.sleep(0.5):
            conn.sendall(b"x")

    with RawServer(drip) as server:
        fetch(server.url("/"))
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType

__all__ = ["RawServer", "Script", "read_request"]

Script = Callable[[socket.socket, "RawServer"], None]


def read_request(conn: socket.socket, limit: int = 64 * 1024) -> bytes:
    """Read one request head (up to the blank line) from ``conn``; return it (b"" if none)."""
    data = b""
    while b"\r\n\r\n" not in data and len(data) < limit:
        piece = conn.recv(4096)
        if not piece:
            break
        data += piece
    return data


class RawServer:
    """A threaded TCP server on 127.0.0.1 running ``script`` for each connection."""

    def __init__(self, script: Script, *, lifetime: float = 20.0) -> None:
        self.script = script
        self.lifetime = lifetime
        self.connections = 0
        self._stopped = threading.Event()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self._listener.settimeout(0.1)
        self.port: int = self._listener.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, daemon=True)

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        """The URL of ``path`` on this server."""
        return f"http://{host}:{self.port}{path}"

    def sleep(self, seconds: float) -> bool:
        """Wait ``seconds``; False when the server stopped or the script's time is up."""
        deadline = getattr(_local, "deadline", None)
        if deadline is not None and time.monotonic() + seconds > deadline:
            return False
        return not self._stopped.wait(seconds)

    def __enter__(self) -> RawServer:
        self._acceptor.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stopped.set()
        self._acceptor.join(timeout=2)
        self._listener.close()
        for thread in self._threads:
            thread.join(timeout=2)

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _address = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        _local.deadline = time.monotonic() + self.lifetime
        conn.settimeout(self.lifetime)
        try:
            self.script(conn, self)
        except OSError:
            pass  # the client hung up: what these tests expect of it
        finally:
            conn.close()


_local = threading.local()
