"""The one safe HTTP fetcher every stage uses (httpx underneath).

:class:`SafeFetcher` implements the :class:`~cdif_harvester.ports.Fetcher` port: the address
policy on the URL and on every resolved address, pinned in :class:`PinnedBackend`; redirects
followed hop by hop; bodies streamed and capped, Content-Encoding decoded within the cap;
timeouts and a total deadline; no cookies, no proxies from the environment. Nothing from httpx
reaches callers: errors are those of :mod:`cdif_harvester.errors`, any HTTP status a
:class:`~cdif_harvester.model.FetchResponse`.

See docs/decisions/0012-address-policy-pinned.md and docs/decisions/0013-bounded-fetcher.md.
"""

from __future__ import annotations

import http.cookiejar
import socket
import ssl
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Self

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
)
from cdif_harvester.model import FetchResponse

__all__ = [
    "ACCEPT_ENCODING",
    "FetchPolicy",
    "PinnedBackend",
    "Resolver",
    "SafeFetcher",
    "system_resolver",
]

MiB = 1024 * 1024

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
        total_timeout: seconds for the whole fetch, redirects and body included.
        max_bytes: body bytes accepted on the wire per response (``fetch(max_bytes=...)``
            overrides it per call).
        max_decompressed_bytes: body bytes accepted after decoding gzip/deflate.
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
    max_redirects: int = 5
    allow_loopback: bool = False
    user_agent: str = USER_AGENT
    resolver: Resolver = field(default=system_resolver)
    ssl_context: ssl.SSLContext | None = None

    def __post_init__(self) -> None:
        for name in ("connect_timeout", "read_timeout", "total_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"FetchPolicy.{name} must be positive")
        for name in ("max_bytes", "max_decompressed_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"FetchPolicy.{name} must be positive")
        if self.max_redirects < 0:
            raise ValueError("FetchPolicy.max_redirects must not be negative")


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
        for address in self.resolve(host, port):
            try:
                return self._inner.connect_tcp(
                    str(address),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
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


# httpcore exceptions are normally turned into httpx ones by the transport; these are caught too
# in case one escapes (a stream closed outside httpx's exception mapping, say).
_HTTPCORE_ERRORS = (
    httpcore.TimeoutException,
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.UnsupportedProtocol,
    httpcore.ProxyError,
)


class SafeFetcher:
    """The safe HTTP fetcher (implements :class:`~cdif_harvester.ports.Fetcher`).

    One fetcher holds one httpx client, so connections are reused across fetches; it is meant to
    live as long as the process (a Lambda container, a local run). Close it with :meth:`close`
    or use it as a context manager.
    """

    def __init__(self, policy: FetchPolicy | None = None) -> None:
        self.policy = policy if policy is not None else FetchPolicy()
        self._backend = PinnedBackend(
            self.policy.resolver, allow_loopback=self.policy.allow_loopback
        )
        ssl_context = self.policy.ssl_context
        if ssl_context is None:
            ssl_context = httpx.create_ssl_context(verify=True, trust_env=False)
        transport = _PinnedTransport(self._backend, ssl_context, httpx.Limits())
        # A cookie policy that accepts no domain: cookies are never stored, so never sent. State
        # from one publisher must not leak into requests to another.
        no_cookies = http.cookiejar.CookieJar(
            policy=http.cookiejar.DefaultCookiePolicy(allowed_domains=[])
        )
        self._client = httpx.Client(
            transport=transport,
            trust_env=False,
            follow_redirects=False,
            cookies=no_cookies,
            headers={"User-Agent": self.policy.user_agent, "Accept-Encoding": ACCEPT_ENCODING},
        )

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
        self._client.close()

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
        the policy for this call; with ``truncate`` a body over it is cut to its first ``max_bytes``
        bytes on the wire (then decoded) instead of refused. A HEAD request returns an empty body.

        The body is returned decoded (gzip/deflate undone); the headers are exactly as received,
        so Content-Encoding and Content-Length describe the body as it was on the wire.

        ``FetchResponse.redirects`` lists the URLs that answered with a redirect, starting with
        ``url`` itself, so ``redirects + (response.url,)`` is the whole chain.

        Raises AddressRefused (blocked), BodyTooLarge, RedirectError, PermanentError
        (permanent), FetchTimeout or FetchFailed (retryable).
        """
        started = time.monotonic()
        deadline = started + self.policy.total_timeout
        wire_cap = self.policy.max_bytes if max_bytes is None else max_bytes
        if wire_cap <= 0:
            raise ValueError("max_bytes must be positive")
        method = method.upper()
        current = netpolicy.check_url(url, allow_loopback=self.policy.allow_loopback)
        current = current.copy_with(fragment=None)
        extra = {
            name: value
            for name, value in (headers or {}).items()
            if name.lower() not in _RESERVED_HEADERS
        }
        hops: list[str] = []
        seen = {_url_key(current)}
        while True:
            with self._mapped_errors(current, deadline):
                answer = self._exchange(
                    method, current, extra, wire_cap, deadline, truncate=truncate
                )
            if isinstance(answer, FetchResponse):
                return replace(answer, redirects=tuple(hops), elapsed=time.monotonic() - started)
            target, status = answer
            hops.append(str(current))
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
        headers: Mapping[str, str],
        wire_cap: int,
        deadline: float,
        *,
        truncate: bool = False,
    ) -> FetchResponse | tuple[httpx.URL, int]:
        """One request: the final response, or the redirect target and status to follow."""
        response = self._send(method, url, headers, deadline)
        try:
            target = self._redirect_target(response, url)
            if target is not None:
                return target, response.status_code
            # HEAD, 204 and 304 answers have no body, whatever their Content-Length says.
            bodiless = method == "HEAD" or response.status_code in (204, 304)
            body = (
                b""
                if bodiless
                else self._read_body(response, str(url), wire_cap, deadline, truncate=truncate)
            )
            return FetchResponse(
                url=str(url),
                status=response.status_code,
                headers=_header_lines(response),
                body=body,
            )
        finally:
            # Closing an unread stream discards the connection rather than draining it.
            response.close()

    def _send(
        self, method: str, url: httpx.URL, headers: Mapping[str, str], deadline: float
    ) -> httpx.Response:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise FetchTimeout(
                f"{url}: total time limit of {self.policy.total_timeout} s exceeded",
                reason="total-timeout",
            )
        # No single connect or read may outlast the total deadline either.
        connect = min(self.policy.connect_timeout, remaining)
        read = min(self.policy.read_timeout, remaining)
        timeout = httpx.Timeout(connect=connect, read=read, write=read, pool=connect)
        try:
            request = self._client.build_request(method, url, headers=headers, timeout=timeout)
        except (ValueError, TypeError) as exc:  # e.g. a header value that is not ASCII
            raise PermanentError(
                f"{url}: request cannot be built: {exc}", reason="invalid-request"
            ) from exc
        return self._client.send(request, stream=True)

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
        url: str,
        cap: int,
        deadline: float,
        *,
        truncate: bool = False,
    ) -> bytes:
        declared = response.headers.get("content-length", "").strip()
        if declared.isdigit() and int(declared) > cap and not truncate:
            raise BodyTooLarge(
                f"{url}: Content-Length {declared} exceeds the limit of {cap} bytes",
                reason="body-too-large",
                status=response.status_code,
                headers=_header_lines(response),
            )
        decoders = _decoders(response, self.policy.max_decompressed_bytes, url)
        body = bytearray()
        received = 0
        for chunk in response.iter_raw():
            received += len(chunk)
            if received > cap and truncate:
                # Cut at the cap (RFC 9309 section 2.5: a robots.txt is read up to a limit):
                # the rest is never read and a compressed stream is left unfinished.
                data = chunk[: len(chunk) - (received - cap)]
                for decoder in decoders:
                    data = decoder.feed(data)
                return bytes(body + data)
            if received > cap:
                raise BodyTooLarge(
                    f"{url}: body exceeds the limit of {cap} bytes",
                    reason="body-too-large",
                    status=response.status_code,
                    headers=_header_lines(response),
                )
            if time.monotonic() > deadline:
                raise FetchTimeout(
                    f"{url}: total time limit of {self.policy.total_timeout} s exceeded "
                    "while reading the body",
                    reason="total-timeout",
                )
            data = chunk
            for decoder in decoders:
                data = decoder.feed(data)
            body += data
        for decoder in decoders:
            decoder.finish()
        return bytes(body)

    @contextmanager
    def _mapped_errors(self, url: httpx.URL, deadline: float) -> Iterator[None]:
        """Turn every httpx/httpcore/socket error into the harvester's error hierarchy."""
        try:
            yield
        except HarvestError:
            raise
        except (httpx.TimeoutException, httpcore.TimeoutException) as exc:
            if time.monotonic() >= deadline:
                raise FetchTimeout(
                    f"{url}: total time limit of {self.policy.total_timeout} s exceeded",
                    reason="total-timeout",
                ) from exc
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
