"""What an entry URL is, end to end: the local runner against a publisher on 127.0.0.1.

A harvest may start from a robots.txt, a sitemap (XML or text), or any other URL: that one is
resolved exactly as if a sitemap listed it, whatever it answers (a JSON-LD document, a 410
tombstone, a 204 with a Link header, a 203, an HTML page, text that is not a sitemap).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.cli.runner import HarvestSummary, LocalHarvester
from cdif_harvester.demo.server import PublisherSite, demo_site_dir
from cdif_harvester.domain.records.extraction import find_jsonld_scripts

pytestmark = pytest.mark.network

JSONLD = {"Content-Type": "application/ld+json"}
HTML = {"Content-Type": "text/html; charset=utf-8"}
TEXT = {"Content-Type": "text/plain; charset=utf-8"}


def demo_record() -> str:
    """The JSON-LD of one of the demo's dataset pages, as a document of its own."""
    page = (demo_site_dir() / "datasets" / "north-atlantic-ctd-2021.html").read_bytes()
    text = next(iter(find_jsonld_scripts(page))).text
    text = text if isinstance(text, str) else text.decode()
    # Its resource on the site itself (the resolver asks the resource what it announces).
    return text.replace("https://doi.org/10.5072/toda.ctd.2021", "{{BASE}}/resource/ctd")


def _harvest(out: Path, url: str) -> tuple[HarvestSummary, dict[str, dict[str, Any]]]:
    with LocalHarvester(out, allow_loopback=True) as harvester:
        summary = harvester.harvest(url)
    lines = [json.loads(x) for x in (out / "outcomes.jsonl").read_text().splitlines()]
    return summary, {str(line["url"]): line for line in lines}


def test_a_json_ld_document_as_entry_url_is_a_record(site: PublisherSite, tmp_path: Path) -> None:
    # Given a publisher's metadata document, served as JSON-LD
    site.add_route("/metadata.jsonld", headers=JSONLD, body=demo_record())
    url = site.url("/metadata.jsonld")

    # When it is the entry URL of a harvest
    _, lines = _harvest(tmp_path / "out", url)

    # Then it is resolved like any listed URL: one record, from the document itself
    assert set(lines) == {url}
    assert lines[url]["outcome"] == "record", lines[url]
    assert lines[url]["pattern"] == "content-type"
    assert len(lines[url]["records"]) == 1


