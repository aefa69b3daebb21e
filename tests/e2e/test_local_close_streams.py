"""Closing a local run holds a bounded number of outcomes, URL states and catalogue entries.

A site of many pages is harvested twice, the second time with part of its pages gone from the
sitemap (so closing withdraws them). In the second harvest the catalogue is wrapped in a proxy
of our own port that tracks, by weak reference, how many of the outcomes, URL states and
entries it handed out are alive at once: closing the run (tombstones, summary, outcomes.jsonl,
the publisher report) must hold a few at a time, not the run's.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from cdif_harvester.cli.runner import LocalHarvester
from cdif_harvester.demo.server import PublisherSite
from cdif_harvester.ports import CatalogIndex
from cdif_harvester.stages.finish import STATE_CHUNK

PAGES = 150
GONE = 40  # pages the second sitemap no longer lists
REPORTS_READ = 5  # the report reads this many records' reports (the real cap is 1,000)
# Alive at once, at most: a page of the catalogue is rows, decoded one at a time; a few more
# for the merge of the sources' URLs and the outcomes walked beside them.
FEW = 10

T = TypeVar("T")

_PAGE = """<!doctype html><html><head><title>Dataset {n}</title>
<script type="application/ld+json">
{{"@context": {{"@vocab": "https://schema.org/"}}, "@type": "Dataset",
 "@id": "https://doi.org/10.5555/bench-{n}", "name": "Dataset {n}",
 "description": "Measurements number {n}.", "url": "{{{{BASE}}}}/datasets/{n}.html"}}
</script></head><body><h1>Dataset {n}</h1></body></html>
"""


def _site(root: Path, listed: Iterable[int]) -> None:
    (root / "datasets").mkdir(parents=True, exist_ok=True)
    for n in range(PAGES):
        (root / "datasets" / f"{n}.html").write_text(_PAGE.format(n=n), encoding="utf-8")
    entries = "".join(f"<url><loc>{{{{BASE}}}}/datasets/{n}.html</loc></url>\n" for n in listed)
    (root / "sitemap.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
        f"{entries}</urlset>\n",
        encoding="utf-8",
    )
    (root / "robots.txt").write_text(
        "User-agent: *\nAllow: /\n\nSitemap: {{BASE}}/sitemap.xml\n", encoding="utf-8"
    )


class _Alive:
    """How many of the objects handed out are alive now, and at most."""

    def __init__(self) -> None:
        self.now = 0
        self.most = 0
        self.handed = 0

    def track(self, items: Iterable[T]) -> Iterator[T]:
        for item in items:
            self.now += 1
            self.handed += 1
            self.most = max(self.most, self.now)
            weakref.finalize(item, self._gone)
            yield item

    def _gone(self) -> None:
        self.now -= 1


class _Tracking:
    """The catalogue, its long listings tracked (everything else passed through)."""

    def __init__(self, inner: CatalogIndex) -> None:
        self._inner = inner
        self.outcomes_alive = _Alive()
        self.urls_alive = _Alive()
        self.records_alive = _Alive()

    def outcomes(self, run_id: str) -> Iterator[Any]:
        return self.outcomes_alive.track(self._inner.outcomes(run_id))

    def get_urls(self, urls: Any) -> dict[str, Any]:
        states = self._inner.get_urls(urls)
        return dict(zip(states, self.urls_alive.track(states.values()), strict=True))

    def records(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        return self.records_alive.track(self._inner.records(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_closing_a_run_holds_a_few_outcomes_states_and_entries_at_once(tmp_path: Path) -> None:
    root, out = tmp_path / "site", tmp_path / "out"
    _site(root, range(PAGES))
    with PublisherSite(root) as site:
        with LocalHarvester(out, allow_loopback=True) as harvester:
            first = harvester.harvest(site.url("/robots.txt"))
        assert first.outcomes["record"] == PAGES
        _site(root, range(GONE, PAGES))
        with LocalHarvester(out, allow_loopback=True, incremental=False) as harvester:
            tracking = _Tracking(harvester.catalog)
            harvester.catalog = tracking  # type: ignore[assignment]
            harvester.wiring.catalog = tracking  # type: ignore[assignment]
            harvester.wiring.settings = replace(
                harvester.wiring.settings, report_max_reports=REPORTS_READ
            )
            second = harvester.harvest(site.url("/robots.txt"))
            in_catalogue = [o.url for o in harvester.catalog.outcomes(second.run_id)]
    # Closing the run held a few outcomes, URL states and entries at a time...
    assert tracking.outcomes_alive.most <= FEW
    assert tracking.urls_alive.most <= STATE_CHUNK + FEW
    assert tracking.records_alive.most <= REPORTS_READ + FEW
    # ...while its work covered every one of them.
    assert second.urls == PAGES - GONE  # the pages listed
    assert len(second.withdrawn) == GONE
    assert tracking.outcomes_alive.handed >= second.urls
    # (the states read are those of the URLs the run had no outcome for: the gone ones)
    assert tracking.urls_alive.handed == GONE
    assert tracking.records_alive.handed >= PAGES
    # outcomes.jsonl: one line per URL of the run, in the catalogue's order (by URL), the same
    # file in the output folder and in the run's folder.
    lines = (out / "outcomes.jsonl").read_text(encoding="utf-8").splitlines()
    urls = [json.loads(line)["url"] for line in lines]
    assert urls == in_catalogue == sorted(set(urls)) and len(urls) == second.urls
    assert (out / "runs" / second.run_id / "outcomes.jsonl").read_text(encoding="utf-8") == (
        out / "outcomes.jsonl"
    ).read_text(encoding="utf-8")
    report = (out / "report.html").read_text(encoding="utf-8")
    assert f'data-count="withdrawn">{GONE}<' in report
