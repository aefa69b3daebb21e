"""The Signposting views checked row by row against CDIF discoverability Appendix 3, against
RFC 9264 section 4.2, and read back with the project's own Link parsers."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from cdif_harvester.domain.resolution.weblinks import (
    parse_html_head,
    parse_link_header,
    parse_linkset_json,
    parse_linkset_text,
)
from cdif_harvester.domain.views.signposting import (
    SIGNPOSTING_RELATIONS,
    html_link_elements,
    landing_page,
    link_header,
    linkset_json,
    linkset_text,
    record_links,
    signposting_links,
)
from cdif_harvester.model import TypedLink

GOLDEN = Path(__file__).parent / "golden" / "crosswalk"
SCHEMA = json.loads((GOLDEN / "rfc9264-linkset.schema.json").read_text(encoding="utf-8"))
LINKSET_VALIDATOR = Draft202012Validator(SCHEMA)

CONTEXT = {
    "schema": "http://schema.org/",
    "dcterms": "http://purl.org/dc/terms/",
    "dcat": "http://www.w3.org/ns/dcat#",
    "ex": "https://x.example/",
}
RESOURCE = "https://doi.org/10.5072/x"
METADATA = "https://x.example/metadata/x"
LANDING = "https://x.example/datasets/x"

Link = tuple[str, str, str | None, str | None, str | None]  # rel, href, type, profile, anchor


@dataclass(frozen=True)
class Row:
    """One Appendix 3 row: the record keys it reads and the links it must give."""

    label: str
    source: dict[str, Any]
    links: tuple[Link, ...]


ROWS = [
    Row(
        "author",
        {
            "schema:creator": {
                "@list": [
                    {"@id": "https://orcid.org/0000-0002-1825-0097", "schema:name": "A"},
                    {"schema:name": "B, who has no @id"},
                    {"@id": "ex:people/c", "schema:name": "C"},
                ]
            }
        },
        (
            ("author", "https://orcid.org/0000-0002-1825-0097", None, None, None),
            ("author", "https://x.example/people/c", None, None, None),
        ),
    ),
    Row("cite-as", {"@id": RESOURCE}, (("cite-as", RESOURCE, None, None, None),)),
    Row(
        "describedby",
        {
            "schema:subjectOf": {
                "@id": METADATA,
                "dcterms:conformsTo": [
                    {"@id": "https://w3id.org/cdif/bbr/metadata/cdifProperties/cdifCore"},
                    {"@id": "https://w3id.org/cdif/core/1.0"},
                ],
            }
        },
        (("describedby", METADATA, None, "https://w3id.org/cdif/core/1.0", None),),
    ),
    Row(
        "describes",
        {"@id": RESOURCE, "schema:subjectOf": {"@id": METADATA}},
        (("describes", RESOURCE, None, None, METADATA),),
    ),
    Row(
        "type (@type)",
        {"@type": ["schema:Dataset"]},
        (("type", "https://schema.org/Dataset", None, None, None),),
    ),
    Row(
        "type (additionalType)",
        {
            "schema:additionalType": [
                "dcat:Dataset",
                "plain words are no IRI",
                {"schema:name": "Observational", "schema:identifier": "https://v.example/obs"},
            ]
        },
        (
            ("type", "http://www.w3.org/ns/dcat#Dataset", None, None, None),
            ("type", "https://v.example/obs", None, None, None),
        ),
    ),
    Row(
        "license",
        {
            "schema:license": [
                "https://spdx.org/licenses/CC0-1.0",
                {
                    "schema:name": "CC BY",
                    "schema:url": "https://creativecommons.org/licenses/by/4.0/",
                },
                "Free to use with attribution.",
            ]
        },
        (
            ("license", "https://spdx.org/licenses/CC0-1.0", None, None, None),
            ("license", "https://creativecommons.org/licenses/by/4.0/", None, None, None),
        ),
    ),
    Row(
        "item",
        {
            "schema:relatedLink": [
                {
                    "schema:linkRelationship": "hasPart",
                    "schema:target": {
                        "schema:url": "https://x.example/files/x.csv",
                        "schema:encodingFormat": ["text/csv"],
                    },
                }
            ]
        },
        (("item", "https://x.example/files/x.csv", "text/csv", None, None),),
    ),
    Row(
        "collection",
        {
            "schema:relatedLink": [
                {
                    "schema:linkRelationship": {"schema:name": "IsPartOf"},
                    "schema:target": {
                        "schema:url": "https://x.example/collections/all",
                        "schema:contentType": ["Collection"],
                    },
                }
            ]
        },
        (("collection", "https://x.example/collections/all", None, None, None),),
    ),
]


def _record(*sources: dict[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = {"@context": CONTEXT}
    for source in sources:
        for key, value in copy.deepcopy(source).items():
            if isinstance(record.get(key), dict) and isinstance(value, dict):
                record[key].update(value)  # two rows both say something of subjectOf
            else:
                record[key] = value
    return record


def _tuples(links: list[TypedLink]) -> list[Link]:
    return [(link.rel, link.href, link.type, link.profile, link.anchor) for link in links]


def test_every_relation_of_appendix_3_has_a_row() -> None:
    assert {row.links[0][0] for row in ROWS} == set(SIGNPOSTING_RELATIONS)


@pytest.mark.parametrize("row", ROWS, ids=[row.label for row in ROWS])
def test_the_row_gives_its_links_from_its_source(row: Row) -> None:
    produced = _tuples(record_links(_record(row.source)))
    relation = row.links[0][0]
    assert [link for link in produced if link[0] == relation] == list(row.links)
    assert all(link.found_in == "record" for link in record_links(_record(row.source)))


@pytest.mark.parametrize("row", ROWS, ids=[row.label for row in ROWS])
def test_the_row_gives_no_link_when_its_source_is_missing(row: Row) -> None:
    everything = _record(*(other.source for other in ROWS))
    for key in row.source:
        everything.pop(key)
    produced = _tuples(record_links(everything))
    for link in row.links:
        assert link not in produced
    assert len(produced) >= 4  # the other rows still give theirs


def test_related_links_of_other_kinds_and_bare_ids_give_nothing() -> None:
    record = _record(
        {
            "@id": "_:b0",
            "schema:relatedLink": [
                {
                    "schema:linkRelationship": "documentation",
                    "schema:target": {"schema:url": LANDING},
                }
            ],
            "schema:license": [{"@id": "_:b1"}],
        }
    )
    assert record_links(record) == []


def test_bare_references_are_read_as_the_nodes_they_name() -> None:
    # (the nodes by id are indexed only when a reference asks for one)
    role = "https://x.example/roles/1"
    target = "https://x.example/targets/1"
    record = _record(
        {
            "schema:relatedLink": [{"@id": role}],
            "schema:hasPart": [
                {
                    "@id": role,
                    "schema:linkRelationship": "hasPart",
                    "schema:target": {"@id": target},
                },
                {
                    "@id": target,
                    "schema:url": "https://x.example/files/x.csv",
                    "schema:encodingFormat": ["text/csv"],
                },
            ],
        }
    )
    assert _tuples(record_links(record)) == [
        ("item", "https://x.example/files/x.csv", "text/csv", None, None)
    ]


# --- merging with what the resolver saw -----------------------------------------------------


def _full() -> dict[str, Any]:
    return _record(*(row.source for row in ROWS), {"schema:url": LANDING})


def test_landing_page_prefers_the_records_url_then_the_harvested_page() -> None:
    assert landing_page(_full(), "https://x.example/other") == LANDING
    bare = _record({"@id": RESOURCE})
    assert landing_page(bare, "https://x.example/page") == "https://x.example/page"
    assert landing_page(bare, "https://x.example/md.json", harvested_is_page=False) == RESOURCE
    assert landing_page(_record({"@id": "urn:x:1"}), None) is None


def test_seen_links_keep_their_context_and_merge_with_the_records() -> None:
    seen = [
        # seen at the landing page (anchor written differently): about the landing page
        TypedLink(RESOURCE, "cite-as", anchor="HTTPS://X.example:443/datasets/x", found_in="html"),
        # the record gives a profile, the page a type: two links, each as published
        TypedLink(METADATA, "describedby", type="application/ld+json", found_in="http-header"),
        # about another resource: keeps its anchor
        TypedLink("https://x.example/a", "item", anchor="https://x.example/b", found_in="linkset"),
        # not Signposting: left out
        TypedLink("https://x.example/md.xml", "meta", scheme="DC", found_in="html"),
        TypedLink(RESOURCE, "describes", reverse=True, found_in="html"),
        TypedLink("https://x.example/style.css", "stylesheet", found_in="html"),
        # the publisher's linkset: kept
        TypedLink("https://x.example/ls.json", "linkset", found_in="http-header"),
    ]
    links = signposting_links(_full(), seen, context=LANDING)
    assert _tuples(links)[:4] == [
        ("cite-as", RESOURCE, None, None, None),
        ("describedby", METADATA, "application/ld+json", None, None),
        ("item", "https://x.example/a", None, None, "https://x.example/b"),
        ("linkset", "https://x.example/ls.json", None, None, None),
    ]
    assert [link.found_in for link in links[:4]] == [
        "html",
        "http-header",
        "linkset",
        "http-header",
    ]
    assert ("describedby", METADATA, None, "https://w3id.org/cdif/core/1.0", None) in _tuples(links)
    rels = [link.rel for link in links]
    assert "meta" not in rels and "stylesheet" not in rels
    assert rels.count("cite-as") == 1 and rels.count("describedby") == 2
    assert not any(link.reverse for link in links)
    # every Appendix 3 relation is there
    assert set(SIGNPOSTING_RELATIONS) <= set(rels)


def test_links_seen_on_a_metadata_document_stay_anchored_there() -> None:
    seen = [TypedLink(RESOURCE, "describes", anchor="https://x.example/md.json")]
    links = signposting_links(_record({"@id": RESOURCE}), seen, context=LANDING)
    assert _tuples(links)[0] == ("describes", RESOURCE, None, None, "https://x.example/md.json")
    # ... unless the caller says that URL is the resource's page
    links = signposting_links(
        _record({"@id": RESOURCE}), seen, context=LANDING, aliases=["https://x.example/md.json"]
    )
    assert _tuples(links)[0] == ("describes", RESOURCE, None, None, None)


def test_invented_identifiers_give_no_links() -> None:
    record = _record(
        {"@id": f"{LANDING}#resource-1", "schema:subjectOf": {"@id": f"{LANDING}#record"}}
    )
    invented = {f"{LANDING}#resource-1", f"{LANDING}#record"}
    assert record_links(record, invented=invented) == []
    assert {link.rel for link in record_links(record)} == {"cite-as", "describedby", "describes"}


# --- the serialisations ------------------------------------------------------------------


def _links() -> list[TypedLink]:
    seen = [
        TypedLink(
            "https://x.example/files/x.nc",
            "item",
            type="application/x-netcdf",
            title="Données CTD",
            hreflang="no",
            found_in="html",
        ),
        TypedLink(
            "https://x.example/md.json",
            "describedby",
            type="application/ld+json",
            profile="https://w3id.org/cdif/core/1.0 https://w3id.org/cdif/discovery/1.0",
            title='say "hi"',
        ),
        TypedLink("https://x.example/a", "item", anchor="https://x.example/b"),
    ]
    return signposting_links(_full(), seen, context=LANDING)


def _comparable(links: Any, default_anchor: str | None) -> list[tuple[Any, ...]]:
    return [
        (k.rel, k.href, k.type, k.profile, k.anchor or default_anchor, k.title, k.hreflang)
        for k in links
    ]


def test_the_linkset_json_has_the_structure_of_rfc_9264() -> None:
    document = linkset_json(LANDING, _links())
    errors = sorted(LINKSET_VALIDATOR.iter_errors(document), key=str)
    assert errors == []
    # one context object per anchor
    anchors = [context["anchor"] for context in document["linkset"]]
    assert anchors == [LANDING, "https://x.example/b", METADATA]


@pytest.mark.parametrize(
    "broken",
    [
        {"linkset": [{"anchor": LANDING, "item": {"href": "https://x.example/a"}}]},
        {
            "linkset": [
                {"anchor": LANDING, "item": [{"rel": "item", "href": "https://x.example/a"}]}
            ]
        },
        {"linkset": [{"anchor": LANDING, "item": [{"type": "text/csv"}]}]},
        {
            "linkset": [
                {"anchor": LANDING, "item": [{"href": "https://x.example/a", "profile": "p"}]}
            ]
        },
        {"linkset": [{"anchor": LANDING, "Not A Relation": [{"href": "https://x.example/a"}]}]},
        {"linkset": [{"item": [{"href": "https://x.example/a"}]}]},
        {"linkset": [], "extra": 1},
        {"linkset": [{"anchor": "no uri", "item": [{"href": "https://x.example/a"}]}]},
        {
            "linkset": [
                {"anchor": LANDING, "item": [{"href": "https://x.example/a", "hreflang": "en"}]}
            ]
        },
    ],
    ids=[
        "targets-not-array",
        "rel-as-target-attribute",
        "no-href",
        "extension-attribute-not-array",
        "bad-relation-name",
        "no-anchor",
        "second-top-level-member",
        "anchor-not-a-uri",
        "hreflang-not-array",
    ],
)
def test_the_rfc_9264_check_refuses_what_the_rfc_forbids(broken: dict[str, Any]) -> None:
    assert not LINKSET_VALIDATOR.is_valid(broken)


def test_the_golden_linkset_json_is_valid_too() -> None:
    document = json.loads((GOLDEN / "landing.linkset.json").read_text(encoding="utf-8"))
    assert list(LINKSET_VALIDATOR.iter_errors(document)) == []


def test_linkset_json_reads_back_into_the_same_links() -> None:
    links = _links()
    body = json.dumps(linkset_json(LANDING, links))
    parsed = parse_linkset_json(body, base=LANDING)
    assert parsed.repairs == ()
    # the reader lists links by context object, then by relation: compare as sets
    assert sorted(_comparable(parsed.links, LANDING)) == sorted(_comparable(links, LANDING))


def test_linkset_text_reads_back_into_the_same_links() -> None:
    links = _links()
    parsed = parse_linkset_text(linkset_text(LANDING, links), base="https://elsewhere.example/")
    assert parsed.repairs == ()
    assert _comparable(parsed.links, None) == _comparable(links, LANDING)


def test_the_link_header_reads_back_into_the_same_links() -> None:
    links = _links()
    header = link_header(links)
    assert "\n" not in header and "\r" not in header
    assert "title*=UTF-8''Donn%C3%A9es%20CTD" in header  # non-ASCII only as title*
    parsed = parse_link_header([header], base=LANDING)
    assert parsed.repairs == ()
    assert _comparable(parsed.links, None) == _comparable(links, None)


def test_the_html_link_elements_read_back_into_the_unanchored_links() -> None:
    links = _links()
    page = f"<html><head>{html_link_elements(links)}</head><body></body></html>"
    parsed = parse_html_head(page.encode("utf-8"), base=LANDING)
    expected = [link for link in links if link.anchor is None]
    assert len(expected) < len(links)  # the anchored ones cannot be said in HTML
    assert _comparable(parsed.links, None) == _comparable(expected, None)


def test_unsafe_characters_never_break_a_header_or_the_markup() -> None:
    link = TypedLink(
        'https://x.example/a b/é<>"',
        "item",
        type='text/"csv"',
        title="line\r\nInjected: yes",
    )
    header = link_header([link])
    assert header.startswith('<https://x.example/a%20b/%C3%A9%3C%3E%22> ; rel="item"')
    assert "\r" not in header and "\n" not in header
    (back,) = parse_link_header([header], base=LANDING).links
    assert back.type == 'text/"csv"' and back.title == "lineInjected: yes"
    markup = html_link_elements([link])
    assert "<link " in markup and markup.count("<") == 1
    assert html_link_elements([replace(link, anchor="https://x.example/z")]) == ""
