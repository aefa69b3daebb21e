"""Discovery against real robots.txt and sitemap files served on 127.0.0.1, hostile ones included.

Every URL that enters, sitemaps as well as pages, ends in one recorded outcome; a broken child
sitemap fails alone and its siblings are harvested.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdif_harvester.cli.runner import LocalHarvester
from cdif_harvester.demo.server import PublisherSite

pytestmark = pytest.mark.network

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
XML = {"Content-Type": "application/xml"}
GZIP = {"Content-Type": "application/gzip"}
PAGE = b"<html><head><title>a page</title></head><body>No metadata here.</body></html>"


def _urlset(*paths: str) -> str:
    return (
        f"<urlset {NS}>"
        + "".join(
            f"<url><loc>\n  {{{{BASE}}}}{p}  \n</loc><lastmod>2024-05-0{i + 1}</lastmod></url>"
            for i, p in enumerate(paths)
        )
        + "</urlset>"
    )


def _index(*paths: str) -> str:
    items = "".join(f"<sitemap><loc>{{{{BASE}}}}{p}</loc></sitemap>" for p in paths)
    return f"<sitemapindex {NS}>{items}</sitemapindex>"


BILLION_LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(
        f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10 if i > 1 else "&lol;" * 10}">'
        for i in range(1, 10)
    )
    + f"]><urlset {NS}><url><loc>&lol9;</loc></url></urlset>"
)


@pytest.fixture
def hostile_site() -> Iterator[PublisherSite]:
    site = PublisherSite(None)
    site.add_route(
        "/robots.txt",
        headers={"Content-Type": "text/plain"},
        body="User-agent: *\nCrawl-delay: 0.2\nSitemap: {{BASE}}/index.xml\n",
    )
    site.add_route(
        "/index.xml",
        headers=XML,
        body=_index(
            "/good.xml",
            "/good.xml.gz",
            "/text.txt",
            "/missing.xml",
            "/html.xml",
            "/bomb.xml",
            "/gzbomb.xml.gz",
            "/truncated.xml",
            "/loop0.xml",
            "/self.xml",
        ),
    )
    site.add_route("/good.xml", headers=XML, body="\ufeff" + _urlset("/p/a.html", "/p/b.html"))
    site.start()  # the base URL is needed to build the gzip bodies, which are served as bytes
    base = site.base_url
    site.add_route(
        "/good.xml.gz",
        headers=GZIP,
        body=gzip.compress(_urlset("/p/c.html").replace("{{BASE}}", base).encode()),
    )
    site.add_route("/text.txt", headers={"Content-Type": "text/plain"}, body=f"{base}/p/d.html\n")
    site.add_route("/html.xml", headers=XML, body=b"<!DOCTYPE html><html><body>Oops</body></html>")
    site.add_route("/bomb.xml", headers=XML, body=BILLION_LAUGHS)
    # 64 MiB of zeros in about 64 KiB: over the 50 MiB sitemap limit once inflated
    site.add_route("/gzbomb.xml.gz", headers=GZIP, body=gzip.compress(b"\0" * (64 * 1024 * 1024)))
    site.add_route(
        "/truncated.xml",
        headers=XML,
        body=_urlset("/p/e.html", "/p/never.html")[
            : -len("</loc><lastmod>2024-05-02</lastmod></url></urlset>") - 5
        ],
    )
    for i in range(10):  # an index chain that never ends
        site.add_route(f"/loop{i}.xml", headers=XML, body=_index(f"/loop{i + 1}.xml"))
    site.add_route("/self.xml", headers=XML, body=_index("/self.xml", "/index.xml"))
    for name in "abcde":
        site.add_route(f"/p/{name}.html", headers={"Content-Type": "text/html"}, body=PAGE)
    yield site
    site.stop()


def test_every_url_that_enters_ends_in_one_recorded_outcome(
    hostile_site: PublisherSite, tmp_path: Path
) -> None:
    slept: list[float] = []
    with LocalHarvester(tmp_path, allow_loopback=True, sleep=slept.append) as harvester:
        summary = harvester.harvest(hostile_site.url("/robots.txt"))
    base = hostile_site.base_url
    lines = [json.loads(line) for line in (tmp_path / "outcomes.jsonl").read_text().splitlines()]
    outcomes = {
        line["url"].removeprefix(base): (line["outcome"], (line.get("reason") or "").split(":")[0])
        for line in lines
    }
    assert outcomes == {
        "/p/a.html": ("no-metadata", "no-metadata"),
        "/p/b.html": ("no-metadata", "no-metadata"),
        "/p/c.html": ("no-metadata", "no-metadata"),
        "/p/d.html": ("no-metadata", "no-metadata"),
        "/p/e.html": ("no-metadata", "no-metadata"),
        "/missing.xml": ("failed", "http-404"),
        "/html.xml": ("failed", "not-a-sitemap"),
        "/bomb.xml": ("failed", "xml-entities-refused"),
        "/gzbomb.xml.gz": ("failed", "too-large"),
        "/truncated.xml": ("failed", "malformed-xml"),
        "/loop3.xml": ("failed", "sitemap-depth-exceeded"),
    }
    assert "1 URLs before it were harvested" in next(
        line["reason"] for line in lines if line["url"].endswith("/truncated.xml")
    )
    assert summary.urls == len(lines)
    requested = [path for _, path, _ in hostile_site.requests]
    assert "/loop4.xml" not in requested  # the chain was cut at the depth limit
    assert requested.count("/robots.txt") == 1  # read once, then cached
    assert requested.count("/self.xml") == 1 and requested.count("/index.xml") == 1
    # Crawl-delay: 0.2 was honoured between requests to the host
    assert slept and all(0 < s <= 0.2 for s in slept)


def test_robots_txt_404_allows_everything_and_5xx_means_try_later(tmp_path: Path) -> None:
    with PublisherSite(None) as site:
        site.add_route("/sitemap.xml", headers=XML, body=_urlset("/p/a.html"))
        site.add_route("/p/a.html", headers={"Content-Type": "text/html"}, body=PAGE)
        with LocalHarvester(tmp_path / "404", allow_loopback=True) as harvester:
            summary = harvester.harvest(site.url("/sitemap.xml"))
        assert summary.outcomes["no-metadata"] == 1  # no robots.txt: allowed

        site.add_route("/robots.txt", status=503, body=b"busy")
        with LocalHarvester(tmp_path / "503", allow_loopback=True, max_attempts=2) as harvester:
            summary = harvester.harvest(site.url("/sitemap.xml"))
        line = json.loads((tmp_path / "503" / "outcomes.jsonl").read_text())
        assert (line["outcome"], line["reason"].split(":")[0]) == ("failed", "robots-unavailable")
        assert summary.urls == 1
