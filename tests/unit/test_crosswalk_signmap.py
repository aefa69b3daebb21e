"""The Signmap of a source: written by the crosswalk, read back by our own sitemap reader (the
one the expander stage uses) into the same URLs and the same typed links."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.adapters.local import InProcessQueue, SqliteCatalog, SystemClock
from cdif_harvester.domain.discovery.sitemap import (
    MAX_SITEMAP_URLS,
    RS_NAMESPACE,
    SitemapEntry,
    iter_sitemap,
    parse_sitemap,
)
from cdif_harvester.domain.resolution.weblinks import parse_linkset_text
from cdif_harvester.domain.views.signmap import (
    latest_lastmod,
    render_signmap,
    render_signmap_index,
)
from cdif_harvester.keys import normalised_record_key, record_hash, record_report_key, signmap_key
from cdif_harvester.model import CatalogEntry, TypedLink
from cdif_harvester.stages import crosswalk as crosswalk_stage
from cdif_harvester.stages.crosswalk import build_source_signmap, build_views, signmap_part_key
from cdif_harvester.wiring import Wiring
from tests.unit.test_crosswalk_stage import MemoryStore, NoFetcher

GOLDEN = Path(__file__).parent / "golden" / "crosswalk"
SIGNMAP_URL = "https://aggregator.example/views/data.example.org/signmap.xml"
SOURCE = "data.example.org"


def _read(body: bytes, url: str = SIGNMAP_URL) -> list[SitemapEntry]:
    # How the expander stage reads a sitemap (stages/expand.py).
    stream = iter_sitemap(body, sitemap_url=url)
    entries = list(stream)
    assert stream.kind == "urlset" and stream.error is None and stream.limit_hit is None
    return entries


def _links(entry: SitemapEntry) -> list[tuple[str, str, str | None, str | None]]:
    return [(link.rel, link.href, link.type, link.profile) for link in entry.links]


ENTRIES = [
    SitemapEntry(
        "https://data.example.org/datasets/a",
        "2024-03-01",
        (
            TypedLink("https://doi.org/10.5072/a", "cite-as"),
            TypedLink(
                "https://data.example.org/md/a.jsonld",
                "describedby",
                type="application/ld+json",
                profile="https://w3id.org/cdif/core/1.0",
            ),
            TypedLink("https://data.example.org/files/a b&c.csv", "item", type="text/csv"),
            # about the metadata record, not the page: a Signmap cannot say so, left out
            TypedLink(
                "https://doi.org/10.5072/a", "describes", anchor="https://data.example.org/md/a"
            ),
        ),
    ),
    SitemapEntry(
        "https://data.example.org/datasets/b?x=1&y=2",
        None,
        (TypedLink("https://données.example/b", "license"),),
    ),
    SitemapEntry("https://data.example.org/datasets/c", "2023-01-01T10:00:00Z", ()),
]


def test_a_signmap_reads_back_into_the_same_urls_and_typed_links() -> None:
    (part,) = render_signmap(ENTRIES)
    assert part.urls == 3 and part.lastmod == "2024-03-01"
    assert f'xmlns:rs="{RS_NAMESPACE}"'.encode() in part.body
    entries = _read(part.body)
    assert [e.loc for e in entries] == [e.loc for e in ENTRIES]
    assert [e.lastmod for e in entries] == [e.lastmod for e in ENTRIES]
    assert _links(entries[0]) == [
        ("cite-as", "https://doi.org/10.5072/a", None, None),
        (
            "describedby",
            "https://data.example.org/md/a.jsonld",
            "application/ld+json",
            "https://w3id.org/cdif/core/1.0",
        ),
        ("item", "https://data.example.org/files/a%20b&c.csv", "text/csv", None),
    ]
    assert _links(entries[1]) == [("license", "https://donn%C3%A9es.example/b", None, None)]
    assert entries[2].links == ()
    assert all(link.anchor == entries[0].loc for link in entries[0].links)


def test_an_empty_source_gives_an_empty_but_readable_signmap() -> None:
    (part,) = render_signmap([])
    assert part.urls == 0 and parse_sitemap(part.body, sitemap_url=SIGNMAP_URL).entries == ()


def test_more_entries_than_a_sitemap_may_hold_are_split_into_parts() -> None:
    parts = render_signmap(ENTRIES, max_urls=2)
    assert [part.urls for part in parts] == [2, 1]
    assert [part.lastmod for part in parts] == ["2024-03-01", "2023-01-01T10:00:00Z"]
    read = [entry.loc for part in parts for entry in _read(part.body)]
    assert read == [e.loc for e in ENTRIES]


def test_a_signmap_larger_than_the_byte_limit_is_split_too() -> None:
    whole = render_signmap(ENTRIES)[0].body
    parts = render_signmap(ENTRIES, max_bytes=len(whole) - 1)
    assert len(parts) == 2
    assert all(len(part.body) < len(whole) for part in parts)
    assert [e.loc for part in parts for e in _read(part.body)] == [e.loc for e in ENTRIES]


def test_the_sitemaps_org_limit_of_50000_urls_is_the_default() -> None:
    entries = [
        SitemapEntry(f"https://data.example.org/d/{n}", None, ())
        for n in range(MAX_SITEMAP_URLS + 1)
    ]
    parts = render_signmap(entries)
    assert [part.urls for part in parts] == [MAX_SITEMAP_URLS, 1]
    assert len(_read(parts[0].body)) == MAX_SITEMAP_URLS


def test_the_index_of_parts_reads_back_with_relative_locations_resolved() -> None:
    body = render_signmap_index([("signmap-00001.xml", "2024-03-01"), ("signmap-00002.xml", None)])
    parsed = parse_sitemap(body, sitemap_url=SIGNMAP_URL)
    assert parsed.kind == "sitemapindex"
    assert [(e.loc, e.lastmod) for e in parsed.entries] == [
        ("https://aggregator.example/views/data.example.org/signmap-00001.xml", "2024-03-01"),
        ("https://aggregator.example/views/data.example.org/signmap-00002.xml", None),
    ]


def test_latest_lastmod_compares_dates_not_strings() -> None:
    assert latest_lastmod(["2024-03-01", "2024-02-29T23:00:00-02:00", None, "soon"]) == (
        "2024-02-29T23:00:00-02:00"
    )
    assert latest_lastmod([None, "not a date"]) is None


# --- the stage ------------------------------------------------------------------------------


def _wiring(tmp_path: Path, store: MemoryStore) -> Wiring:
    return Wiring(
        store=store,
        catalog=SqliteCatalog(tmp_path / "catalog.sqlite"),
        queue=InProcessQueue(),
        fetcher=NoFetcher(),
        clock=SystemClock(),
    )


def _golden() -> tuple[dict[str, Any], dict[str, Any]]:
    record = json.loads((GOLDEN / "landing.record.jsonld").read_text(encoding="utf-8"))
    report = json.loads((GOLDEN / "landing.report.json").read_text(encoding="utf-8"))
    return record, report


def _variant(name: str, **report_changes: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    record, report = _golden()
    record = copy.deepcopy(record)
    record["@id"] = f"https://doi.org/10.5072/{name}"
    record["schema:url"] = f"https://data.example.org/datasets/{name}"
    record["schema:subjectOf"]["@id"] = f"https://data.example.org/metadata/{name}"
    record["schema:subjectOf"]["schema:sdDatePublished"] = "2024-01-01"
    report = dict(report, record_id=f"https://data.example.org/metadata/{name}")
    report["provenance"] = dict(report["provenance"], url=record["schema:url"], links=[])
    report.update(report_changes)
    return record, report


def _store(
    wiring: Wiring,
    source: str,
    record: dict[str, Any] | None,
    report: dict[str, Any],
) -> str:
    """Store a harvested record (None: only its report) as the indexer does, with its
    catalogue entry; return the record's key."""
    rkey = record_hash(report["record_id"])
    report_key = record_report_key(source, rkey)
    wiring.store.put(report_key, json.dumps(report).encode())
    key = normalised_record_key(source, rkey)
    if record is not None:
        wiring.store.put(key, json.dumps(record).encode())
    wiring.catalog.put_record(
        CatalogEntry(
            record_id=report["record_id"],
            resource_id=report["record_id"],
            source=source,
            url=report["provenance"]["url"],
            title=None,
            pattern="embedded-script",
            valid=bool(report.get("valid")),
            conformance=None,
            date_modified=None,
            sd_date_published=None,
            content_hash=rkey,
            record_key=key,
            report_key=report_key,
            run_id="r1",
            harvested_at="2024-06-01T00:00:00+00:00",
            withdrawn_at=report.get("withdrawn_at"),
        )
    )
    return key


