"""The safe fetcher against real HTTP servers on 127.0.0.1 (no packet goes beyond loopback).

Host names are mapped to addresses by an injected resolver, so no DNS query is made; the
session-wide network guard (tests/support/netguard.py) fails any test that tries to reach a
non-loopback address, and refusal tests also spy on httpcore's connect to prove that nothing was
attempted for the refused address.
"""

from __future__ import annotations

import gzip
import shutil
import ssl
import subprocess
import sys
import textwrap
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpcore
import httpx
import pytest

from cdif_harvester import CONTACT_URL, PRODUCT
from cdif_harvester.adapters.http import FetchPolicy, SafeFetcher, default_ssl_context
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
from cdif_harvester.ports import Fetcher
from tests.support import netguard
from tests.support.httpserver import LocalHTTPServer

pytestmark = pytest.mark.network

MiB = 1024 * 1024
REPO_ROOT = Path(__file__).resolve().parents[2]


class MappingResolver:
    """A resolver from a fixed table, recording every lookup; unknown names fail like DNS."""

    def __init__(self, table: dict[str, list[str]] | None = None) -> None:
        self.table = dict(table or {})
        self.calls: list[str] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        if host not in self.table:
            raise OSError(f"unknown host {host}")
        return list(self.table[host])


class ConnectSpy:
    """Records the (host, port) of every connection httpcore's socket backend opens."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def hosts(self) -> list[str]:
        return [host for host, _port in self.calls]


@pytest.fixture
def server() -> Iterator[LocalHTTPServer]:
    with LocalHTTPServer() as running:
        yield running


@pytest.fixture
def resolver() -> MappingResolver:
    return MappingResolver({"publisher.test": ["127.0.0.1"], "localhost": ["127.0.0.1"]})


@pytest.fixture
def connect_spy(monkeypatch: pytest.MonkeyPatch) -> ConnectSpy:
    spy = ConnectSpy()
    real = httpcore.SyncBackend.connect_tcp

    def connect_tcp(self: httpcore.SyncBackend, host: str, port: int, **kwargs: Any) -> Any:
        spy.calls.append((host, port))
        return real(self, host, port, **kwargs)

    monkeypatch.setattr(httpcore.SyncBackend, "connect_tcp", connect_tcp)
    return spy


@pytest.fixture
def make_fetcher(resolver: MappingResolver) -> Iterator[Callable[..., SafeFetcher]]:
    fetchers: list[SafeFetcher] = []

    def make(**settings: Any) -> SafeFetcher:
        settings.setdefault("allow_loopback", True)
        settings.setdefault("resolver", resolver)
        fetcher = SafeFetcher(FetchPolicy(**settings))
        fetchers.append(fetcher)
        return fetcher

    yield make
    for fetcher in fetchers:
        fetcher.close()


@pytest.fixture(scope="module")
def gzip_bomb() -> bytes:
    """100 MB of zeros, gzipped (about 100 KB), built piecewise to keep memory low."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(MiB)
    parts = [compressor.compress(block) for _ in range(100)]
    parts.append(compressor.flush())
    return b"".join(parts)


def zeros(total: int, chunk: int = 64 * 1024) -> Callable[[], Iterator[bytes]]:
    def produce() -> Iterator[bytes]:
        sent = 0
        while sent < total:
            size = min(chunk, total - sent)
            sent += size
            yield bytes(size)

    return produce


def assert_wrapped(error: HarvestError) -> None:
    """Wrapped errors keep their cause but are never httpx/httpcore types themselves."""
    assert not isinstance(error, httpx.HTTPError)
    assert type(error).__module__ == "cdif_harvester.errors"


# --- plain responses -------------------------------------------------------------------------


def test_get_returns_status_headers_and_body(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    server.route("/doc", body=b'{"a": 1}', headers=[("Content-Type", "Application/LD+JSON; x=y")])
    fetcher: Fetcher = make_fetcher()
    response = fetcher.fetch(server.url("/doc"))
    assert response.status == 200
    assert response.body == b'{"a": 1}'
    assert response.url == server.url("/doc")
    assert response.redirects == ()
    assert response.media_type == "application/ld+json"
    assert response.header("Content-Length") == "8"
    assert all(name == name.lower() for name, _value in response.headers)
    assert response.elapsed > 0


@pytest.mark.parametrize("status", [204, 404, 410, 500, 503])
def test_any_status_is_a_response(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher], status: int
) -> None:
    server.route("/s", status=status, body=b"" if status == 204 else b"oops")
    response = make_fetcher().fetch(server.url("/s"))
    assert response.status == status


