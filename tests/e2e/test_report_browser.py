"""The publisher report in a real browser: the demo site harvested locally, report.html opened
in headless Chromium over the DevTools Protocol.

Chromium is required, not optional: without it these tests fail and say how to install it
(``make browser``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.cli.runner import LocalHarvester
from cdif_harvester.demo.server import PublisherSite
from tests.support.browser import Browser, BrowserMissing, Page, chromium_binary

pytestmark = [pytest.mark.network, pytest.mark.serial]  # (wall-clock bounds)

# Read back by the test: the title, the chart's box, every data-count element, and whatever
# markup a publisher's text must never have turned into.
_READ_PAGE = """(() => {
  const chart = document.getElementById('outcome-chart');
  const box = chart ? chart.getBoundingClientRect() : {width: 0, height: 0};
  return {
    title: document.title,
    chart: {width: box.width, height: box.height},
    bars: Array.from(document.querySelectorAll('#outcome-chart rect'),
                     r => r.getBoundingClientRect().width),
    counts: Array.from(document.querySelectorAll('[data-count]'),
                       e => [e.dataset.count, e.textContent.trim()]),
    scripts: document.querySelectorAll('script').length,
    images: document.querySelectorAll('img').length,
    handlers: Array.from(document.querySelectorAll('*'))
      .filter(e => Array.from(e.attributes).some(a => a.name.startsWith('on'))).length,
    text: document.body.innerText,
  };
})()"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium for the module; a missing Chromium fails the tests."""
    try:
        binary = chromium_binary()
    except BrowserMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    with Browser(binary) as running:
        yield running


@contextmanager
def _opened(browser: Browser, report: Path) -> Iterator[tuple[Page, dict[str, Any]]]:
    """The report open in a new tab, with what _READ_PAGE read from it."""
    with browser.page() as page:
        page.open(report.resolve().as_uri())
        yield page, page.evaluate(_READ_PAGE)


def _numbers(read: dict[str, Any]) -> dict[str, int]:
    """The data-count numbers; a name shown in several places must read the same in each."""
    seen: dict[str, set[str]] = {}
    for name, text in read["counts"]:
        seen.setdefault(name, set()).add(text)
    assert all(len(texts) == 1 for texts in seen.values()), seen
    return {name: int(texts.pop()) for name, texts in seen.items() if name != "elapsed-seconds"}


def test_the_demo_report_renders_in_chromium_with_summary_json_figures(
    site: PublisherSite, tmp_path: Path, browser: Browser
) -> None:
    out = tmp_path / "out"
    with LocalHarvester(out, allow_loopback=True) as harvester:
        summary = harvester.harvest(site.url("/robots.txt"))
    written = json.loads((out / "summary.json").read_text())
    report = out / written["files"]["report"]
    kept = out / "runs" / summary.run_id / "report.html"
    assert report.is_file() and kept.read_text() == report.read_text()

    with _opened(browser, report) as (page, read):
        assert page.errors == []
        # nothing but the file itself was loaded
        assert page.requests == [report.resolve().as_uri()]

    assert read["title"].startswith("Harvest report: ")
    assert summary.run_id in read["title"]
    assert read["chart"]["width"] > 0 and read["chart"]["height"] > 0
    assert max(read["bars"]) > 0  # the bars are drawn
    assert read["scripts"] == 0

    numbers = _numbers(read)
    assert numbers["urls"] == written["urls"] == 8
    for kind, count in written["outcomes"].items():
        assert numbers[f"outcome-{kind}"] == count, kind
        assert numbers[f"chart-outcome-{kind}"] == count, kind
    shown_patterns = {name for name in numbers if name.startswith("pattern-")}
    assert shown_patterns == {f"pattern-{p}" for p in written["patterns"]}
    for pattern, count in written["patterns"].items():
        assert numbers[f"pattern-{pattern}"] == count, pattern
    assert numbers["records"] == written["records"]
    assert numbers["valid-records"] == written["valid_records"]
    assert numbers["invalid-records"] == written["invalid_records"]
    assert numbers["withdrawn"] == len(written["withdrawn"])
    # the demo's draft record lacks dateModified and a licence; one page is gone
    assert numbers["problem-required:schema:dateModified-records"] == 1
    assert numbers["problem-required:schema:license-records"] == 1
    assert numbers["problem-http-404-urls"] == 1
    assert numbers["signposting-level-0"] == written["patterns"]["embedded-script"]
    assert "To reach level 1" in read["text"]


