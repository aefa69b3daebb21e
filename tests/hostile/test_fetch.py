"""Hostile publishers against the safe fetcher: every misbehaving server ends the fetch with one
clear error, within a small multiple of the deadline, in bounded memory.

Each server is real and listens on 127.0.0.1: tests/support/rawserver.py writes bytes at any pace
(headers at one byte a second, headers that never end, endless bodies), the friendly
tests/support/httpserver.py serves redirects. The fetch deadline is set small (2 s) so the wall
time bound is functional, not a benchmark: "ends near the deadline, not hours later". Memory is
measured in a fresh process (tests/support/bounds.py) where it matters.
"""

from __future__ import annotations

import json
import socket
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.adapters.http import FetchPolicy, SafeFetcher
from cdif_harvester.errors import (
    BodyTooLarge,
    FetchTimeout,
    PermanentError,
    RedirectError,
    RetryableError,
    TooSlow,
)
from tests.support.bounds import measure
from tests.support.httpserver import LocalHTTPServer
from tests.support.rawserver import RawServer, read_request

pytestmark = [pytest.mark.network, pytest.mark.serial]  # (wall-clock bounds)

KiB = 1024
MiB = 1024 * KiB
DEADLINE = 2.0
# "Ends at the deadline": a few times the deadline leaves room for a loaded 2-core machine, and is
# still far below what an unbounded fetch would take (the raw servers give up after 15 s).
WALL_BOUND = 3 * DEADLINE
# A fetch in a fresh interpreter with httpx imported costs some 40-50 MiB; an uncapped body or an
# unbounded inflate costs its size (the bombs below expand to 49 MiB and more).
MEMORY_BOUND_MIB = 80


@pytest.fixture
def make_fetcher() -> Iterator[Callable[..., SafeFetcher]]:
    fetchers: list[SafeFetcher] = []

    def make(**settings: Any) -> SafeFetcher:
        settings.setdefault("allow_loopback", True)
        settings.setdefault("total_timeout", DEADLINE)
        fetcher = SafeFetcher(FetchPolicy(**settings))
        fetchers.append(fetcher)
        return fetcher

    yield make
    for fetcher in fetchers:
        fetcher.close()


def serve(script: Callable[[socket.socket, RawServer], None]) -> RawServer:
    return RawServer(script, lifetime=15.0)


def timed(call: Callable[[], object]) -> tuple[BaseException | None, float]:
    """Run ``call``; return what it raised (None if nothing) and how long it took."""
    started = time.monotonic()
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - the test inspects it
        return exc, time.monotonic() - started
    return None, time.monotonic() - started


def drip(data: bytes, every: float) -> Callable[[socket.socket, RawServer], None]:
    """A script that answers with ``data`` one byte every ``every`` seconds, then waits."""

    def script(conn: socket.socket, server: RawServer) -> None:
        read_request(conn)
        for byte in data:
            if not server.sleep(every):
                return
            conn.sendall(bytes([byte]))
        while server.sleep(0.1):
            pass

    return script


# --- time: one deadline for connect, response head and body ----------------------------------


def test_status_line_and_headers_at_one_byte_a_second_end_at_the_deadline(
    make_fetcher: Callable[..., SafeFetcher],
) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 2\r\n\r\nok"
    with serve(drip(head, every=1.0)) as server:
        error, elapsed = timed(lambda: make_fetcher().fetch(server.url("/")))
    assert isinstance(error, TooSlow), error
    assert error.reason == "too-slow"
    assert "response head" in str(error)
    assert isinstance(error, PermanentError)  # a slow-loris publisher is not retried
    assert elapsed < WALL_BOUND


def test_headers_that_never_end_stop_at_the_deadline(
    make_fetcher: Callable[..., SafeFetcher],
) -> None:
    def endless_head(conn: socket.socket, server: RawServer) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\n")
        n = 0
        while server.sleep(0.05):
            n += 1
            conn.sendall(f"X-Pad-{n}: y\r\n".encode())

    with serve(endless_head) as server:
        error, elapsed = timed(lambda: make_fetcher().fetch(server.url("/")))
    assert isinstance(error, TooSlow), error
    assert error.reason == "too-slow"
    assert elapsed < WALL_BOUND


