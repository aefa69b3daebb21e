"""A tiny scriptable HTTP server on 127.0.0.1 for integration tests.

Each test starts its own :class:`LocalHTTPServer` (a ``ThreadingHTTPServer`` on an ephemeral
port, in a daemon thread) and scripts routes with :meth:`LocalHTTPServer.route`: status, header
lines (repeated names allowed), a body given as bytes or as a callable yielding chunks, an honest,
lying or missing Content-Length, chunked transfer coding, a delay before the headers or between
chunks (slow and dripping bodies). ``raw`` routes write arbitrary bytes to the socket. Every
request received is recorded in :attr:`LocalHTTPServer.requests`.

Usage::

    with LocalHTTPServer() as server:
        server.route("/a", status=302, headers=[("Location", "/b")])
        server.route("/b", body=b"hello")
        fetch(server.url("/a"))
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

__all__ = ["LocalHTTPServer", "Route", "SeenRequest"]

Body = bytes | Callable[[], Iterable[bytes]]


@dataclass
class Route:
    """What the server answers on one path.

    ``content_length``: ``"auto"`` sends the true length for a bytes body (and chunked for a
    callable body), an int sends that value whatever the body (a lie if it differs), None sends
    none and closes the connection after the body.
    """

    status: int = 200
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: Body = b""
    content_length: int | Literal["auto"] | None = "auto"
    chunked: bool = False
    headers_delay: float = 0.0
    chunk_delay: float = 0.0
    raw: bytes | None = None  # written as-is instead of a response
    # Decides the answer per request (method, Accept, query ...): returns the Route to send.
    respond: Callable[[SeenRequest], Route] | None = None


@dataclass(frozen=True)
class SeenRequest:
    """One request as the server received it."""

    method: str
    path: str
    headers: list[tuple[str, str]]

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or None."""
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: LocalHTTPServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients hanging up mid-body are expected in these tests: stay quiet."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """No access log on stderr."""

    def do_GET(self) -> None:
        self._serve()

    def do_HEAD(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self._serve()

    def _serve(self) -> None:
        owner = self.server.owner
        seen = SeenRequest(self.command, self.path, list(self.headers.items()))
        owner.record(seen)
        route = owner.routes.get(self.path.split("?", 1)[0])
        if route is None:
            route = Route(status=404, body=b"not found")
        elif route.respond is not None:
            route = route.respond(seen)
        try:
            self._answer(route, owner.stopping)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _answer(self, route: Route, stopping: threading.Event) -> None:
        if route.headers_delay and stopping.wait(route.headers_delay):
            self.close_connection = True
            return
        if route.raw is not None:
            self.wfile.write(route.raw)
            self.close_connection = True
            return
        chunks: Iterable[bytes] = [route.body] if isinstance(route.body, bytes) else route.body()
        chunked = route.chunked or (route.content_length == "auto" and callable(route.body))
        self.send_response(route.status)
        for name, value in route.headers:
            self.send_header(name, value)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        elif route.content_length == "auto":
            assert isinstance(route.body, bytes)
            self.send_header("Content-Length", str(len(route.body)))
        elif route.content_length is not None:
            self.send_header("Content-Length", str(route.content_length))
            self.close_connection = True  # a lying length would desynchronise keep-alive
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command == "HEAD":
            return
        for chunk in chunks:
            if route.chunk_delay and stopping.wait(route.chunk_delay):
                self.close_connection = True
                return
            if not chunk:
                continue
            if chunked:
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            else:
                self.wfile.write(chunk)
            self.wfile.flush()
        if chunked:
            self.wfile.write(b"0\r\n\r\n")


class LocalHTTPServer:
    """A threaded HTTP/1.1 server on 127.0.0.1 with scriptable routes (see the module doc)."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.requests: list[SeenRequest] = []
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def port(self) -> int:
        """The ephemeral port the server listens on."""
        return int(self._server.server_address[1])

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        """The URL of ``path`` on this server, optionally under another host name."""
        return f"http://{host}:{self.port}{path}"

    def route(self, path: str, **settings: Any) -> Route:
        """Script the answer on ``path`` (keyword arguments are :class:`Route` fields)."""
        route = Route(**settings)
        self.routes[path] = route
        return route

    def record(self, request: SeenRequest) -> None:
        """Remember a received request (called from handler threads)."""
        with self._lock:
            self.requests.append(request)

    def paths(self) -> list[str]:
        """The paths requested so far, in order."""
        with self._lock:
            return [request.path for request in self.requests]

    def start(self) -> LocalHTTPServer:
        """Start serving in a daemon thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, release slow handlers and close the listening socket."""
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> LocalHTTPServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
