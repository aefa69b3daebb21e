"""Documents and answers are kept only when asked, on one machine: a real publisher on 127.0.0.1.

By default a harvest writes no copy of what it fetched (no ``raw/``, no cached page under
``cache/``): documents go to the extractor in their message, or through the run's staging area
when too large, and the validators of each URL's answers go to its catalogue state, so a
re-harvest still asks conditionally and ends ``unchanged`` on 304s. ``--keep-bodies`` keeps
both, as before.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdif_harvester.cli.main import main
from cdif_harvester.cli.runner import LocalHarvester
from cdif_harvester.demo.server import PublisherSite, demo_site_dir
from cdif_harvester.model import Outcome
from tests.support.httpserver import LocalHTTPServer

KELP = "/datasets/kelp-forest-survey.html"
GLIDER = "/datasets/glider-mission-notes.html"  # a page without metadata
RECORDS = 5  # the demo site's records
# The record pages of sitemap-datasets.xml (the archive's sitemap is left with its lastmods).
RECORD_PAGES = {
    KELP,
    "/datasets/gulf-sst-anomalies.html",
    "/datasets/north-atlantic-ctd-2021.html",
}
_RUN_FILES = ("catalog.sqlite", "summary.json", "report.html", "outcomes.jsonl", "runs/")


@pytest.fixture
def site_dir(tmp_path: Path) -> Path:
    copy = tmp_path / "site"
    shutil.copytree(str(demo_site_dir()), copy)
    return copy


@pytest.fixture
def served(site_dir: Path) -> Iterator[PublisherSite]:
    with PublisherSite(site_dir) as site:
        yield site


def _files(out: Path, top: str) -> list[Path]:
    return sorted(p for p in (out / top).rglob("*") if p.is_file()) if (out / top).is_dir() else []


def _cached_urls(out: Path) -> set[str]:
    """The URLs whose answers the HTTP cache keeps (each ``cache/`` meta file names one)."""
    return {
        json.loads(path.read_text())["url"]
        for path in _files(out, "cache")
        if path.suffix == ".json"
    }


def _snapshot(out: Path) -> dict[str, str]:
    return {
        str(path.relative_to(out)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in out.rglob("*")
        if path.is_file() and not str(path.relative_to(out)).startswith(_RUN_FILES)
    }


def _without_lastmod(site_dir: Path) -> None:
    """Take every ``<lastmod>`` out of the datasets' sitemap: its pages are then asked again."""
    sitemap = site_dir / "sitemap-datasets.xml"
    sitemap.write_text(re.sub(r"\s*<lastmod>[^<]*</lastmod>", "", sitemap.read_text()))


def _reports(out: Path) -> list[dict[str, object]]:
    return [json.loads(path.read_text()) for path in _files(out, "reports")]


