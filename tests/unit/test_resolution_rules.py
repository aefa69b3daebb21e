"""The resolver's pure rules: profiles, media types, ranking, merging, anchors, claims."""

from __future__ import annotations

import pytest

from cdif_harvester.domain.resolution.rules import (
    MediaType,
    anchored_to,
    cite_as_warning,
    claimed_resources,
    describedby_tiers,
    forward_meta_links,
    is_cdif_profile,
    is_jsonld_type,
    is_list_profile,
    merge_links,
    normalise_url,
    parse_media_type,
    reverse_claims,
    same_origin,
)
from cdif_harvester.model import TypedLink

E = "https://e.org"


def link(href: str, rel: str = "describedby", **fields: object) -> TypedLink:
    return TypedLink(href=href, rel=rel, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, MediaType("")),
        ("", MediaType("")),
        ("Application/LD+JSON", MediaType("application/ld+json")),
        ('application/ld+json; profile="CDIF1.0"', MediaType("application/ld+json", "CDIF1.0")),
        (
            "application/ld+json;profile='CDIF-list-1.0'",
            MediaType("application/ld+json", "CDIF-list-1.0"),
        ),
        ("text/html; charset=utf-8", MediaType("text/html")),
        (
            'application/ld+json; charset=utf-8; PROFILE="a b"',
            MediaType("application/ld+json", "a b"),
        ),
    ],
)
def test_parse_media_type(value: str | None, expected: MediaType) -> None:
    assert parse_media_type(value) == expected


@pytest.mark.parametrize(
    ("profile", "cdif", "listing"),
    [
        ("CDIF1.0", True, False),
        ("cdif1.1", True, False),
        ("https://w3id.org/cdif/core/1.0", True, False),
        ("https://w3id.org/cdif/core/1.1/", True, False),
        ("http://w3id.org/cdif/discovery/1.0", True, False),
        ("CDIF-list-1.0", False, True),
        ("https://schema.org/ https://w3id.org/cdif/core/1.0", True, False),
        ("https://example.org/cdif/core/1.0", False, False),
        ("DCAT", False, False),
        (None, False, False),
    ],
)
def test_profiles(profile: str | None, cdif: bool, listing: bool) -> None:
    assert (is_cdif_profile(profile), is_list_profile(profile)) == (cdif, listing)


def test_jsonld_types() -> None:
    assert is_jsonld_type("application/ld+json; profile=x")
    assert is_jsonld_type("application/json")
    assert not is_jsonld_type("application/xml")
    assert not is_jsonld_type(None)


@pytest.mark.parametrize(
    ("url", "normal"),
    [
        ("HTTP://E.org:80/a#frag", "http://e.org/a"),
        ("https://e.org:443", "https://e.org/"),
        ("https://e.org:8443/a?q=1", "https://e.org:8443/a?q=1"),
        ("https://e.org/a/", "https://e.org/a/"),
    ],
)
def test_normalise_url(url: str, normal: str) -> None:
    assert normalise_url(url) == normal


def test_same_origin() -> None:
    assert same_origin("https://E.org/a", "https://e.org:443/b")
    assert not same_origin("https://e.org/a", "http://e.org/a")
    assert not same_origin("http://127.0.0.1:1/a", "http://127.0.0.1:2/a")


def test_describedby_tiers_rank_cdif_then_jsonld_then_untyped_and_drop_other_types() -> None:
    links = [
        link(f"{E}/x.xml", type="application/xml"),
        link(f"{E}/u"),
        link(f"{E}/j.json", type="application/ld+json"),
        link(f"{E}/c.json", type="application/ld+json", profile="https://w3id.org/cdif/core/1.0"),
        link(f"{E}/t.json", type='application/ld+json;profile="CDIF1.0"'),
        link(f"{E}/r", reverse=True),
        link(f"{E}/cite", rel="cite-as"),
    ]
    tiers = describedby_tiers(links)
    assert [[item.href for item in tier] for tier in tiers] == [
        [f"{E}/c.json", f"{E}/t.json"],
        [f"{E}/j.json"],
        [f"{E}/u"],
    ]


def test_duplicates_are_merged_and_attributes_filled() -> None:
    merged = merge_links(
        [
            link(f"{E}/m.json", type="application/ld+json", found_in="http-header"),
            link(f"{E}:443/m.json", type="Application/LD+JSON", title="Metadata"),
            link(f"{E}/m.json", rel="cite-as"),
            link(f"{E}/other", rel="stylesheet"),
        ]
    )
    assert [(item.rel, item.href, item.type, item.title) for item in merged] == [
        ("describedby", f"{E}/m.json", "application/ld+json", "Metadata"),
        ("cite-as", f"{E}/m.json", None, None),
    ]
    assert merged[0].found_in == "http-header"


def test_forward_and_reverse_meta_links() -> None:
    links = [
        link(f"{E}/m", rel="meta", scheme="DC"),
        link(f"{E}/resource", rel="meta", reverse=True),
        link(f"{E}/described", rel="describes"),
    ]
    assert [item.href for item in forward_meta_links(links)] == [f"{E}/m"]
    assert reverse_claims(links) == [f"{E}/resource", f"{E}/described"]


def test_anchored_to_keeps_only_links_of_the_resource_and_its_redirects() -> None:
    links = [
        link(f"{E}/a.json", anchor=f"{E}/landing"),
        link(f"{E}/b.json", anchor="HTTPS://e.org/doi-landing"),
        link(f"{E}/c.json", anchor=f"{E}/elsewhere"),
        link(f"{E}/d.json"),
    ]
    kept, foreign = anchored_to(links, [f"{E}/landing", f"{E}/doi-landing"])
    assert [item.href for item in kept] == [f"{E}/a.json", f"{E}/b.json"]
    assert foreign == 2


def test_cite_as_warning() -> None:
    same = [
        link("https://doi.org/10.1/a", rel="cite-as"),
        link("https://doi.org/10.1/a#", rel="cite-as"),
    ]
    assert cite_as_warning(same) is None
    two = [*same, link("https://doi.org/10.1/b", rel="cite-as")]
    assert cite_as_warning(two) == (
        "conflicting cite-as links: https://doi.org/10.1/a, https://doi.org/10.1/b"
    )


def test_claimed_resources_of_both_shapes() -> None:
    resource_first = {
        "@type": "Dataset",
        "@id": "https://doi.org/10.1/x",
        "url": "https://repo.org/x",
        "subjectOf": {"@id": "https://repo.org/x/meta"},
    }
    assert claimed_resources(resource_first) == ["https://repo.org/x", "https://doi.org/10.1/x"]
    record_first = {
        "@type": "DigitalDocument",
        "@id": "https://meta.org/r",
        "about": {"@type": ["schema:Dataset"], "@id": "https://repo.org/y"},
    }
    assert claimed_resources(record_first) == ["https://repo.org/y"]
    graph = {"@graph": [{"@type": "Dataset", "@id": "urn:x", "url": {"@id": "https://r.org/z"}}]}
    assert claimed_resources(graph) == ["https://r.org/z"]
    assert claimed_resources({"@type": "WebPage", "url": "https://r.org/"}) == []
    assert claimed_resources("not a document") == []