def test_repeated_link_headers_are_kept_in_order(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    links = [
        '<https://example.org/meta.jsonld>; rel="describedby"; type="application/ld+json"',
        '<https://example.org/data.csv>; rel="item"',
        '<https://example.org/linkset>; rel="linkset"',
    ]
    server.route(
        "/", body=b"x", headers=[("LINK", links[0]), ("Link", links[1]), ("link", links[2])]
    )
    response = make_fetcher().fetch(server.url("/"))
    assert response.header_all("link") == links
    assert [name for name, _value in response.headers].count("link") == 3


def test_user_agent_and_accept_encoding_are_ours(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    server.route("/", body=b"x")
    make_fetcher().fetch(
        server.url("/"),
        headers={"User-Agent": "spoof", "Accept-Encoding": "br", "X-Extra": "yes", "Accept": "a/b"},
    )
    seen = server.requests[-1]
    user_agent = seen.header("user-agent") or ""
    assert PRODUCT in user_agent
    assert CONTACT_URL in user_agent
    assert seen.header("accept-encoding") == "gzip, deflate"
    assert seen.header("x-extra") == "yes"
    assert seen.header("accept") == "a/b"


def test_head_returns_an_empty_body(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    server.route("/big", body=b"x" * 5000)
    response = make_fetcher(max_bytes=10).fetch(server.url("/big"), method="HEAD")
    assert response.status == 200
    assert response.body == b""
    assert response.header("content-length") == "5000"
    assert server.requests[-1].method == "HEAD"


def test_cookies_are_never_sent_back(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    server.route("/", body=b"x", headers=[("Set-Cookie", "session=abc; Path=/")])
    fetcher = make_fetcher()
    fetcher.fetch(server.url("/"))
    fetcher.fetch(server.url("/"))
    assert server.requests[-1].header("cookie") is None


def test_a_cookie_set_by_a_redirect_is_not_sent_to_the_next_hop(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    server.route("/from", status=302, headers=[("Location", "/to"), ("Set-Cookie", "s=1; Path=/")])
    server.route("/to", body=b"x")
    assert make_fetcher().fetch(server.url("/from")).body == b"x"
    assert server.paths() == ["/from", "/to"]
    assert server.requests[-1].header("cookie") is None


def test_a_request_without_accept_accepts_anything(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    server.route("/", body=b"x")
    make_fetcher().fetch(server.url("/"))
    seen = server.requests[-1]
    assert seen.header("accept") == "*/*"
    assert seen.header("accept-encoding") == "gzip, deflate"
    assert seen.header("host") == f"127.0.0.1:{server.port}"


@pytest.mark.parametrize("suffix", ["#part", "#"])
def test_a_fragment_is_neither_sent_nor_in_the_answer(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher], suffix: str
) -> None:
    server.route("/page", body=b"x")
    response = make_fetcher().fetch(server.url("/page") + suffix)
    assert response.url == server.url("/page")
    assert server.paths() == ["/page"]


def test_connections_are_reused(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher], connect_spy: ConnectSpy
) -> None:
    server.route("/", body=b"x")
    fetcher = make_fetcher()
    for _ in range(3):
        fetcher.fetch(server.url("/"))
    assert len(connect_spy.calls) == 1


# --- content encodings -----------------------------------------------------------------------

PAYLOAD = b'{"@context": "https://schema.org/", "name": "dataset"}\n' * 200


def _deflate(data: bytes, wbits: int) -> bytes:
    compressor = zlib.compressobj(6, zlib.DEFLATED, wbits)
    return compressor.compress(data) + compressor.flush()


@pytest.mark.parametrize(
    ("coding", "encoded"),
    [
        ("gzip", gzip.compress(PAYLOAD)),
        ("x-gzip", gzip.compress(PAYLOAD)),
        ("GZIP", gzip.compress(PAYLOAD)),
        ("deflate", _deflate(PAYLOAD, zlib.MAX_WBITS)),  # zlib-wrapped, as the RFC says
        ("deflate", _deflate(PAYLOAD, -zlib.MAX_WBITS)),  # raw, as many servers send
        ("gzip", gzip.compress(PAYLOAD[:5000]) + gzip.compress(PAYLOAD[5000:])),  # 2 members
        ("gzip, gzip", gzip.compress(gzip.compress(PAYLOAD))),
        ("identity", PAYLOAD),
    ],
)
def test_body_is_decoded(
    server: LocalHTTPServer,
    make_fetcher: Callable[..., SafeFetcher],
    coding: str,
    encoded: bytes,
) -> None:
    server.route("/", body=encoded, headers=[("Content-Encoding", coding)])
    assert make_fetcher().fetch(server.url("/")).body == PAYLOAD


def test_gzip_body_streamed_in_small_chunks_is_decoded(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    encoded = gzip.compress(PAYLOAD)
    pieces = [encoded[i : i + 7] for i in range(0, len(encoded), 7)]
    server.route("/", body=lambda: iter(pieces), headers=[("Content-Encoding", "gzip")])
    assert make_fetcher().fetch(server.url("/")).body == PAYLOAD


def test_raw_deflate_one_byte_at_a_time_is_decoded(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    encoded = _deflate(PAYLOAD[:300], -zlib.MAX_WBITS)
    pieces = [encoded[i : i + 1] for i in range(len(encoded))]
    server.route("/", body=lambda: iter(pieces), headers=[("Content-Encoding", "deflate")])
    assert make_fetcher().fetch(server.url("/")).body == PAYLOAD[:300]


def test_gzip_bomb_is_stopped_at_the_decompressed_cap(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher], gzip_bomb: bytes
) -> None:
    assert len(gzip_bomb) < 1 * MiB  # small on the wire, 100 MB expanded
    server.route("/bomb", body=gzip_bomb, headers=[("Content-Encoding", "gzip")])
    fetcher = make_fetcher()  # default caps: 10 MiB, on the wire and decompressed
    with pytest.raises(BodyTooLarge) as caught:
        fetcher.fetch(server.url("/bomb"))
    assert caught.value.reason == "decompressed-too-large"
    assert caught.value.outcome == "failed"


def test_gzip_bomb_never_expands_in_memory(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher], gzip_bomb: bytes
) -> None:
    server.route("/bomb", body=gzip_bomb, headers=[("Content-Encoding", "gzip")])
    fetcher = make_fetcher(max_decompressed_bytes=1 * MiB)
    tracemalloc.start()
    try:
        with pytest.raises(BodyTooLarge) as caught:
            fetcher.fetch(server.url("/bomb"))
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert caught.value.reason == "decompressed-too-large"
    assert peak < 8 * MiB  # the expanded body would be 100 MB


def test_a_cut_read_of_a_gzip_bomb_stops_at_the_cap(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher], gzip_bomb: bytes
) -> None:
    # A body cut on request (the resolver's read of an oversize landing page) holds the cap on
    # the decoded body too: the bomb is cut, not refused and not expanded.
    server.route("/bomb", body=gzip_bomb, headers=[("Content-Encoding", "gzip")])
    fetcher = make_fetcher()
    tracemalloc.start()
    try:
        cut = fetcher.fetch(server.url("/bomb"), max_bytes=1 * MiB, truncate=True)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert cut.truncated is True
    assert 0 < len(cut.body) <= 1 * MiB
    assert set(cut.body) == {0}
    assert peak < 16 * MiB


def test_unknown_content_encoding_is_refused(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    server.route("/", body=b"\x1b\x00", headers=[("Content-Encoding", "br")])
    with pytest.raises(PermanentError) as caught:
        make_fetcher().fetch(server.url("/"))
    assert caught.value.reason == "unsupported-content-encoding"
    assert "br" in str(caught.value)


def test_corrupt_gzip_is_a_permanent_error(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    server.route(
        "/", body=b"\x1f\x8b\x08\x00garbage-not-deflate", headers=[("Content-Encoding", "gzip")]
    )
    with pytest.raises(PermanentError) as caught:
        make_fetcher().fetch(server.url("/"))
    assert caught.value.reason == "content-decoding-error"


def test_truncated_gzip_is_reported(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    encoded = gzip.compress(PAYLOAD)
    server.route("/", body=encoded[: len(encoded) // 2], headers=[("Content-Encoding", "gzip")])
    with pytest.raises(FetchFailed) as caught:
        make_fetcher().fetch(server.url("/"))
    assert caught.value.reason == "truncated-body"


# --- size caps -------------------------------------------------------------------------------


def test_declared_content_length_over_cap_is_refused_before_reading(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    # The body would take seconds to arrive; the refusal must not wait for it.
    server.route(
        "/",
        body=zeros(20 * MiB),
        content_length=20 * MiB,
        chunk_delay=0.05,
        headers=[("Link", '<meta.json>; rel="describedby"')],
    )
    started = time.monotonic()
    with pytest.raises(BodyTooLarge) as caught:
        make_fetcher(max_bytes=1 * MiB).fetch(server.url("/"))
    assert time.monotonic() - started < 1.0
    assert caught.value.reason == "body-too-large"
    assert "Content-Length" in str(caught.value)
    # The head of the refused response stays usable (a resolver reads its Link headers).
    assert caught.value.status == 200
    assert ("link", '<meta.json>; rel="describedby"') in caught.value.headers


@pytest.mark.parametrize("framing", ["close-delimited", "chunked"])
def test_body_without_content_length_is_stopped_at_the_cap(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher], framing: str
) -> None:
    if framing == "chunked":
        server.route("/", body=zeros(50 * MiB), chunked=True)
    else:
        server.route("/", body=zeros(50 * MiB), content_length=None)
    started = time.monotonic()
    with pytest.raises(BodyTooLarge) as caught:
        make_fetcher(max_bytes=1 * MiB).fetch(server.url("/"))
    assert caught.value.reason == "body-too-large"
    assert "Content-Length" not in str(caught.value)
    assert time.monotonic() - started < 5.0


def test_body_larger_than_a_lying_content_length_is_cut_at_the_declared_length(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    server.route("/", body=zeros(20 * MiB), content_length=100)
    response = make_fetcher(max_bytes=1 * MiB).fetch(server.url("/"))
    assert response.body == bytes(100)


def test_default_wire_cap_is_ten_mebibytes(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    server.route("/", body=zeros(10 * MiB + 1), chunked=True)
    with pytest.raises(BodyTooLarge):
        make_fetcher().fetch(server.url("/"))
    server.route("/ok", body=zeros(10 * MiB), chunked=True)
    assert len(make_fetcher().fetch(server.url("/ok")).body) == 10 * MiB


def test_max_bytes_argument_overrides_the_policy(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    server.route("/", body=b"y" * 2000, chunked=True)
    fetcher = make_fetcher(max_bytes=100)
    with pytest.raises(BodyTooLarge):
        fetcher.fetch(server.url("/"))
    assert len(fetcher.fetch(server.url("/"), max_bytes=2000).body) == 2000
    with pytest.raises(BodyTooLarge):
        make_fetcher().fetch(server.url("/"), max_bytes=1999)


# --- time limits -----------------------------------------------------------------------------


@pytest.mark.serial  # (a wall-clock bound)
def test_slow_drip_body_hits_the_total_timeout(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    server.route("/drip", body=lambda: (b"x" for _ in range(1000)), chunk_delay=0.05)
    started = time.monotonic()
    # Still sending at the deadline: too slow, and not worth retrying (permanent).
    with pytest.raises(TooSlow) as caught:
        make_fetcher(total_timeout=0.5, read_timeout=5).fetch(server.url("/drip"))
    elapsed = time.monotonic() - started
    assert caught.value.reason == "too-slow"
    assert 0.45 < elapsed < 1.5


def test_silent_server_hits_the_read_timeout(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    server.route("/silent", body=b"late", headers_delay=3)
    with pytest.raises(FetchTimeout) as caught:
        make_fetcher(read_timeout=0.3).fetch(server.url("/silent"))
    assert caught.value.reason == "read-timeout"
    assert caught.value.__cause__ is not None
    assert_wrapped(caught.value)


def test_total_timeout_also_bounds_waiting_for_headers(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    server.route("/silent", body=b"late", headers_delay=3)
    started = time.monotonic()
    with pytest.raises(FetchTimeout) as caught:
        make_fetcher(read_timeout=10, total_timeout=0.4).fetch(server.url("/silent"))
    assert caught.value.reason == "total-timeout"
    assert time.monotonic() - started < 1.5


# --- network failures ------------------------------------------------------------------------


def test_connection_refused_is_a_retryable_failure(
    make_fetcher: Callable[..., SafeFetcher],
) -> None:
    with LocalHTTPServer() as gone:
        port = gone.port
    with pytest.raises(FetchFailed) as caught:
        make_fetcher().fetch(f"http://127.0.0.1:{port}/")
    assert caught.value.reason == "connection-refused"
    assert isinstance(caught.value.__cause__, httpx.ConnectError)
    assert_wrapped(caught.value)


def test_tls_failure_is_a_retryable_failure(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher], connect_spy: ConnectSpy
) -> None:
    # https to a plain-HTTP server: the handshake fails. The connection still went to the
    # pinned address while TLS was set up for the name.
    server.route("/", body=b"x")
    with pytest.raises(FetchFailed) as caught:
        make_fetcher(connect_timeout=2).fetch(f"https://publisher.test:{server.port}/")
    assert caught.value.reason == "tls-error"
    assert connect_spy.hosts() == ["127.0.0.1"]


def test_fetchers_share_one_verifying_tls_context_read_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Reading the CA bundle takes tens of milliseconds: every fetcher of a process given no TLS
    # settings shares the one context, which verifies certificates and host names.
    made: list[ssl.SSLContext] = []
    create = httpx.create_ssl_context

    def counted(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        made.append(create(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(httpx, "create_ssl_context", counted)
    default_ssl_context.cache_clear()
    try:
        with SafeFetcher(FetchPolicy(allow_loopback=True)), SafeFetcher():
            pass
        assert len(made) == 1
        assert default_ssl_context() is made[0]
        assert made[0].verify_mode == ssl.CERT_REQUIRED and made[0].check_hostname
    finally:
        default_ssl_context.cache_clear()  # (the next fetcher makes its own, unpatched)


def test_garbage_response_is_a_protocol_error(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    server.route("/", raw=b"HELLO THERE\r\n\r\n")
    with pytest.raises(FetchFailed) as caught:
        make_fetcher().fetch(server.url("/"))
    assert caught.value.reason == "protocol-error"


def test_unknown_name_is_a_dns_failure(
    make_fetcher: Callable[..., SafeFetcher], connect_spy: ConnectSpy
) -> None:
    with pytest.raises(FetchFailed) as caught:
        make_fetcher().fetch("http://nowhere.test/")
    assert caught.value.reason == "dns-failure"
    assert connect_spy.calls == []


# --- redirects -------------------------------------------------------------------------------


def test_redirect_chain_is_followed_and_recorded(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    server.route("/a", status=301, headers=[("Location", "b")])  # relative
    server.route("/b", status=302, headers=[("Location", server.url("/c"))])  # absolute
    server.route("/c", status=307, headers=[("Location", "/d?x=1#frag")])
    server.route("/d", body=b"final")
    response = make_fetcher().fetch(server.url("/a"))
    assert response.body == b"final"
    assert response.url == server.url("/d?x=1")
    assert response.redirects == (server.url("/a"), server.url("/b"), server.url("/c"))
    assert server.paths() == ["/a", "/b", "/c", "/d?x=1"]


def test_redirect_to_another_host_name_goes_through_the_resolver(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher], resolver: MappingResolver
) -> None:
    server.route("/a", status=302, headers=[("Location", server.url("/b", host="publisher.test"))])
    server.route("/b", body=b"ok")
    response = make_fetcher().fetch(server.url("/a"))
    assert response.url == server.url("/b", host="publisher.test")
    assert resolver.calls == ["publisher.test"]
    assert server.requests[-1].header("host") == f"publisher.test:{server.port}"


def test_303_turns_post_into_get_and_307_keeps_it(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    server.route("/see-other", status=303, headers=[("Location", "/target")])
    server.route("/temporary", status=307, headers=[("Location", "/target")])
    server.route("/target", body=b"ok")
    fetcher = make_fetcher()
    fetcher.fetch(server.url("/see-other"), method="POST")
    assert [r.method for r in server.requests[-2:]] == ["POST", "GET"]
    fetcher.fetch(server.url("/temporary"), method="POST")
    assert [r.method for r in server.requests[-2:]] == ["POST", "POST"]


def test_credentials_are_dropped_when_a_redirect_leaves_the_origin(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    server.route("/a", status=302, headers=[("Location", server.url("/b", host="publisher.test"))])
    server.route("/b", body=b"ok")
    make_fetcher().fetch(server.url("/a"), headers={"Authorization": "Bearer t", "X-Keep": "1"})
    first, second = server.requests[-2:]
    assert first.header("authorization") == "Bearer t"
    assert second.header("authorization") is None
    assert second.header("x-keep") == "1"


def test_redirect_loop_is_detected(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    server.route("/x", status=302, headers=[("Location", "/y")])
    server.route("/y", status=302, headers=[("Location", "/x")])
    with pytest.raises(RedirectError) as caught:
        make_fetcher().fetch(server.url("/x"))
    assert caught.value.reason == "redirect-loop"
    assert server.paths() == ["/x", "/y"]


def test_redirect_to_itself_is_a_loop(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    server.route(
        "/self", status=301, headers=[("Location", f"http://127.0.0.1:{server.port}/self")]
    )
    with pytest.raises(RedirectError) as caught:
        make_fetcher().fetch(server.url("/self"))
    assert caught.value.reason == "redirect-loop"


def test_too_many_redirects(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    for hop in range(10):
        server.route(f"/r{hop}", status=302, headers=[("Location", f"/r{hop + 1}")])
    server.route("/r10", body=b"end")
    with pytest.raises(RedirectError) as caught:
        make_fetcher(max_redirects=3).fetch(server.url("/r0"))
    assert caught.value.reason == "too-many-redirects"
    assert server.paths() == ["/r0", "/r1", "/r2", "/r3"]
    # exactly at the limit is fine; the default limit is 5
    assert make_fetcher(max_redirects=3).fetch(server.url("/r7")).body == b"end"
    with pytest.raises(RedirectError):
        make_fetcher().fetch(server.url("/r4"))
    assert make_fetcher().fetch(server.url("/r5")).body == b"end"


def test_redirect_without_location(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    server.route("/", status=302)
    with pytest.raises(RedirectError) as caught:
        make_fetcher().fetch(server.url("/"))
    assert caught.value.reason == "redirect-without-location"


def test_304_and_300_are_responses_not_redirects(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    server.route(
        "/nm", status=304, headers=[("Content-Length", str(50 * MiB))], content_length=None
    )
    server.route("/mc", status=300, headers=[("Location", "/elsewhere")], body=b"choices")
    fetcher = make_fetcher()
    not_modified = fetcher.fetch(server.url("/nm"), max_bytes=10)
    assert (not_modified.status, not_modified.body) == (304, b"")
    assert fetcher.fetch(server.url("/mc")).status == 300


# --- address policy: refusals send nothing ---------------------------------------------------


@pytest.mark.parametrize(
    "case",
    [
        ("http://10.0.0.1/", "private-address"),
        ("http://169.254.169.254/latest/meta-data/iam/", "cloud-metadata-address"),
        ("http://[::ffff:10.0.0.1]/", "private-address"),
        ("http://[fd00:ec2::254]/", "cloud-metadata-address"),
        ("http://2130706433/", "non-canonical-ip"),
        ("ftp://example.org/file", "scheme-not-allowed"),
        ("file:///etc/passwd", "scheme-not-allowed"),
        ("http://admin:pw@publisher.test/", "credentials-in-url"),
        ("http://internal.test/", "private-address"),  # a name resolving to a private address
    ],
)
def test_redirect_to_a_refused_address_is_stopped_before_connecting(
    server: LocalHTTPServer,
    make_fetcher: Callable[..., SafeFetcher],
    resolver: MappingResolver,
    connect_spy: ConnectSpy,
    case: tuple[str, str],
) -> None:
    location, reason = case
    resolver.table["internal.test"] = ["10.20.30.40"]
    server.route("/go", status=302, headers=[("Location", location)])
    escapes_before = len(netguard.attempts)
    with pytest.raises(AddressRefused) as caught:
        make_fetcher().fetch(server.url("/go"))
    assert caught.value.reason == reason
    assert caught.value.outcome == "blocked"
    assert connect_spy.hosts() == ["127.0.0.1"]  # the loopback server only
    assert len(netguard.attempts) == escapes_before
    assert server.paths() == ["/go"]


def test_name_resolving_to_metadata_address_is_refused_without_connecting(
    make_fetcher: Callable[..., SafeFetcher], resolver: MappingResolver, connect_spy: ConnectSpy
) -> None:
    resolver.table["metadata.test"] = ["169.254.169.254"]
    with pytest.raises(AddressRefused) as caught:
        make_fetcher().fetch("http://metadata.test/latest/meta-data/")
    assert caught.value.reason == "cloud-metadata-address"
    assert "metadata.test resolves to 169.254.169.254" in str(caught.value)
    assert resolver.calls == ["metadata.test"]
    assert connect_spy.calls == []


def test_name_resolving_to_loopback_and_private_is_refused(
    server: LocalHTTPServer,
    make_fetcher: Callable[..., SafeFetcher],
    resolver: MappingResolver,
    connect_spy: ConnectSpy,
) -> None:
    # The loopback address is allowed here and listed first, yet the name is refused: one
    # disallowed address is enough.
    resolver.table["mixed.test"] = ["127.0.0.1", "10.1.2.3"]
    server.route("/", body=b"x")
    fetcher = make_fetcher(allow_loopback=True)
    with pytest.raises(AddressRefused) as caught:
        fetcher.fetch(f"http://mixed.test:{server.port}/")
    assert caught.value.reason == "private-address"
    assert "mixed.test resolves to 10.1.2.3" in str(caught.value)
    assert connect_spy.calls == []
    assert server.requests == []
    # a refusal at connect time leaves the fetcher usable
    assert fetcher.fetch(server.url("/")).body == b"x"


def test_literal_ip_url_is_refused_before_resolving_or_connecting(
    make_fetcher: Callable[..., SafeFetcher], resolver: MappingResolver, connect_spy: ConnectSpy
) -> None:
    for url, reason in [
        ("http://10.0.0.1/", "private-address"),
        ("http://169.254.169.254/", "cloud-metadata-address"),
        ("http://[::ffff:169.254.169.254]/", "cloud-metadata-address"),
        ("http://0x7f.0.0.1/", "non-canonical-ip"),
        ("http://100.64.0.1/", "shared-address"),
    ]:
        with pytest.raises(AddressRefused) as caught:
            make_fetcher().fetch(url)
        assert caught.value.reason == reason, url
    assert resolver.calls == []
    assert connect_spy.calls == []


def test_loopback_is_refused_unless_allowed(
    server: LocalHTTPServer,
    make_fetcher: Callable[..., SafeFetcher],
    resolver: MappingResolver,
    connect_spy: ConnectSpy,
) -> None:
    server.route("/", body=b"local")
    strict = make_fetcher(allow_loopback=False)
    for url in [
        server.url("/"),
        server.url("/", host="publisher.test"),
        server.url("/", host="localhost"),
    ]:
        with pytest.raises(AddressRefused) as caught:
            strict.fetch(url)
        assert caught.value.reason == "loopback-address"
    assert connect_spy.calls == []
    assert server.requests == []
    relaxed = make_fetcher(allow_loopback=True)
    assert relaxed.fetch(server.url("/")).body == b"local"
    assert relaxed.fetch(server.url("/", host="publisher.test")).body == b"local"


def test_connection_goes_to_the_pinned_address(
    server: LocalHTTPServer,
    make_fetcher: Callable[..., SafeFetcher],
    resolver: MappingResolver,
    connect_spy: ConnectSpy,
) -> None:
    server.route("/", body=b"pinned")
    response = make_fetcher().fetch(server.url("/", host="publisher.test"))
    assert response.body == b"pinned"
    assert response.url == server.url("/", host="publisher.test")
    assert connect_spy.calls == [("127.0.0.1", server.port)]
    assert server.requests[-1].header("host") == f"publisher.test:{server.port}"
    assert resolver.calls == ["publisher.test"]


def test_name_is_resolved_once_per_connection_so_rebinding_cannot_switch_it(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher], connect_spy: ConnectSpy
) -> None:
    # A rebinding DNS answers the first lookup with an allowed address and later ones with a
    # forbidden one. The address checked is the address used, and no second lookup happens.
    answers = iter([["127.0.0.1"], ["169.254.169.254"], ["169.254.169.254"]])
    lookups: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        lookups.append(host)
        return next(answers)

    server.route("/", body=b"ok")
    fetcher = make_fetcher(resolver=rebinding)
    assert fetcher.fetch(f"http://rebind.test:{server.port}/").body == b"ok"
    assert lookups == ["rebind.test"]
    assert connect_spy.hosts() == ["127.0.0.1"]
    # A new connection resolves again, and the new answer is checked again.
    fresh = make_fetcher(resolver=rebinding)
    with pytest.raises(AddressRefused) as caught:
        fresh.fetch(f"http://rebind.test:{server.port}/")
    assert caught.value.reason == "cloud-metadata-address"
    assert connect_spy.hosts() == ["127.0.0.1"]


def test_falls_back_to_the_next_checked_address(
    server: LocalHTTPServer,
    make_fetcher: Callable[..., SafeFetcher],
    resolver: MappingResolver,
    connect_spy: ConnectSpy,
) -> None:
    resolver.table["dual.test"] = ["::1", "127.0.0.1"]  # nothing listens on ::1 at this port
    server.route("/", body=b"v4")
    assert make_fetcher().fetch(f"http://dual.test:{server.port}/").body == b"v4"
    assert connect_spy.hosts() == ["::1", "127.0.0.1"]


def test_credentials_and_schemes_refused_up_front(
    make_fetcher: Callable[..., SafeFetcher], connect_spy: ConnectSpy
) -> None:
    fetcher = make_fetcher()
    for url, reason in [
        ("http://user:secret@publisher.test/", "credentials-in-url"),
        ("ftp://publisher.test/", "scheme-not-allowed"),
        ("file:///etc/passwd", "scheme-not-allowed"),
    ]:
        with pytest.raises(AddressRefused) as caught:
            fetcher.fetch(url)
        assert caught.value.reason == reason
    assert connect_spy.calls == []


def test_errors_are_only_harvester_errors(
    server: LocalHTTPServer, make_fetcher: Callable[..., SafeFetcher]
) -> None:
    server.route("/", body=b"x")
    fetcher = make_fetcher()
    with pytest.raises(PermanentError) as caught:
        fetcher.fetch("http://[::1/")
    assert caught.value.reason == "invalid-url"
    assert_wrapped(caught.value)
    for headers in [{"X-Bad": "caf\u00e9"}, {"X-Bad": "a\r\nInjected: 1"}, {"Bad Name": "1"}]:
        with pytest.raises(PermanentError) as caught:
            fetcher.fetch(server.url("/"), headers=headers)
        assert caught.value.reason == "invalid-request"
        assert caught.value.__cause__ is not None
        assert_wrapped(caught.value)


def test_policy_defaults() -> None:
    policy = FetchPolicy()
    assert (policy.connect_timeout, policy.read_timeout, policy.total_timeout) == (5.0, 10.0, 30.0)
    assert policy.max_bytes == 10 * MiB
    assert policy.max_decompressed_bytes == 50 * MiB
    assert policy.max_header_bytes == 32 * 1024
    assert policy.max_redirects == 5
    assert policy.allow_loopback is False
    assert PRODUCT in policy.user_agent
    with pytest.raises(ValueError):
        FetchPolicy(total_timeout=0)


def test_context_manager_closes_the_fetcher(server: LocalHTTPServer) -> None:
    server.route("/", body=b"x")
    with SafeFetcher(FetchPolicy(allow_loopback=True)) as fetcher:
        assert fetcher.fetch(server.url("/")).body == b"x"
    with pytest.raises(RuntimeError):
        fetcher.fetch(server.url("/"))
    assert len(server.requests) == 1


# --- optional: a refusal inside a network namespace with nothing but loopback ----------------


def _unshare_available() -> bool:
    if shutil.which("unshare") is None:
        return False
    try:
        probe = subprocess.run(
            ["unshare", "-n", "true"], capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return probe.returncode == 0


@pytest.mark.skipif(not _unshare_available(), reason="unshare -n not permitted here")
def test_refusal_in_a_loopback_only_network_namespace() -> None:
    # Without the test guard and with no route anywhere: the refusal must come from the policy
    # (AddressRefused), not from a failed connection (which would be FetchFailed).
    script = textwrap.dedent(
        """
        import socket
        from cdif_harvester.adapters.http import FetchPolicy, SafeFetcher
        from cdif_harvester.errors import AddressRefused

        attempts = []
        real = socket.socket.connect
        def connect(self, address):
            attempts.append(address)
            return real(self, address)
        socket.socket.connect = connect

        policy = FetchPolicy(resolver=lambda host, port: ["10.0.0.1"])
        with SafeFetcher(policy) as fetcher:
            for url in ("http://internal.test/", "http://169.254.169.254/"):
                try:
                    fetcher.fetch(url)
                except AddressRefused as exc:
                    print(exc.reason)
        print("connects", len(attempts))
        """
    )
    done = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["private-address", "cloud-metadata-address", "connects", "0"]