def test_a_harvest_keeps_no_document_by_default(served: PublisherSite, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with LocalHarvester(out, allow_loopback=True) as harvester:
        summary = harvester.harvest(served.url("/robots.txt"))
    assert summary.records == RECORDS

    # no raw copy; the cache keeps robots.txt and the sitemaps (read again on a 304), no page
    assert _files(out, "raw") == []
    cached = _cached_urls(out)
    assert cached and all(url.endswith((".xml", ".xml.gz", "/robots.txt")) for url in cached)
    assert not (out / "staging").exists()  # the run's staging area is gone with the run
    # what raw/'s provenance file held is in each record's report
    for report in _reports(out):
        fetched = report["provenance"]["fetched"]  # type: ignore[index]
        assert fetched["kept"] is False and fetched["status"] == 200
        assert fetched["url"].startswith(served.url("/datasets/"))
        assert fetched["headers"]["content-type"].startswith("text/html")
        assert fetched["headers"]["etag"] and fetched["at"]


def test_keep_bodies_keeps_documents_and_answers_as_before(
    served: PublisherSite, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = ["harvest", served.url("/robots.txt"), "--out", str(out), "--allow-loopback"]
    assert main([*argv, "--quiet", "--keep-bodies"]) == 0
    capsys.readouterr()

    raw = _files(out, "raw")
    documents = [p for p in raw if not p.name.endswith(".meta.json")]
    assert (
        len(documents) == RECORDS and len(raw) == 2 * RECORDS
    )  # each with its provenance beside it
    meta = json.loads(documents[0].with_name(documents[0].stem + ".meta.json").read_text())
    assert meta["status"] == 200 and meta["final_url"].startswith(served.url("/datasets/"))
    assert {served.url(KELP), served.url(GLIDER)} <= _cached_urls(out)
    for report in _reports(out):
        fetched = report["provenance"]["fetched"]  # type: ignore[index]
        document = report["provenance"]["document"]  # type: ignore[index]
        assert fetched["kept"] is True and (out / str(document)).is_file()


def test_an_unchanged_reharvest_asks_conditionally_and_keeps_no_body(
    site_dir: Path, tmp_path: Path
) -> None:
    _without_lastmod(site_dir)
    out = tmp_path / "out"
    with PublisherSite(site_dir) as served:
        with LocalHarvester(out, allow_loopback=True) as harvester:
            first = harvester.harvest(served.url("/robots.txt"))
        assert first.outcomes["record"] == RECORDS
        before = _snapshot(out)
        seen = len(served.timings)
        with LocalHarvester(out, allow_loopback=True) as harvester:
            second = harvester.harvest(served.url("/robots.txt"))
            outcomes = {o.url: o for o in harvester.catalog.outcomes(second.run_id)}
        later = served.timings[seen:]
        pages = {path: served.url(path) for path in (*RECORD_PAGES, GLIDER)}

    # every page was asked again, conditionally, and answered 304: no body came
    asked = [t for t in later if t.target in (*RECORD_PAGES, GLIDER)]
    # (each record page once; the page without metadata twice: as a page, then as JSON-LD)
    assert {t.target for t in asked} == {*RECORD_PAGES, GLIDER}
    assert sorted(t.target for t in asked if t.target != GLIDER) == sorted(RECORD_PAGES)
    assert {t.status for t in asked} == {304}
    assert second.outcomes["record"] == 0
    for path in RECORD_PAGES:
        outcome = outcomes[pages[path]]
        assert outcome.outcome is Outcome.UNCHANGED, path
        assert (outcome.reason or "").startswith("not-modified"), outcome.reason
    glider = outcomes[pages[GLIDER]]
    assert glider.outcome is Outcome.NO_METADATA and "not modified" in (glider.reason or "")
    # and no body was kept, then or now: nothing was written the second time
    assert _files(out, "raw") == [] and not _cached_urls(out) & set(pages.values())
    assert _snapshot(out) == before


def test_a_changed_page_is_fetched_once_and_harvested_again(site_dir: Path, tmp_path: Path) -> None:
    _without_lastmod(site_dir)
    out = tmp_path / "out"
    with PublisherSite(site_dir) as served:
        with LocalHarvester(out, allow_loopback=True) as harvester:
            harvester.harvest(served.url("/robots.txt"))
        page = site_dir / KELP.lstrip("/")
        page.write_text(page.read_text().replace("Annual diver", "Yearly diver"))
        seen = len(served.timings)
        with LocalHarvester(out, allow_loopback=True) as harvester:
            again = harvester.harvest(served.url("/robots.txt"))
        later = served.timings[seen:]
        served_url_kelp = served.url(KELP)

    assert again.outcomes["record"] == 1 and again.records == 1
    # the conditional request got the new page (200), which the resolution used: one request
    assert [(t.target, t.status) for t in later if t.target == KELP] == [(KELP, 200)]
    assert any("Yearly diver" in path.read_text() for path in _files(out, "records"))
    assert _files(out, "raw") == [] and served_url_kelp not in _cached_urls(out)


def test_a_document_too_large_for_its_message_goes_through_the_staging_area(
    tmp_path: Path,
) -> None:
    dataset = {
        "@context": "https://schema.org/",
        "@type": "Dataset",
        "@id": "https://example.org/big#dataset",
        "name": "A dataset with a long description",
        "description": "x" * (400 * 1024),  # past the message's 200 KiB
    }
    body = (
        '<!doctype html><html><head><title>big</title><script type="application/ld+json">'
        + json.dumps(dataset)
        + "</script></head><body></body></html>"
    ).encode()
    out = tmp_path / "out"
    with LocalHTTPServer() as server:
        server.route("/big.html", headers=[("Content-Type", "text/html")], body=body)
        with LocalHarvester(out, allow_loopback=True) as harvester:
            summary = harvester.harvest(server.url("/big.html"))
    assert summary.outcomes["record"] == 1
    (record,) = (json.loads(p.read_text()) for p in _files(out, "records"))
    assert len(json.dumps(record)) > 400 * 1024  # the whole description came through
    assert _files(out, "raw") == [] and not (out / "staging").exists()