def test_slow_body_stops_at_the_deadline_and_is_not_retried(
    make_fetcher: Callable[..., SafeFetcher],
) -> None:
    def slow_body(conn: socket.socket, server: RawServer) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
        while server.sleep(0.1):
            conn.sendall(b"x")

    with serve(slow_body) as server:
        error, elapsed = timed(lambda: make_fetcher(read_timeout=5).fetch(server.url("/")))
    assert isinstance(error, TooSlow), error
    assert error.reason == "too-slow"
    assert "body" in str(error)
    assert elapsed < WALL_BOUND


def test_endless_slow_chunked_body_stops_at_the_deadline(
    make_fetcher: Callable[..., SafeFetcher],
) -> None:
    def endless_chunks(conn: socket.socket, server: RawServer) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        while server.sleep(0.1):
            conn.sendall(b"1\r\nx\r\n")

    with serve(endless_chunks) as server:
        error, elapsed = timed(lambda: make_fetcher().fetch(server.url("/")))
    assert isinstance(error, TooSlow), error
    assert elapsed < WALL_BOUND


def test_server_that_accepts_and_never_answers_is_a_retryable_timeout(
    make_fetcher: Callable[..., SafeFetcher],
) -> None:
    def silent(conn: socket.socket, server: RawServer) -> None:
        read_request(conn)
        while server.sleep(0.1):
            pass

    with serve(silent) as server:
        # The read timeout is longer than the deadline: the deadline ends it.
        error, elapsed = timed(lambda: make_fetcher(read_timeout=10).fetch(server.url("/")))
        assert isinstance(error, FetchTimeout), error
        assert error.reason == "total-timeout"
        assert elapsed < WALL_BOUND
        # The usual case (read timeout shorter than the deadline): the read timeout ends it.
        error, elapsed = timed(lambda: make_fetcher(read_timeout=0.5).fetch(server.url("/")))
        assert isinstance(error, FetchTimeout), error
        assert error.reason == "read-timeout"
        assert elapsed < WALL_BOUND
    # Nothing was received: an overloaded server looks like this, and may answer next time.
    assert isinstance(error, RetryableError)


def test_server_that_never_reads_the_request_is_bounded(
    make_fetcher: Callable[..., SafeFetcher],
) -> None:
    def deaf(conn: socket.socket, server: RawServer) -> None:
        while server.sleep(0.1):
            pass

    with serve(deaf) as server:
        error, elapsed = timed(lambda: make_fetcher().fetch(server.url("/")))
    assert isinstance(error, FetchTimeout), error
    assert elapsed < WALL_BOUND


def test_redirect_hops_share_one_deadline(make_fetcher: Callable[..., SafeFetcher]) -> None:
    with LocalHTTPServer() as server:
        for hop in range(20):
            server.route(
                f"/hop/{hop}",
                status=302,
                headers=[("Location", f"/hop/{hop + 1}")],
                headers_delay=0.5,
            )
        error, elapsed = timed(lambda: make_fetcher(max_redirects=30).fetch(server.url("/hop/0")))
    assert isinstance(error, FetchTimeout | TooSlow), error
    assert error.reason in ("total-timeout", "too-slow")
    assert elapsed < WALL_BOUND


# --- the response head: 32 KiB, and up to 1 MiB more of Link lines ------------------------


def head_with(lines: list[bytes]) -> Callable[[socket.socket, RawServer], None]:
    def script(conn: socket.socket, server: RawServer) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\n" + b"".join(lines) + b"Content-Length: 2\r\n\r\nok")
        while server.sleep(0.1):
            pass

    return script


