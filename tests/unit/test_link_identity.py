"""Which links are one link (relation, target with its fragment, type, profile, anchor), and
which source wins when a page's sources disagree (HTTP header over HTML over linkset)."""

from __future__ import annotations

from cdif_harvester.domain.resolution.rules import (
    describedby_tiers,
    link_attributes,
    link_identity,
    linkset_forms,
    merge_links,
    settle_links,
)
from cdif_harvester.model import TypedLink

E = "https://e.org"
PAGE = f"{E}/landing"


def link(href: str, rel: str = "describedby", **fields: object) -> TypedLink:
    return TypedLink(href=href, rel=rel, **fields)  # type: ignore[arg-type]


# --- identity -----------------------------------------------------------------------------------


def test_a_links_attributes_are_its_type_and_profile_as_its_identity_compares_them() -> None:
    # (the Signposting merge groups links by them, without the work on the links' URLs)
    for typed in (
        link(f"{E}/m"),
        link(f"{E}/m", type="Text/CSV; Charset=UTF-8", profile="https://b.org https://a.org"),
        link(f"{E}/m", type="application/ld+json;profile='x'", profile="https://a.org,b"),
    ):
        assert link_attributes(typed) == link_identity(typed)[3:5]


def test_links_differing_only_in_type_are_two_links() -> None:
    turtle = link(f"{E}/metadata", type="text/turtle")
    jsonld = link(f"{E}/metadata", type="application/ld+json")
    assert merge_links([turtle, jsonld]) == (turtle, jsonld)
    # and the JSON-LD one is the one the resolver asks for
    assert describedby_tiers([turtle, jsonld]) == [[jsonld]]


def test_links_differing_only_in_profile_are_two_links() -> None:
    plain = link(f"{E}/m.json", type="application/ld+json", profile="https://e.org/other")
    cdif = link(f"{E}/m.json", type="application/ld+json", profile="https://w3id.org/cdif/core/1.0")
    assert merge_links([plain, cdif]) == (plain, cdif)
    assert describedby_tiers([plain, cdif]) == [[cdif], [plain]]


def test_the_two_forms_of_a_linkset_are_two_links_json_first() -> None:
    text = link(f"{E}/ls", rel="linkset", type="application/linkset")
    json_form = link(f"{E}/ls", rel="linkset", type="application/linkset+json")
    untyped = link(f"{E}/ls2", rel="linkset")
    assert merge_links([text, json_form]) == (text, json_form)
    assert linkset_forms([text, untyped, json_form]) == [[json_form], [untyped], [text]]


def test_a_fragment_makes_another_target() -> None:
    bare = link("https://w3id.org/x/", rel="cite-as")
    other = link("https://w3id.org/x/#different", rel="cite-as")
    merged = merge_links([bare, other])
    assert [item.href for item in merged] == [
        "https://w3id.org/x/",
        "https://w3id.org/x/#different",
    ]


def test_spelling_differences_that_change_nothing_keep_one_link() -> None:
    first = link(
        f"{E}/m", type='text/csv; charset="UTF-8"', profile="https://a.org/p https://b.org/q"
    )
    same = link(
        "HTTPS://E.ORG:443/m",
        type="Text/CSV;charset=UTF-8",
        profile="https://b.org/q  https://a.org/p",
    )
    assert link_identity(first) == link_identity(same)
    assert merge_links([first, same]) == (first,)


def test_several_profiles_are_matched_one_by_one() -> None:
    several = link(
        f"{E}/m.json",
        type="application/ld+json",
        profile="https://e.org/other https://w3id.org/cdif/core/1.0",
    )
    assert describedby_tiers([link(f"{E}/j.json", type="application/ld+json"), several])[0] == [
        several
    ]


# --- every link read, its use, conflicts --------------------------------------------------------


