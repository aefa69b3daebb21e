"""The safe fetcher keeps its keep-alive connection after answers it does not read to the end.

A 304 to a conditional request, a HEAD answer, a redirect's short body and a body refused or cut
at the caller's cap are read to their end (a short rest only) before the connection goes back
to the pool, so N such fetches from one host open one connection, not N. The server is real
(tests/support/rawserver.py, on 127.0.0.1) and counts the connections it accepts.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest

from cdif_harvester.adapters.http import FetchPolicy, SafeFetcher
from cdif_harvester.errors import BodyTooLarge
from tests.support.rawserver import RawServer, read_request

pytestmark = pytest.mark.network

FETCHES = 20
CAP = 1000  # the caller's cap in the refused and cut cases; the bodies are a little over it
BODY = b"x" * (CAP + 500)


def _answer(method: str, path: str) -> bytes:
    """The response to one request, by method and path."""
    if path == "/unchanged":
        return b'HTTP/1.1 304 Not Modified\r\nETag: "v1"\r\n\r\n'
    if path == "/moved":
        body = b"<a href='/page'>moved</a>"
        head = f"HTTP/1.1 302 Found\r\nLocation: /page\r\nContent-Length: {len(body)}\r\n\r\n"
        return head.encode() + body
    if path == "/chunked":
        chunk = f"{len(BODY):x}\r\n".encode() + BODY + b"\r\n0\r\n\r\n"
        return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk
    head = f'HTTP/1.1 200 OK\r\nContent-Length: {len(BODY)}\r\nETag: "v1"\r\n\r\n'.encode()
    # A HEAD answer declares the length a GET would have, and sends no body.
    return head if method == "HEAD" else head + BODY


def keep_alive(conn: socket.socket, server: RawServer) -> None:
    """Answer request after request on one connection until the client hangs up."""
    while True:
        request = read_request(conn)
        if not request:
            return
        method, path = request.split(b" ", 2)[:2]
        conn.sendall(_answer(method.decode(), path.decode()))


def _not_modified(fetcher: SafeFetcher, server: RawServer) -> None:
    response = fetcher.fetch(server.url("/unchanged"), headers={"If-None-Match": '"v1"'})
    assert response.status == 304


def _head(fetcher: SafeFetcher, server: RawServer) -> None:
    response = fetcher.fetch(server.url("/page"), method="HEAD")
    assert (response.status, response.body) == (200, b"")


def _refused(fetcher: SafeFetcher, server: RawServer) -> None:
    with pytest.raises(BodyTooLarge):
        fetcher.fetch(server.url("/page"), max_bytes=CAP)


def _refused_chunked(fetcher: SafeFetcher, server: RawServer) -> None:
    with pytest.raises(BodyTooLarge):
        fetcher.fetch(server.url("/chunked"), max_bytes=CAP)


def _cut(fetcher: SafeFetcher, server: RawServer) -> None:
    response = fetcher.fetch(server.url("/chunked"), max_bytes=CAP, truncate=True)
    assert response.truncated and response.body == BODY[:CAP]


def _redirected(fetcher: SafeFetcher, server: RawServer) -> None:
    response = fetcher.fetch(server.url("/moved"))
    assert response.url == server.url("/page") and response.body == BODY


@pytest.mark.parametrize(
    "fetch",
    [_not_modified, _head, _refused, _refused_chunked, _cut, _redirected],
    ids=["304", "HEAD", "refused-by-length", "refused-chunked", "cut", "redirect"],
)
def test_connections_are_reused_after_unread_answers(
    fetch: Callable[[SafeFetcher, RawServer], None],
) -> None:
    with (
        RawServer(keep_alive, lifetime=15.0) as server,
        SafeFetcher(FetchPolicy(allow_loopback=True, total_timeout=5.0)) as fetcher,
    ):
        for _ in range(FETCHES):
            fetch(fetcher, server)
        opened = server.connections
    assert opened == 1, f"{FETCHES} fetches opened {opened} connections"
