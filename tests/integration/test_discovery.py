"""Discovery against real robots.txt and sitemap files served on 127.0.0.1, hostile ones included.

Every URL that enters, sitemaps as well as pages, ends in one recorded outcome; a broken child
sitemap fails alone and its siblings are harvested.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from dataclasses import replace
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


DATASET_PAGE = """<html><head><script type="application/ld+json">
{"@context": "https://schema.org", "@type": "Dataset", "@id": "{{BASE}}/d/1",
 "name": "Signmap dataset", "identifier": "{{BASE}}/d/1", "url": "{{BASE}}/d/1"}
</script></head><body>d1</body></html>"""


def test_more_sitemap_shapes_and_signmap_links(tmp_path: Path) -> None:
    with PublisherSite(None) as site, PublisherSite(None) as elsewhere:
        base, foreign = site.base_url, elsewhere.url("/x.html")
        site.add_route(
            "/robots.txt",
            headers={"Content-Type": "text/plain"},
            body="User-agent: *\nAllow: /\n\nUser-agent: CDIF1.0\nDisallow: /drafts/\n"
            "Sitemap: {{BASE}}/index.xml\n",
        )
        site.add_route(
            "/index.xml",
            headers=XML,
            body=_index(
                "/plain-ns.xml",
                "/gz-named.xml",
                "/relative.xml",
                "/xxe.xml",
                "/signmap.xml",
                "/cross.xml",
            ),
        )
        # no namespace at all
        site.add_route(
            "/plain-ns.xml",
            headers=XML,
            body="<urlset><url><loc>{{BASE}}/p/a.html</loc></url></urlset>",
        )
        # gzip recognised by its magic bytes although named .xml and served as XML
        site.add_route(
            "/gz-named.xml",
            headers=XML,
            body=gzip.compress(_urlset("/p/b.html").replace("{{BASE}}", base).encode()),
        )
        # a relative location, resolved against the sitemap
        site.add_route(
            "/relative.xml",
            headers=XML,
            body=f"<urlset {NS}><url><loc>p/c.html</loc></url></urlset>",
        )
        site.add_route(
            "/xxe.xml",
            headers=XML,
            body=(
                '<?xml version="1.0"?><!DOCTYPE u [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
                f"<urlset {NS}><url><loc>&x;</loc></url></urlset>"
            ),
        )
        site.add_route(
            "/signmap.xml",
            headers=XML,
            body=(
                f'<urlset {NS} xmlns:rs="http://www.openarchives.org/rs/terms/">'
                "<url><loc>{{BASE}}/d/1</loc>"
                '<rs:ln rel="describedby" href="{{BASE}}/md/1.json" type="application/ld+json" '
                'profile="https://w3id.org/cdif/core/1.0"/>'
                '<rs:ln rel="cite-as" href="https://doi.org/10.5072/sig.1"/></url>'
                "<url><loc>{{BASE}}/drafts/2</loc></url></urlset>"
            ),
        )
        site.add_route(
            "/cross.xml",
            headers=XML,
            body=f"<urlset {NS}><url><loc>{elsewhere.url('/x.html')}</loc></url></urlset>",
        )
        site.add_route("/d/1", headers={"Content-Type": "text/html"}, body=DATASET_PAGE)
        for name in "abc":
            site.add_route(f"/p/{name}.html", headers={"Content-Type": "text/html"}, body=PAGE)
        with LocalHarvester(tmp_path, allow_loopback=True) as harvester:
            harvester.harvest(site.url("/robots.txt"))
        assert elsewhere.requests == [
            ("GET", "/robots.txt", elsewhere.requests[0][2])
        ]  # only asked whether it announces the sitemap; the page itself was never fetched

    lines = {
        line["url"]: line
        for line in map(json.loads, (tmp_path / "outcomes.jsonl").read_text().splitlines())
    }
    outcome = {
        url.removeprefix(base): (v["outcome"], (v.get("reason") or "").split(":")[0])
        for url, v in lines.items()
    }
    assert outcome == {
        "/p/a.html": ("no-metadata", "no-metadata"),
        "/p/b.html": ("no-metadata", "no-metadata"),
        "/p/c.html": ("no-metadata", "no-metadata"),
        "/xxe.xml": ("failed", "xml-entities-refused"),
        "/d/1": ("record", ""),
        "/drafts/2": ("disallowed", "robots-txt"),  # the CDIF1.0 group's rule
        foreign: ("disallowed", "cross-host-location"),
    }
    (record,) = lines[f"{base}/d/1"]["records"]
    report = json.loads((tmp_path / record["report"]).read_text())
    links = {(link["rel"], link["href"]) for link in report["provenance"]["links"]}
    assert links == {
        ("describedby", f"{base}/md/1.json"),
        ("cite-as", "https://doi.org/10.5072/sig.1"),
    }


def test_a_sitemap_over_the_url_limit_is_cut_and_recorded(tmp_path: Path) -> None:
    with PublisherSite(None) as site:
        site.add_route("/sm.xml", headers=XML, body=_urlset(*(f"/p/{n}.html" for n in "abcde")))
        for name in "abcde":
            site.add_route(f"/p/{name}.html", headers={"Content-Type": "text/html"}, body=PAGE)
        with LocalHarvester(tmp_path, allow_loopback=True) as harvester:
            harvester.wiring.settings = replace(harvester.wiring.settings, max_sitemap_urls=3)
            summary = harvester.harvest(site.url("/sm.xml"))
    lines = [json.loads(line) for line in (tmp_path / "outcomes.jsonl").read_text().splitlines()]
    (cut,) = [line for line in lines if line["outcome"] == "failed"]
    assert cut["url"].endswith("/sm.xml") and cut["reason"].startswith("max-urls")
    assert summary.outcomes["no-metadata"] == 3