_HOSTILE = "<img src=x onerror=console.error('img')><script>console.error('script')</script>"


def test_hostile_publisher_text_stays_text_in_chromium(
    site: PublisherSite, tmp_path: Path, browser: Browser
) -> None:
    dataset = {
        "@context": "https://schema.org/",
        "@type": "Dataset",
        "@id": "https://doi.org/10.5072/hostile",
        "name": ["a name", _HOSTILE],
        "description": "d",
        "license": "https://creativecommons.org/licenses/by/4.0/",
        "url": "{{BASE}}/datasets/hostile.html",
    }
    block = json.dumps(dataset).replace("</", "<\\/")
    site.add_route(
        "/datasets/hostile.html",
        headers={"Content-Type": "text/html"},
        body=f'<html><head><script type="application/ld+json">{block}</script></head></html>',
    )
    site.add_route(
        "/hostile.xml",
        headers={"Content-Type": "application/xml"},
        body=(
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            "<url><loc>{{BASE}}/datasets/hostile.html</loc></url>"
            "<url><loc>{{BASE}}/gone.html?q=&quot;&gt;&lt;script&gt;console.error(1)"
            "&lt;/script&gt;</loc></url></urlset>"
        ),
    )
    out = tmp_path / "out"
    with LocalHarvester(out, allow_loopback=True) as harvester:
        harvester.harvest(site.url("/hostile.xml"))
    lines = (out / "outcomes.jsonl").read_text()
    assert "<script>console.error(1)</script>" in lines  # the hostile text did reach the report
    assert "onerror=console.error('img')" in lines

    with _opened(browser, out / "report.html") as (page, read):
        assert page.errors == []  # no injected script or handler ran

    assert read["scripts"] == 0 and read["images"] == 0 and read["handlers"] == 0
    assert "<script>console.error(1)</script>" in read["text"]  # shown as text
    assert "onerror=console.error('img')" in read["text"]


def _stored_reports(out: Path) -> list[dict[str, Any]]:
    """Every record report the harvests wrote (reports/<source>/*.json)."""
    return [json.loads(path.read_text()) for path in sorted((out / "reports").rglob("*.json"))]


def test_an_unchanged_reharvest_still_reports_the_invalid_record_with_its_errors_and_warnings(
    site: PublisherSite, tmp_path: Path, browser: Browser
) -> None:
    out = tmp_path / "out"
    with LocalHarvester(out, allow_loopback=True) as harvester:
        harvester.harvest(site.url("/robots.txt"))
    with LocalHarvester(out, allow_loopback=True) as harvester:
        second = harvester.harvest(site.url("/robots.txt"))
    assert second.records == 0 and second.outcomes["record"] == 0  # nothing changed

    stored = _stored_reports(out)
    invalid = [r for r in stored if not r["valid"]]
    assert invalid  # the demo's draft record
    warnings = sum(len(r["warnings"]) for r in stored)
    assert warnings > 0
    with _opened(browser, out / "report.html") as (page, read):
        assert page.errors == []
        order = page.evaluate("Array.from(document.querySelectorAll('main > section'), s => s.id)")

    numbers = _numbers(read)
    # the records as they stand, though this run read none of them
    assert numbers["records"] == len(stored)
    assert numbers["invalid-records"] == len(invalid)
    assert numbers["run-records"] == 0 and numbers["change-unchanged"] == len(stored)
    assert numbers["warnings"] == warnings
    for report in invalid:
        assert report["provenance"]["url"] in read["text"]
        for error in report["errors"]:
            assert error["message"] in read["text"]
    # warnings below the errors, both at the top, above this run's URLs
    assert order.index("problems") < order.index("warnings") < order.index("outcomes")
    assert order.index("problems") <= 1
    # the heading names the host, not the internal key
    host = site.url("/").split("/")[2]
    assert read["title"].startswith(f"Harvest report: {host} ")
    assert host.replace(":", "_") not in read["text"]
    # the robots.txt fix names the path that was refused
    lines = [json.loads(line) for line in (out / "outcomes.jsonl").read_text().splitlines()]
    refused = [line["url"] for line in lines if line["outcome"] == "disallowed"]
    assert refused
    path = "/" + refused[0].split("/", 3)[3]
    assert f"Allow: {path}" in read["text"]
