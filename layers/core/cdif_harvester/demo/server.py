"""A real HTTP server that plays a publisher site, for the demo and for integration tests.

:class:`PublisherSite` serves a folder of files on 127.0.0.1 from a daemon thread, with
``{{BASE}}`` placeholders and ``.tmpl`` templates rendered at serve time, validators and
conditional answers like a real publisher's server, routes that tests add, and a log of every
request; :func:`demo_site_dir` is the bundled demo site.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from email.utils import formatdate, parsedate_to_datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import unquote, urlsplit

__all__ = ["PLACEHOLDER", "PublisherSite", "TimedRequest", "demo_site_dir", "max_overlap"]

PLACEHOLDER = b"{{BASE}}"
TEMPLATE_SUFFIX = ".tmpl"

_CONTENT_TYPES = {
    ".xml": "application/xml",
    ".gz": "application/gzip",
    ".html": "text/html; charset=utf-8",
    ".htm": "text/html; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".json": "application/ld+json",
    ".jsonld": "application/ld+json",
}
# Files whose bytes get {{BASE}} replaced; binary files (a ready-made .gz) are served as-is.
_TEXT_SUFFIXES = frozenset({".xml", ".html", ".htm", ".txt", ".json", ".jsonld"})

RequestRecord = tuple[str, str, dict[str, str]]


def demo_site_dir() -> Traversable:
    """Return the bundled demo publisher site (package data ``cdif_harvester/demo/site``)."""
    return files("cdif_harvester.demo").joinpath("site")


@dataclass(frozen=True)
class TimedRequest:
    """One request as the site served it: ``started`` when it arrived, ``finished`` when its
    answer had been written (both ``time.monotonic()`` seconds)."""

    method: str
    target: str
    status: int
    started: float
    finished: float


def max_overlap(requests: Iterable[TimedRequest], *, tolerance: float = 0.0) -> int:
    """The most requests in progress at one moment. ``tolerance`` forgives that much overlap
    between one answer's end and the next arrival (the server notes its end after the client may
    already have read the answer)."""
    events: list[tuple[float, int]] = []
    for request in requests:
        events.append((request.started, 1))
        events.append((max(request.started, request.finished - tolerance), -1))
    current = peak = 0
    for _, step in sorted(events):  # an end sorts before a start at the same instant
        current += step
        peak = max(peak, current)
    return peak


@dataclass(frozen=True)
class _Route:
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes


class PublisherSite:
    """A publisher site served over real HTTP on 127.0.0.1 (an ephemeral port unless one is given).

    The files of ``directory`` are served from a daemon thread. Text files may contain the
    placeholder ``{{BASE}}``, replaced at serve time by the server's base URL
    (``http://127.0.0.1:PORT``), so sitemaps and records carry absolute URLs whatever port the
    server got. A file ``NAME.tmpl`` is not served itself: it is the template of ``NAME``
    (rendered, and gzip-compressed when ``NAME`` ends in ``.gz``), which is how the bundled site
    ships a gzip sitemap that still holds absolute URLs.

    Files are served with an ``ETag`` (a hash of the bytes sent) and a ``Last-Modified`` (the
    file's modification time), and conditional requests get ``304 Not Modified`` as a real
    publisher's server would (``If-None-Match`` first, else ``If-Modified-Since``);
    ``conditional=False`` plays a server that ignores both and sends no validators.

    Tests can add routes that override files (any status, headers, body) and read the request
    log::

        with PublisherSite(demo_site_dir()) as site:
            site.add_route("/gone", status=410)
            urllib.request.urlopen(site.url("/robots.txt"))
            assert site.requests[0][:2] == ("GET", "/robots.txt")

    ``requests`` logs every request as ``(method, request target, headers)`` with lower-cased
    header names, in arrival order; ``timings`` logs each one's start and end (see
    :class:`TimedRequest`: ``time.monotonic()`` seconds), which is how tests measure how many
    requests a harvester had in flight on the site at once. ``response_delay`` seconds pass
    before every answer (a slow publisher). Connections are kept open between requests, as
    HTTP/1.1 servers do; ``keep_alive=False`` plays one that closes each after its answer.
    """

    def __init__(
        self,
        directory: Traversable | str | os.PathLike[str] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        response_delay: float = 0.0,
        conditional: bool = True,
        keep_alive: bool = True,
    ) -> None:
        if directory is None:
            directory = demo_site_dir()
        elif isinstance(directory, (str, os.PathLike)):
            directory = Path(directory)
        self.directory: Traversable = directory
        self.requests: list[RequestRecord] = []
        self.timings: list[TimedRequest] = []
        self.response_delay = response_delay
        self.conditional = conditional
        self.keep_alive = keep_alive
        self._started = time.time()
        self._host = host
        self._port = port
        self._routes: dict[str, _Route] = {}
        self._first_answers: dict[str, list[_Route]] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> Self:
        """Bind and start serving in a daemon thread; returns self."""
        if self._server is not None:
            return self
        server = _Server((self._host, self._port), _Handler)
        server.site = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"publisher-site-{server.server_address[1]}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port (idempotent)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- addresses ------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port; raises RuntimeError before :meth:`start`."""
        if self._server is None:
            raise RuntimeError("PublisherSite is not started")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT`` without a trailing slash; raises RuntimeError before start."""
        return f"http://{self._host}:{self.port}"

    def url(self, path: str = "/") -> str:
        """Return the absolute URL of ``path`` on this site."""
        return self.base_url + (path if path.startswith("/") else "/" + path)

    # -- routes ---------------------------------------------------------------------------------

    def add_route(
        self,
        path: str,
        status: int = 200,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
        body: bytes | str = b"",
        *,
        times: int | None = None,
    ) -> None:
        """Answer requests for ``path`` with this status, headers and body instead of a file.

        With ``times``, only the next ``times`` requests get this answer; then the route set
        before (or the file) answers again: how a test plays "429 now, 200 later".

        ``path`` is matched against the full request target first (with its query), then
        against the path alone. ``headers`` may repeat a name (pass pairs, e.g. several
        ``Link`` headers). ``{{BASE}}`` is replaced in header values and in the body. A
        ``Content-Length`` given here is sent as given (to play a lying server); otherwise the
        body's length is sent.
        """
        pairs = headers.items() if isinstance(headers, Mapping) else (headers or ())
        raw = body.encode("utf-8") if isinstance(body, str) else body
        route = _Route(status, tuple((str(k), str(v)) for k, v in pairs), raw)
        if times is None:
            self._routes[path] = route
        else:
            with self._lock:
                self._first_answers.setdefault(path, []).extend([route] * times)

    # -- serving (called from handler threads) --------------------------------------------------

    def _render(self, data: bytes) -> bytes:
        return data.replace(PLACEHOLDER, self.base_url.encode("ascii"))

    def _respond(
        self, target: str, request: Mapping[str, str] | None = None
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        path = urlsplit(target).path or "/"
        route = self._take_first_answer(target) or self._take_first_answer(path)
        route = route or self._routes.get(target) or self._routes.get(path)
        if route is not None:
            base = self.base_url
            headers = [(k, v.replace("{{BASE}}", base)) for k, v in route.headers]
            return route.status, headers, self._render(route.body)
        found = self._file(unquote(path))
        if found is None:
            body = b"Not Found\n"
            return 404, [("Content-Type", "text/plain; charset=utf-8")], body
        name, data, modified = found
        suffix = _suffix(name)
        headers = [("Content-Type", _CONTENT_TYPES.get(suffix, "application/octet-stream"))]
        if not self.conditional:
            return 200, headers, data
        etag = '"' + hashlib.sha256(data).hexdigest()[:24] + '"'
        headers += [("ETag", etag), ("Last-Modified", formatdate(modified, usegmt=True))]
        if _not_modified(request or {}, etag, modified):
            return 304, headers[1:], b""
        return 200, headers, data

    def _take_first_answer(self, key: str) -> _Route | None:
        with self._lock:
            waiting = self._first_answers.get(key)
            return waiting.pop(0) if waiting else None

    def _file(self, path: str) -> tuple[str, bytes, float] | None:
        """Return (file name, bytes to send, modification time) for a URL path, or None."""
        parts = [part for part in path.split("/") if part]
        if any(part in {".", ".."} or part.startswith(".") or "\\" in part for part in parts):
            return None
        if path.endswith("/") or not parts:
            parts.append("index.html")
        name = parts[-1]
        if name.endswith(TEMPLATE_SUFFIX):
            return None  # templates are served only through what they render
        node = _walk(self.directory, parts)
        if node is not None and node.is_file():
            data = node.read_bytes()
            rendered = self._render(data) if _suffix(name) in _TEXT_SUFFIXES else data
            return name, rendered, self._modified(node)
        template = _walk(self.directory, [*parts[:-1], name + TEMPLATE_SUFFIX])
        if template is None or not template.is_file():
            return None
        data = self._render(template.read_bytes())
        if name.endswith(".gz"):
            data = gzip.compress(data, mtime=0)
        return name, data, self._modified(template)

    def _modified(self, node: Traversable) -> float:
        """The file's modification time (whole seconds, as HTTP dates have), else start time."""
        if isinstance(node, Path):
            return float(int(node.stat().st_mtime))
        return float(int(self._started))


def _not_modified(request: Mapping[str, str], etag: str, modified: float) -> bool:
    """RFC 9110 section 13.2.2: If-None-Match decides when present, else If-Modified-Since."""
    if_none_match = request.get("if-none-match")
    if if_none_match is not None:
        tags = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
        return "*" in tags or etag in tags
    if_modified_since = request.get("if-modified-since")
    if if_modified_since is None:
        return False
    try:
        since = parsedate_to_datetime(if_modified_since).timestamp()
    except (TypeError, ValueError):
        return False
    return modified <= since


def _suffix(name: str) -> str:
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else ""


def _walk(root: Traversable, parts: list[str]) -> Traversable | None:
    node = root
    for index, part in enumerate(parts):
        if index and not node.is_dir():
            return None
        node = node.joinpath(part)
    return node


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True  # a restarted site can rebind a port in TIME_WAIT
    site: PublisherSite

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet: a client that hangs up mid-answer is routine in tests."""


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    # An idle kept connection is closed after this many seconds (its thread ends with it).
    timeout = 30
    # Headers and body go out in two writes: with Nagle's algorithm the second would wait for
    # the client's delayed ACK (40 ms a request) on a kept connection.
    disable_nagle_algorithm = True
    server_version = "DemoPublisher/1.0"
    sys_version = ""

    def do_GET(self) -> None:
        self._answer(send_body=True)

    def do_HEAD(self) -> None:
        self._answer(send_body=False)

    def _answer(self, *, send_body: bool) -> None:
        started = time.monotonic()
        site = self.server.site
        site.requests.append(
            (self.command, self.path, {k.lower(): v for k, v in self.headers.items()})
        )
        if site.response_delay > 0:
            time.sleep(site.response_delay)
        request = {k.lower(): v for k, v in self.headers.items()}
        status, headers, body = site._respond(self.path, request)
        self.send_response(status, _reason(status))
        names = {name.lower() for name, _ in headers}
        for name, value in headers:
            self.send_header(name, value)
        if "content-length" not in names:
            self.send_header("Content-Length", str(len(body)))
        if not site.keep_alive:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if send_body and body:
            self.wfile.write(body)
        self.wfile.flush()
        site.timings.append(
            TimedRequest(self.command, self.path, status, started, time.monotonic())
        )

    def log_message(self, format: str, *args: Any) -> None:
        """No access log on stderr; tests read ``PublisherSite.requests`` instead."""


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Status"
