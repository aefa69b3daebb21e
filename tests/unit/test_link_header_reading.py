"""Reading RFC 8288 Link headers and HTML <link> elements as publishers write them: relation
types, several rels, typed and profiled links, malformed parameters, and many links."""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

import pytest

from cdif_harvester.domain.resolution import weblinks
from cdif_harvester.domain.resolution.weblinks import parse_html_head, parse_link_header

BASE = "https://repo.test/page"


def _links(header: str) -> list[tuple[str, str, str | None, str | None]]:
    return [
        (link.href, link.rel, link.type, link.profile)
        for link in parse_link_header([header], BASE).links
    ]


def _html(link_elements: str) -> list[tuple[str, str, str | None, str | None]]:
    page = f"<html><head>{link_elements}</head><body></body></html>".encode()
    return [
        (link.href, link.rel, link.type, link.profile) for link in parse_html_head(page, BASE).links
    ]


META = "https://repo.test/meta.jsonld"


@pytest.mark.parametrize(
    "header",
    [
        '<a.csv>; rel=item; type="text/csv, <meta.jsonld>; rel=describedby; '
        'type="application/ld+json"',
        "<a.csv>; rel=item; type='text/csv, <meta.jsonld>; rel=describedby; "
        "type='application/ld+json'",
        '<a.csv>; rel="item, <meta.jsonld>; rel="describedby"; type="application/ld+json"',
        '<a.csv>; rel=item; title="unclosed, <meta.jsonld>, '
        '<meta.jsonld>; rel=describedby; type="application/ld+json"',
    ],
    ids=["type-double", "type-single", "rel", "title-then-bare-link"],
)
def test_an_unclosed_quote_keeps_the_links_after_it(header: str) -> None:
    parsed = parse_link_header([header], BASE)
    described = [link for link in parsed.links if link.rel == "describedby"]
    assert [(link.href, link.type) for link in described] == [(META, "application/ld+json")]
    assert any("unterminated quote" in note for note in parsed.repairs), parsed.repairs
    # the link with the broken parameter is kept too
    assert any(link.href == "https://repo.test/a.csv" for link in parsed.links)


def test_a_quoted_value_holding_a_comma_and_brackets_is_not_cut() -> None:
    header = '<a>; rel=item; title="see <b>, and <c> too"; type="text/csv", <meta.jsonld>; rel=x'
    links = parse_link_header([header], BASE).links
    assert links[0].title == "see <b>, and <c> too"
    assert links[0].type == "text/csv"
    assert [link.href for link in links] == ["https://repo.test/a", META]


def test_an_unquoted_type_keeps_its_link_and_the_others() -> None:
    header = (
        "<a.csv>; rel=item; type=text/csv, <meta.jsonld>; rel=describedby; type=application/ld+json"
    )
    assert _links(header) == [
        ("https://repo.test/a.csv", "item", "text/csv", None),
        (META, "describedby", "application/ld+json", None),
    ]


def test_relation_types_registered_any_case_extension_as_written() -> None:
    header = (
        '<meta.jsonld>; rel="DescribedBy https://schema.org/subjectOf CITE-AS", '
        '<x>; rel="HTTPS://Example.org/Rel"'
    )
    assert [rel for _href, rel, _t, _p in _links(header)] == [
        "describedby",
        "https://schema.org/subjectOf",
        "cite-as",
        "HTTPS://Example.org/Rel",
    ]
    html = '<link rel="DescribedBy https://schema.org/subjectOf" href="meta.jsonld">'
    assert [rel for _href, rel, _t, _p in _html(html)] == [
        "describedby",
        "https://schema.org/subjectOf",
    ]


def test_several_rels_give_one_link_each_with_the_same_attributes() -> None:
    header = '<meta.jsonld>; rel="describedby cite-as"; type="application/ld+json"'
    expected = [
        (META, "describedby", "application/ld+json", None),
        (META, "cite-as", "application/ld+json", None),
    ]
    assert _links(header) == expected
    html = '<link rel="describedby cite-as" type="application/ld+json" href="/meta.jsonld">'
    assert _html(html) == expected


def test_a_type_with_parameters_is_kept_as_published() -> None:
    header = '<d.csv>; rel=item; type="text/csv;charset=UTF-8"'
    assert _links(header)[0][2] == "text/csv;charset=UTF-8"
    html = '<link rel="item" type="text/csv;charset=UTF-8" href="d.csv">'
    assert _html(html)[0][2] == "text/csv;charset=UTF-8"


def test_several_profiles_are_kept_as_published() -> None:
    profiles = "https://w3id.org/cdif/core/1.1 https://w3id.org/cdif/discovery/1.1"
    header = f'<meta.jsonld>; rel=describedby; profile="{profiles}"'
    assert _links(header)[0][3] == profiles
    html = f'<link rel="describedby" profile="{profiles}" href="meta.jsonld">'
    assert _html(html)[0][3] == profiles


def _header(count: int, *, meta_at: int | None = None) -> str:
    values = [f'<https://repo.test/item/{n}>; rel="item"' for n in range(count)]
    if meta_at is not None:
        values.insert(meta_at, '<meta.jsonld>; rel="describedby"')
    return ", ".join(values)


def test_the_first_thousand_link_values_are_kept_and_the_rest_counted() -> None:
    cap = weblinks.MAX_HEADER_LINK_VALUES
    parsed = parse_link_header([_header(cap + 250, meta_at=3)], BASE)
    assert len(parsed.links) == cap
    assert parsed.links[3].rel == "describedby"
    assert f"link-header: the first {cap} link-values kept; 251 more read and dropped" in (
        parsed.repairs
    )
    # the cap holds per response, over several header lines
    split = parse_link_header([_header(cap - 10), _header(30)], BASE)
    assert len(split.links) == cap
    assert any("20 more read and dropped" in note for note in split.repairs)
    # under the cap nothing is said
    assert parse_link_header([_header(cap)], BASE).repairs == ()


def test_notes_of_dropped_link_values_are_not_listed() -> None:
    cap = weblinks.MAX_HEADER_LINK_VALUES
    header = _header(cap) + ", " + ", ".join(["<x>; rel=item; =bad"] * 50)
    parsed = parse_link_header([header], BASE)
    assert not any("unparseable" in note for note in parsed.repairs), parsed.repairs


def _lines_run(header: str) -> int:
    """How many lines of the reader run to read ``header``: a count of work, not a time."""
    count = 0
    source = weblinks.__file__

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if frame.f_code.co_filename != source:
            return None
        count += 1
        return trace

    sys.settrace(trace)
    try:
        parse_link_header([header], BASE)
    finally:
        sys.settrace(None)
    return count


def test_a_header_of_100000_links_costs_what_its_first_10000_cost() -> None:
    ten_thousand = _lines_run(_header(10_000))
    hundred_thousand = _lines_run(_header(100_000))
    # Past MAX_LINK_VALUES the rest of the header is never scanned.
    assert hundred_thousand <= ten_thousand * 1.01
    # And up to it reading is linear: ten times the links, about ten times the work.
    thousand = _lines_run(_header(1_000))
    assert ten_thousand <= thousand * 10 * 1.1


def test_notes_of_kept_link_values_are_listed_when_others_are_dropped() -> None:
    cap = weblinks.MAX_HEADER_LINK_VALUES
    header = "<https://other.test/x>; title=norel, " + _header(cap)
    parsed = parse_link_header([header], BASE)
    assert any("has no rel" in note for note in parsed.repairs), parsed.repairs
