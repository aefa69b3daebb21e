"""A site's address harvests the site, end to end: the local runner against a publisher on
127.0.0.1. A site root is asked for robots.txt's sitemaps, then for a sitemap at a well-known
path, and only when neither exists is the page itself resolved."""

from __future__ import annotations

import html
import io
import json
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.cli.runner import HarvestSummary, LocalHarvester
from cdif_harvester.demo.server import PublisherSite
from tests.e2e.test_entry_url import HTML, TEXT

pytestmark = pytest.mark.network

NO_SITEMAP_ROBOTS = "User-agent: *\nAllow: /\n"
DATASETS = "/datasets/north-atlantic-ctd-2021.html"


def _harvest(out: Path, url: str) -> tuple[HarvestSummary, dict[str, dict[str, Any]], str]:
    progress = io.StringIO()
    with LocalHarvester(out, allow_loopback=True, progress=progress) as harvester:
        summary = harvester.harvest(url)
    lines = [json.loads(x) for x in (out / "outcomes.jsonl").read_text().splitlines()]
    return summary, {str(line["url"]): line for line in lines}, progress.getvalue()


def _paths(site: PublisherSite) -> list[str]:
    return [target for _, target, _ in site.requests]


def test_a_site_root_is_harvested_from_the_sitemaps_robots_txt_announces(
    site: PublisherSite, tmp_path: Path
) -> None:
    # Given the demo site, whose robots.txt announces its sitemap index
    root = site.url("/")

    # When its address is the entry URL
    summary, lines, progress = _harvest(tmp_path / "out", root)

    # Then the sitemaps' pages are harvested, the home page is not even asked for
    assert summary.records >= 5
    assert lines[site.url(DATASETS)]["outcome"] == "record"
    assert root not in lines
    assert "/" not in _paths(site)
    index = site.url("/sitemap-index.xml")
    # and the progress and the summary say which sitemap was found, and how
    assert f"1 sitemap announced in robots.txt: {index}" in progress
    written = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert written["sites"] == [summary.sites[0]]
    assert summary.sites[0]["found_by"] == "robots.txt"
    assert summary.sites[0]["sitemaps"] == [index]
    # and so does the publisher report
    report = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "Sitemaps found" in report
    assert html.escape(summary.sites[0]["note"]) in report


def test_without_robots_sitemaps_a_well_known_sitemap_path_is_used(
    site: PublisherSite, tmp_path: Path
) -> None:
    # Given a robots.txt announcing no sitemap, no /sitemap.xml, but a /sitemap_index.xml
    site.add_route("/robots.txt", headers=TEXT, body=NO_SITEMAP_ROBOTS)
    index = (site.directory / "sitemap-index.xml").read_text()
    site.add_route("/sitemap.xml", status=404, headers=HTML, body="<html>Not found</html>")
    site.add_route("/sitemap_index.xml", headers={"Content-Type": "application/xml"}, body=index)

    # When the site's address is harvested
    summary, lines, progress = _harvest(tmp_path / "out", site.url("/"))

    # Then the records of that sitemap are harvested; the missing path failed nothing
    assert lines[site.url(DATASETS)]["outcome"] == "record"
    assert summary.records >= 5
    assert site.url("/sitemap.xml") not in lines
    assert summary.sites[0]["found_by"] == "well-known path"
    assert summary.sites[0]["sitemaps"] == [site.url("/sitemap_index.xml")]
    assert summary.sites[0]["probed"] == [{"url": site.url("/sitemap.xml"), "answer": "http-404"}]
    assert f"found at a well-known path: {site.url('/sitemap_index.xml')}" in progress
    # and the search stopped at the first sitemap found
    assert "/sitemap.xml.gz" not in _paths(site)


def test_a_site_root_with_no_sitemap_anywhere_is_resolved_itself(
    site: PublisherSite, tmp_path: Path
) -> None:
    # Given a site without sitemaps whose home page is a landing page with metadata
    site.add_route("/robots.txt", headers=TEXT, body=NO_SITEMAP_ROBOTS)
    page = (site.directory / DATASETS.lstrip("/")).read_text()
    site.add_route("/", headers=HTML, body=page)
    root = site.url("/")

    # When its address is harvested
    summary, lines, progress = _harvest(tmp_path / "out", root)

    # Then every well-known path was asked once (all 404), and the page itself gave the record
    assert set(lines) == {root}
    assert lines[root]["outcome"] == "record", lines[root]
    asked = _paths(site)
    for path in ("/sitemap.xml", "/sitemap_index.xml", "/sitemap.xml.gz"):
        assert asked.count(path) == 1
    assert summary.sites[0]["found_by"] is None
    assert "the page itself is resolved" in progress


def test_a_well_known_path_robots_txt_disallows_is_not_asked(
    site: PublisherSite, tmp_path: Path
) -> None:
    # Given a robots.txt without sitemaps that disallows /sitemap.xml
    site.add_route("/robots.txt", headers=TEXT, body="User-agent: *\nDisallow: /sitemap.xml\n")
    index = (site.directory / "sitemap-index.xml").read_text()
    site.add_route("/sitemap.xml", headers={"Content-Type": "application/xml"}, body=index)
    site.add_route("/sitemap_index.xml", headers={"Content-Type": "application/xml"}, body=index)

    # When the site's address is harvested
    summary, lines, _ = _harvest(tmp_path / "out", site.url("/"))

    # Then /sitemap.xml was never asked for; the next path was used
    assert "/sitemap.xml" not in _paths(site)
    assert summary.sites[0]["sitemaps"] == [site.url("/sitemap_index.xml")]
    assert lines[site.url(DATASETS)]["outcome"] == "record"


def test_a_url_with_a_path_or_a_query_is_not_a_site_root(
    site: PublisherSite, tmp_path: Path
) -> None:
    # Given a page at the root with a query: an entry URL like any other (0067)
    page = (site.directory / DATASETS.lstrip("/")).read_text()
    site.add_route("/?id=1", headers=HTML, body=page)
    url = site.url("/?id=1")

    summary, lines, _ = _harvest(tmp_path / "out", url)

    assert set(lines) == {url}
    assert summary.sites == []
    assert "/robots.txt" in _paths(site)  # (the page is checked against it, as before)
    assert "/sitemap.xml" not in _paths(site)