def test_a_410_entry_url_is_a_tombstone_and_withdraws_what_it_held(
    site: PublisherSite, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    site.add_route("/metadata.jsonld", headers=JSONLD, body=demo_record())
    url = site.url("/metadata.jsonld")
    first, lines = _harvest(out, url)
    assert lines[url]["outcome"] == "record"
    # Given the publisher withdraws the document: 410 Gone
    site.add_route("/metadata.jsonld", status=410, headers=TEXT, body="Gone\n")

    # When the entry URL is harvested again
    summary, lines = _harvest(out, url)

    # Then it ends no-metadata, gone; its record is kept and marked withdrawn
    assert lines[url]["outcome"] == "no-metadata"
    assert str(lines[url]["reason"]).startswith("no-metadata: gone (410 tombstone)")
    assert summary.withdrawn == [url]
    with LocalHarvester(out, allow_loopback=True) as harvester:
        state = harvester.catalog.get_url(url)
        entries = [e for e in harvester.catalog.records() if e.url == url]
    assert state is not None and state.withdrawn_at
    assert entries and all(e.withdrawn_at for e in entries)
    assert json.loads((out / entries[0].report_key).read_text())["withdrawn_at"]
    assert first.withdrawn == []


def test_a_410_entry_url_never_harvested_is_no_metadata(
    site: PublisherSite, tmp_path: Path
) -> None:
    site.add_route("/old", status=410, headers=HTML, body="<html><body>gone</body></html>")
    summary, lines = _harvest(tmp_path / "out", site.url("/old"))
    line = lines[site.url("/old")]
    assert line["outcome"] == "no-metadata"
    assert "gone (410 tombstone)" in str(line["reason"])
    assert summary.withdrawn == []


def test_a_204_entry_url_is_read_by_its_link_header(site: PublisherSite, tmp_path: Path) -> None:
    # Given a resource that answers 204 with a Link header to its metadata
    site.add_route("/metadata.jsonld", headers=JSONLD, body=demo_record())
    site.add_route(
        "/resource/x",
        status=204,
        headers={
            "Link": '<{{BASE}}/metadata.jsonld>; rel="describedby"; type="application/ld+json"'
        },
    )
    url = site.url("/resource/x")

    _, lines = _harvest(tmp_path / "out", url)

    assert lines[url]["outcome"] == "record", lines[url]
    assert lines[url]["pattern"] == "http-link"
    assert len(lines[url]["records"]) == 1


def test_a_203_html_entry_url_is_read_as_200(site: PublisherSite, tmp_path: Path) -> None:
    page = (demo_site_dir() / "datasets" / "north-atlantic-ctd-2021.html").read_text()
    site.add_route("/proxied.html", status=203, headers=HTML, body=page)
    url = site.url("/proxied.html")

    _, lines = _harvest(tmp_path / "out", url)

    assert lines[url]["outcome"] == "record", lines[url]
    assert lines[url]["pattern"] == "embedded-script"


def test_an_html_landing_page_as_entry_url_still_works(site: PublisherSite, tmp_path: Path) -> None:
    url = site.url("/datasets/kelp-forest-survey.html")
    _, lines = _harvest(tmp_path / "out", url)
    assert set(lines) == {url}
    assert lines[url]["outcome"] == "record"


def test_text_and_xml_sitemaps_as_entry_urls_still_work(
    site: PublisherSite, tmp_path: Path
) -> None:
    pages = ["/datasets/kelp-forest-survey.html", "/datasets/gulf-sst-anomalies.html"]
    site.add_route("/sitemap.txt", headers=TEXT, body="".join(f"{{{{BASE}}}}{p}\n" for p in pages))
    _, lines = _harvest(tmp_path / "text", site.url("/sitemap.txt"))
    assert {u: line["outcome"] for u, line in lines.items()} == {
        site.url(p): "record" for p in pages
    }
    _, lines = _harvest(tmp_path / "xml", site.url("/sitemap-datasets.xml"))
    assert len(lines) > 2 and site.url("/sitemap-datasets.xml") not in lines
    assert lines[site.url("/datasets/kelp-forest-survey.html")]["outcome"] == "record"


@pytest.mark.parametrize(
    ("headers", "body"),
    [
        (TEXT, "this is not a sitemap\nnor metadata of any kind\n"),
        ({"Content-Type": "application/xml"}, "<catalogue><item>no sitemap</item></catalogue>"),
        ({}, "just some bytes"),
    ],
    ids=["plain-text", "xml-not-a-sitemap", "untyped"],
)
def test_an_entry_url_that_is_neither_sitemap_nor_metadata_is_no_metadata(
    site: PublisherSite, tmp_path: Path, headers: dict[str, str], body: str
) -> None:
    # Given an entry URL whose answer is no sitemap (text without URLs, another XML root)
    site.add_route("/notes", headers=headers, body=body)
    url = site.url("/notes")

    _, lines = _harvest(tmp_path / "out", url)

    # Then it is a page without metadata, said so, not a failed sitemap
    assert lines[url]["outcome"] == "no-metadata", lines[url]
    assert str(lines[url]["reason"]).startswith("no-metadata: no CDIF metadata found")


def test_a_data_file_listing_urls_is_not_a_text_sitemap(
    site: PublisherSite, tmp_path: Path
) -> None:
    # Given a CSV data file whose lines are URLs, as a text sitemap's are
    body = "{{BASE}}/datasets/kelp-forest-survey.html\n{{BASE}}/datasets/gulf-sst-anomalies.html\n"
    site.add_route("/stations.csv", headers={"Content-Type": "text/csv"}, body=body)
    url = site.url("/stations.csv")

    _, lines = _harvest(tmp_path / "out", url)

    # Then its declared type wins: it is resolved as a URL, not read as a list of URLs
    assert set(lines) == {url}
    assert lines[url]["outcome"] == "no-metadata"
