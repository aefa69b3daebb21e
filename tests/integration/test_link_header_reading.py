"""End to end, against a real server on 127.0.0.1: a landing page whose Link header is larger
than a response head used to be allowed, or malformed, still leads to its metadata."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.cli.runner import LocalHarvester
from tests.support.httpserver import LocalHTTPServer

pytestmark = pytest.mark.network

KiB = 1024
HTML = "text/html; charset=utf-8"
LINKS_KEPT = 1000  # link-values of a response's Link headers read, per the issue
PAGE = b"<!doctype html><html><head><title>landing</title></head><body>hi</body></html>"


@pytest.fixture
def server() -> Iterator[LocalHTTPServer]:
    """The publisher: a sitemap listing ``/page``, and ``/meta.jsonld``, its metadata."""
    with LocalHTTPServer() as served:
        sitemap = (
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"<url><loc>{served.url('/page')}</loc></url></urlset>"
        )
        served.route(
            "/sitemap.xml", headers=[("Content-Type", "application/xml")], body=sitemap.encode()
        )
        record = {
            "@context": "https://schema.org/",
            "@type": "Dataset",
            "@id": served.url("/page"),
            "name": "A dataset announced among many links",
        }
        served.route(
            "/meta.jsonld",
            headers=[("Content-Type", "application/ld+json")],
            body=json.dumps(record).encode(),
        )
        yield served


def _harvest(server: LocalHTTPServer, out: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    with LocalHarvester(out, allow_loopback=True) as harvester:
        harvester.harvest(server.url("/sitemap.xml"))
    lines = [json.loads(x) for x in (out / "outcomes.jsonl").read_text().splitlines()]
    (line,) = [line for line in lines if line["url"] == server.url("/page")]
    reports = [json.loads((out / ref["report"]).read_text()) for ref in line.get("records") or []]
    return line, reports


def _items(count: int) -> list[str]:
    return [
        f'<https://repo.test/files/{n:06d}/part.csv>; rel="item"; type="text/csv"'
        for n in range(count)
    ]


def test_a_link_header_over_100_kib_with_its_metadata_link_gives_the_record(
    server: LocalHTTPServer, tmp_path: Path
) -> None:
    values = _items(3000)
    values.insert(10, '</meta.jsonld>; rel="describedby"; type="application/ld+json"')
    header = ", ".join(values)
    assert len(header) > 150 * KiB
    server.route("/page", headers=[("Content-Type", HTML), ("Link", header)], body=PAGE)
    line, reports = _harvest(server, tmp_path / "out")
    assert line["outcome"] == "record", line
    assert server.url("/meta.jsonld") in json.dumps(reports)
    dropped = len(values) - LINKS_KEPT
    assert f"{dropped} more read and dropped" in json.dumps([line, reports]), (line, reports)


def test_a_metadata_link_past_the_cut_leaves_the_page_read_without_metadata(
    server: LocalHTTPServer, tmp_path: Path
) -> None:
    values = [*_items(3000), '</meta.jsonld>; rel="describedby"; type="application/ld+json"']
    header = ", ".join(values)
    server.route("/page", headers=[("Content-Type", HTML), ("Link", header)], body=PAGE)
    line, _reports = _harvest(server, tmp_path / "out")
    # The page is read (not failed for its head), its links past the cap are not followed.
    assert line["outcome"] == "no-metadata", line
    assert "/meta.jsonld" not in [request.path for request in server.requests]


@pytest.mark.parametrize("quote", ['"', "'"])
def test_an_unclosed_quote_in_a_type_does_not_hide_the_metadata_link(
    server: LocalHTTPServer, tmp_path: Path, quote: str
) -> None:
    header = (
        f"<https://repo.test/files/part.csv>; rel=item; type={quote}text/csv, "
        f"</meta.jsonld>; rel=describedby; type={quote}application/ld+json{quote}"
    )
    server.route("/page", headers=[("Content-Type", HTML), ("Link", header)], body=PAGE)
    line, reports = _harvest(server, tmp_path / "out")
    assert line["outcome"] == "record", line
    assert "/meta.jsonld" in [request.path for request in server.requests]
    assert "unterminated quote in parameter type repaired" in json.dumps(reports), reports