def _harvested(tmp_path: Path) -> tuple[MemoryStore, Wiring, list[str]]:
    store = MemoryStore()
    wiring = _wiring(tmp_path, store)
    keys = [
        _store(wiring, SOURCE, *_golden()),
        _store(wiring, SOURCE, *_variant("zeta")),
        _store(wiring, SOURCE, *_variant("alpha")),
        _store(wiring, SOURCE, *_variant("broken", valid=False)),
        _store(wiring, SOURCE, *_variant("gone", withdrawn_at="2024-05-01T00:00:00Z")),
        _store(wiring, "other.example.org", *_variant("elsewhere")),
    ]
    _store(wiring, SOURCE, None, _variant("no-record")[1])
    return store, wiring, keys


def test_the_source_signmap_lists_its_valid_records_with_their_views_links(
    tmp_path: Path,
) -> None:
    store, wiring, keys = _harvested(tmp_path)
    views = {key: build_views(wiring, key) for key in keys}
    # When the Signmap of the source is built
    key = build_source_signmap(wiring, SOURCE)
    # Then it is at the documented key, and our sitemap reader finds the valid records only,
    # sorted by landing page
    assert key == signmap_key(SOURCE) == f"views/{SOURCE}/signmap.xml"
    assert store.content_types[key] == "application/xml"
    entries = _read(store.objects[key])
    assert [e.loc for e in entries] == [
        "https://data.example.org/datasets/alpha",
        "https://data.example.org/datasets/fjord-ctd",
        "https://data.example.org/datasets/zeta",
    ]
    assert [e.lastmod for e in entries] == ["2024-02-10", "2024-03-01", "2024-02-10"]
    # with the same typed links, in the same order, as the record's linkset (those about its
    # landing page)
    for entry, record_key_ in zip(entries, [keys[2], keys[0], keys[1]], strict=True):
        linkset = store.objects[views[record_key_]["linkset"]]
        about_page = [
            (link.rel, link.href, link.type, link.profile)
            for link in parse_linkset_text(linkset, base=entry.loc).links
            if link.anchor == entry.loc
        ]
        assert _links(entry) == about_page
        assert ("describedby", "https://w3id.org/cdif/core/1.0") in {
            (rel, profile) for rel, _, _, profile in about_page
        }


