"""The sitemap expander isolates what goes wrong with one location, one host's robots.txt or one
index child: each ends with its own outcome and reason, and the rest of the sitemap goes on."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from cdif_harvester.adapters.local import (
    DirectoryObjectStore,
    InProcessQueue,
    SqliteCatalog,
    SystemClock,
)
from cdif_harvester.contracts import SITEMAP_QUEUE, URL_QUEUE, SitemapJob, UrlJob, decode
from cdif_harvester.domain.discovery.robots import MAX_ROBOTS_BYTES
from cdif_harvester.errors import (
    AddressRefused,
    FetchFailed,
    FetchTimeout,
    RedirectError,
)
from cdif_harvester.model import Outcome, UrlOutcome
from cdif_harvester.stages.expand import MAX_OTHER_ROBOTS_PER_JOB, expand_sitemap
from cdif_harvester.stages.runs import begin_run
from cdif_harvester.wiring import Wiring
from tests.support.fakes import Answer, TableFetcher

BASE = "https://pub.example.org"
XML = {"content-type": "application/xml"}
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def _wiring(tmp_path: Path, pages: Mapping[str, Answer]) -> Wiring:
    wiring = Wiring(
        store=DirectoryObjectStore(tmp_path),
        catalog=SqliteCatalog(tmp_path / "c.sqlite"),
        queue=InProcessQueue(),
        fetcher=TableFetcher(pages),
        clock=SystemClock(),
    )
    begin_run(wiring, "r", [f"{BASE}/sitemap.xml"])
    return wiring


def _asked(wiring: Wiring) -> list[str]:
    fetcher = wiring.fetcher
    assert isinstance(fetcher, TableFetcher)
    return fetcher.asked


def _drain(wiring: Wiring, name: str) -> list[str]:
    queue = wiring.queue
    assert isinstance(queue, InProcessQueue)
    bodies = []
    while (body := queue.receive(name)) is not None:
        bodies.append(body)
    return bodies


def _urlset(*locs: str) -> bytes:
    return (
        f"<urlset {NS}>{''.join(f'<url><loc>{loc}</loc></url>' for loc in locs)}</urlset>".encode()
    )


def _index(*locs: str) -> bytes:
    items = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return f"<sitemapindex {NS}>{items}</sitemapindex>".encode()


def _job(url: str = f"{BASE}/sitemap.xml") -> SitemapJob:
    return SitemapJob(run_id="r", source="s", url=url, depth=1)


def _outcomes(wiring: Wiring) -> dict[str, UrlOutcome]:
    return {outcome.url: outcome for outcome in wiring.catalog.outcomes("r")}


def _sent_urls(wiring: Wiring) -> list[str]:
    return [decode(body, UrlJob).url for body in _drain(wiring, URL_QUEUE)]


def test_one_bad_location_or_host_never_sinks_its_sitemap(tmp_path: Path) -> None:
    announce = f"Sitemap: {BASE}/sitemap.xml\n".encode()
    hostile = {
        "http://[::1/x": (Outcome.FAILED, "invalid-url: "),
        "https://pub.example.org:99999/x": (Outcome.FAILED, "invalid-url: "),
        "https://bad%20host.example.org/x": (Outcome.FAILED, "invalid-url: "),
        f"{BASE}/{'a' * 3000}": (Outcome.FAILED, "invalid-url: "),
        "ftp://pub.example.org/x": (Outcome.BLOCKED, "scheme-not-allowed: "),
        "mailto:data@example.org": (Outcome.BLOCKED, "scheme-not-allowed: "),
        "https://private.example.net/a": (Outcome.BLOCKED, "private-address: "),
        "https://dead.example.net/a": (Outcome.FAILED, "robots-unavailable: "),
        "https://dead.example.net/b": (Outcome.FAILED, "robots-unavailable: "),
        "https://busy.example.net/a": (Outcome.FAILED, "robots-unavailable: "),
        "https://slow.example.net/a": (Outcome.FAILED, "robots-unavailable: "),
        "https://loop.example.net/a": (Outcome.FAILED, "robots-unavailable: "),
    }
    good = [f"{BASE}/a.html", "https://friend.example.net/b.html", f"{BASE}/c.html"]
    wiring = _wiring(
        tmp_path,
        {
            f"{BASE}/sitemap.xml": (200, XML, _urlset(good[0], *hostile, *good[1:])),
            "https://friend.example.net/robots.txt": (200, {}, announce),
            "https://private.example.net/robots.txt": AddressRefused(
                "refused 10.0.0.1", reason="private-address"
            ),
            "https://dead.example.net/robots.txt": FetchFailed(
                "could not resolve dead.example.net", reason="dns-failure"
            ),
            "https://busy.example.net/robots.txt": (503, {}, b"later"),
            "https://slow.example.net/robots.txt": FetchTimeout("too slow", reason="read-timeout"),
            "https://loop.example.net/robots.txt": RedirectError("loop", reason="redirect-loop"),
        },
    )
    expand_sitemap(wiring, _job())

    assert _sent_urls(wiring) == good
    outcomes = _outcomes(wiring)
    assert set(outcomes) == set(hostile)
    for url, (outcome, code) in hostile.items():
        assert outcomes[url].outcome is outcome, url
        assert (outcomes[url].reason or "").startswith(code), (url, outcomes[url].reason)
    assert "503" in (outcomes["https://busy.example.net/a"].reason or "")
    # A dead host's robots.txt is asked once, however many of its URLs the sitemap lists.
    assert _asked(wiring).count("https://dead.example.net/robots.txt") == 1
    run = wiring.catalog.get_run("r")
    assert run is not None
    assert run.entered == run.settled + len(good) and run.sitemaps == 0


def test_a_transient_failure_of_the_sitemaps_own_robots_txt_retries_the_job(
    tmp_path: Path,
) -> None:
    wiring = _wiring(
        tmp_path,
        {
            f"{BASE}/sitemap.xml": (200, XML, _urlset(f"{BASE}/a.html")),
            f"{BASE}/robots.txt": FetchTimeout("too slow", reason="read-timeout"),
        },
    )
    with pytest.raises(FetchTimeout):
        expand_sitemap(wiring, _job())
    assert _sent_urls(wiring) == [] and _outcomes(wiring) == {}


def test_at_most_a_few_other_hosts_robots_txt_are_read_per_job(tmp_path: Path) -> None:
    hosts = [f"https://h{n}.example.net" for n in range(MAX_OTHER_ROBOTS_PER_JOB + 3)]
    announce = f"Sitemap: {BASE}/sitemap.xml\n".encode()
    wiring = _wiring(
        tmp_path,
        {
            f"{BASE}/sitemap.xml": (200, XML, _urlset(*(f"{h}/a" for h in hosts))),
            **{f"{h}/robots.txt": (200, {}, announce) for h in hosts},
        },
    )
    expand_sitemap(wiring, _job())
    assert _sent_urls(wiring) == [f"{h}/a" for h in hosts[:MAX_OTHER_ROBOTS_PER_JOB]]
    outcomes = _outcomes(wiring)
    assert sorted(outcomes) == [f"{h}/a" for h in hosts[MAX_OTHER_ROBOTS_PER_JOB:]]
    assert all(
        (o.reason or "").startswith("robots-unavailable: ") and "too-many-hosts" in (o.reason or "")
        for o in outcomes.values()
    )
    robots = [url for url in _asked(wiring) if url.endswith("/robots.txt")]
    assert len(robots) == MAX_OTHER_ROBOTS_PER_JOB


def test_an_index_follows_children_on_other_hosts_only_when_they_announce_them(
    tmp_path: Path,
) -> None:
    friend, stranger = "https://friend.example.net", "https://stranger.example.net"
    children = [
        f"{BASE}/a.xml",
        f"{friend}/announced.xml",
        f"{stranger}/b.xml",
        "ftp://pub.example.org/c.xml",
        "http://[::1/d.xml",
        f"{BASE}/sitemap.xml#again",  # itself: never followed
    ]
    wiring = _wiring(
        tmp_path,
        {
            f"{BASE}/sitemap.xml": (200, XML, _index(*children)),
            f"{friend}/robots.txt": (200, {}, f"Sitemap: {friend}/announced.xml\n".encode()),
            f"{stranger}/robots.txt": (200, {}, f"Sitemap: {stranger}/own.xml\n".encode()),
        },
    )
    result = expand_sitemap(wiring, _job())
    sent = [decode(body, SitemapJob).url for body in _drain(wiring, SITEMAP_QUEUE)]
    assert sent == [f"{BASE}/a.xml", f"{friend}/announced.xml"]
    outcomes = _outcomes(wiring)
    assert {url: o.outcome for url, o in outcomes.items()} == {
        f"{stranger}/b.xml": Outcome.DISALLOWED,
        "ftp://pub.example.org/c.xml": Outcome.BLOCKED,
        "http://[::1/d.xml": Outcome.FAILED,
    }
    assert (outcomes[f"{stranger}/b.xml"].reason or "").startswith("cross-host-sitemap: ")
    assert not isinstance(result, UrlOutcome) and result.sitemap_jobs == 2


def test_variants_of_one_url_are_handed_on_once_and_one_host_is_one_host(tmp_path: Path) -> None:
    site = "http://pub.example.org"
    wiring = _wiring(
        tmp_path,
        {
            f"{site}/sitemap.xml": (
                200,
                XML,
                _urlset(
                    f"{site}:80/x",
                    f"{site}/x",
                    "HTTP://PUB.Example.org/x#part",
                    f"{site}/x#other",
                    "http://pub.example.org:80",
                ),
            )
        },
    )
    expand_sitemap(wiring, _job(f"{site}/sitemap.xml"))
    assert _sent_urls(wiring) == [f"{site}/x", f"{site}/"]
    assert _outcomes(wiring) == {}  # none refused as cross-host
    assert [url for url in _asked(wiring) if url.endswith("robots.txt")] == [f"{site}/robots.txt"]


def test_a_robots_txt_over_the_cap_is_read_up_to_it(tmp_path: Path) -> None:
    # RFC 9309 section 2.5: the first 500 KiB are read, cut at the last complete line; the rule
    # past the cap is never seen.
    head = f"Sitemap: {BASE}/sitemap.xml\nUser-agent: *\nDisallow: /private/\n".encode()
    filler = b"# " + b"x" * 98 + b"\n"
    body = head + filler * (MAX_ROBOTS_BYTES // len(filler) + 10) + b"Disallow: /\n"
    assert len(body) > MAX_ROBOTS_BYTES
    wiring = _wiring(
        tmp_path,
        {
            f"{BASE}/sitemap.xml": (200, XML, _urlset(f"{BASE}/a.html", f"{BASE}/private/b")),
            f"{BASE}/robots.txt": (200, {}, body),
        },
    )
    expand_sitemap(wiring, _job())
    assert _sent_urls(wiring) == [f"{BASE}/a.html"]
    (refused,) = _outcomes(wiring).values()
    assert refused.url == f"{BASE}/private/b" and refused.outcome is Outcome.DISALLOWED