def test_huge_header_block_is_refused_with_a_clear_reason(
    make_fetcher: Callable[..., SafeFetcher],
) -> None:
    lines = [f"X-Pad-{n}: {'y' * 90}\r\n".encode() for n in range(2000)]  # about 200 KiB
    with serve(head_with(lines)) as server:
        error, elapsed = timed(lambda: make_fetcher().fetch(server.url("/")))
    assert isinstance(error, PermanentError), error
    assert error.reason == "headers-too-large"
    assert "32768 bytes" in str(error)
    assert elapsed < WALL_BOUND


def test_link_headers_up_to_their_ceiling_are_kept_and_a_huge_one_is_refused(
    make_fetcher: Callable[..., SafeFetcher],
) -> None:
    def link_header(count: int) -> bytes:
        links = ", ".join(f'<https://repo.test/item/{n}>; rel="item"' for n in range(count))
        return f"Link: {links}\r\n".encode()

    # About 160 KiB over three lines: past h11's own 100 KiB and the 32 KiB of other headers.
    lines = [link_header(1500), link_header(1500), b"X-Other: 1\r\n", link_header(1000)]
    assert sum(map(len, lines)) > 150 * KiB
    with serve(head_with(lines)) as server:
        response = make_fetcher().fetch(server.url("/"))
    expected = [len(line) - len("Link: \r\n") for line in lines if line.startswith(b"Link")]
    assert [len(value) for value in response.header_all("link")] == expected
    assert response.body == b"ok"

    huge = link_header(30_000)  # about 1.2 MiB: over the 1 MiB ceiling of Link lines
    with serve(head_with([huge])) as server:
        error, elapsed = timed(lambda: make_fetcher().fetch(server.url("/")))
    assert isinstance(error, PermanentError), error
    assert error.reason == "headers-too-large"
    assert "linkset" in str(error)  # what the publisher should do instead
    assert elapsed < WALL_BOUND


def test_other_headers_keep_their_cap_beside_large_link_headers(
    make_fetcher: Callable[..., SafeFetcher],
) -> None:
    link = ", ".join(f"<https://repo.test/item/{n}>; rel=item" for n in range(2000))
    pad = [f"X-Pad-{n}: {'y' * 90}\r\n".encode() for n in range(400)]  # about 40 KiB
    with serve(head_with([f"Link: {link}\r\n".encode(), *pad])) as server:
        error, _elapsed = timed(lambda: make_fetcher().fetch(server.url("/")))
    assert isinstance(error, PermanentError), error
    assert error.reason == "headers-too-large"
    assert "32768 bytes" in str(error)


def test_endless_interim_responses_are_capped_like_one_head(
    make_fetcher: Callable[..., SafeFetcher],
) -> None:
    def interim(conn: socket.socket, server: RawServer) -> None:
        read_request(conn)
        while server.sleep(0.001):
            conn.sendall(b"HTTP/1.1 102 Processing\r\n\r\n" * 50)

    with serve(interim) as server:
        error, elapsed = timed(lambda: make_fetcher().fetch(server.url("/")))
    assert isinstance(error, PermanentError), error
    assert error.reason == "headers-too-large"
    assert elapsed < WALL_BOUND


def test_interim_responses_arriving_together_are_each_counted(
    make_fetcher: Callable[..., SafeFetcher],
) -> None:
    # 40 KiB of interim heads in one write, then nothing: the head cap (32 KiB) must see every
    # one of them, not only the first of each read, or the fetch waits for the deadline.
    def burst(conn: socket.socket, server: RawServer) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 102 Processing\r\n\r\n" * 1500)
        server.sleep(DEADLINE * 2)

    with serve(burst) as server:
        error, _elapsed = timed(lambda: make_fetcher().fetch(server.url("/")))
    assert isinstance(error, PermanentError), error
    assert error.reason == "headers-too-large"


# --- redirects ----------------------------------------------------------------------------------


def test_redirect_chain_longer_than_the_limit(make_fetcher: Callable[..., SafeFetcher]) -> None:
    with LocalHTTPServer() as server:
        for hop in range(10):
            server.route(f"/r/{hop}", status=301, headers=[("Location", f"/r/{hop + 1}")])
        server.route("/r/10", body=b"never reached")
        error, elapsed = timed(lambda: make_fetcher().fetch(server.url("/r/0")))
        assert isinstance(error, RedirectError), error
        assert error.reason == "too-many-redirects"
        assert len(server.requests) == 6  # the first request and five redirects followed
    assert elapsed < WALL_BOUND


