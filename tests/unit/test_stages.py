"""The stage functions against the local adapters and a fake of our own Fetcher port."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from cdif_harvester.adapters.local import (
    DirectoryObjectStore,
    InProcessQueue,
    SqliteCatalog,
    SystemClock,
)
from cdif_harvester.contracts import (
    DOCUMENT_QUEUE,
    SITEMAP_QUEUE,
    URL_QUEUE,
    DocumentJob,
    SitemapJob,
    UrlJob,
    decode,
)
from cdif_harvester.domain.discovery.sitemap import parse_sitemap
from cdif_harvester.domain.records.extraction import read_jsonld_scripts
from cdif_harvester.errors import FetchFailed
from cdif_harvester.model import Outcome, Source, TypedLink, UrlState, plain
from cdif_harvester.stages.expand import (
    ExpansionResult,
    _link_of_part,
    expand_sitemap,
)
from cdif_harvester.stages.extract import extract_documents
from cdif_harvester.stages.intake import InvalidEntryUrl, start_harvest
from cdif_harvester.stages.jobs import run_job
from cdif_harvester.stages.resolve import resolve_url
from cdif_harvester.stages.runs import begin_run
from cdif_harvester.stages.sources import start_source_run
from cdif_harvester.wiring import Wiring
from tests.support.fakes import TableFetcher

BASE = "https://pub.example.org"
XML = {"content-type": "application/xml"}
HTML = {"content-type": "text/html; charset=utf-8"}


def _wiring(tmp_path: Path, pages: Mapping[str, tuple[int, Mapping[str, str], bytes]]) -> Wiring:
    return Wiring(
        store=DirectoryObjectStore(tmp_path),
        catalog=SqliteCatalog(tmp_path / "c.sqlite"),
        queue=InProcessQueue(),
        fetcher=TableFetcher(pages),
        clock=SystemClock(),
    )


def _drain(wiring: Wiring, name: str) -> list[str]:
    queue = wiring.queue
    assert isinstance(queue, InProcessQueue)
    bodies = []
    while (body := queue.receive(name)) is not None:
        bodies.append(body)
    return bodies


def _urlset(*paths: str) -> bytes:
    urls = "".join(f"<url><loc>{BASE}{p}</loc><lastmod>2024-05-01</lastmod></url>" for p in paths)
    return f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'.encode()


def _index(*paths: str) -> bytes:
    items = "".join(f"<sitemap><loc>{BASE}{p}</loc></sitemap>" for p in paths)
    return f'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{items}</sitemapindex>'.encode()


def _job(path: str, depth: int = 0, parent: str | None = None) -> SitemapJob:
    return SitemapJob(run_id="r", source="s", url=f"{BASE}{path}", depth=depth, parent=parent)


def test_intake_queues_a_sitemap_job_and_refuses_what_can_never_be_fetched(tmp_path: Path) -> None:
    wiring = _wiring(tmp_path, {})
    job = start_harvest(wiring, f"  {BASE}/robots.txt ")
    assert decode(_drain(wiring, SITEMAP_QUEUE)[0], SitemapJob) == job
    assert job.url == f"{BASE}/robots.txt" and job.source == "pub.example.org"
    for bad in ("ftp://x.org/s.xml", "/relative", "http://", "https://x.org/" + "a" * 3000):
        with pytest.raises(InvalidEntryUrl):
            start_harvest(wiring, bad)
    # The run is recorded before its job is queued, with one sitemap job to do
    run = wiring.catalog.get_run(job.run_id)
    assert run is not None and run.entry_urls == (job.url,) and run.sitemaps == 1


def test_robots_sitemaps_and_disallowed_urls(tmp_path: Path) -> None:
    robots = b"User-agent: *\nDisallow: /private/\nSitemap: " + BASE.encode() + b"/sm.xml\n"
    wiring = _wiring(
        tmp_path,
        {
            f"{BASE}/robots.txt": (200, {"content-type": "text/plain"}, robots),
            f"{BASE}/sm.xml": (200, XML, _urlset("/a.html", "/private/b.html", "/a.html")),
        },
    )
    expand_sitemap(wiring, _job("/robots.txt"))
    (child,) = [decode(b, SitemapJob) for b in _drain(wiring, SITEMAP_QUEUE)]
    assert child.url == f"{BASE}/sm.xml" and child.depth == 1
    result = expand_sitemap(wiring, child)
    urls = [decode(b, UrlJob) for b in _drain(wiring, URL_QUEUE)]
    assert [(u.url, u.lastmod) for u in urls] == [(f"{BASE}/a.html", "2024-05-01T00:00:00Z")]
    assert result.disallowed == 1
    (outcome,) = wiring.catalog.outcomes("r")
    assert outcome.outcome is Outcome.DISALLOWED and outcome.url == f"{BASE}/private/b.html"
    assert wiring.fetcher.asked.count(f"{BASE}/robots.txt") == 1  # type: ignore[attr-defined]


def test_missing_robots_allows_everything_and_5xx_robots_retries_later(tmp_path: Path) -> None:
    wiring = _wiring(tmp_path, {f"{BASE}/sm.xml": (200, XML, _urlset("/a.html"))})
    expand_sitemap(wiring, _job("/sm.xml"))
    assert len(_drain(wiring, URL_QUEUE)) == 1
    wiring = _wiring(
        tmp_path / "2",
        {
            f"{BASE}/sm.xml": (200, XML, _urlset("/a.html")),
            f"{BASE}/robots.txt": (503, {}, b""),
        },
    )
    with pytest.raises(FetchFailed):
        expand_sitemap(wiring, _job("/sm.xml"))


@pytest.mark.parametrize("status", [429, 503])
def test_a_busy_sitemap_or_robots_txt_is_retried_when_it_asks(tmp_path: Path, status: int) -> None:
    busy = {"retry-after": "120"}
    wiring = _wiring(tmp_path, {f"{BASE}/sm.xml": (status, busy, b"")})
    with pytest.raises(FetchFailed) as caught:
        expand_sitemap(wiring, _job("/sm.xml"))
    assert caught.value.retry_after == 120
    wiring = _wiring(
        tmp_path / "2", {f"{BASE}/robots.txt": (status, {"retry-after": "99999"}, b"")}
    )
    with pytest.raises(FetchFailed) as caught:
        expand_sitemap(wiring, _job("/robots.txt"))
    assert caught.value.reason == "robots-unavailable"
    assert caught.value.retry_after == wiring.settings.max_retry_after  # capped


def test_sitemap_index_children_without_cycles_and_with_a_depth_limit(tmp_path: Path) -> None:
    wiring = _wiring(
        tmp_path, {f"{BASE}/idx.xml": (200, XML, _index("/a.xml", "/idx.xml", "/a.xml", "/b.xml"))}
    )
    expand_sitemap(wiring, _job("/idx.xml"))
    children = [decode(b, SitemapJob).url for b in _drain(wiring, SITEMAP_QUEUE)]
    assert children == [f"{BASE}/a.xml", f"{BASE}/b.xml"]  # itself and duplicates dropped
    deep = _job("/idx.xml", depth=wiring.settings.max_sitemap_depth)
    outcome = run_job(wiring, deep, expand_sitemap)
    assert outcome.outcome is Outcome.FAILED
    assert outcome.reason.startswith("sitemap-depth-exceeded")


def test_broken_or_missing_sitemaps_end_in_a_recorded_outcome(tmp_path: Path) -> None:
    wiring = _wiring(
        tmp_path,
        {
            f"{BASE}/html.xml": (200, XML, b"<html><body>hello</body></html>"),
            f"{BASE}/robots.txt": (200, {}, b"User-agent: *\nAllow: /\n"),
        },
    )
    for path, reason in [
        ("/html.xml", "not-a-sitemap"),
        ("/gone.xml", "http-404"),
        ("/robots.txt", "no-sitemaps-in-robots"),
    ]:
        outcome = run_job(wiring, _job(path, depth=1), expand_sitemap)
        assert (outcome.outcome, outcome.reason.split(":")[0]) == (Outcome.FAILED, reason)


def test_an_html_entry_url_is_harvested_as_a_single_page(tmp_path: Path) -> None:
    wiring = _wiring(tmp_path, {f"{BASE}/page.html": (200, HTML, b"<html></html>")})
    expand_sitemap(wiring, _job("/page.html"))
    (job,) = [decode(b, UrlJob) for b in _drain(wiring, URL_QUEUE)]
    assert job.url == f"{BASE}/page.html"


PAGE = b"""<html><head>
<script type="application/ld+json">{"@context": "https://schema.org", "@type": "WebSite"}</script>
<script type="application/ld+json">{"@context": "https://schema.org", "@type": "Dataset",
  "@id": "https://doi.org/10.5072/x", "name": "X"}</script>
