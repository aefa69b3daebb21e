"""The politeness policy, proven from the publishers' own request logs (real HTTP on 127.0.0.1).

Two slow publishers are harvested together in one local run: one asks for ``Crawl-delay: 1``,
the other sets none. Their logs (arrival and end of every request, monotonic time) must show at
most N requests in flight per host, starts on the Crawl-delay host at least one second apart, and
the two hosts served at the same time (parallelism across hosts, never within a host beyond N).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdif_harvester.cli.main import main
from cdif_harvester.cli.runner import LocalHarvester
from cdif_harvester.demo.server import PublisherSite, TimedRequest, max_overlap

pytestmark = pytest.mark.serial  # (crawl delays and overlaps read on the wall clock)

PER_HOST = 2
RESPONSE_DELAY = 0.2  # seconds per answer: slow enough that any overlap would show
CRAWL_DELAY = 1.0
TOLERANCE = 0.05  # server-side clocks see a request a little after the client sent it
HTML = {"Content-Type": "text/html; charset=utf-8"}
XML = {"Content-Type": "application/xml"}


def _page(name: str) -> str:
    return f"""<html><head><title>{name}</title><script type="application/ld+json">
{{"@context": "https://schema.org/", "@type": "Dataset", "@id": "{{{{BASE}}}}/ds/{name}",
  "name": "Dataset {name}", "description": "Dataset {name}, served slowly.",
  "url": "{{{{BASE}}}}/p/{name}.html", "identifier": "{{{{BASE}}}}/ds/{name}"}}
</script></head><body>{name}</body></html>"""


def _publisher(pages: int, robots: str, *, delay: float = RESPONSE_DELAY) -> PublisherSite:
    site = PublisherSite(None, response_delay=delay).start()
    site.add_route("/robots.txt", headers={"Content-Type": "text/plain"}, body=robots)
    locs = "".join(f"<url><loc>{{{{BASE}}}}/p/{i}.html</loc></url>" for i in range(pages))
    site.add_route(
        "/sitemap.xml",
        headers=XML,
        body=f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{locs}</urlset>',
    )
    for i in range(pages):
        site.add_route(f"/p/{i}.html", headers=HTML, body=_page(str(i)))
    return site


@pytest.fixture
def slow_hosts() -> Iterator[tuple[PublisherSite, PublisherSite]]:
    """A publisher with ``Crawl-delay: 1`` and 8 pages, and one with none and 12 pages."""
    delayed = _publisher(8, "User-agent: *\nCrawl-delay: 1\nSitemap: {{BASE}}/sitemap.xml\n")
    eager = _publisher(12, "User-agent: *\nAllow: /\nSitemap: {{BASE}}/sitemap.xml\n")
    yield delayed, eager
    delayed.stop()
    eager.stop()


def _starts(timings: list[TimedRequest]) -> list[float]:
    return sorted(timing.started for timing in timings)


def _overlap_in_time(one: list[TimedRequest], other: list[TimedRequest]) -> bool:
    return any(a.started < b.finished and b.started < a.finished for a in one for b in other)


def test_two_hosts_harvested_in_parallel_each_within_its_politeness(
    slow_hosts: tuple[PublisherSite, PublisherSite], tmp_path: Path
) -> None:
    delayed, eager = slow_hosts
    began = time.monotonic()
    with LocalHarvester(
        tmp_path, allow_loopback=True, requests_per_host=PER_HOST, workers=4
    ) as harvester:
        summary = harvester.harvest([delayed.url("/robots.txt"), eager.url("/robots.txt")])
    elapsed = time.monotonic() - began

    assert summary.outcomes["record"] == 20, summary.to_dict()
    assert summary.entry_urls == [delayed.url("/robots.txt"), eager.url("/robots.txt")]
    slow_log, fast_log = list(delayed.timings), list(eager.timings)
    assert len(slow_log) >= 10 and len(fast_log) >= 14  # robots.txt, sitemap, every page

    # No more than N requests in flight per host, ever; the host without a Crawl-delay did
    # get N at once (the limit was reached, not merely never tested)
    assert max_overlap(slow_log, tolerance=0.01) <= PER_HOST
    assert max_overlap(fast_log, tolerance=0.01) == PER_HOST

    # Crawl-delay: successive request starts on that host at least one second apart
    starts = _starts(slow_log)
    gaps = [later - earlier for earlier, later in zip(starts, starts[1:], strict=False)]
    assert min(gaps) >= CRAWL_DELAY - TOLERANCE, gaps

    # Parallelism across hosts: the eager host was served while the delayed one was
    assert _overlap_in_time(slow_log, fast_log)
    fast_done = max(timing.finished for timing in fast_log)
    assert fast_done < max(timing.finished for timing in slow_log) - 2 * CRAWL_DELAY
    print(  # the figures, for the record (pytest -s)
        f"\nmax overlap: delayed {max_overlap(slow_log, tolerance=0.01)}, "
        f"eager {max_overlap(fast_log, tolerance=0.01)}; min gap on the delayed host "
        f"{min(gaps):.3f} s; eager host done after {fast_done - min(_starts(fast_log)):.2f} s; "
        f"run {elapsed:.2f} s"
    )


@pytest.mark.parametrize("status", [429, 503])
def test_a_retry_after_makes_the_retry_wait(status: int, tmp_path: Path) -> None:
    site = _publisher(1, "User-agent: *\nSitemap: {{BASE}}/sitemap.xml\n", delay=0.0)
    try:
        site.add_route("/p/0.html", status=status, headers={"Retry-After": "1"}, times=1)
        with LocalHarvester(tmp_path, allow_loopback=True) as harvester:
            summary = harvester.harvest(site.url("/robots.txt"))
    finally:
        site.stop()
    assert summary.outcomes["record"] == 1
    page = [timing for timing in site.timings if timing.target == "/p/0.html"]
    assert [timing.status for timing in page] == [status, 200]
    assert page[1].started - page[0].finished >= 1.0 - TOLERANCE


def test_cdif_harvest_takes_several_entry_urls_and_a_per_host_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = _publisher(3, "User-agent: *\nSitemap: {{BASE}}/sitemap.xml\n", delay=0.05)
    two = _publisher(3, "User-agent: *\nSitemap: {{BASE}}/sitemap.xml\n", delay=0.05)
    entries = [one.url("/robots.txt"), two.url("/sitemap.xml")]
    try:
        status = main(
            [
                "harvest",
                *entries,
                "--out",
                str(tmp_path),
                "--allow-loopback",
                "--per-host",
                "1",
                "--workers",
                "2",
                "--quiet",
            ]
        )
    finally:
        one.stop()
        two.stop()
    assert status == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["entry_urls"] == entries
    assert summary["entry_url"] == entries[0]
    assert summary["outcomes"]["record"] == 6
    assert json.loads(capsys.readouterr().out)["run_id"] == summary["run_id"]
    lines = (tmp_path / "outcomes.jsonl").read_text().splitlines()
    assert len(lines) == 6
    assert max_overlap(one.timings, tolerance=0.01) == 1
    assert max_overlap(two.timings, tolerance=0.01) == 1


def test_bad_per_host_values_are_usage_errors(tmp_path: Path) -> None:
    for bad in (["--per-host", "0"], ["--host-slots", "example.org"]):
        with pytest.raises(SystemExit) as exited:
            main(["harvest", "https://example.org/robots.txt", "--out", str(tmp_path), *bad])
        assert exited.value.code == 2