def test_redirect_loop(make_fetcher: Callable[..., SafeFetcher]) -> None:
    with LocalHTTPServer() as server:
        server.route("/a", status=302, headers=[("Location", "/b")])
        server.route("/b", status=307, headers=[("Location", "/a#again")])  # the same target
        error, elapsed = timed(lambda: make_fetcher().fetch(server.url("/a")))
    assert isinstance(error, RedirectError), error
    assert error.reason == "redirect-loop"
    assert elapsed < WALL_BOUND


# --- bodies: the caller's cap holds, also once decompressed ----------------------------------


def gzip_of_zeros(total: int) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [compressor.compress(bytes(MiB)) for _ in range(total // MiB)]
    return b"".join([*parts, compressor.flush()])


def test_inflate_cap_is_the_callers_cap(make_fetcher: Callable[..., SafeFetcher]) -> None:
    bomb = gzip_of_zeros(5 * MiB)
    with LocalHTTPServer() as server:
        server.route(
            "/bomb",
            body=bomb,
            headers=[("Content-Encoding", "gzip"), ("Link", '<m.json>; rel="describedby"')],
        )
        with pytest.raises(BodyTooLarge) as caught:
            make_fetcher().fetch(server.url("/bomb"), max_bytes=1 * MiB)
    error = caught.value
    assert error.reason == "decompressed-too-large"
    assert f"more than {MiB} bytes" in str(error)
    # Like a body over the wire cap, the refused response keeps its status and headers.
    assert error.status == 200
    assert ("link", '<m.json>; rel="describedby"') in error.headers


# A describedby target of under 50 KiB that inflates to 49 MiB (issue 16, defect 3), fetched with
# the document cap (10 MiB); then an endless chunked body sent as fast as the socket takes it.
_BOUNDED_FETCH = """
import json, socket, zlib
from cdif_harvester.adapters.http import FetchPolicy, SafeFetcher
from cdif_harvester.errors import BodyTooLarge
from tests.support.rawserver import RawServer, read_request

MiB = 1024 * 1024
compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
bomb = b"".join([*(compressor.compress(bytes(MiB)) for _ in range(49)), compressor.flush()])

def script(conn, server):
    read_request(conn)
    if KIND == "bomb":
        conn.sendall(
            b"HTTP/1.1 200 OK\\r\\nContent-Type: application/ld+json\\r\\n"
            b"Content-Encoding: gzip\\r\\nContent-Length: %d\\r\\n\\r\\n" % len(bomb) + bomb
        )
    else:
        conn.sendall(b"HTTP/1.1 200 OK\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n")
        chunk = b"10000\\r\\n" + b"x" * 0x10000 + b"\\r\\n"
        while True:
            conn.sendall(chunk)
    while server.sleep(0.1):
        pass

with RawServer(script, lifetime=30) as server:
    with SafeFetcher(FetchPolicy(allow_loopback=True, total_timeout=20)) as fetcher:
        try:
            response = fetcher.fetch(server.url("/"), max_bytes=10 * MiB)
            print(json.dumps({"body": len(response.body)}))
        except BodyTooLarge as exc:
            print(json.dumps({"error": exc.reason, "status": exc.status}))
"""


@pytest.mark.parametrize(
    ("kind", "reason"),
    [("bomb", "decompressed-too-large"), ("endless", "body-too-large")],
)
def test_bomb_and_endless_body_stop_at_the_cap_in_bounded_memory(kind: str, reason: str) -> None:
    measured = measure(f"KIND = {kind!r}\n" + _BOUNDED_FETCH, timeout=60)
    assert measured.returncode == 0, measured.stderr[-3000:]
    assert json.loads(measured.stdout) == {"error": reason, "status": 200}
    assert measured.peak_rss_mib < MEMORY_BOUND_MIB, measured
    assert measured.cpu_seconds < 10, measured


# --- the same verdict locally and on AWS ------------------------------------------------------


def slow_site(requests: list[str]) -> Callable[[socket.socket, RawServer], None]:
    """A site whose sitemap lists one page that arrives at a byte every 0.2 s."""

    def script(conn: socket.socket, server: RawServer) -> None:
        head = read_request(conn).decode("latin-1")
        path = head.split(" ", 2)[1] if head.count(" ") >= 2 else ""
        requests.append(path)
        base = f"http://127.0.0.1:{server.port}"
        if path == "/sitemap.xml":
            body = (
                '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                f"<url><loc>{base}/slow.html</loc></url></urlset>"
            ).encode()
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\nConnection: close\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body) + body
            )
        elif path == "/slow.html":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n")
            while server.sleep(0.2):
                conn.sendall(b"X: y\r\n")
        else:
            conn.sendall(
                b"HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
            )

    return script


