"""The one safe HTTP fetcher every stage uses (httpx underneath).

:class:`SafeFetcher` implements the :class:`~cdif_harvester.ports.Fetcher` port: the address
policy on the URL and on every resolved address, pinned in :class:`PinnedBackend`; redirects
followed hop by hop; bodies streamed and capped, Content-Encoding decoded within the same cap;
one deadline per fetch over connect, response head and body, and a cap on the response head
(:class:`_BoundedStream`); no cookies, no proxies from the environment. Nothing from httpx
reaches callers: errors are those of :mod:`cdif_harvester.errors`, any HTTP status a
:class:`~cdif_harvester.model.FetchResponse`.

See docs/decisions/0012-address-policy-pinned.md, docs/decisions/0013-bounded-fetcher.md,
docs/decisions/0048-one-fetch-deadline.md and docs/decisions/0099-a-lean-fetch-path.md.
"""

from __future__ import annotations

import re
import socket
import ssl
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache
from types import TracebackType
from typing import NamedTuple, Self

import httpcore
import httpx

from cdif_harvester import USER_AGENT
from cdif_harvester.adapters import netpolicy
from cdif_harvester.adapters.netpolicy import IPAddress
from cdif_harvester.errors import (
    AddressRefused,
    BodyTooLarge,
    FetchFailed,
    FetchTimeout,
    HarvestError,
    PermanentError,
    RedirectError,
    TooSlow,
)
from cdif_harvester.model import FetchResponse

__all__ = [
    "ACCEPT_ENCODING",
    "FetchPolicy",
    "PinnedBackend",
    "Resolver",
    "SafeFetcher",
    "default_ssl_context",
    "system_resolver",
]

KiB = 1024
MiB = 1024 * KiB

#: The content-codings the fetcher offers and decodes itself.
ACCEPT_ENCODING = "gzip, deflate"

#: Resolves (host, port) to IP address strings; injectable so tests need no DNS.
Resolver = Callable[[str, int], list[str]]

_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

# Headers the fetcher owns: a caller value would break decoding (Accept-Encoding), the pinned
# connection's Host, message framing, or the fetcher's identification.
_RESERVED_HEADERS = frozenset(
    {
        "accept-encoding",
        "connection",
        "content-length",
        "host",
        "te",
        "transfer-encoding",
        "upgrade",
        "user-agent",
    }
)

# Headers that must not follow a redirect to another origin (as browsers and httpx do).
_CREDENTIAL_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})

# Output produced per zlib call: keeps each step small whatever the cap.
_INFLATE_STEP = 64 * 1024
_GZIP_WBITS = 16 + zlib.MAX_WBITS
_ZLIB_WBITS = zlib.MAX_WBITS
_RAW_DEFLATE_WBITS = -zlib.MAX_WBITS
_MAX_CODINGS = 2


def system_resolver(host: str, port: int) -> list[str]:
    """Resolve ``host`` with the operating system (``socket.getaddrinfo``), TCP only.

    Returns the distinct IPv4 and IPv6 addresses in the resolver's order.
    """
    addresses: list[str] = []
    for family, _type, _proto, _name, sockaddr in socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM
    ):
        if family in (socket.AF_INET, socket.AF_INET6):
            address = str(sockaddr[0])
            if address not in addresses:
                addresses.append(address)
    return addresses


