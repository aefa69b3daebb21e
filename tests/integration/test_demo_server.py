"""The demo publisher site, served over real HTTP on 127.0.0.1, read by the domain parsers."""

from __future__ import annotations

import gzip
import http.client
import json
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker
from lxml import html

from cdif_harvester import USER_AGENT
from cdif_harvester.demo.server import PublisherSite, demo_site_dir
from cdif_harvester.domain.discovery.robots import parse_robots
from cdif_harvester.domain.discovery.sitemap import SitemapEntry, parse_sitemap

pytestmark = pytest.mark.network

# Every page the demo sitemaps list, and what a harvester should make of it.
RECORD_VALID = "record valid"
RECORD_VALID_AFTER_NORMALISATION = "record valid once normalised"
RECORD_INVALID = "record invalid"
NO_METADATA = "no-metadata"
FAILED_404 = "failed 404"
DISALLOWED = "disallowed"
EXPECTED_PAGES = {
    "/datasets/north-atlantic-ctd-2021.html": ("2025-03-04T09:30:00Z", RECORD_VALID),
    "/datasets/gulf-sst-anomalies.html": ("2025-02-14", RECORD_VALID_AFTER_NORMALISATION),
    "/datasets/kelp-forest-survey.html": ("2025-01-27", RECORD_VALID),
    "/datasets/glider-mission-notes.html": ("2024-12-02", NO_METADATA),
    "/private/whale-acoustics-embargoed.html": ("2025-02-28", DISALLOWED),
    "/datasets/tide-gauge-records-1990s.html": ("2024-11-18", RECORD_VALID),
    "/datasets/sediment-cores-draft.html": ("2024-06-30", RECORD_INVALID),
    "/datasets/retired-mooring-2009.html": ("2019-05-21", FAILED_404),
}
CDIF_CONFORMANCE = {"@id": "https://w3id.org/cdif/core/1.0"}
SCHEMA_PREFIXES = {
    "schema": "http://schema.org/",
    "dcterms": "http://purl.org/dc/terms/",
    "dcat": "http://www.w3.org/ns/dcat#",
    "prov": "http://www.w3.org/ns/prov#",
}

# Loopback only, and no proxy from the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Answer:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body


def fetch(url: str, method: str = "GET") -> Answer:
    assert url.startswith("http://127.0.0.1:")
    request = urllib.request.Request(url, method=method, headers={"User-Agent": USER_AGENT})
    try:
        with _OPENER.open(request, timeout=5) as response:
            return Answer(
                response.status,
                {k.lower(): v for k, v in response.headers.items()},
                response.read(),
            )
    except urllib.error.HTTPError as error:
        with error:
            return Answer(
                error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()
            )


@pytest.fixture(scope="module")
def site() -> Iterator[PublisherSite]:
    with PublisherSite(demo_site_dir()) as running:
        yield running


def entries(site: PublisherSite, path: str) -> tuple[SitemapEntry, ...]:
    answer = fetch(site.url(path))
    assert answer.status == 200
    parsed = parse_sitemap(answer.body, sitemap_url=site.url(path))
    assert parsed.error is None
    assert parsed.limit_hit is None
    return parsed.entries


def jsonld_blocks(page: bytes) -> list[tuple[str | None, Any]]:
    """(profile, parsed JSON) of every application/ld+json script of a page."""
    tree = html.fromstring(page)
    return [
        (script.get("profile"), json.loads(script.text or ""))
        for script in tree.iter("script")
        if (script.get("type") or "").strip().lower() == "application/ld+json"
    ]