@pytest.fixture
def short_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both composition roots build their fetcher with a 2 s deadline."""
    from cdif_harvester import local_runtime  # noqa: PLC0415
    from cdif_harvester.adapters import http  # noqa: PLC0415

    def policy(**settings: Any) -> FetchPolicy:
        return FetchPolicy(**{"total_timeout": DEADLINE, **settings})

    monkeypatch.setattr(http, "FetchPolicy", policy)  # aws_runtime imports it when wiring
    monkeypatch.setattr(local_runtime, "FetchPolicy", policy)


@pytest.mark.usefixtures("short_deadline")
def test_a_slow_page_fails_too_slow_at_the_first_attempt_locally(tmp_path: Any) -> None:
    from cdif_harvester.cli.runner import LocalHarvester  # noqa: PLC0415

    requests: list[str] = []
    with serve(slow_site(requests)) as server:
        started = time.monotonic()
        with LocalHarvester(tmp_path / "out", allow_loopback=True, max_attempts=3) as harvester:
            harvester.harvest(server.url("/sitemap.xml"))
        elapsed = time.monotonic() - started
    (line,) = [
        json.loads(x) for x in (tmp_path / "out" / "outcomes.jsonl").read_text().splitlines()
    ]
    assert line["outcome"] == "failed"
    assert str(line["reason"]).startswith("too-slow: ")
    assert requests.count("/slow.html") == 1  # not retried
    assert elapsed < 5 * DEADLINE


@pytest.mark.aws
@pytest.mark.usefixtures("short_deadline")
def test_a_slow_page_fails_too_slow_at_the_first_attempt_on_aws(stack: Any) -> None:
    import boto3  # noqa: PLC0415

    from cdif_harvester.adapters.aws import DynamoCatalog  # noqa: PLC0415
    from tests.support.pipeline import invoke, run_pipeline  # noqa: PLC0415

    event = json.loads(
        (
            Path(__file__).resolve().parents[2] / "infrastructure/events/intake-post-harvest.json"
        ).read_text(encoding="utf-8")
    )
    requests: list[str] = []
    with serve(slow_site(requests)) as server:
        event["body"] = json.dumps({"url": server.url("/sitemap.xml")})
        operator = event["requestContext"]["identity"]["apiKeyId"]
        response = invoke(stack, "IntakeFunction", event, OPERATOR_API_KEY_IDS=operator)
        assert response["statusCode"] == 202, response
        run_id = json.loads(response["body"])["run_id"]
        stats = run_pipeline(
            boto3.client("sqs", region_name=stack.region), stack, ALLOW_LOOPBACK="true"
        )
    assert stats.failures == []  # nothing handed back to SQS for a retry
    catalog = DynamoCatalog(
        boto3.resource("dynamodb", region_name=stack.region).Table(stack.table_name)
    )
    (outcome,) = catalog.outcomes(run_id)
    assert outcome.outcome == "failed"
    assert str(outcome.reason).startswith("too-slow: ")
    assert requests.count("/slow.html") == 1