@dataclass(frozen=True)
class FetchPolicy:
    """Limits and settings of a :class:`SafeFetcher`; the defaults suit harvesting the web.

    Attributes:
        connect_timeout: seconds to open a TCP connection (and finish the TLS handshake).
        read_timeout: seconds to wait for any single read (headers or a body chunk).
        total_timeout: seconds for the whole fetch: every connection, response head and body,
            redirects included.
        max_bytes: body bytes accepted per response, on the wire and once decoded
            (``fetch(max_bytes=...)`` overrides it per call).
        max_decompressed_bytes: an upper bound on decoded body bytes whatever ``max_bytes`` says;
            the decoded cap is the smaller of the two.
        max_header_bytes: bytes accepted per response head (status line, headers and any
            interim 1xx responses), ``Link`` field lines left out.
        max_link_header_bytes: bytes of ``Link`` field lines accepted per response head on top
            of ``max_header_bytes``; the two make the hard ceiling of a response head.
        max_redirects: redirects followed before giving up.
        allow_loopback: let 127.0.0.0/8 and ::1 through (local runs and tests only).
        user_agent: the User-Agent sent; names the product and a contact URL.
        resolver: host name resolution, ``(host, port) -> [IP address, ...]``.
        ssl_context: TLS settings; None verifies certificates against certifi's CA bundle.
    """

    connect_timeout: float = 5.0
    read_timeout: float = 10.0
    total_timeout: float = 30.0
    max_bytes: int = 10 * MiB
    max_decompressed_bytes: int = 50 * MiB
    # 32 KiB: four times the 8 KiB that nginx (proxy_buffer_size) and most proxies accept for
    # an upstream's response head (docs/decisions/0048-one-fetch-deadline.md).
    max_header_bytes: int = 32 * KiB
    # 1 MiB of Link lines: 1,000 links (what the Link header reader keeps per page) of 1 KiB
    # each; a page whose metadata link sits among many others is read, not failed
    # (docs/decisions/0066-reading-link-headers.md).
    max_link_header_bytes: int = 1 * MiB
    max_redirects: int = 5
    allow_loopback: bool = False
    user_agent: str = USER_AGENT
    resolver: Resolver = field(default=system_resolver)
    ssl_context: ssl.SSLContext | None = None

    def __post_init__(self) -> None:
        for name in ("connect_timeout", "read_timeout", "total_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"FetchPolicy.{name} must be positive")
        for name in (
            "max_bytes",
            "max_decompressed_bytes",
            "max_header_bytes",
            "max_link_header_bytes",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"FetchPolicy.{name} must be positive")
        if self.max_redirects < 0:
            raise ValueError("FetchPolicy.max_redirects must not be negative")


class _Budget:
    """What one fetch may still spend: its deadline, and the bytes of the current response head.

    One budget per :meth:`SafeFetcher.fetch`, shared by its redirect hops; the connection's
    stream (:class:`_BoundedStream`) reads it from :data:`_BUDGET` on every socket operation.
    """

    def __init__(self, policy: FetchPolicy, deadline: float) -> None:
        self.total_timeout = policy.total_timeout
        self.max_header_bytes = policy.max_header_bytes
        self.max_link_header_bytes = policy.max_link_header_bytes
        self.max_head_bytes = policy.max_header_bytes + policy.max_link_header_bytes
        self.deadline = deadline
        self.url = ""
        self.head_open = False  # from sending a request until its final response head is read
        self.head_bytes = 0
        self.received = 0  # bytes received from the server for the current hop
        self.lines = _HeadLines()

    def start_hop(self, url: str) -> None:
        """A new request is about to be sent: its response head starts empty."""
        self.url = url
        self.head_open = True
        self.head_bytes = 0
        self.received = 0
        self.lines = _HeadLines()

    def remaining(self) -> float:
        """Seconds left before the deadline (negative once it has passed)."""
        return self.deadline - time.monotonic()

    def expired(self) -> HarvestError:
        """The error for a deadline that has passed, by what the server had sent by then.

        A server that had sent nothing (a silent or overloaded one) may answer next time: a
        retryable FetchTimeout. One still sending, head or body, kept the connection busy for
        the whole deadline: TooSlow, permanent (docs/decisions/0048-one-fetch-deadline.md).
        """
        limit = f"total time limit of {self.total_timeout} s exceeded"
        if not self.received:
            return FetchTimeout(
                f"{self.url}: {limit} before the server sent anything", reason="total-timeout"
            )
        where = "the response head" if self.head_open else "the body"
        return TooSlow(
            f"{self.url}: {limit} while the server was still sending {where} "
            f"({self.received} bytes received)",
        )

    def count_head(self, data: bytes) -> None:
        """Count ``data``, read while the response head is awaited, against the head caps."""
        self.head_bytes += len(data)
        self.lines.feed(data)
        if self.lines.other > self.max_header_bytes:
            raise self.head_too_large()

    def head_too_large(self) -> PermanentError:
        """The error for a response head over :attr:`FetchPolicy.max_header_bytes` (``Link``
        lines left out) or over the ceiling, ``Link`` lines included."""
        if self.lines.other > self.max_header_bytes:
            what = f"response head exceeds {self.max_header_bytes} bytes"
        else:
            what = (
                f"response head exceeds {self.max_head_bytes} bytes "
                f"({self.max_link_header_bytes} of them for Link headers)"
            )
        return PermanentError(
            f"{self.url}: {what} (headers this large are refused; many links belong in a "
            "linkset, RFC 9264, not in Link headers)",
            reason="headers-too-large",
        )


# The bytes of a status line that say whether a head is interim: "HTTP/1.1 1xx".
_STATUS_BYTES = 12
# The blank line that ends a head, and a Link field line with the obs-fold lines continuing it.
_BLANK_LINE = re.compile(rb"^\r?\n", re.MULTILINE)
_LINK_LINES = re.compile(rb"^link:[^\n]*\n(?:[ \t][^\n]*\n)*", re.IGNORECASE | re.MULTILINE)


class _HeadLines:
    """Bytes of a response head as they arrive, split into ``Link`` field lines and the rest.

    Each line is classified by its first five bytes (``link:`` in any case; a line starting
    with white space continues the previous one, RFC 9112 obs-fold); the rest of a line is
    found with ``bytes.find``, so the count costs one pass. The blank line ending an interim
    head (a 1xx status other than 101) is followed by the next head, which is counted on: the
    interim heads and the final one count as one head, however they are cut into reads. The
    blank line ending the final head ends the count (what follows in the same read is body).
    """

    def __init__(self) -> None:
        self.link = 0
        self.other = 0
        self._start = b""  # the first bytes of the current line, while it is not classified
        self._is_link: bool | None = None  # the current line's kind, once known
        self._last_was_link = False
        self._status = b""  # the first bytes of the current head's status line (12 at most)
        self._status_read = False  # whether they are all there

    def feed(self, data: bytes) -> None:
        """Count ``data``, the next bytes of the head (and of the heads after interim ones)."""
        while data:
            self._read_status(data)
            end = self._count(data)
            if end < 0 or not self._interim():
                return
            data = data[end:]  # the next head starts here
            self._status, self._status_read = b"", False

    def _read_status(self, data: bytes) -> None:
        """Keep the first bytes of the head's status line, as far as ``data`` goes on with it."""
        if self._status_read:
            return
        piece = data[: _STATUS_BYTES - len(self._status)]
        newline = piece.find(b"\n")
        if newline != -1:
            piece, self._status_read = piece[:newline], True
        self._status += piece
        if len(self._status) >= _STATUS_BYTES:
            self._status_read = True

    def _interim(self) -> bool:
        """Whether the head just ended is an interim one: 1xx, but not 101 (after a switch of
        protocols nothing is a head)."""
        parts = self._status.split(b" ", 2)
        code = parts[1] if len(parts) > 1 else b""
        return parts[0].startswith(b"HTTP/") and code[:1] == b"1" and code[:3] != b"101"

    def _add(self, count: int, *, is_link: bool) -> None:
        if is_link:
            self.link += count
        else:
            self.other += count

    def _count(self, data: bytes) -> int:
        """Count ``data`` up to the blank line ending the head; return where that line ends
        in ``data``, or -1 when the head goes on past it."""
        if not self._start and self._is_link is None and not self._last_was_link:
            # At the start of a line, as a head read in one piece is: two searches count it
            # as the loop below would, line by line.
            blank = _BLANK_LINE.search(data)
            if blank is not None:
                head = data[: blank.end()]
                link = sum(map(len, _LINK_LINES.findall(head)))
                self.link += link
                self.other += len(head) - link
                return blank.end()
        pos, size = 0, len(data)
        while pos < size:
            if self._is_link is None:
                piece = data[pos : pos + 5 - len(self._start)]
                newline = piece.find(b"\n")
                if newline != -1:
                    piece = piece[: newline + 1]
                self._start += piece
                pos += len(piece)
                if newline == -1 and len(self._start) < 5:
                    return -1  # the line's first bytes are still to come
                start, self._start = self._start, b""
                if start in (b"\r\n", b"\n"):  # the blank line that ends a head
                    self.other += len(start)
                    self._last_was_link = False
                    return pos
                if start[:1] in (b" ", b"\t"):
                    is_link = self._last_was_link
                else:
                    is_link = start.lower() == b"link:"
                self._add(len(start), is_link=is_link)
                if newline == -1:
                    self._is_link = is_link
                else:
                    self._last_was_link = is_link
                continue
            newline = data.find(b"\n", pos)
            end = size if newline == -1 else newline + 1
            self._add(end - pos, is_link=self._is_link)
            pos = end
            if newline != -1:
                self._last_was_link, self._is_link = self._is_link, None
        return -1


# The budget of the fetch running in this thread (or context); None outside SafeFetcher.fetch.
_BUDGET: ContextVar[_Budget | None] = ContextVar("cdif_fetch_budget", default=None)


def _bounded(budget: _Budget, timeout: float | None) -> tuple[float, bool]:
    """The timeout to give one socket operation, and whether the deadline is what limits it.

    Raises the budget's expiry error when the deadline has already passed.
    """
    remaining = budget.remaining()
    if remaining <= 0:
        raise budget.expired()
    if timeout is None or remaining < timeout:
        return remaining, True
    return timeout, False


class _BoundedStream(httpcore.NetworkStream):
    """A connection's stream that holds every read and write to the running fetch's budget.

    httpcore's timeouts apply to one socket operation each, so a server sending one byte at a
    time resets them forever; here each operation may wait at most until the fetch's deadline,
    and the bytes read while a response head is awaited are counted against the head caps (each
    read asks for no more than the room left under the ceiling, so the ceiling is exact; bytes
    other than ``Link`` lines past their cap end the fetch at the read that brought them). The
    budget is looked up per
    operation because pooled connections outlive the fetch that opened them.
    """

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        """Read up to ``max_bytes``, within the deadline and the head cap of the fetch."""
        budget = _BUDGET.get()
        if budget is None:
            return self._inner.read(max_bytes, timeout)
        if budget.head_open:
            room = budget.max_head_bytes - budget.head_bytes
            if room <= 0:
                raise budget.head_too_large()
            max_bytes = min(max_bytes, room)
        limit, by_deadline = _bounded(budget, timeout)
        try:
            data = self._inner.read(max_bytes, limit)
        except httpcore.ReadTimeout:
            if by_deadline:
                raise budget.expired() from None
            raise
        budget.received += len(data)
        if budget.head_open:
            budget.count_head(data)
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        """Write ``buffer``, within the deadline of the fetch."""
        budget = _BUDGET.get()
        if budget is None:
            self._inner.write(buffer, timeout)
            return
        limit, by_deadline = _bounded(budget, timeout)
        try:
            self._inner.write(buffer, limit)
        except httpcore.WriteTimeout:
            if by_deadline:
                raise budget.expired() from None
            raise

    def close(self) -> None:
        """Close the connection."""
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        """Upgrade to TLS; the handshake too must end before the deadline."""
        budget = _BUDGET.get()
        if budget is not None:
            timeout, _by_deadline = _bounded(budget, timeout)
        return _BoundedStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> object:
        """What the wrapped stream says (the socket, the TLS object, the addresses)."""
        return self._inner.get_extra_info(info)


class PinnedBackend(httpcore.NetworkBackend):
    """An httpcore network backend that resolves, checks and connects to the checked address.

    ``connect_tcp`` is where httpcore opens every connection, so putting the policy here covers
    every request and every redirect hop, and the address connected to is the one that was
    checked: there is no second resolution an attacker could answer differently.
    """

    def __init__(
        self,
        resolver: Resolver = system_resolver,
        *,
        allow_loopback: bool = False,
        inner: httpcore.NetworkBackend | None = None,
    ) -> None:
        self._resolver = resolver
        self._allow_loopback = allow_loopback
        self._inner = inner if inner is not None else httpcore.SyncBackend()

    def resolve(self, host: str, port: int) -> list[IPAddress]:
        """Return the addresses of ``host`` once every one has passed the policy.

        Raises AddressRefused when the host or any of its addresses is refused (see
        :func:`netpolicy.check_resolved` for why one bad address refuses the name), and
        FetchFailed (``dns-failure``) when the name does not resolve.
        """
        literal = netpolicy.check_host(host, allow_loopback=self._allow_loopback)
        if literal is not None:
            return [literal]
        try:
            answers = self._resolver(host, port)
        except (OSError, UnicodeError) as exc:
            raise FetchFailed(f"could not resolve {host}: {exc}", reason="dns-failure") from exc
        if not answers:
            raise FetchFailed(f"{host} resolved to no address", reason="dns-failure")
        return netpolicy.check_resolved(host, answers, allow_loopback=self._allow_loopback)

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        """Resolve and check ``host``, then connect to a checked address (in resolver order).

        Falls back to the next checked address when one cannot be reached (an IPv6 address on
        a host without IPv6 connectivity, say); all of them passed the policy.
        """
        failure: Exception | None = None
        budget = _BUDGET.get()
        for address in self.resolve(host, port):
            limit = timeout
            if budget is not None:  # each fallback address within what is left of the deadline
                limit, _by_deadline = _bounded(budget, timeout)
            try:
                stream = self._inner.connect_tcp(
                    str(address),
                    port,
                    timeout=limit,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
            else:
                return _BoundedStream(stream)
        assert failure is not None  # resolve() never returns an empty list
        raise failure

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        """Refused: the fetcher only talks TCP to checked addresses."""
        raise AddressRefused("refused a Unix socket connection", reason="scheme-not-allowed")

    def sleep(self, seconds: float) -> None:
        """Sleep as the wrapped backend does (httpcore uses it between connection retries)."""
        self._inner.sleep(seconds)


def _allow_head_of(size: int) -> None:
    """Let httpcore's HTTP/1.1 parser (h11) buffer a response head of ``size`` bytes.

    httpcore gives every connection a head limit of 100 KiB, a class attribute that no
    argument reaches. The fetcher's own ceiling (:class:`_BoundedStream`) is exact and lower
    than whatever this is set to, so the class limit is only ever raised, process-wide: for
    any other httpcore client it stays a bound, just a larger one.
    """
    connection = httpcore.HTTP11Connection
    connection.MAX_INCOMPLETE_EVENT_SIZE = max(connection.MAX_INCOMPLETE_EVENT_SIZE, size)


class _PinnedTransport(httpx.HTTPTransport):
    """An httpx transport whose connection pool opens connections through a PinnedBackend."""

    def __init__(
        self, backend: httpcore.NetworkBackend, ssl_context: ssl.SSLContext, limits: httpx.Limits
    ) -> None:
        super().__init__(verify=ssl_context, trust_env=False, limits=limits)
        # httpx has no public way to give HTTPTransport a network backend, so the pool it has
        # just built (and not used) is replaced by the same pool with our backend. HTTPTransport
        # keeps all its request/response/exception handling. ``_pool`` is the only private name
        # relied on; the check makes an incompatible httpx fail here, loudly, instead of
        # silently connecting without the policy.
        if not isinstance(getattr(self, "_pool", None), httpcore.ConnectionPool):
            raise RuntimeError("unsupported httpx version: HTTPTransport._pool not found")
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            http1=True,
            http2=False,
            retries=0,
            network_backend=backend,
        )


class _Decoder:
    """Streaming decoder of one content-coding (gzip or deflate) with a cap on its output.

    Each zlib call is limited (``max_length``) so at most the cap, plus one step, is ever
    produced: a decompression bomb is stopped at the cap, not after expanding in memory.
    """

    def __init__(self, coding: str, cap: int, url: str) -> None:
        self._coding = coding
        self._gzip = coding in ("gzip", "x-gzip")
        self._cap = cap
        self._url = url
        self._produced = 0
        # "deflate" should be zlib-wrapped (RFC 9110) but many servers send raw deflate: try
        # zlib first and, if the first bytes are not a zlib header, start again in raw mode.
        self._sniffing = coding == "deflate"
        self._sniffed = b""
        self._obj = zlib.decompressobj(_GZIP_WBITS if self._gzip else _ZLIB_WBITS)
        self._member_started = False
        self._member_output = 0
        self._finished = False
        # The output under the cap of the call that went over it (see _inflate).
        self.overflow = b""

    def feed(self, data: bytes) -> bytes:
        """Decode the next piece of encoded body; return the decoded bytes it yields."""
        if not data or self._finished:
            return b""
        try:
            if self._sniffing:
                self._sniffed += data
                try:
                    out = self._inflate(data)
                except zlib.error:
                    self._sniffing = False
                    self._obj = zlib.decompressobj(_RAW_DEFLATE_WBITS)
                    self._produced = 0
                    return self._inflate(self._sniffed)
                if len(self._sniffed) >= 2 or out:  # the zlib header has been accepted
                    self._sniffing = False
                    self._sniffed = b""
                return out
            return self._inflate(data)
        except zlib.error as exc:
            raise PermanentError(
                f"{self._url}: {self._coding} body cannot be decoded: {exc}",
                reason="content-decoding-error",
            ) from exc

    def finish(self) -> None:
        """Check the encoded body ended where the compressed stream ends."""
        if self._member_started and not self._obj.eof and not self._finished:
            raise FetchFailed(
                f"{self._url}: {self._coding} body ends before the compressed stream does",
                reason="truncated-body",
            )

    def _inflate(self, data: bytes) -> bytes:
        out = bytearray()
        buf = data
        more = bool(buf)
        while more:
            if self._obj.eof:
                if not self._gzip:
                    self._finished = True  # bytes after a deflate stream are ignored
                    break
                # RFC 1952 allows several gzip members in a row: decode the next one.
                self._obj = zlib.decompressobj(_GZIP_WBITS)
                self._member_output = 0
            self._member_started = True
            step = min(_INFLATE_STEP, self._cap - self._produced + 1)
            try:
                piece = self._obj.decompress(buf, step)
            except zlib.error:
                if self._gzip and self._member_output == 0 and self._produced > 0:
                    # Garbage (often padding) after a complete gzip member: ignored, as
                    # browsers and gzip(1) do.
                    self._finished = True
                    break
                raise
            self._produced += len(piece)
            self._member_output += len(piece)
            if self._produced > self._cap:
                # What fits under the cap, for a caller that reads a body cut at the cap.
                self.overflow = bytes(out) + piece[: len(piece) - (self._produced - self._cap)]
                raise BodyTooLarge(
                    f"{self._url}: body decompresses to more than {self._cap} bytes",
                    reason="decompressed-too-large",
                )
            out += piece
            if self._obj.eof:
                buf = self._obj.unused_data
                more = bool(buf)
            else:
                buf = self._obj.unconsumed_tail
                # A full step may mean zlib holds more output for input it already took.
                more = bool(buf) or len(piece) == step
        return bytes(out)


def _decoders(response: httpx.Response, cap: int, url: str) -> list[_Decoder]:
    """The decoders for the response's Content-Encoding, in decoding order."""
    codings = [
        coding.strip().lower()
        for value in response.headers.get_list("content-encoding")
        for coding in value.split(",")
    ]
    codings = [coding for coding in codings if coding and coding != "identity"]
    unsupported = [coding for coding in codings if coding not in ("gzip", "x-gzip", "deflate")]
    if unsupported or len(codings) > _MAX_CODINGS:
        raise PermanentError(
            f"{url}: unsupported Content-Encoding {', '.join(codings)!r} "
            f"(only {ACCEPT_ENCODING} is accepted)",
            reason="unsupported-content-encoding",
        )
    # Codings are listed in the order they were applied, so they are undone in reverse.
    return [_Decoder(coding, cap, url) for coding in reversed(codings)]


def _header_lines(response: httpx.Response) -> tuple[tuple[str, str], ...]:
    """Every header line in order, names lower-cased, repeated headers kept apart."""
    lines: list[tuple[str, str]] = []
    for name, value in response.headers.raw:
        try:
            text = value.decode("utf-8")
        except UnicodeDecodeError:
            text = value.decode("latin-1")
        lines.append((name.decode("latin-1").lower(), text))
    return tuple(lines)


def _url_key(url: httpx.URL) -> tuple[str, str, int | None, str]:
    """What makes two URLs the same request target (default port and fragment ignored)."""
    default_port = {"http": 80, "https": 443}.get(url.scheme)
    port = None if url.port == default_port else url.port
    return (url.scheme, url.raw_host.decode("ascii"), port, url.raw_path.decode("ascii"))


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    scheme, host, port, _path = _url_key(url)
    return scheme, host, port


def _root_causes(exc: BaseException) -> Iterator[BaseException]:
    """The exception and those it was raised from or during, nearest first."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _network_reason(exc: BaseException, default: str) -> str:
    for cause in _root_causes(exc):
        if isinstance(cause, ssl.SSLError | ssl.CertificateError):
            return "tls-error"
        if isinstance(cause, ConnectionRefusedError):
            return "connection-refused"
        if isinstance(cause, ConnectionResetError | BrokenPipeError):
            return "connection-reset"
    return default


#: What is left of a response the fetcher did not read (the end of a HEAD or 304 answer, a
#: redirect's body, the rest of a refused or cut body) is read and dropped when it is at most this
#: long and arrives within :data:`DRAIN_SECONDS`, so the connection goes back to the pool; a
#: longer or slower rest costs the connection instead
#: (docs/decisions/0078-cold-start-layer-and-connections.md).
DRAIN_BYTES = 64 * KiB
DRAIN_SECONDS = 1.0


def _bodiless(method: str, status: int) -> bool:
    """Whether a response to ``method`` with ``status`` has no body (RFC 9110 section 6.4.1)."""
    return method == "HEAD" or status in (204, 304) or 100 <= status < 200


def _drain(response: httpx.Response, chunks: Iterator[bytes]) -> None:
    """Read the unread rest of ``response`` (a short one only) so its connection can be reused.

    Within the fetch's deadline and at most :data:`DRAIN_SECONDS` of it; any error, a rest
    declared or found longer than :data:`DRAIN_BYTES`, or no running fetch ends the drain, and
    the caller's ``response.close()`` then discards the connection.
    """
    budget = _BUDGET.get()
    if response.is_closed or budget is None:
        return
    if not _bodiless(response.request.method, response.status_code):
        declared = response.headers.get("content-length", "").strip()
        if declared.isdigit() and int(declared) - response.num_bytes_downloaded > DRAIN_BYTES:
            return
    deadline = budget.deadline
    budget.deadline = min(deadline, time.monotonic() + DRAIN_SECONDS)
    left = DRAIN_BYTES
    try:
        for raw in chunks:
            left -= len(raw)
            if left < 0:
                return
    except Exception:  # noqa: BLE001 - whatever ends the drain, the connection is dropped
        return
    finally:
        # A redirect's next hop still has the whole deadline of the fetch.
        budget.deadline = deadline


def _current_budget() -> _Budget:
    """The budget of the fetch under way (set by :meth:`SafeFetcher.fetch`)."""
    budget = _BUDGET.get()
    if budget is None:
        raise RuntimeError("no fetch under way")
    return budget


# httpcore exceptions are normally turned into httpx ones by the transport; these are caught too
# in case one escapes (a stream closed outside httpx's exception mapping, say).
_HTTPCORE_ERRORS = (
    httpcore.TimeoutException,
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.UnsupportedProtocol,
    httpcore.ProxyError,
)


class _Final(NamedTuple):
    """The final answer of one exchange (a redirect is a plain ``(target, status)`` tuple)."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    truncated: bool


@cache
def default_ssl_context() -> ssl.SSLContext:
    """The TLS settings of a fetcher given none: certificates verified against certifi's CA
    bundle, no proxy or certificate settings read from the environment.

    Built once per process and shared by its fetchers: reading the bundle takes tens of
    milliseconds, and every fetcher verifies against the same one (httpcore sets only the
    ALPN protocols on it, to the same value for every connection).
    """
    return httpx.create_ssl_context(verify=True, trust_env=False)


class SafeFetcher:
    """The safe HTTP fetcher (implements :class:`~cdif_harvester.ports.Fetcher`).

    One fetcher holds one connection pool, so connections are reused across fetches; it is meant
    to live as long as the process (a Lambda container, a local run). Close it with :meth:`close`
    or use it as a context manager.
    """

    def __init__(self, policy: FetchPolicy | None = None) -> None:
        self.policy = policy if policy is not None else FetchPolicy()
        self._backend = PinnedBackend(
            self.policy.resolver, allow_loopback=self.policy.allow_loopback
        )
        ssl_context = self.policy.ssl_context
        if ssl_context is None:
            ssl_context = default_ssl_context()
        _allow_head_of(self.policy.max_header_bytes + self.policy.max_link_header_bytes)
        # Requests go straight to the transport, not through an httpx.Client: the fetcher
        # follows redirects itself, sends no cookies and reads no proxy settings, so the client
        # would only add work per request (a cookie jar read and written through http.cookiejar,
        # the URL parsed again). See docs/decisions/0099-a-lean-fetch-path.md.
        self._transport = _PinnedTransport(self._backend, ssl_context, httpx.Limits())
        self._closed = False
        # The headers of every request, in the order an httpx.Client with these defaults sent
        # them (with each name lower-cased, to find the ones a caller replaces).
        self._headers = [
            (name, name.lower(), value)
            for name, value in (
                ("Accept", "*/*"),
                ("Connection", "keep-alive"),
                ("User-Agent", self.policy.user_agent),
                ("Accept-Encoding", ACCEPT_ENCODING),
            )
        ]

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close every pooled connection; the fetcher cannot be used afterwards."""
        self._closed = True
        self._transport.close()

    def fetch(
        self,
        url: str,
        *,
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        max_bytes: int | None = None,
        truncate: bool = False,
    ) -> FetchResponse:
        """Fetch ``url`` under the policy and return the final response, whatever its status.

        ``headers`` are added to the request, except the ones the fetcher owns (User-Agent,
        Accept-Encoding, Host and framing headers), which are ignored; Authorization and Cookie
        are dropped when a redirect leaves the origin. ``max_bytes`` overrides the wire cap of
        the policy for this call. A HEAD request returns an empty body. With ``truncate``, a body
        over the cap (on the wire or decoded) is cut at the cap and returned with
        ``truncated=True`` instead of raising BodyTooLarge (a declared Content-Length over the
        cap is then read up to the cap too).

        The body is returned decoded (gzip/deflate undone); the headers are exactly as received,
        so Content-Encoding and Content-Length describe the body as it was on the wire.

        ``FetchResponse.redirects`` lists the URLs that answered with a redirect, starting with
        ``url`` itself, so ``redirects + (response.url,)`` is the whole chain.

        Without ``truncate`` a returned body is always whole: a body over ``max_bytes``, on the
        wire or once decoded, raises BodyTooLarge (with the response's status and headers). The
        whole fetch (every hop's connection, response head and body) ends by the policy's
        ``total_timeout``.

        Raises AddressRefused (blocked); BodyTooLarge, RedirectError, TooSlow (still sending at
        the deadline), PermanentError (``headers-too-large``, an undecodable body, ...)
        (permanent); FetchTimeout (nothing received in time) or FetchFailed (retryable).
        """
        deadline = time.monotonic() + self.policy.total_timeout
        token = _BUDGET.set(_Budget(self.policy, deadline))
        try:
            return self._fetch(
                url, method=method, headers=headers, max_bytes=max_bytes, truncate=truncate
            )
        finally:
            _BUDGET.reset(token)

    def _fetch(
        self,
        url: str,
        *,
        method: str,
        headers: Mapping[str, str] | None,
        max_bytes: int | None,
        truncate: bool,
    ) -> FetchResponse:
        """:meth:`fetch`, once its budget is in place."""
        started = time.monotonic()
        wire_cap = self.policy.max_bytes if max_bytes is None else max_bytes
        if wire_cap <= 0:
            raise ValueError("max_bytes must be positive")
        method = method.upper()
        # The URL is parsed once (by the policy check) and that parse is what is sent; copying
        # it without its fragment parses it again, so that is done only when it has one.
        current = netpolicy.check_url(url, allow_loopback=self.policy.allow_loopback)
        if "#" in url:
            current = current.copy_with(fragment=None)
        extra = {
            name: value
            for name, value in (headers or {}).items()
            if name.lower() not in _RESERVED_HEADERS
        }
        hops: list[str] = []
        seen: set[tuple[str, str, int | None, str]] = set()
        while True:
            text = str(current)
            with self._mapped_errors(current):
                answer = self._exchange(method, current, text, extra, wire_cap, truncate=truncate)
            if isinstance(answer, _Final):
                status, lines, body, cut = answer
                return FetchResponse(
                    url=text,
                    status=status,
                    headers=lines,
                    body=body,
                    truncated=cut,
                    redirects=tuple(hops),
                    elapsed=time.monotonic() - started,
                )
            target, status = answer
            if not seen:  # the first hop's key, needed only once there is a redirect
                seen.add(_url_key(current))
            hops.append(text)
            if _url_key(target) in seen:
                raise RedirectError(
                    f"redirect loop: {current} redirects to {target}, already visited",
                    reason="redirect-loop",
                )
            if len(hops) > self.policy.max_redirects:
                raise RedirectError(
                    f"{url}: more than {self.policy.max_redirects} redirects",
                    reason="too-many-redirects",
                )
            # Every hop is checked before it is followed; names are checked again when the
            # connection is opened (PinnedBackend).
            target = netpolicy.check_url(target, allow_loopback=self.policy.allow_loopback)
            seen.add(_url_key(target))
            if status == 303 and method != "HEAD":
                method = "GET"
            elif status in (301, 302) and method == "POST":
                method = "GET"  # what browsers do, whatever RFC 9110 allows
            if _origin(target) != _origin(current):
                extra = {k: v for k, v in extra.items() if k.lower() not in _CREDENTIAL_HEADERS}
            current = target

    def _exchange(
        self,
        method: str,
        url: httpx.URL,
        text: str,
        headers: Mapping[str, str],
        wire_cap: int,
        *,
        truncate: bool = False,
    ) -> _Final | tuple[httpx.URL, int]:
        """One request to ``url`` (``text`` is its string): the final response's status, header
        lines, body and whether it was cut, or the redirect target and status to follow."""
        response = self._send(method, url, text, headers)
        chunks = response.iter_raw()
        # Whether the connection may be kept: not after a network, protocol or deadline error,
        # where reading on would only fail again (or wait).
        reusable = False
        try:
            target = self._redirect_target(response, url)
            if target is not None:
                reusable = True
                return target, response.status_code
            # HEAD, 204 and 304 answers have no body, whatever their Content-Length says.
            bodiless = _bodiless(method, response.status_code)
            try:
                body, cut = (
                    (b"", False)
                    if bodiless
                    else self._read_body(response, chunks, text, wire_cap, truncate=truncate)
                )
            except BodyTooLarge:
                reusable = True
                raise
            reusable = True
            return _Final(response.status_code, _header_lines(response), body, cut)
        finally:
            if reusable:
                _drain(response, chunks)
            # Closing a stream read to its end returns the connection to the pool; closing one
            # read only in part discards the connection.
            response.close()

    def _send(
        self, method: str, url: httpx.URL, text: str, headers: Mapping[str, str]
    ) -> httpx.Response:
        if self._closed:
            raise RuntimeError("the fetcher is closed")
        budget = _current_budget()
        budget.start_hop(text)
        remaining = budget.remaining()
        if remaining <= 0:
            raise budget.expired()
        # No single connect or read may outlast the total deadline either.
        connect = min(self.policy.connect_timeout, remaining)
        read = min(self.policy.read_timeout, remaining)
        timeout = {"connect": connect, "read": read, "write": read, "pool": connect}
        # A caller's header replaces a default of the same name, and comes after the defaults.
        given = {name.lower() for name in headers}
        merged = [(name, value) for name, lower, value in self._headers if lower not in given]
        merged.extend(headers.items())
        try:
            request = httpx.Request(method, url, headers=merged, extensions={"timeout": timeout})
        except (ValueError, TypeError) as exc:  # e.g. a header value that is not ASCII
            raise PermanentError(
                f"{url}: request cannot be built: {exc}", reason="invalid-request"
            ) from exc
        response = self._transport.handle_request(request)
        response.request = request
        budget.head_open = False
        return response

    @staticmethod
    def _redirect_target(response: httpx.Response, current: httpx.URL) -> httpx.URL | None:
        """The URL a redirect response points to (relative Locations resolved), or None."""
        if response.status_code not in _REDIRECT_STATUSES:
            return None
        location = response.headers.get("location", "").strip()
        if not location:
            raise RedirectError(
                f"{current} answered {response.status_code} without a Location",
                reason="redirect-without-location",
            )
        try:
            target = current.join(location)
        except httpx.InvalidURL as exc:
            raise RedirectError(
                f"{current} redirects to an invalid Location {location!r}: {exc}",
                reason="bad-redirect-location",
            ) from exc
        return target.copy_with(fragment=None)

    def _read_body(
        self,
        response: httpx.Response,
        chunks: Iterator[bytes],
        url: str,
        cap: int,
        *,
        truncate: bool,
    ) -> tuple[bytes, bool]:
        """The decoded body, and whether it was cut at ``cap`` (only ever with ``truncate``)."""
        declared = response.headers.get("content-length", "").strip()
        if declared.isdigit() and int(declared) > cap and not truncate:
            raise BodyTooLarge(
                f"{url}: Content-Length {declared} exceeds the limit of {cap} bytes",
                reason="body-too-large",
                status=response.status_code,
                headers=_header_lines(response),
            )
        # The caller's cap holds for the decoded body too: a 48 KiB gzip must not become a
        # 49 MiB document where the caller accepts 10 MiB.
        decoders = _decoders(response, min(cap, self.policy.max_decompressed_bytes), url)
        budget = _current_budget()
        # The decoded pieces, joined once at the end (a body read in one piece is not copied).
        parts: list[bytes] = []
        size = 0
        received = 0
        try:
            for raw in chunks:
                received += len(raw)
                chunk = raw
                if received > cap and truncate:
                    # Cut where the cap falls; the rest is drained, if short (see _drain).
                    chunk = raw[: len(raw) - (received - cap)]
                elif received > cap:
                    raise BodyTooLarge(
                        f"{url}: body exceeds the limit of {cap} bytes", reason="body-too-large"
                    )
                if budget.remaining() < 0:  # (reads are bounded too; this ends a fast drip)
                    raise budget.expired()
                data = chunk
                for decoder in decoders:
                    data = decoder.feed(data)
                parts.append(data)
                size += len(data)
                if truncate and (received > cap or size > cap):
                    return b"".join(parts)[:cap], True
        except BodyTooLarge as exc:
            if truncate:
                # The decoded body outgrew the cap: it is cut at the cap, with what the last
                # decoder produced below it.
                if decoders and exc.reason == "decompressed-too-large":
                    parts.append(decoders[-1].overflow)
                return b"".join(parts)[:cap], True
            # Whichever cap was hit, the refused response keeps its status and headers (a
            # resolver still reads its Link headers); its body is never handed on cut.
            raise BodyTooLarge(
                str(exc),
                reason=exc.reason,
                status=response.status_code,
                headers=_header_lines(response),
            ) from None
        for decoder in decoders:
            decoder.finish()
        return b"".join(parts), False

    @contextmanager
    def _mapped_errors(self, url: httpx.URL) -> Iterator[None]:
        """Turn every httpx/httpcore/socket error into the harvester's error hierarchy."""
        try:
            yield
        except HarvestError:
            raise
        except (httpx.TimeoutException, httpcore.TimeoutException) as exc:
            budget = _current_budget()
            if budget.remaining() <= 0:
                raise budget.expired() from exc
            reason = {
                httpx.ConnectTimeout: "connect-timeout",
                httpx.ReadTimeout: "read-timeout",
                httpx.WriteTimeout: "write-timeout",
                httpx.PoolTimeout: "pool-timeout",
                httpcore.ConnectTimeout: "connect-timeout",
                httpcore.ReadTimeout: "read-timeout",
            }.get(type(exc), "timeout")
            raise FetchTimeout(f"{url}: {reason}: {exc}", reason=reason) from exc
        except (httpx.ConnectError, httpcore.ConnectError) as exc:
            reason = _network_reason(exc, "connect-error")
            raise FetchFailed(f"{url}: cannot connect ({reason}): {exc}", reason=reason) from exc
        except (httpx.RemoteProtocolError, httpcore.RemoteProtocolError) as exc:
            raise FetchFailed(f"{url}: bad HTTP response: {exc}", reason="protocol-error") from exc
        except (httpx.LocalProtocolError, httpcore.LocalProtocolError) as exc:
            raise PermanentError(
                f"{url}: request cannot be sent: {exc}", reason="invalid-request"
            ) from exc
        except httpx.UnsupportedProtocol as exc:
            raise AddressRefused(f"{url}: {exc}", reason="scheme-not-allowed") from exc
        except httpx.InvalidURL as exc:
            raise PermanentError(f"{url}: invalid URL: {exc}", reason="invalid-url") from exc
        except (httpx.HTTPError, httpx.StreamError, OSError, *_HTTPCORE_ERRORS) as exc:
            reason = _network_reason(exc, "network-error")
            raise FetchFailed(f"{url}: {reason}: {exc}", reason=reason) from exc