def test_a_second_build_of_an_unchanged_source_writes_nothing(tmp_path: Path) -> None:
    store, wiring, _ = _harvested(tmp_path)
    build_source_signmap(wiring, SOURCE)
    store.puts.clear()
    build_source_signmap(wiring, SOURCE)
    assert store.puts == []


def test_a_large_source_gets_an_index_of_parts(tmp_path: Path) -> None:
    store, wiring, _ = _harvested(tmp_path)
    key = build_source_signmap(wiring, SOURCE, max_urls=2)
    index = parse_sitemap(store.objects[key], sitemap_url=SIGNMAP_URL)
    assert index.kind == "sitemapindex"
    assert [e.loc for e in index.entries] == [
        "https://aggregator.example/views/data.example.org/signmap-00001.xml",
        "https://aggregator.example/views/data.example.org/signmap-00002.xml",
    ]
    assert [e.lastmod for e in index.entries] == ["2024-03-01", "2024-02-10"]
    parts = [store.objects[signmap_part_key(SOURCE, n)] for n in (1, 2)]
    assert signmap_part_key(SOURCE, 1) == f"views/{SOURCE}/signmap-00001.xml"
    locs = [e.loc for part in parts for e in _read(part)]
    assert locs == [
        "https://data.example.org/datasets/alpha",
        "https://data.example.org/datasets/fjord-ctd",
        "https://data.example.org/datasets/zeta",
    ]
    # with the public URL of the store given, the index names the parts absolutely
    key = build_source_signmap(wiring, SOURCE, max_urls=2, base_url="https://cdn.example/h/")
    index = parse_sitemap(store.objects[key], sitemap_url="https://elsewhere.example/x.xml")
    assert index.entries[0].loc == f"https://cdn.example/h/views/{SOURCE}/signmap-00001.xml"


def test_the_parts_of_a_large_signmap_are_written_as_they_are_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (a million records make some twenty parts of up to 50 MB: they are not all held)
    store, wiring, _ = _harvested(tmp_path)
    made: list[int] = []
    made_when_put: dict[str, int] = {}
    iter_parts = crosswalk_stage.iter_signmap

    def counted(*args: Any, **kwargs: Any) -> Any:
        for part in iter_parts(*args, **kwargs):
            made.append(part.urls)
            yield part

    put = store.put

    def noted(key: str, body: bytes, **kwargs: Any) -> None:
        made_when_put[key] = len(made)
        put(key, body, **kwargs)

    monkeypatch.setattr(crosswalk_stage, "iter_signmap", counted)
    monkeypatch.setattr(store, "put", noted)
    build_source_signmap(wiring, SOURCE, max_urls=1)
    parts = [signmap_part_key(SOURCE, number) for number in (1, 2, 3)]
    # the first part is written once the second says there is an index; each later one as
    # soon as it is made
    assert [made_when_put[key] for key in parts] == [2, 2, 3]
    assert made == [1, 1, 1] and made_when_put[signmap_key(SOURCE)] == 3
