"""The expander's fast paths write what the generic ones write: URL jobs (UrlJobEncoder against
``encode``), stored parts (against ``json.dumps`` of the part as the short form keeps it), and
compact sitemap entries (against the entries ``iter_sitemap`` gives)."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.adapters.local import (
    DirectoryObjectStore,
    InProcessQueue,
    SqliteCatalog,
    SystemClock,
)
from cdif_harvester.contracts import (
    MAX_MESSAGE_BYTES,
    SITEMAP_QUEUE,
    URL_QUEUE,
    SitemapJob,
    UrlJob,
    UrlJobEncoder,
    decode,
    encode,
)
from cdif_harvester.domain.discovery.entry import entry_sitemap
from cdif_harvester.domain.discovery.sitemap import (
    CompactEntry,
    SitemapEntry,
    _compact,
    iter_sitemap,
    parse_sitemap,
)
from cdif_harvester.errors import ContractError
from cdif_harvester.keys import sitemap_part_key
from cdif_harvester.model import TypedLink, plain
from cdif_harvester.stages.expand import _link_of_part, _write_part, expand_sitemap
from cdif_harvester.wiring import Wiring
from tests.support.fakes import TableFetcher

BASE = "https://pub.example.org"
SITEMAP = f"{BASE}/sm.xml"
RS = 'xmlns:rs="http://www.openarchives.org/rs/terms/"'
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'

# Values a template could trip on: JSON escapes, format braces, the stand-ins' own characters,
# non-ASCII, quotes and control characters.
AWKWARD = (
    f"{BASE}/d/plain",
    f"{BASE}/d/{{braces}}/{{0}}/{{url}}",
    f'{BASE}/d/"quoted"\\back\\slash',
    "https://bücher.example/ä?q=ü&x=€",
    f"{BASE}/d/\ue000url\ue000/\ue000href\ue000",
    f"{BASE}/d/tab\tnewline\nnul\x00",
)

SIGNMAP_LINKS = (
    TypedLink(f"{BASE}/md/1.json", "describedby", type="application/ld+json",
              profile="https://w3id.org/cdif/core/1.0/", found_in="signmap"),
    TypedLink("https://doi.org/10.5072/1", "cite-as", found_in="signmap"),
)  # fmt: skip

ODD_LINKS = (
    TypedLink(f"{BASE}/md/x.json", "describedby", anchor=f"{BASE}/elsewhere", found_in="linkset",
              title="Métadonnées {x}", hreflang="fr", scheme="DC", reverse=True, used=True,
              ignored="anchor"),
    TypedLink("https://example.net/\ue000anchor\ue000", "item", anchor=None),
    TypedLink(f"{BASE}/md/y.json", "describedby", anchor="", type=""),
)  # fmt: skip

SHARED: list[dict[str, Any]] = [
    {},
    {"cdif_agent": True, "crawl_delay": 1.5, "requests_per_host": 2},
    {"options": {"render": "fallback", "format_parameter": "format=CDIF1.0"}, "crawl_delay": 2.0},
    {"options": {"format_parameter": '{"x": "{url}"}'}, "sitemap": None},
    {"run_id": "run-{0}", "source": 'src "\ue000lastmod\ue000"', "sitemap": AWKWARD[1]},
]


def _shared(overrides: dict[str, Any]) -> dict[str, Any]:
    shared: dict[str, Any] = {
        "run_id": "r",
        "source": "s",
        "sitemap": SITEMAP,
        "cdif_agent": False,
        "options": {},
        "requests_per_host": None,
        "crawl_delay": None,
    }
    return shared | overrides


@pytest.mark.parametrize("overrides", SHARED)
def test_the_url_job_encoder_writes_what_encode_writes(overrides: dict[str, Any]) -> None:
    shared = _shared(overrides)
    encoder = UrlJobEncoder(**shared)
    for url in AWKWARD:
        for lastmod in (None, "2024-05-01T08:00:00Z", "{lastmod}\ue000"):
            for links in ((), SIGNMAP_LINKS, ODD_LINKS, SIGNMAP_LINKS + ODD_LINKS):
                anchored = tuple(
                    TypedLink(**{**link.__dict__, "anchor": url})
                    if link.found_in == "signmap"
                    else link
                    for link in links
                )
                expected = encode(UrlJob(url=url, lastmod=lastmod, links=anchored, **shared))
                assert encoder.encode(url, lastmod, anchored) == expected


@pytest.mark.parametrize("overrides", SHARED[:3])
def test_signmap_rows_are_encoded_as_the_links_they_stand_for(overrides: dict[str, Any]) -> None:
    shared = _shared(overrides)
    encoder = UrlJobEncoder(**shared)
    rows = [(link.href, link.rel, link.type, link.profile) for link in SIGNMAP_LINKS]
    rows.append((AWKWARD[2], "{rel}", "", None))
    for url in AWKWARD:
        for anchor in (None, url.upper(), AWKWARD[4]):
            typed = tuple(
                TypedLink(href, rel, type=t, profile=p, anchor=anchor or url, found_in="signmap")
                for href, rel, t, p in rows
            )
            expected = encode(UrlJob(url=url, lastmod=None, links=typed, **shared))
            assert encoder.encode(url, None, rows, anchor=anchor) == expected
            mixed = [ODD_LINKS[0], *rows]
            expected = encode(UrlJob(url=url, lastmod="x", links=(ODD_LINKS[0], *typed), **shared))
            assert encoder.encode(url, "x", mixed, anchor=anchor) == expected


def test_the_url_job_encoder_refuses_what_encode_refuses() -> None:
    encoder = UrlJobEncoder(**_shared({}))
    many = tuple(
        TypedLink(f"{BASE}/md/{i}.json", "describedby", anchor=f"{BASE}/d/1", found_in="signmap")
        for i in range(3000)
    )
    with pytest.raises(ContractError) as generic:
        encode(UrlJob(run_id="r", source="s", url=f"{BASE}/d/1", sitemap=SITEMAP, links=many))
    with pytest.raises(ContractError) as fast:
        encoder.encode(f"{BASE}/d/1", None, many)
    assert fast.value.reason == generic.value.reason == "message-too-large"
    # Shared fields over the cap: each job is refused alike (nothing to make a template of).
    huge = _shared({"options": {"format_parameter": "x" * MAX_MESSAGE_BYTES}})
    with pytest.raises(ContractError):
        UrlJobEncoder(**huge).encode(f"{BASE}/d/1", None, ())


def _signmap(count: int) -> bytes:
    """A Signmap whose links take every way the reader has: relative and wrapped hrefs, several
    relation types in one rel, no type, a link before the location, a lastmod left empty."""
    urls = "".join(
        f'<url><rs:ln rel="cite-as" href="https://doi.org/10.5072/{i}"/>'
        f"<loc> {BASE}/d/{i}?a=1&amp;b=\u00e9 </loc><lastmod>2024-05-0{i % 9 + 1}</lastmod>"
        f'<rs:ln rel="describedby item" href="/md/{i}.json" type="application/ld+json" '
        'profile=" https://w3id.org/cdif/core/1.0/ "/>'
        f'<rs:ln rel="alternate" href="{BASE}/md/\n   {i}.xml"/><image:image/></url>'
        for i in range(count)
    )
    odd = (
        f"<url><loc></loc><loc>{BASE}/second-loc</loc><lastmod/><lastmod>2024-01-01</lastmod>"
        f'<rs:ln rel="describedby" href="{BASE}/md/second.json"/></url>'
        f'<url><loc>{BASE}/nested<rs:ln rel="describedby" href="{BASE}/md/in-loc.json"/></loc>'
        f'<rs:ln rel="cite-as" href="https://doi.org/10.5072/nested"/></url>'
        f'<url><lastmod>2024-01-01</lastmod><rs:ln rel="item" href="{BASE}/no-loc"/></url>'
    )
    return (
        f'<urlset {NS} {RS} xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">'
        f"{odd}{urls}</urlset>"
    ).encode()


@pytest.mark.parametrize(
    "body",
    [
        _signmap(30),
        gzip.compress(_signmap(30)),
        _signmap(5)[:-40],  # broken part-way
        f"<sitemapindex {NS}><sitemap><loc>{BASE}/a.xml</loc></sitemap></sitemapindex>".encode(),
        f"{BASE}/one\n{BASE}/two\n".encode(),
        b'<rss version="2.0"><channel><item><link>https://pub.example.org/i</link></item>'
        b"</channel></rss>",
    ],
    ids=["signmap", "gzip", "broken", "index", "text", "rss"],
)
def test_compact_entries_stand_for_the_entries_the_reader_gives(body: bytes) -> None:
    typed = iter_sitemap(body, sitemap_url=SITEMAP, max_urls=25)
    compact = iter_sitemap(body, sitemap_url=SITEMAP, max_urls=25, compact=True)
    entries = list(typed)
    rows = list(compact)
    assert entries and all(isinstance(row, CompactEntry) for row in rows)
    assert [row.entry() for row in rows] == entries
    assert (compact.kind, compact.count, compact.error, compact.limit_hit) == (
        typed.kind,
        typed.count,
        typed.error,
        typed.limit_hit,
    )
    media_type = "text/plain" if typed.kind == "text" else "application/xml"
    found = entry_sitemap(
        200, media_type, body, url=SITEMAP, max_urls=25, max_bytes=10**6, compact=True
    )
    assert found is not None and [row.entry() for row in found] == entries


def test_the_reader_takes_the_first_location_and_lastmod_that_are_not_empty() -> None:
    entries = parse_sitemap(_signmap(0), sitemap_url=SITEMAP).entries
    signmap = {"found_in": "signmap"}
    assert entries == (
        SitemapEntry(
            f"{BASE}/second-loc",
            "2024-01-01",
            (TypedLink(f"{BASE}/md/second.json", "describedby", anchor=f"{BASE}/second-loc",
                       **signmap),),
        ),
        SitemapEntry(
            f"{BASE}/nested",  # (the text of the location, its element left out)
            None,
            (TypedLink(f"{BASE}/md/in-loc.json", "describedby", anchor=f"{BASE}/nested",
                       **signmap),
             TypedLink("https://doi.org/10.5072/nested", "cite-as", anchor=f"{BASE}/nested",
                       **signmap)),
        ),
    )  # fmt: skip


def _wiring(tmp_path: Path) -> Wiring:
    return Wiring(
        store=DirectoryObjectStore(tmp_path),
        catalog=SqliteCatalog(tmp_path / "c.sqlite"),
        queue=InProcessQueue(),
        fetcher=TableFetcher({}),
        clock=SystemClock(),
    )


def _short(link: TypedLink) -> list[str | None]:
    """A Signmap link as stored parts have kept it since the short form (the previous writer's
    rule, restated): ``[href, rel, type, profile]``."""
    assert link.found_in == "signmap" and not (link.title or link.hreflang or link.scheme)
    return [link.href, link.rel, link.type, link.profile]


@pytest.mark.parametrize("last", [True, False])
def test_a_stored_part_is_byte_for_byte_what_the_short_form_wrote(
    tmp_path: Path, last: bool
) -> None:
    entries = list(iter_sitemap(_signmap(12), sitemap_url=SITEMAP, compact=True))
    entries.append(CompactEntry(f"{BASE}/d/\u00e9", None, (("https://x.example/\u00e9", "item",
                                                             None, "p"),)))  # fmt: skip
    job = SitemapJob(run_id="r", source="s", url=SITEMAP, depth=1)
    wiring = _wiring(tmp_path)
    _write_part(wiring, job, 2, entries, last=last)
    expected = {
        "sitemap": SITEMAP,
        "entries": [
            {
                "loc": entry.loc,
                "lastmod": entry.lastmod,
                "links": [_short(link) for link in entry.entry().links],
            }
            for entry in entries
        ],
        "next": None if last else sitemap_part_key("r", SITEMAP, 3),
    }
    written = wiring.store.get(sitemap_part_key("r", SITEMAP, 2))
    assert written == json.dumps(expected, separators=(",", ":")).encode("utf-8")
    # ... and read back as the links the entries stand for.
    part = json.loads(written)
    for entry, kept in zip(entries, part["entries"], strict=True):
        read = tuple(_link_of_part(link, kept["loc"]) for link in kept["links"])
        assert read == entry.entry().links


def test_only_signmap_links_can_be_compact() -> None:
    page = SitemapEntry(f"{BASE}/d/1", None, (SIGNMAP_LINKS[1],))
    with pytest.raises(ValueError, match="not a Signmap link"):
        _compact(page)
    anchored = SitemapEntry(
        f"{BASE}/d/1", "2024", (TypedLink(**{**plain(SIGNMAP_LINKS[0]), "anchor": f"{BASE}/d/1"}),)
    )
    assert _compact(anchored).entry() == anchored


def test_url_jobs_are_those_the_compact_entries_stand_for(tmp_path: Path) -> None:
    """Locations in another form than the canonical one: the URL job is of the canonical URL,
    its Signmap links anchored at the location as listed (as the reader gives them), in the
    first part and in the stored parts the follow-up jobs read."""
    body = (
        f"<urlset {NS} {RS}>"
        + "".join(
            f"<url><loc>HTTPS://PUB.example.org:443/d/{i}</loc><lastmod>2024-05-01</lastmod>"
            f'<rs:ln rel="describedby" href="/md/{i}.json" type="application/ld+json"/></url>'
            for i in range(7)
        )
        + "</urlset>"
    ).encode()
    wiring = _wiring(tmp_path)
    wiring.fetcher = TableFetcher({SITEMAP: (200, {"content-type": "application/xml"}, body)})
    wiring.settings = replace(wiring.settings, max_urls_per_job=3)
    queue = wiring.queue
    assert isinstance(queue, InProcessQueue)
    sent = []
    job: SitemapJob | None = SitemapJob(run_id="r", source="s", url=SITEMAP, crawl_delay=1.0)
    while job is not None:
        expand_sitemap(wiring, job)
        while (message := queue.receive(URL_QUEUE)) is not None:
            sent.append(message)
        follow_up = queue.receive(SITEMAP_QUEUE)
        job = None if follow_up is None else decode(follow_up, SitemapJob)
    expected = [
        encode(
            UrlJob(
                run_id="r",
                source="s",
                url=f"{BASE}/d/{i}",
                sitemap=SITEMAP,
                lastmod="2024-05-01T00:00:00Z",
                links=entry.entry().links,
                crawl_delay=1.0,
            )
        )
        for i, entry in enumerate(iter_sitemap(body, sitemap_url=SITEMAP, compact=True))
    ]
    assert sent == expected
    assert all('"anchor":"HTTPS://PUB.example.org:443/d/' in message for message in sent)