<script type="application/ld+json">{ broken </script>
</head></html>"""


def test_resolver_hands_on_embedded_json_ld_in_its_message(tmp_path: Path) -> None:
    wiring = _wiring(
        tmp_path,
        {
            f"{BASE}/p.html": (200, HTML, PAGE),
            f"{BASE}/none.html": (200, HTML, b"<html><p>no metadata</p></html>"),
            f"{BASE}/busy.html": (502, HTML, b""),
        },
    )
    job = resolve_url(wiring, UrlJob(run_id="r", source="s", url=f"{BASE}/p.html"))
    assert isinstance(job, DocumentJob) and job.pattern == "embedded-script"
    (document,) = job.documents
    # by default the page's JSON-LD blocks travel in the message and nothing is kept
    assert document.body is None and document.kept is False
    (scripts,) = job.scripts
    assert scripts.key == document.key
    assert [block.text for block in scripts.blocks] == [
        block.text for block in read_jsonld_scripts(PAGE).blocks
    ]
    assert document.key.startswith("raw/") and not wiring.store.exists(document.key)
    assert (document.status, document.headers["content-type"]) == (200, HTML["content-type"])
    assert not [key for key in wiring.store.list("") if key.startswith(("raw/", "cache/"))]
    assert decode(_drain(wiring, DOCUMENT_QUEUE)[0], DocumentJob) == job

    outcome = resolve_url(wiring, UrlJob(run_id="r", source="s", url=f"{BASE}/none.html"))
    assert outcome.outcome is Outcome.NO_METADATA  # type: ignore[union-attr]
    with pytest.raises(FetchFailed):
        resolve_url(wiring, UrlJob(run_id="r", source="s", url=f"{BASE}/busy.html"))


@pytest.mark.parametrize("asked_by", ["run", "source"])
def test_resolver_keeps_the_raw_page_when_asked(tmp_path: Path, asked_by: str) -> None:
    wiring = _wiring(tmp_path, {f"{BASE}/p.html": (200, HTML, PAGE)})
    options: dict[str, str] = {}
    if asked_by == "run":
        wiring = replace(wiring, settings=replace(wiring.settings, keep_bodies=True))
    else:
        options = {"keep_bodies": "true"}
    url_job = UrlJob(run_id="r", source="s", url=f"{BASE}/p.html", options=options)
    job = resolve_url(wiring, url_job)
    assert isinstance(job, DocumentJob) and job.pattern == "embedded-script"
    assert job.documents[0].kept is True and job.documents[0].body is None
    assert wiring.store.get(job.documents[0].key) == PAGE
    assert wiring.store.exists(job.documents[0].key.rsplit(".", 1)[0] + ".meta.json")
    assert decode(_drain(wiring, DOCUMENT_QUEUE)[0], DocumentJob) == job


def test_extractor_keeps_good_blocks_beside_broken_ones(tmp_path: Path) -> None:
    wiring = _wiring(tmp_path, {f"{BASE}/p.html": (200, HTML, PAGE)})
    document_job = resolve_url(wiring, UrlJob(run_id="r", source="s", url=f"{BASE}/p.html"))
    assert isinstance(document_job, DocumentJob)
    index_job = extract_documents(wiring, document_job)
    staged = json.loads(index_job.staged)  # type: ignore[union-attr]
    (record,) = staged["records"]
    assert record["resource_id"] == "https://doi.org/10.5072/x"
    assert record["report"]["valid"] is False  # no license, no dateModified, no subjectOf ...
    reasons = sorted(item["reason"].split(":")[0] for item in staged["skipped"])
    assert reasons == ["malformed-json", "no Dataset node in this block"]


def test_extractor_prefers_the_cdif_profiled_block_of_a_record(tmp_path: Path) -> None:
    def block(name: str, profile: str = "") -> str:
        node = {
            "@context": "https://schema.org/",
            "@type": "Dataset",
            "@id": "https://doi.org/10.5072/same",
            "name": name,
            "subjectOf": {"@id": f"{BASE}/meta/same", "@type": "DigitalDocument"},
        }
        attribute = f' profile="{profile}"' if profile else ""
        return f'<script type="application/ld+json"{attribute}>{json.dumps(node)}</script>'

    page = f"<html><head>{block('plain')}{block('cdif', 'CDIF1.0')}</head></html>".encode()
    wiring = _wiring(tmp_path, {f"{BASE}/two.html": (200, HTML, page)})
    document_job = resolve_url(wiring, UrlJob(run_id="r", source="s", url=f"{BASE}/two.html"))
    assert isinstance(document_job, DocumentJob)
    index_job = extract_documents(wiring, document_job)
    staged = json.loads(index_job.staged)  # type: ignore[union-attr]
    (record,) = staged["records"]
    assert record["block"] == 1 and record["record"]["schema:name"] == "cdif"
    assert [item["block"] for item in staged["skipped"]] == [0]


def test_a_big_sitemap_continues_in_follow_up_jobs_without_loss_or_repeat(
    tmp_path: Path,
) -> None:
    paths = [f"/p{i}.html" for i in range(23)]
    wiring = _wiring(tmp_path, {f"{BASE}/big.xml": (200, XML, _urlset(*paths))})
    wiring.settings = replace(wiring.settings, max_urls_per_job=10)
    handed_on: list[str] = []
    job: SitemapJob | None = _job("/big.xml", depth=1)
    parts = 0
    while job is not None:
        result = expand_sitemap(wiring, job)
        parts += 1
        handed_on += [decode(b, UrlJob).url for b in _drain(wiring, URL_QUEUE)]
        follow_ups = [decode(b, SitemapJob) for b in _drain(wiring, SITEMAP_QUEUE)]
        assert result.follow_up is bool(follow_ups)
        job = follow_ups[0] if follow_ups else None
        if job is not None:
            assert job.body_key is not None and job.offset == parts * 10
    assert parts == 3
    assert handed_on == [f"{BASE}{p}" for p in paths]  # every URL once, in order
    assert wiring.fetcher.asked.count(f"{BASE}/big.xml") == 1  # type: ignore[attr-defined]


def _signmap(count: int) -> bytes:
    """A Signmap of ``count`` URLs, each with a described-by, a cite-as and an item link."""
    urls = "".join(
        f"<url><loc>{BASE}/d/{i}</loc>"
        f'<rs:ln rel="describedby item" href="{BASE}/md/{i}.json" type="application/ld+json" '
        'profile="https://w3id.org/cdif/core/1.0"/>'
        f'<rs:ln rel="cite-as" href="https://doi.org/10.5072/{i}"/></url>'
        for i in range(count)
    )
    return (
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" '
        f'xmlns:rs="http://www.openarchives.org/rs/terms/">{urls}</urlset>'
    ).encode()


def test_signmap_links_keep_every_field_through_stored_parts(tmp_path: Path) -> None:
    body = _signmap(25)
    wiring = _wiring(tmp_path, {f"{BASE}/sm.xml": (200, XML, body)})
    wiring.settings = replace(wiring.settings, max_urls_per_job=10)
    jobs: list[UrlJob] = []
    job: SitemapJob | None = _job("/sm.xml", depth=1)
    while job is not None:
        expand_sitemap(wiring, job)
        jobs += [decode(b, UrlJob) for b in _drain(wiring, URL_QUEUE)]
        follow_ups = [decode(b, SitemapJob) for b in _drain(wiring, SITEMAP_QUEUE)]
        if follow_ups:
            (job,) = follow_ups
            # A Signmap's own links are stored short: four values, not ten named fields.
            part = json.loads(wiring.store.get(job.body_key or ""))
            assert part["entries"][0]["links"][0] == [
                f"{BASE}/md/{job.offset}.json",
                "describedby",
                "application/ld+json",
                "https://w3id.org/cdif/core/1.0",
            ]
        else:
            job = None
    parsed = parse_sitemap(body, sitemap_url=f"{BASE}/sm.xml")
    assert [(j.url, j.links) for j in jobs] == [(e.loc, e.links) for e in parsed.entries]
    assert len(jobs) == 25 and all(len(j.links) == 3 for j in jobs)


def test_a_stored_part_reads_links_short_or_kept_whole(tmp_path: Path) -> None:
    odd = TypedLink(
        f"{BASE}/md/x.json", "describedby", anchor=f"{BASE}/elsewhere", found_in="linkset",
        title="Metadata", hreflang="en", scheme="DC", reverse=True,
    )  # fmt: skip
    plainest = TypedLink(
        f"{BASE}/md/y.json", "describedby", anchor=f"{BASE}/d/y", found_in="signmap"
    )
    short = [plainest.href, plainest.rel, None, None]
    assert _link_of_part(short, f"{BASE}/d/y") == plainest
    assert _link_of_part(json.loads(json.dumps(plain(odd))), f"{BASE}/d/y") == odd
    # A part written with every link whole (as before the short form) is still read.
    key = "staging/parts/old.json"
    part = {
        "sitemap": f"{BASE}/sm.xml",
        "entries": [{"loc": f"{BASE}/d/y", "lastmod": None, "links": [plain(odd)]}],
        "next": None,
    }
    wiring = _wiring(tmp_path, {})
    wiring.store.put(key, json.dumps(part).encode(), content_type="application/json")
    expand_sitemap(wiring, replace(_job("/sm.xml", depth=1), offset=10, body_key=key))
    (job,) = [decode(b, UrlJob) for b in _drain(wiring, URL_QUEUE)]
    assert job.url == f"{BASE}/d/y" and job.links == (odd,)


def test_cross_host_locations_need_the_other_hosts_robots_txt(tmp_path: Path) -> None:
    other, third = "https://other.example.net", "https://third.example.net"
    wiring = _wiring(
        tmp_path,
        {
            f"{BASE}/sm.xml": (
                200,
                XML,
                b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                + f"<url><loc>{other}/a.html</loc></url>".encode()
                + f"<url><loc>{third}/b.html</loc></url>".encode()
                + b"</urlset>",
            ),
            f"{other}/robots.txt": (200, {}, f"Sitemap: {BASE}/sm.xml\n".encode()),
        },
    )
    expand_sitemap(wiring, _job("/sm.xml", depth=1))
    assert [decode(b, UrlJob).url for b in _drain(wiring, URL_QUEUE)] == [f"{other}/a.html"]
    (refused,) = wiring.catalog.outcomes("r")
    assert refused.url == f"{third}/b.html" and refused.outcome is Outcome.DISALLOWED
    assert refused.reason is not None and refused.reason.startswith("cross-host-location")


def test_cdif_sitemaps_are_marked_and_the_cdif_group_rules_apply(tmp_path: Path) -> None:
    robots = (
        f"User-agent: *\nAllow: /\nSitemap: {BASE}/html.xml\n\n"
        f"User-agent: CDIF1.0\nDisallow: /drafts/\nSitemap: {BASE}/cdif.xml\n"
    ).encode()
    wiring = _wiring(
        tmp_path,
        {
            f"{BASE}/robots.txt": (200, {}, robots),
            f"{BASE}/cdif.xml": (200, XML, _urlset("/md/1.json", "/drafts/2.json")),
        },
    )
    expand_sitemap(wiring, _job("/robots.txt"))
    children = {
        decode(b, SitemapJob).url: decode(b, SitemapJob) for b in _drain(wiring, SITEMAP_QUEUE)
    }
    assert children[f"{BASE}/cdif.xml"].cdif_agent and not children[f"{BASE}/html.xml"].cdif_agent
    expand_sitemap(wiring, children[f"{BASE}/cdif.xml"])
    (job,) = [decode(b, UrlJob) for b in _drain(wiring, URL_QUEUE)]
    assert job.url == f"{BASE}/md/1.json" and job.cdif_agent
    (refused,) = wiring.catalog.outcomes("r")
    assert refused.outcome is Outcome.DISALLOWED and "CDIF1.0" in (refused.reason or "")


def test_signmap_links_and_lastmod_ride_on_the_url_job(tmp_path: Path) -> None:
    signmap = (
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" '
        'xmlns:rs="http://www.openarchives.org/rs/terms/"><url>'
        f"<loc>{BASE}/d/1</loc><lastmod>2024-05-01T10:00:00+02:00</lastmod>"
        f'<rs:ln rel="describedby" href="{BASE}/md/1.json" type="application/ld+json" '
        'profile="https://w3id.org/cdif/core/1.0"/>'
        f'<rs:ln rel="cite-as" href="https://doi.org/10.5072/1"/>'
        "</url></urlset>"
    ).encode()
    wiring = _wiring(tmp_path, {f"{BASE}/signmap.xml": (200, XML, signmap)})
    expand_sitemap(wiring, _job("/signmap.xml", depth=1))
    (job,) = [decode(b, UrlJob) for b in _drain(wiring, URL_QUEUE)]
    assert job.lastmod == "2024-05-01T08:00:00Z"
    assert {(link.rel, link.href, link.profile) for link in job.links} == {
        ("describedby", f"{BASE}/md/1.json", "https://w3id.org/cdif/core/1.0"),
        ("cite-as", "https://doi.org/10.5072/1", None),
    }


class RecordingQueue(InProcessQueue):
    """The in-process queue, also keeping the delays asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.delays: list[int] = []

    def send(
        self, queue: str, bodies: Sequence[str], *, delays: Sequence[int] | None = None
    ) -> None:
        super().send(queue, bodies, delays=delays)
        self.delays += list(delays or [0] * len(bodies))


def test_crawl_delay_spreads_a_hosts_url_jobs_and_is_capped(tmp_path: Path) -> None:
    wiring = _wiring(
        tmp_path,
        {
            f"{BASE}/robots.txt": (200, {}, b"User-agent: *\nCrawl-delay: 60\n"),
            f"{BASE}/sm.xml": (200, XML, _urlset("/a", "/b", "/c")),
        },
    )
    queue = RecordingQueue()
    wiring.queue = queue
    expand_sitemap(wiring, _job("/sm.xml", depth=1))
    cap = int(wiring.settings.max_crawl_delay)
    assert queue.delays == [0, cap, 2 * cap]  # 60 s asked, capped


def test_the_expander_stores_a_robots_policy_then_tells_the_gate_its_crawl_delay(
    tmp_path: Path,
) -> None:
    wiring = _wiring(
        tmp_path,
        {
            f"{BASE}/robots.txt": (200, {}, b"User-agent: *\nCrawl-delay: 60\n"),
            f"{BASE}/sm.xml": (200, XML, _urlset("/a", "/b")),
        },
    )
    heard: list[tuple[str, float, bool]] = []
    wiring.record_crawl_delay = lambda origin, policy: heard.append(
        (origin, wiring.settings.crawl_delay_of(policy), origin in wiring.robots)
    )
    expand_sitemap(wiring, _job("/sm.xml", depth=1))
    expand_sitemap(wiring, _job("/sm.xml", depth=1))  # the policy is held: read and told once
    assert heard == [(BASE, wiring.settings.max_crawl_delay, True)]


def test_a_sources_own_limits_ride_from_its_run_to_every_url_job(tmp_path: Path) -> None:
    wiring = _wiring(
        tmp_path,
        {
            f"{BASE}/robots.txt": (200, {}, f"Sitemap: {BASE}/sm.xml\nCrawl-delay: 1\n".encode()),
            f"{BASE}/sm.xml": (200, XML, _urlset("/a", "/b", "/c")),
        },
    )
    catalog = wiring.catalog
    assert isinstance(catalog, SqliteCatalog)
    wiring.sources = catalog
    catalog.put_source(
        Source(
            source_id="fragile",
            entry_url=f"{BASE}/robots.txt",
            requests_per_host=1,
            crawl_delay=4.0,
        )
    )
    queue = RecordingQueue()
    wiring.queue = queue

    start_source_run(wiring, "fragile", trigger="schedule")
    (robots,) = [decode(b, SitemapJob) for b in _drain(wiring, SITEMAP_QUEUE)]
    expand_sitemap(wiring, robots)
    (sitemap,) = [decode(b, SitemapJob) for b in _drain(wiring, SITEMAP_QUEUE)]
    queue.delays.clear()
    expand_sitemap(wiring, sitemap)

    jobs = [decode(b, UrlJob) for b in _drain(wiring, URL_QUEUE)]
    assert {(j.requests_per_host, j.crawl_delay) for j in jobs} == {(1, 4.0)}
    assert (sitemap.requests_per_host, sitemap.crawl_delay) == (1, 4.0)
    # The source's 4 s is longer than the robots.txt's 1 s: it spaces the URL jobs
    assert queue.delays == [0, 4, 8]


def _held(url: str, lastmod: str, **fields: object) -> UrlState:
    """The state of a URL whose records the catalogue holds, harvested at ``lastmod``."""
    return UrlState(
        url=url,
        source="s",
        lastmod=lastmod,
        fingerprint="f" * 64,
        record_ids=(f"{url}#record",),
        **fields,  # type: ignore[arg-type]
    )


def test_urls_whose_lastmod_is_not_newer_end_unchanged_without_a_url_job(
    tmp_path: Path,
) -> None:
    paths = ("/same.html", "/older.html", "/new.html", "/gone.html", "/no-records.html")
    wiring = _wiring(tmp_path, {f"{BASE}/sitemap.xml": (200, XML, _urlset(*paths))})
    begin_run(wiring, "r", [f"{BASE}/sitemap.xml"])
    # The sitemap says 2024-05-01 for every URL. Held: the same date, an older one, a withdrawn
    # URL, and one that never produced records.
    wiring.catalog.put_url(_held(f"{BASE}/same.html", "2024-05-01T00:00:00Z"))
    wiring.catalog.put_url(_held(f"{BASE}/older.html", "2024-04-30T23:59:59Z"))
    wiring.catalog.put_url(_held(f"{BASE}/gone.html", "2024-06-01", withdrawn_at="2024-06-02"))
    wiring.catalog.put_url(UrlState(url=f"{BASE}/no-records.html", source="s", lastmod="2025"))
    job = _job("/sitemap.xml", depth=1)

    result = expand_sitemap(wiring, job)

    sent = {decode(b, UrlJob).url for b in _drain(wiring, URL_QUEUE)}
    assert sent == {f"{BASE}{p}" for p in paths} - {f"{BASE}/same.html"}
    assert isinstance(result, ExpansionResult) and (result.url_jobs, result.unchanged) == (4, 1)
    (unchanged,) = list(wiring.catalog.outcomes("r"))
    assert (unchanged.url, unchanged.outcome) == (f"{BASE}/same.html", Outcome.UNCHANGED)
    assert unchanged.reason is not None and unchanged.reason.startswith("lastmod: ")
    run = wiring.catalog.get_run("r")
    assert run is not None and (run.entered, run.settled, run.sitemaps) == (5, 1, 0)
    # A redelivered job records the same outcome again without counting it twice.
    expand_sitemap(wiring, replace(job))
    run = wiring.catalog.get_run("r")
    assert run is not None and (run.entered, run.settled) == (5, 1)


def test_without_incremental_harvesting_every_url_gets_a_job(tmp_path: Path) -> None:
    wiring = _wiring(tmp_path, {f"{BASE}/sitemap.xml": (200, XML, _urlset("/same.html"))})
    wiring.settings = replace(wiring.settings, incremental=False)
    wiring.catalog.put_url(_held(f"{BASE}/same.html", "2024-05-01T00:00:00Z"))

    expand_sitemap(wiring, _job("/sitemap.xml", depth=1))

    assert [decode(b, UrlJob).url for b in _drain(wiring, URL_QUEUE)] == [f"{BASE}/same.html"]
    assert list(wiring.catalog.outcomes("r")) == []
