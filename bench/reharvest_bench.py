"""Benchmark: an unchanged re-harvest against the first harvest of a 2,000-page site (issue 6).

Run from the repository root::

    .venv/bin/python bench/reharvest_bench.py             # 2,000 pages (a few minutes)
    .venv/bin/python bench/reharvest_bench.py --pages 200 # smoke run

It writes a publisher site into a temporary folder (robots.txt, a sitemap index, two sitemaps
and N landing pages, each about 12 KB of HTML with one CDIF JSON-LD block of about 3 KB) and
serves it over real HTTP on 127.0.0.1 with the product's demo server (which answers
conditional requests with 304, as a publisher's web server does). Then, in the same run, with
the local runner (``LocalHarvester``, default settings: 4 workers, 2 requests per host):

1. **first** harvest into an empty output folder;
2. **unchanged** re-harvest into the same folder (the sitemaps carry ``<lastmod>``: the
   landing pages are not asked at all);
3. the same pair again on a copy of the site whose sitemaps have **no lastmod**, so every page
   is asked with a conditional request and answers 304.

Reported: wall-clock seconds of each harvest (``time.perf_counter`` around ``harvest()``), the
requests the site served and how many carried a body, the files written, and the ratio
re-harvest / first. Goal: the unchanged re-harvest takes under 10% of the first. Wall-clock
is what an operator waits for; both harvests run in the same process, one after the other.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdif_harvester.cli.runner import LocalHarvester
from cdif_harvester.demo.server import PublisherSite

_FILLER = (
    "<p>Measurements were taken at fixed stations along the transect and quality controlled "
    "with the archive's standard procedures; see the methods document for details.</p>\n"
)


def _page(index: int, *, valid: bool = False) -> str:
    """One landing page; ``valid`` adds what CDIF core 1.0 requires and the page lacks (the
    metadata record's ``additionalType``), so that the record is valid and gets its views."""
    record: dict[str, Any] = {
        "@context": {
            "schema": "http://schema.org/",
            "dcterms": "http://purl.org/dc/terms/",
            "dcat": "http://www.w3.org/ns/dcat#",
            "prov": "http://www.w3.org/ns/prov#",
        },
        "@id": f"https://doi.org/10.5072/bench.{index:05d}",
        "@type": ["schema:Dataset"],
        "schema:name": f"Benchmark dataset {index}",
        "schema:description": "Synthetic ocean observations for the re-harvest benchmark. " * 8,
        "schema:identifier": f"https://doi.org/10.5072/bench.{index:05d}",
        "schema:url": f"{{{{BASE}}}}/datasets/{index:05d}.html",
        "schema:dateModified": "2025-01-15",
        "schema:license": "https://creativecommons.org/licenses/by/4.0/",
        "schema:keywords": ["oceanography", "temperature", f"station {index % 97}"],
        "schema:creator": [
            {"@type": "schema:Person", "schema:name": f"Researcher {index % 31}"},
        ],
        "schema:subjectOf": {
            "@id": f"{{{{BASE}}}}/metadata/{index:05d}",
            "@type": ["dcat:CatalogRecord"],
            "schema:about": {"@id": f"https://doi.org/10.5072/bench.{index:05d}"},
            "dcterms:conformsTo": [{"@id": "https://w3id.org/cdif/core/1.0"}],
            "schema:sdDatePublished": "2025-01-16",
            "schema:dateModified": "2025-01-16",
        },
    }
    if valid:
        record["schema:subjectOf"]["schema:additionalType"] = ["dcat:CatalogRecord"]
    body = _FILLER * 40
    return (
        "<!DOCTYPE html>\n<html><head><title>Benchmark dataset</title>\n"
        '<script type="application/ld+json">\n'
        + json.dumps(record, indent=1)
        + "\n</script></head>\n<body><h1>Benchmark dataset</h1>\n"
        + body
        + "</body></html>\n"
    )


def write_site(root: Path, pages: int, *, lastmod: bool, valid: bool = False) -> None:
    """Write the benchmark site: robots.txt, a sitemap index, two sitemaps, ``pages`` pages
    (with ``valid``, valid CDIF records)."""
    (root / "datasets").mkdir(parents=True)
    for index in range(pages):
        page = _page(index, valid=valid)
        (root / "datasets" / f"{index:05d}.html").write_text(page, encoding="utf-8")
    half = pages // 2
    for name, chunk in (("a", range(half)), ("b", range(half, pages))):
        entries = "".join(
            f"  <url><loc>{{{{BASE}}}}/datasets/{i:05d}.html</loc>"
            + ("<lastmod>2025-01-16</lastmod>" if lastmod else "")
            + "</url>\n"
            for i in chunk
        )
        (root / f"sitemap-{name}.xml").write_text(
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
            + entries
            + "</urlset>\n",
            encoding="utf-8",
        )
    (root / "sitemap-index.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
        "  <sitemap><loc>{{BASE}}/sitemap-a.xml</loc></sitemap>\n"
        "  <sitemap><loc>{{BASE}}/sitemap-b.xml</loc></sitemap>\n"
        "</sitemapindex>\n",
        encoding="utf-8",
    )
    (root / "robots.txt").write_text(
        "User-agent: *\nAllow: /\n\nSitemap: {{BASE}}/sitemap-index.xml\n", encoding="utf-8"
    )


@dataclass
class Harvest:
    """What one harvest cost."""

    seconds: float
    requests: int
    with_body: int
    files_written: int
    outcomes: dict[str, int]


def _files(out: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}


def _harvest(site: PublisherSite, out: Path) -> Harvest:
    before_files = _files(out) if out.exists() else {}
    before_requests = len(site.timings)
    with LocalHarvester(out, allow_loopback=True) as harvester:
        started = time.perf_counter()
        summary = harvester.harvest(site.url("/robots.txt"))
        seconds = time.perf_counter() - started
    after = _files(out)
    served = site.timings[before_requests:]
    return Harvest(
        seconds=seconds,
        requests=len(served),
        with_body=sum(1 for t in served if t.status == 200),
        files_written=sum(1 for path, mtime in after.items() if before_files.get(path) != mtime),
        outcomes={k: v for k, v in summary.outcomes.items() if v},
    )


def run_pair(work: Path, pages: int, *, lastmod: bool) -> tuple[Harvest, Harvest]:
    """First harvest and unchanged re-harvest of a fresh site; returns both."""
    site_dir = work / ("site-lastmod" if lastmod else "site-plain")
    write_site(site_dir, pages, lastmod=lastmod)
    out = work / ("out-lastmod" if lastmod else "out-plain")
    with PublisherSite(site_dir) as site:
        first = _harvest(site, out)
        again = _harvest(site, out)
    return first, again


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the Markdown report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=2000)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="cdif-reharvest-bench-"))
    try:
        rows = [
            ("sitemaps with lastmod", *run_pair(work, args.pages, lastmod=True)),
            ("sitemaps without lastmod", *run_pair(work, args.pages, lastmod=False)),
        ]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"Pages: {args.pages}; Python {platform.python_version()} on {platform.machine()}.\n")
    print(
        "| site | harvest | seconds | requests | with a body | files written | outcomes |\n"
        "| --- | --- | ---: | ---: | ---: | ---: | --- |"
    )
    for label, first, again in rows:
        for name, run in (("first", first), ("unchanged re-harvest", again)):
            outcomes = ", ".join(f"{k} {v}" for k, v in sorted(run.outcomes.items()))
            print(
                f"| {label} | {name} | {run.seconds:.2f} | {run.requests} | {run.with_body} | "
                f"{run.files_written} | {outcomes} |"
            )
    print("\n| site | re-harvest / first | goal (< 10%) |\n| --- | ---: | --- |")
    for label, first, again in rows:
        ratio = again.seconds / first.seconds
        print(f"| {label} | {ratio:.1%} | {'met' if ratio < 0.10 else 'not met'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
