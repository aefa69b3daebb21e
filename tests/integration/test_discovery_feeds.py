"""RSS 2.0 and Atom 1.0 feeds read as sitemaps, against real files served on 127.0.0.1.

A feed announced in robots.txt, listed in a sitemap index or given as the entry URL is read
like a urlset: each item's or entry's link is harvested, dated by ``pubDate`` / ``updated``. A
sitemap whose XML declaration is broken is read without it, and the run says so.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from cdif_harvester.cli.runner import LocalHarvester
from cdif_harvester.demo.server import PublisherSite

pytestmark = pytest.mark.network

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
ATOM_NS = 'xmlns="http://www.w3.org/2005/Atom"'
XML = {"Content-Type": "application/xml"}
RSS_TYPE = {"Content-Type": "application/rss+xml"}
ATOM_TYPE = {"Content-Type": "application/atom+xml"}
HTML = {"Content-Type": "text/html"}
TEXT = {"Content-Type": "text/plain"}


def _dataset_page(name: str) -> str:
    return (
        '<html><head><script type="application/ld+json">'
        '{"@context": "https://schema.org", "@type": "Dataset", '
        f'"@id": "{{{{BASE}}}}/d/{name}", "name": "Dataset {name}", '
        f'"identifier": "{{{{BASE}}}}/d/{name}", "url": "{{{{BASE}}}}/d/{name}"}}'
        f"</script></head><body>{name}</body></html>"
    )


def _rss(*names: str) -> str:
    """An RSS 2.0 feed: the channel's own link first (not a location), then one item per name,
    linked relatively (resolved against the feed's URL) and dated the RFC 822 way."""
    items = "".join(
        f"<item><title>{n}</title><link>../d/{n}</link>"
        f"<pubDate>Tue, 0{i + 1} Apr 2025 10:00:00 GMT</pubDate><guid>urn:x:{n}</guid></item>"
        for i, n in enumerate(names)
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?><rss version="2.0"><channel><title>New</title>'
        f"<link>{{{{BASE}}}}/</link><description>d</description>{items}</channel></rss>"
    )


def _atom(*names: str) -> str:
    """An Atom 1.0 feed (as CKAN's /feeds/dataset.atom): a self link, entries with an edit
    link before the alternate one."""
    entries = "".join(
        f"<entry><title>{n}</title><id>urn:x:{n}</id><link rel='edit' href='/api/{n}'/>"
        f"<link rel='alternate' type='text/html' href='{{{{BASE}}}}/d/{n}'/>"
        f"<updated>2025-04-0{i + 1}T10:00:00Z</updated></entry>"
        for i, n in enumerate(names)
    )
    return (
        f'<?xml version="1.0" encoding="utf-8"?><feed {ATOM_NS}><title>Datasets</title>'
        "<link rel='self' href='{{BASE}}/feeds/dataset.atom'/><id>urn:feed</id>"
        f"<updated>2025-04-09T00:00:00Z</updated>{entries}</feed>"
    )


def _outcomes(out: Path, base: str) -> dict[str, tuple[str, str]]:
    lines = [json.loads(line) for line in (out / "outcomes.jsonl").read_text().splitlines()]
    return {
        line["url"].removeprefix(base): (line["outcome"], (line.get("reason") or "").split(":")[0])
        for line in lines
    }


def _serve_pages(site: PublisherSite, *names: str) -> None:
    for name in names:
        site.add_route(f"/d/{name}", headers=HTML, body=_dataset_page(name))


def test_a_feed_announced_in_robots_txt_yields_a_record_per_item(tmp_path: Path) -> None:
    with PublisherSite(None) as site:
        site.add_route(
            "/robots.txt", headers=TEXT, body="User-agent: *\nSitemap: {{BASE}}/feeds/new.rss\n"
        )
        site.add_route("/feeds/new.rss", headers=RSS_TYPE, body=_rss("a", "b"))
        _serve_pages(site, "a", "b")
        with LocalHarvester(tmp_path / "1", allow_loopback=True) as harvester:
            harvester.harvest(site.url("/robots.txt"))
        assert _outcomes(tmp_path / "1", site.base_url) == {
            "/d/a": ("record", ""),
            "/d/b": ("record", ""),
        }
        # pubDate is each item's lastmod: a second harvest of the same feed asks for nothing
        with LocalHarvester(tmp_path / "1", allow_loopback=True) as harvester:
            harvester.harvest(site.url("/robots.txt"))
        assert _outcomes(tmp_path / "1", site.base_url) == {
            "/d/a": ("unchanged", "lastmod"),
            "/d/b": ("unchanged", "lastmod"),
        }


def test_a_feed_listed_in_a_sitemap_index_yields_a_record_per_entry(tmp_path: Path) -> None:
    with PublisherSite(None) as site:
        site.add_route("/robots.txt", headers=TEXT, body="User-agent: *\nSitemap: {{BASE}}/i.xml\n")
        site.add_route(
            "/i.xml",
            headers=XML,
            body=f"<sitemapindex {NS}><sitemap><loc>{{{{BASE}}}}/feeds/dataset.atom</loc>"
            "</sitemap><sitemap><loc>{{BASE}}/feeds/new.rss</loc></sitemap></sitemapindex>",
        )
        site.add_route("/feeds/dataset.atom", headers=ATOM_TYPE, body=_atom("a", "b"))
        site.add_route("/feeds/new.rss", headers=RSS_TYPE, body=_rss("c"))
        _serve_pages(site, "a", "b", "c")
        with LocalHarvester(tmp_path, allow_loopback=True) as harvester:
            harvester.harvest(site.url("/robots.txt"))
        requested = [path for _, path, _ in site.requests]
        base = site.base_url
    assert _outcomes(tmp_path, base) == {
        "/d/a": ("record", ""),
        "/d/b": ("record", ""),
        "/d/c": ("record", ""),
    }
    assert not any(path.startswith("/api/") for path in requested)  # edit links are not pages


@pytest.mark.parametrize(
    ("path", "headers", "body"),
    [
        pytest.param("/feeds/dataset.atom", ATOM_TYPE, _atom("a", "b"), id="atom"),
        pytest.param("/feeds/new.rss", RSS_TYPE, _rss("a", "b"), id="rss"),
    ],
)
def test_a_feed_as_the_entry_url_yields_a_record_per_entry(
    tmp_path: Path, path: str, headers: dict[str, str], body: str
) -> None:
    with PublisherSite(None) as site:
        site.add_route(path, headers=headers, body=body)
        _serve_pages(site, "a", "b")
        with LocalHarvester(tmp_path, allow_loopback=True) as harvester:
            harvester.harvest(site.url(path))
        base = site.base_url
    assert _outcomes(tmp_path, base) == {"/d/a": ("record", ""), "/d/b": ("record", "")}


def test_a_sitemap_with_a_broken_xml_declaration_is_harvested_with_a_note(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with PublisherSite(None) as site:
        site.add_route(
            "/sitemap.xml",
            headers=TEXT,  # as served raw by a code host
            body=f'<?xml version="null" encoding="null"?>\n<urlset {NS}>'
            "<url><loc>{{BASE}}/d/a</loc></url></urlset>",
        )
        _serve_pages(site, "a")
        with (
            caplog.at_level(logging.WARNING, logger="cdif_harvester.stages.expand"),
            LocalHarvester(tmp_path, allow_loopback=True) as harvester,
        ):
            harvester.harvest(site.url("/sitemap.xml"))
        base = site.base_url
    assert _outcomes(tmp_path, base) == {"/d/a": ("record", "")}
    (note,) = [r.getMessage() for r in caplog.records if "XML declaration" in r.getMessage()]
    assert f"{base}/sitemap.xml" in note and 'version="null"' in note