def prefixed(node: Any) -> Any:
    """Hand-normalise a plain schema.org record (``@vocab``, unprefixed keys) to CDIF's shape:
    ``schema:`` keys, ``@type`` always an array of prefixed names, the prefix context."""
    if isinstance(node, list):
        return [prefixed(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "@context":
            out[key] = dict(SCHEMA_PREFIXES)
        elif key == "@type":
            types = value if isinstance(value, list) else [value]
            out[key] = [t if ":" in t else f"schema:{t}" for t in types]
        elif key.startswith("@") or ":" in key:
            out[key] = prefixed(value)
        else:
            out[f"schema:{key}"] = prefixed(value)
    return out


@pytest.fixture
def validator(corpus: Path) -> Draft202012Validator:
    """The official CDIF core 1.0 schema (skips when the reference corpus is absent)."""
    schema = json.loads((corpus / "cdif-core-1.0/cdifCore/resolvedSchema.json").read_text())
    return Draft202012Validator(schema, format_checker=FormatChecker())


# -- discovery: robots.txt -> index -> sitemaps ----------------------------------------------------


def test_robots_txt_announces_the_index_and_hides_private(site: PublisherSite) -> None:
    answer = fetch(site.url("/robots.txt"))
    assert answer.status == 200
    assert answer.headers["content-type"] == "text/plain; charset=utf-8"
    policy = parse_robots(answer.body, robots_url=site.url("/robots.txt"))
    assert policy.sitemaps == (site.url("/sitemap-index.xml"),)
    assert policy.cdif_sitemaps == ()
    assert policy.allows(site.url("/datasets/north-atlantic-ctd-2021.html"), USER_AGENT)
    assert not policy.allows(site.url("/private/whale-acoustics-embargoed.html"), USER_AGENT)


def test_sitemap_index_lists_both_sitemaps(site: PublisherSite) -> None:
    assert entries(site, "/sitemap-index.xml") == (
        SitemapEntry(site.url("/sitemap-datasets.xml"), "2025-03-04T09:30:00Z"),
        SitemapEntry(site.url("/sitemap-archive.xml.gz"), "2024-11-18"),
    )


def test_gzip_sitemap_is_served_compressed_with_absolute_urls(site: PublisherSite) -> None:
    answer = fetch(site.url("/sitemap-archive.xml.gz"))
    assert answer.status == 200
    assert answer.headers["content-type"] == "application/gzip"
    assert answer.body.startswith(b"\x1f\x8b")
    assert int(answer.headers["content-length"]) == len(answer.body)
    assert site.base_url.encode() in gzip.decompress(answer.body)


def test_robots_to_landing_pages(site: PublisherSite) -> None:
    robots = parse_robots(fetch(site.url("/robots.txt")).body, robots_url=site.url("/robots.txt"))
    pages: list[SitemapEntry] = []
    for index_url in robots.sitemaps:
        index = parse_sitemap(fetch(index_url).body, sitemap_url=index_url)
        assert index.kind == "sitemapindex"
        for child in index.entries:
            child_sitemap = parse_sitemap(fetch(child.loc).body, sitemap_url=child.loc)
            assert child_sitemap.kind == "urlset"
            pages.extend(child_sitemap.entries)
    assert {entry.loc: entry.lastmod for entry in pages} == {
        site.url(path): lastmod for path, (lastmod, _) in EXPECTED_PAGES.items()
    }
    assert len(pages) == len(EXPECTED_PAGES)
    allowed = {entry.loc for entry in pages if robots.allows(entry.loc, USER_AGENT)}
    assert allowed == {
        site.url(path) for path, (_, outcome) in EXPECTED_PAGES.items() if outcome != DISALLOWED
    }


def test_no_placeholder_left_in_anything_served(site: PublisherSite) -> None:
    paths = ["/", "/robots.txt", "/sitemap-index.xml", "/sitemap-datasets.xml", *EXPECTED_PAGES]
    for path in paths:
        answer = fetch(site.url(path))
        assert b"{{BASE}}" not in answer.body, path
    assert b"{{BASE}}" not in gzip.decompress(fetch(site.url("/sitemap-archive.xml.gz")).body)


# -- each page and its expected outcome ------------------------------------------------------------


@pytest.mark.parametrize("path", list(EXPECTED_PAGES))
def test_page_outcome(site: PublisherSite, validator: Draft202012Validator, path: str) -> None:
    outcome = EXPECTED_PAGES[path][1]
    answer = fetch(site.url(path))
    if outcome == FAILED_404:
        assert answer.status == 404
        return
    assert answer.status == 200
    assert answer.headers["content-type"] == "text/html; charset=utf-8"
    blocks = jsonld_blocks(answer.body)
    datasets = [
        (profile, block)
        for profile, block in blocks
        if "Dataset" in str(block.get("@type")) and "@graph" not in block
    ]
    if outcome == NO_METADATA:
        assert blocks == []
        return
    assert len(datasets) == 1
    profile, record = datasets[0]
    if outcome == RECORD_VALID_AFTER_NORMALISATION:
        assert profile is None
        assert "name" in record  # unprefixed keys as published...
        assert list(validator.iter_errors(record))  # ...so not valid as is
        record = prefixed(record)
    else:
        assert profile == "CDIF1.0"
    errors = sorted(error.message for error in validator.iter_errors(record))
    if outcome == RECORD_INVALID:
        assert errors == [
            "'schema:dateModified' is a required property",
            f"{record!r} is not valid under any of the given schemas",
        ]
        assert "schema:license" not in record
        assert "schema:conditionsOfAccess" not in record
    else:  # valid, or valid but not to be fetched (disallowed)
        assert errors == []
        assert CDIF_CONFORMANCE in record["schema:subjectOf"]["dcterms:conformsTo"]
        assert record["schema:subjectOf"]["schema:about"]["@id"] == record["@id"]


def test_two_script_blocks_on_one_page(site: PublisherSite) -> None:
    blocks = jsonld_blocks(fetch(site.url("/datasets/kelp-forest-survey.html")).body)
    assert [profile for profile, _ in blocks] == [None, "CDIF1.0"]
    website = blocks[0][1]
    assert [node["@type"] for node in website["@graph"]] == ["WebSite", "Organization"]


def test_records_carry_the_served_base_url(site: PublisherSite) -> None:
    blocks = jsonld_blocks(fetch(site.url("/datasets/north-atlantic-ctd-2021.html")).body)
    record = blocks[0][1]
    assert record["schema:url"] == site.url("/datasets/north-atlantic-ctd-2021.html")
    assert record["@id"].startswith("https://doi.org/10.5072/")  # the DOI test prefix


# -- the server itself -----------------------------------------------------------------------------


def test_missing_hidden_and_escaping_paths_are_404(site: PublisherSite) -> None:
    for path in ["/nope.html", "/datasets/", "/sitemap-archive.xml.gz.tmpl", "/datasets/x/y.html"]:
        assert fetch(site.url(path)).status == 404, path
    # A raw request line, which urllib would normalise.
    connection = http.client.HTTPConnection("127.0.0.1", site.port, timeout=5)
    try:
        for target in ["/../server.py", "/datasets/../../server.py", "/%2e%2e/server.py"]:
            connection.request("GET", target)
            response = connection.getresponse()
            response.read()
            assert response.status == 404, target
            connection.close()
    finally:
        connection.close()


def test_head_matches_get_without_a_body(site: PublisherSite) -> None:
    get = fetch(site.url("/sitemap-datasets.xml"))
    head = fetch(site.url("/sitemap-datasets.xml"), method="HEAD")
    assert head.status == get.status == 200
    assert head.body == b""
    assert head.headers["content-type"] == get.headers["content-type"] == "application/xml"
    assert int(head.headers["content-length"]) == len(get.body)
    assert fetch(site.url("/missing.xml"), method="HEAD").status == 404


def test_content_types_by_extension(site: PublisherSite) -> None:
    assert fetch(site.url("/")).headers["content-type"] == "text/html; charset=utf-8"
    assert fetch(site.url("/sitemap-index.xml")).headers["content-type"] == "application/xml"


def test_routes_override_files_and_requests_are_logged(tmp_path: Path) -> None:
    (tmp_path / "record.json").write_text('{"@id": "{{BASE}}/record.json"}', encoding="utf-8")
    (tmp_path / "robots.txt").write_text("User-agent: *\nDisallow:\n", encoding="utf-8")
    with PublisherSite(tmp_path) as site:
        site.add_route(
            "/robots.txt",
            status=503,
            headers=[("Retry-After", "120")],
            body=b"busy",
        )
        site.add_route(
            "/landing",
            headers=[
                ("Content-Type", "text/html"),
                ("Link", '<{{BASE}}/record.json>; rel="describedby"; type="application/ld+json"'),
                ("Link", '<https://doi.org/10.5072/x>; rel="cite-as"'),
            ],
            body="<html></html>",
        )
        record = fetch(site.url("/record.json"))
        assert record.status == 200
        assert record.headers["content-type"] == "application/ld+json"
        assert json.loads(record.body) == {"@id": site.url("/record.json")}
        busy = fetch(site.url("/robots.txt"))
        assert (busy.status, busy.headers["retry-after"], busy.body) == (503, "120", b"busy")

        connection = http.client.HTTPConnection("127.0.0.1", site.port, timeout=5)
        connection.request("HEAD", "/landing?x=1", headers={"Accept": "text/html"})
        response = connection.getresponse()
        response.read()
        connection.close()
        assert response.status == 200
        assert response.headers.get_all("Link") == [
            f'<{site.base_url}/record.json>; rel="describedby"; type="application/ld+json"',
            '<https://doi.org/10.5072/x>; rel="cite-as"',
        ]
        assert response.headers["Content-Length"] == str(len(b"<html></html>"))

        assert [(method, path) for method, path, _ in site.requests] == [
            ("GET", "/record.json"),
            ("GET", "/robots.txt"),
            ("HEAD", "/landing?x=1"),
        ]
        assert site.requests[0][2]["user-agent"] == USER_AGENT
        assert site.requests[2][2]["accept"] == "text/html"


def test_start_stop_on_a_given_port_and_quiet(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "index.html").write_text("<p>{{BASE}}</p>", encoding="utf-8")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    site = PublisherSite(tmp_path, port=port)
    with pytest.raises(RuntimeError):
        _ = site.base_url
    site.start()
    try:
        assert site.base_url == f"http://127.0.0.1:{port}"
        assert fetch(site.url("/")).body == f"<p>http://127.0.0.1:{port}</p>".encode()
        assert fetch(site.url("/missing")).status == 404
        # a client that hangs up without a request, or sends garbage, must not print anything
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            raw.sendall(b"GET /a b HTTP/1.1\r\n\r\n")
            assert raw.recv(1024).startswith(b"HTTP/1.1 400")
    finally:
        site.stop()
    site.stop()  # idempotent
    with PublisherSite(tmp_path, port=port) as again:  # the port is released once stopped
        assert fetch(again.url("/")).status == 200
    out, err = capfd.readouterr()
    assert err == ""
    assert out == ""


def test_demo_site_dir_is_the_bundled_site() -> None:
    site_dir = demo_site_dir()
    assert site_dir.joinpath("robots.txt").is_file()
    assert site_dir.joinpath("sitemap-archive.xml.gz.tmpl").is_file()
    names = {node.name for node in site_dir.joinpath("datasets").iterdir()}
    assert {
        Path(path).name for path, (_, outcome) in EXPECTED_PAGES.items() if outcome != FAILED_404
    } - {"whale-acoustics-embargoed.html"} <= names
    assert "retired-mooring-2009.html" not in names


@pytest.mark.parametrize("keep_alive", [True, False])
def test_the_site_keeps_a_connection_open_between_requests_unless_told_not_to(
    keep_alive: bool,
) -> None:
    # Given the demo site, and one HTTP/1.1 connection to it
    with PublisherSite(keep_alive=keep_alive) as site:
        host, port = site.url("/").split("//", 1)[1].split("/", 1)[0].split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=5)
        try:
            # When a page is asked for, then another
            connection.request("GET", "/robots.txt")
            first = connection.getresponse()
            first.read()
            first_socket = connection.sock
            connection.request("GET", "/robots.txt")
            second = connection.getresponse()
            second.read()
            second_socket = connection.sock
        finally:
            connection.close()
    assert first.status == second.status == 200  # noqa: PLR2004
    # Then a keeping site answers both on one socket; the other closes it after each answer
    if keep_alive:
        assert first.getheader("Connection") is None
        assert first_socket is not None and second_socket is first_socket
    else:
        assert first.getheader("Connection") == "close"
        assert first_socket is None and second_socket is None