def test_settle_keeps_each_source_and_marks_use() -> None:
    header = link(f"{E}/m.json", type="application/ld+json", found_in="http-header")
    html = link(f"{E}/m.json", type="application/ld+json", found_in="html")
    style = link(f"{E}/s.css", rel="stylesheet", found_in="html")
    links, warnings = settle_links(
        [header, html, html, style], [PAGE], {(link_identity(header), "http-header")}
    )
    assert [(item.found_in, item.used, item.ignored) for item in links] == [
        ("http-header", True, None),
        ("html", False, None),
        ("html", False, None),
    ]
    assert [item.rel for item in links] == ["describedby", "describedby", "stylesheet"]
    assert warnings == []


def test_a_link_anchored_at_another_resource_is_ignored() -> None:
    mine = link(f"{E}/a.json", anchor=f"{PAGE}", found_in="http-header")
    unanchored = link(f"{E}/b.json", found_in="html")
    foreign = link(f"{E}/c.json", anchor=f"{E}/elsewhere", found_in="html")
    links, _ = settle_links([mine, unanchored, foreign], [PAGE, f"{E}/pid"])
    assert [item.ignored for item in links] == [None, None, "anchor"]


def test_the_header_wins_a_cite_as_conflict_with_html_and_it_is_a_warning() -> None:
    header = link("https://w3id.org/x/", rel="cite-as", found_in="http-header")
    html = link("https://w3id.org/x/#different", rel="cite-as", found_in="html")
    linkset = link("https://w3id.org/y", rel="cite-as", anchor=PAGE, found_in="linkset")
    links, warnings = settle_links([linkset, html, header], [PAGE])
    assert [(item.href, item.used, item.ignored) for item in links] == [
        ("https://w3id.org/y", False, "overruled"),
        ("https://w3id.org/x/#different", False, "overruled"),
        ("https://w3id.org/x/", True, None),
    ]
    assert len(warnings) == 2
    assert all(w.startswith("conflicting-links: conflicting cite-as links") for w in warnings)
    assert "https://w3id.org/x/#different in HTML <link>" in warnings[1]


def test_html_wins_over_a_linkset_and_agreeing_sources_are_no_conflict() -> None:
    html = link("https://doi.org/10.1/a", rel="cite-as", found_in="html")
    linkset = link("https://doi.org/10.1/a", rel="cite-as", anchor=PAGE, found_in="linkset")
    other = link("https://doi.org/10.1/b", rel="cite-as", anchor=PAGE, found_in="linkset")
    links, warnings = settle_links([linkset, other, html], [PAGE])
    assert [(item.used, item.ignored) for item in links] == [
        (False, None),
        (False, "overruled"),
        (True, None),
    ]
    assert len(warnings) == 1 and "https://doi.org/10.1/b in the linkset" in warnings[0]


def test_two_cite_as_in_one_source_keep_the_first() -> None:
    first = link("https://doi.org/10.1/a", rel="cite-as", found_in="http-header")
    second = link("https://doi.org/10.1/b", rel="cite-as", found_in="http-header")
    links, warnings = settle_links([first, second], [PAGE])
    assert [(item.used, item.ignored) for item in links] == [(True, None), (False, "overruled")]
    assert warnings == [
        "conflicting-links: conflicting cite-as links in the HTTP Link header: "
        "https://doi.org/10.1/a is used, https://doi.org/10.1/b is not"
    ]


def test_types_of_the_most_authoritative_source_are_used() -> None:
    about = link("https://schema.org/AboutPage", rel="type", found_in="http-header")
    dataset = link("https://schema.org/Dataset", rel="type", found_in="http-header")
    same = link("https://schema.org/Dataset", rel="type", found_in="html")
    article = link("https://schema.org/ScholarlyArticle", rel="type", found_in="html")
    links, warnings = settle_links([about, dataset, same, article], [PAGE])
    assert [(item.used, item.ignored) for item in links] == [
        (True, None),
        (True, None),
        (False, None),
        (False, "overruled"),
    ]
    assert len(warnings) == 1 and "ScholarlyArticle in HTML <link>" in warnings[0]
