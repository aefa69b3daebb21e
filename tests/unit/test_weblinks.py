"""Typed links from HTTP Link headers (RFC 8288), linksets (RFC 9264) and HTML heads."""

from __future__ import annotations

import json
import random
from typing import Any, cast
from urllib.parse import urlsplit

import pytest

from cdif_harvester.domain.resolution.weblinks import (
    HtmlHead,
    LinkParse,
    MetaTag,
    parse_html_head,
    parse_link_header,
    parse_linkset_json,
    parse_linkset_text,
)
from cdif_harvester.model import TypedLink

BASE = "https://data.example.org/datasets/42/landing.html"
LINKSET_URL = "https://data.example.org/linksets/42"
CDIF = "https://w3id.org/cdif/core/1.0"


def header_link(href: str, rel: str, **fields: Any) -> TypedLink:
    return TypedLink(href=href, rel=rel, found_in=fields.pop("found_in", "http-header"), **fields)


def linkset_link(href: str, rel: str, anchor: str, **fields: Any) -> TypedLink:
    return TypedLink(href=href, rel=rel, anchor=anchor, found_in="linkset", **fields)


def html_link(href: str, rel: str, **fields: Any) -> TypedLink:
    return TypedLink(href=href, rel=rel, found_in="html", **fields)


# --- Link header: the RFC 8288 grammar ----------------------------------------------------

GRAMMAR_CASES = [
    pytest.param(
        [
            f'<https://data.example.org/42.jsonld>; rel="describedby"; type="application/ld+json"'
            f'; profile="{CDIF}"'
        ],
        [
            header_link(
                "https://data.example.org/42.jsonld",
                "describedby",
                type="application/ld+json",
                profile=CDIF,
            )
        ],
        id="one-link-quoted-parameters",
    ),
    pytest.param(
        ['<https://data.example.org/42.jsonld>; rel="describedby item"'],
        [
            header_link("https://data.example.org/42.jsonld", "describedby"),
            header_link("https://data.example.org/42.jsonld", "item"),
        ],
        id="multi-valued-rel-gives-one-link-per-relation-type",
    ),
    pytest.param(
        ['<https://example.org/>; rel="start  start   index"'],
        [
            header_link("https://example.org/", "start"),
            header_link("https://example.org/", "index"),
        ],
        id="relation-type-repeated-in-one-value-counts-once",
    ),
    pytest.param(
        [
            "<https://a.example/1>; rel=item, <https://a.example/2>; rel=item",
            "<https://a.example/3>; rel=license",
        ],
        [
            header_link("https://a.example/1", "item"),
            header_link("https://a.example/2", "item"),
            header_link("https://a.example/3", "license"),
        ],
        id="several-links-per-value-and-several-values",
    ),
    pytest.param(
        [
            r'<https://a.example/1>; rel=next; title="one, two; \"three\" \\ four", '
            r"<https://a.example/2>; rel=prev"
        ],
        [
            header_link("https://a.example/1", "next", title='one, two; "three" \\ four'),
            header_link("https://a.example/2", "prev"),
        ],
        id="quoted-string-with-comma-semicolon-and-escapes",
    ),
    pytest.param(
        ['<https://a.example/1>; REL="DescribedBy"; Type="Application/LD+JSON"; PROFILE="P"'],
        [
            header_link(
                "https://a.example/1", "describedby", type="application/ld+json", profile="P"
            )
        ],
        id="parameter-names-case-insensitive-rel-and-type-lower-cased",
    ),
    pytest.param(
        [
            r"<https://a.example/1>; rel=describedby; "
            r'type="Application/LD+JSON; profile=\"https://W3ID.org/CDIF/core/1.0\""'
        ],
        [
            header_link(
                "https://a.example/1",
                "describedby",
                type='application/ld+json; profile="https://W3ID.org/CDIF/core/1.0"',
            )
        ],
        id="type-lower-cased-in-media-type-only",
    ),
    pytest.param(
        ['<https://a.example/1>; rel="http://Example.net/Rel/Other START"'],
        [
            header_link("https://a.example/1", "http://Example.net/Rel/Other"),
            header_link("https://a.example/1", "start"),
        ],
        id="extension-relation-type-kept-as-written",
    ),
    pytest.param(
        ['<https://a.example/1>; rel=item; hreflang=en; hreflang=de; title="T"; media=print'],
        [header_link("https://a.example/1", "item", hreflang="en", title="T")],
        id="hreflang-may-repeat-first-kept",
    ),
    pytest.param(
        ["<https://a.example/1>; rel=item; crossorigin"],
        [header_link("https://a.example/1", "item")],
        id="parameter-without-value",
    ),
    pytest.param(
        ['<https://a.example/r>; rev="META"; scheme="DC"'],
        [header_link("https://a.example/r", "meta", scheme="DC", reverse=True)],
        id="rev-link-1997-draft",
    ),
    pytest.param(
        ['<https://a.example/m>; rel="meta"; rev="made META"; scheme=FGDC'],
        [
            header_link("https://a.example/m", "meta", scheme="FGDC"),
            header_link("https://a.example/m", "made", scheme="FGDC", reverse=True),
            header_link("https://a.example/m", "meta", scheme="FGDC", reverse=True),
        ],
        id="rel-and-rev-in-one-link-value",
    ),
]


@pytest.mark.parametrize(("values", "expected"), GRAMMAR_CASES)
def test_link_header_grammar(values: list[str], expected: list[TypedLink]) -> None:
    result = parse_link_header(values, BASE)
    assert result == LinkParse(links=tuple(expected), repairs=())


RESOLUTION_CASES = [
    pytest.param("<meta.json>", "https://data.example.org/datasets/42/meta.json", id="relative"),
    pytest.param("<../43/>", "https://data.example.org/datasets/43/", id="dot-dot"),
    pytest.param("</about>", "https://data.example.org/about", id="absolute-path"),
    pytest.param("<//cdn.example.net/x>", "https://cdn.example.net/x", id="network-path"),
    pytest.param("<?format=jsonld>", BASE + "?format=jsonld", id="query-only"),
    pytest.param("<#it>", BASE + "#it", id="fragment-only"),
    pytest.param("<>", BASE, id="empty-reference-is-the-base"),
    pytest.param("< https://a.example/x >", "https://a.example/x", id="space-inside-brackets"),
]


@pytest.mark.parametrize(("target", "href"), RESOLUTION_CASES)
def test_link_header_targets_resolve_against_the_response_url(target: str, href: str) -> None:
    result = parse_link_header([f"{target}; rel=item"], BASE)
    assert result.links == (header_link(href, "item"),)
    assert result.repairs == ()


@pytest.mark.parametrize(
    ("anchor", "expected"),
    [
        ("#dataset", BASE + "#dataset"),
        ("/datasets/42", "https://data.example.org/datasets/42"),
        ("https://doi.org/10.5555/42", "https://doi.org/10.5555/42"),
        ("", BASE),
    ],
)
def test_link_header_anchor_resolves_against_the_response_url(anchor: str, expected: str) -> None:
    result = parse_link_header([f'<https://a.example/l>; rel=license; anchor="{anchor}"'], BASE)
    assert result.links == (header_link("https://a.example/l", "license", anchor=expected),)


def test_link_header_without_anchor_keeps_anchor_none_and_found_in_is_configurable() -> None:
    result = parse_link_header(["<x>; rel=item"], BASE, found_in="html-http-equiv")
    assert result.links == (
        TypedLink(
            href="https://data.example.org/datasets/42/x", rel="item", found_in="html-http-equiv"
        ),
    )


# RFC 8288 section 3.5, the examples it describes (own URLs where the RFC's would be the same).
RFC8288_EXAMPLES = [
    pytest.param(
        '<http://example.com/TheBook/chapter2>; rel="previous"; title="previous chapter"',
        [header_link("http://example.com/TheBook/chapter2", "previous", title="previous chapter")],
        id="previous-with-title",
    ),
    pytest.param(
        '</>; rel="http://example.net/foo"',
        [header_link("https://data.example.org/", "http://example.net/foo")],
        id="root-target-extension-relation",
    ),
    pytest.param(
        '</terms>; rel="copyright"; anchor="#foo"',
        [header_link("https://data.example.org/terms", "copyright", anchor=BASE + "#foo")],
        id="anchor-fragment",
    ),
    pytest.param(
        "</TheBook/chapter2>; rel=\"previous\"; title*=UTF-8'de'letztes%20Kapitel, "
        "</TheBook/chapter4>; rel=\"next\"; title*=UTF-8'de'n%c3%a4chstes%20Kapitel",
        [
            header_link(
                "https://data.example.org/TheBook/chapter2", "previous", title="letztes Kapitel"
            ),
            header_link(
                "https://data.example.org/TheBook/chapter4", "next", title="nächstes Kapitel"
            ),
        ],
        id="title-star-utf8",
    ),
    pytest.param(
        '<http://example.org/>; rel="start http://example.net/relation/other"',
        [
            header_link("http://example.org/", "start"),
            header_link("http://example.org/", "http://example.net/relation/other"),
        ],
        id="two-relation-types",
    ),
    pytest.param(
        '<https://example.org/>; rel="start", <https://example.org/index>; rel="index"',
        [
            header_link("https://example.org/", "start"),
            header_link("https://example.org/index", "index"),
        ],
        id="two-links-one-field",
    ),
]


@pytest.mark.parametrize(("value", "expected"), RFC8288_EXAMPLES)
def test_rfc8288_examples(value: str, expected: list[TypedLink]) -> None:
    assert parse_link_header([value], BASE) == LinkParse(links=tuple(expected), repairs=())


@pytest.mark.parametrize(
    ("params", "title", "repairs"),
    [
        pytest.param("title*=UTF-8'de'n%c3%a4chstes", "nächstes", [], id="utf8"),
        pytest.param("title*=utf-8''%E2%82%AC%20rates", "€ rates", [], id="no-language"),
        pytest.param("title*=iso-8859-1'en'%A3%20rates", "£ rates", [], id="latin-1"),
        pytest.param("title=\"plain\"; title*=UTF-8''fancy", "fancy", [], id="star-wins-after"),
        pytest.param("title*=UTF-8''fancy; title=\"plain\"", "fancy", [], id="star-wins-before"),
        pytest.param(
            "title=\"plain\"; title*=UTF-8''%ff%fe",
            "plain",
            ["link-header: title* \"UTF-8''%ff%fe\" cannot be decoded; ignored"],
            id="invalid-utf8-falls-back-to-title",
        ),
        pytest.param(
            "title*=no-quotes-here",
            None,
            ["link-header: title* 'no-quotes-here' cannot be decoded; ignored"],
            id="not-an-ext-value",
        ),
        pytest.param(
            "title*=klingon-9''abc",
            None,
            ["link-header: title* \"klingon-9''abc\" cannot be decoded; ignored"],
            id="unknown-charset",
        ),
    ],
)
def test_title_star_is_decoded_and_wins(params: str, title: str | None, repairs: list[str]) -> None:
    result = parse_link_header([f"<https://a.example/n>; rel=next; {params}"], BASE)
    assert result.links == (header_link("https://a.example/n", "next", title=title),)
    assert list(result.repairs) == repairs


# --- Link header: sloppy forms, repaired and noted ------------------------------------------

SLOPPY_CASES = [
    pytest.param(
        ["https://x.example/y; rel=describedby"],
        [header_link("https://x.example/y", "describedby")],
        ["link-header: missing angle brackets around https://x.example/y repaired"],
        id="target-without-angle-brackets",
    ),
    pytest.param(
        ["meta.json ; rel=describedby, <https://x.example/z>; rel=item"],
        [
            header_link("https://data.example.org/datasets/42/meta.json", "describedby"),
            header_link("https://x.example/z", "item"),
        ],
        ["link-header: missing angle brackets around meta.json repaired"],
        id="relative-target-without-angle-brackets",
    ),
    pytest.param(
        ["<https://x.example/m>; rel='describedby'; type='application/ld+json'; profile='CDIF1.0'"],
        [
            header_link(
                "https://x.example/m", "describedby", type="application/ld+json", profile="CDIF1.0"
            )
        ],
        [
            "link-header: single-quoted value of parameter rel repaired",
            "link-header: single-quoted value of parameter type repaired",
            "link-header: single-quoted value of parameter profile repaired",
        ],
        id="single-quoted-values-as-the-cdif-spec-writes-them",
    ),
    pytest.param(
        [f"<https://x.example/m>; rel=describedby; profile={CDIF}; type=application/ld+json"],
        [
            header_link(
                "https://x.example/m", "describedby", type="application/ld+json", profile=CDIF
            )
        ],
        [
            f"link-header: unquoted value '{CDIF}' of parameter profile (not a token) accepted",
            "link-header: unquoted value 'application/ld+json' of parameter type "
            "(not a token) accepted",
        ],
        id="unquoted-values-that-are-not-tokens",
    ),
    pytest.param(
        ['<https://x.example/m>; rel = "describedby" ;type= "text/turtle"'],
        [header_link("https://x.example/m", "describedby", type="text/turtle")],
        [
            "link-header: whitespace around '=' in parameter rel repaired",
            "link-header: whitespace around '=' in parameter type repaired",
        ],
        id="whitespace-around-equals",
    ),
    pytest.param(
        [", <https://x.example/1>; rel=item,, <https://x.example/2>; rel=item , "],
        [header_link("https://x.example/1", "item"), header_link("https://x.example/2", "item")],
        ["link-header: empty list element ignored"] * 3,
        id="stray-empty-elements",
    ),
    pytest.param(
        ["<https://x.example/1>;; rel=item;"],
        [header_link("https://x.example/1", "item")],
        ["link-header: empty parameter ignored in link to https://x.example/1"] * 2,
        id="empty-parameters",
    ),
    pytest.param(
        ['<https://x.example/m>; rel="describedby; type="text/html"'],
        [],
        [
            "link-header: unparseable fragment 'text/html\"' skipped",
            "link-header: 'describedby;' is not a relation type; ignored",
            "link-header: 'type=' is not a relation type; ignored",
            "link-header: link to https://x.example/m has no rel; dropped",
        ],
        id="quote-closed-by-the-next-parameter-leaves-no-relation-type",
    ),
    pytest.param(
        ['<https://x.example/m>; rel="describedby; type=text/html'],
        [header_link("https://x.example/m", "describedby", type="text/html")],
        [
            "link-header: unterminated quote in parameter rel repaired",
            "link-header: unquoted value 'text/html' of parameter type (not a token) accepted",
        ],
        id="unterminated-quote-ends-at-the-next-semicolon",
    ),
    pytest.param(
        ["<https://x.example/m>; rel=item; title='unterminated"],
        [header_link("https://x.example/m", "item", title="unterminated")],
        ["link-header: unterminated quote in parameter title repaired"],
        id="unterminated-single-quote",
    ),
    pytest.param(
        ["<https://x.example/a; rel=item, <https://x.example/b>; rel=item"],
        [header_link("https://x.example/a", "item"), header_link("https://x.example/b", "item")],
        ["link-header: unclosed '<' before https://x.example/a repaired"],
        id="unclosed-angle-bracket",
    ),
    pytest.param(
        ["<https://x.example/a>; rel=item <https://x.example/b>; rel=next"],
        [header_link("https://x.example/a", "item"), header_link("https://x.example/b", "next")],
        ["link-header: missing comma before link to <https://x.example/b>; rel=next"],
        id="missing-comma",
    ),
    pytest.param(
        ["<https://x.example/a>; rel=describedby item"],
        [
            header_link("https://x.example/a", "describedby"),
            header_link("https://x.example/a", "item"),
        ],
        ["link-header: unquoted value 'describedby item' of parameter rel (not a token) accepted"],
        id="unquoted-multi-valued-rel",
    ),
    pytest.param(
        ["<https://x.example/a>; type=text/html, <https://x.example/b>; rel=item"],
        [header_link("https://x.example/b", "item")],
        [
            "link-header: unquoted value 'text/html' of parameter type (not a token) accepted",
            "link-header: link to https://x.example/a has no rel; dropped",
        ],
        id="link-without-rel-dropped",
    ),
    pytest.param(
        ["garbage here, <https://x.example/b>; rel=item, rel=orphan"],
        [header_link("https://x.example/b", "item")],
        [
            "link-header: unparseable fragment 'garbage here' skipped",
            "link-header: unparseable fragment 'rel=orphan' skipped",
        ],
        id="unparseable-link-values-skipped",
    ),
    pytest.param(
        ['<https://x.example/b>; rel=item; @@junk@@; type="text/csv"; "q"=1'],
        [header_link("https://x.example/b", "item", type="text/csv")],
        [
            "link-header: unparseable parameter '@@junk@@' skipped",
            "link-header: unparseable parameter '\"q\"=1' skipped",
        ],
        id="unparseable-parameters-skipped",
    ),
    pytest.param(
        ["<https://x.example/b>; rel=item junk-after-value <https://x.example/c>; rel=next"],
        [
            header_link("https://x.example/b", "item"),
            header_link("https://x.example/b", "junk-after-value"),
            header_link("https://x.example/c", "next"),
        ],
        [
            "link-header: unquoted value 'item junk-after-value' of parameter rel (not a token) "
            "accepted",
            "link-header: missing comma before link to <https://x.example/c>; rel=next",
        ],
        id="junk-between-links",
    ),
    pytest.param(
        ['<https://x.example/b>; rel=item; rel=next; type="a/b"; type="c/d"'],
        [header_link("https://x.example/b", "item", type="a/b")],
        [
            "link-header: repeated parameter rel in link to https://x.example/b ignored",
            "link-header: repeated parameter type in link to https://x.example/b ignored",
        ],
        id="first-rel-wins-rfc8288-3.3",
    ),
    pytest.param(
        ["<http://[::1/x>; rel=item, <https://x.example/ok>; rel=item"],
        [header_link("https://x.example/ok", "item")],
        ["link-header: target 'http://[::1/x' cannot be made absolute; link dropped"],
        id="unresolvable-target-dropped",
    ),
    pytest.param(
        ['<https://x.example/a>; rel=item; anchor="http://[bad"'],
        [],
        ["link-header: anchor 'http://[bad' cannot be made absolute; dropped"],
        id="unresolvable-anchor-dropped",
    ),
]


def test_values_that_are_not_relation_types_are_ignored() -> None:
    result = parse_link_header(['<https://x.example/a>; rel="item (bad) Describedby a:"'], BASE)
    assert result.links == (
        header_link("https://x.example/a", "item"),
        header_link("https://x.example/a", "describedby"),
    )
    assert result.repairs == (
        "link-header: '(bad)' is not a relation type; ignored",
        "link-header: 'a:' is not a relation type; ignored",
    )


@pytest.mark.parametrize(("values", "expected", "repairs"), SLOPPY_CASES)
def test_link_header_sloppy_forms_are_repaired_and_noted(
    values: list[str], expected: list[TypedLink], repairs: list[str]
) -> None:
    result = parse_link_header(values, BASE)
    assert result.links == tuple(expected)
    assert list(result.repairs) == repairs


def test_a_broken_header_value_does_not_spoil_the_next_one() -> None:
    result = parse_link_header(
        ['<https://x.example/a>; rel="item', "<https://x.example/b>; rel=next"], BASE
    )
    assert result.links == (
        header_link("https://x.example/a", "item"),
        header_link("https://x.example/b", "next"),
    )
    assert result.repairs == ("link-header: unterminated quote in parameter rel repaired",)


def test_relative_target_with_relative_base_is_dropped() -> None:
    result = parse_link_header(["<x>; rel=item"], "")
    assert result.links == ()
    assert result.repairs == ("link-header: target 'x' cannot be made absolute; link dropped",)


@pytest.mark.parametrize(
    "value",
    [
        "",
        " ",
        ",",
        ";",
        "<",
        ">",
        '"',
        "'",
        "\\",
        "<>",
        "<;>;",
        "=;=,=",
        '<a>; rel="\\',
        "<a>; rel=\r\n<b>",
        "\x00\x01<\x7f>",
        "<a>;" * 50,
        '"' * 7 + "'" * 5,
        "<<<>>>;rel=;;,,",
    ],
)
def test_link_header_odd_inputs_never_raise(value: str) -> None:
    result = parse_link_header([value, value], BASE)
    assert isinstance(result, LinkParse)
    assert all(urlsplit(link.href).scheme for link in result.links)


def test_link_header_non_string_values_are_ignored() -> None:
    values = cast(list[str], [None, b"<https://x.example/a>; rel=item", 3])
    assert parse_link_header(values, BASE) == LinkParse(links=(), repairs=())


def test_link_header_fuzz_never_raises_and_links_are_well_formed() -> None:
    rng = random.Random(8288)
    alphabet = "<>;,=\"'\\ \t\r\n*aZ:/#%é\x00[]{}relanchortitle"
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        base = rng.choice([BASE, "", "http://[::1", "urn:x:y"])
        result = parse_link_header([text], base)
        for link in result.links:
            assert urlsplit(link.href).scheme
            assert link.rel and not any(char.isspace() for char in link.rel)
            assert link.anchor is None or urlsplit(link.anchor).scheme


# --- application/linkset (RFC 9264 section 4.1) ---------------------------------------------


def test_linkset_text_rfc9264_style_document() -> None:
    # Given a linkset in the Link header syntax, one link per line as RFC 9264 lays them out
    body = (
        "<https://data.example.org/datasets/42.jsonld>\n"
        '  ; rel="describedby"\n'
        '  ; type="application/ld+json"\n'
        f'  ; profile="{CDIF}"\n'
        '  ; anchor="https://data.example.org/datasets/42",\n'
        '<https://doi.org/10.5555/42>; rel="cite-as"; anchor="/datasets/42",\n'
        '<files/42.csv>; rel="item"; type="text/csv"; anchor="/datasets/42"\n'
    ).encode()
    # When it is read
    result = parse_linkset_text(body, LINKSET_URL)
    # Then every link has its anchor and resolved targets, and nothing needed repair
    landing = "https://data.example.org/datasets/42"
    assert result == LinkParse(
        links=(
            linkset_link(
                "https://data.example.org/datasets/42.jsonld",
                "describedby",
                landing,
                type="application/ld+json",
                profile=CDIF,
            ),
            linkset_link("https://doi.org/10.5555/42", "cite-as", landing),
            linkset_link(
                "https://data.example.org/linksets/files/42.csv", "item", landing, type="text/csv"
            ),
        ),
        repairs=(),
    )


def test_linkset_text_line_breaks_separate_link_values() -> None:
    body = (
        '<https://a.example/1>; rel=item; anchor="https://a.example/"\n'
        '<https://a.example/2>; rel=item; anchor="https://a.example/"\r\n'
        "\n"
        '<https://a.example/3>; rel=license; anchor="https://a.example/"'
    )
    result = parse_linkset_text(body, LINKSET_URL)
    assert [link.href for link in result.links] == [
        "https://a.example/1",
        "https://a.example/2",
        "https://a.example/3",
    ]
    assert result.repairs == ()


def test_linkset_text_missing_anchor_defaults_to_the_linkset_url() -> None:
    body = b'\xef\xbb\xbf<https://a.example/1>; rel="item describedby"\n'
    result = parse_linkset_text(body, LINKSET_URL)
    assert result.links == (
        linkset_link("https://a.example/1", "item", LINKSET_URL),
        linkset_link("https://a.example/1", "describedby", LINKSET_URL),
    )
    assert result.repairs == (
        f"linkset: link to https://a.example/1 has no anchor; anchor set to {LINKSET_URL}",
    )


def test_linkset_text_sloppy_forms_are_noted_with_the_linkset_prefix() -> None:
    body = (
        "https://a.example/1; rel='item'; anchor=https://a.example/\n"
        "garbage here\n"
        "bare-word\n"
        '<https://a.example/2>; rel=item; anchor="https://a.example/"\n'
    )
    result = parse_linkset_text(body, LINKSET_URL)
    assert result.links == (
        linkset_link("https://a.example/1", "item", "https://a.example/"),
        linkset_link("https://a.example/2", "item", "https://a.example/"),
    )
    assert result.repairs == (
        "linkset: missing angle brackets around https://a.example/1 repaired",
        "linkset: single-quoted value of parameter rel repaired",
        "linkset: unquoted value 'https://a.example/' of parameter anchor (not a token) accepted",
        "linkset: unparseable fragment 'garbage here' skipped",
        "linkset: missing angle brackets around bare-word repaired",
        f"linkset: link to {LINKSET_URL[: LINKSET_URL.rindex('/')]}/bare-word has no rel; dropped",
    )


def test_linkset_text_latin1_title_bytes_do_not_break_reading() -> None:
    body = b'<https://a.example/1>; rel=item; anchor="https://a.example/"; title="caf\xe9"'
    result = parse_linkset_text(body, LINKSET_URL)
    assert result.links == (
        linkset_link("https://a.example/1", "item", "https://a.example/", title="café"),
    )


# --- application/linkset+json (RFC 9264 section 4.2) ----------------------------------------


def test_linkset_json_rfc9264_style_document() -> None:
    # Given a JSON linkset with two link contexts and the target attributes RFC 9264 defines
    document = {
        "linkset": [
            {
                "anchor": "https://data.example.org/datasets/42",
                "describedby": [
                    {
                        "href": "/datasets/42.jsonld",
                        "type": "Application/LD+JSON",
                        "profile": [CDIF],
                    },
                    {
                        "href": "https://data.example.org/datasets/42.xml",
                        "type": "text/xml",
                        "hreflang": ["en", "fr"],
                        "title": "ISO 19115",
                        "title*": [{"value": "ISO 19115 métadonnées", "language": "fr"}],
                    },
                ],
                "item": [{"href": "files/42.csv", "type": "text/csv"}],
                "http://www.iana.org/assignments/relation/Other": [{"href": "#x"}],
            },
            {
                "anchor": "../datasets/43",
                "cite-as": [{"href": "https://doi.org/10.5555/43"}],
                "License": [{"href": "https://creativecommons.org/licenses/by/4.0/"}],
            },
        ]
    }
    # When it is read
    result = parse_linkset_json(json.dumps(document), LINKSET_URL)
    # Then each target gives one link, anchors and hrefs resolved against the linkset URL
    ds42 = "https://data.example.org/datasets/42"
    ds43 = "https://data.example.org/datasets/43"
    assert result == LinkParse(
        links=(
            linkset_link(
                "https://data.example.org/datasets/42.jsonld",
                "describedby",
                ds42,
                type="application/ld+json",
                profile=CDIF,
            ),
            linkset_link(
                "https://data.example.org/datasets/42.xml",
                "describedby",
                ds42,
                type="text/xml",
                hreflang="en",
                title="ISO 19115 métadonnées",
            ),
            linkset_link(
                "https://data.example.org/linksets/files/42.csv", "item", ds42, type="text/csv"
            ),
            linkset_link(
                LINKSET_URL + "#x", "http://www.iana.org/assignments/relation/Other", ds42
            ),
            linkset_link("https://doi.org/10.5555/43", "cite-as", ds43),
            linkset_link("https://creativecommons.org/licenses/by/4.0/", "license", ds43),
        ),
        repairs=(),
    )


def test_linkset_json_profile_values_are_joined_and_scheme_read() -> None:
    document = {
        "linkset": [
            {
                "anchor": "https://a.example/",
                "describedby": [
                    {
                        "href": "https://a.example/m",
                        "profile": ["https://p.example/1", {"value": "https://p.example/2"}],
                        "scheme": ["DC"],
                    }
                ],
            }
        ]
    }
    result = parse_linkset_json(json.dumps(document).encode(), LINKSET_URL)
    assert result.links == (
        linkset_link(
            "https://a.example/m",
            "describedby",
            "https://a.example/",
            profile="https://p.example/1 https://p.example/2",
            scheme="DC",
        ),
    )
    assert result.repairs == ()


def test_linkset_json_wrong_shapes_are_read_as_far_as_possible() -> None:
    document = {
        "linkset": [
            {
                "describedby": {
                    "href": "https://a.example/m",
                    "profile": CDIF,
                    "hreflang": "en",
                    "type": ["text/html"],
                    "title*": {"value": "T"},
                }
            },
            "not a context",
            {"anchor": 42, "item": [{"href": "https://a.example/lost"}]},
            {
                "anchor": "https://a.example/",
                "item": [{"type": "text/csv"}, "x", {"href": 7}, {"href": "https://a.example/ok"}],
                "license": "https://a.example/license",
            },
        ]
    }
    result = parse_linkset_json(json.dumps(document), LINKSET_URL)
    assert result.links == (
        linkset_link(
            "https://a.example/m",
            "describedby",
            LINKSET_URL,
            type="text/html",
            profile=CDIF,
            hreflang="en",
            title="T",
        ),
        linkset_link("https://a.example/ok", "item", "https://a.example/"),
    )
    assert result.repairs == (
        f"linkset: link context has no anchor; anchor set to {LINKSET_URL}",
        "linkset: targets of describedby are not an array; read as one",
        "linkset: title* is not an array; read as one value",
        "linkset: profile is not an array; read as one value",
        "linkset: type is an array; first value used",
        "linkset: hreflang is not an array; read as one value",
        "linkset: a link context is not an object; skipped",
        "linkset: anchor '42' is unusable; context skipped",
        "linkset: target of item has no usable href; skipped",
        "linkset: target of item is not an object; skipped",
        "linkset: target of item has no usable href; skipped",
        "linkset: targets of license are not an array; skipped",
    )


def test_linkset_json_keys_that_are_not_relation_types_are_skipped() -> None:
    document = {
        "linkset": [
            {
                "anchor": "https://a.example/",
                "not a rel!": [{"href": "https://a.example/x"}],
                "Item Collection": [{"href": "https://a.example/y"}],
            }
        ]
    }
    result = parse_linkset_json(json.dumps(document), LINKSET_URL)
    assert result.links == (
        linkset_link("https://a.example/y", "item", "https://a.example/"),
        linkset_link("https://a.example/y", "collection", "https://a.example/"),
    )
    assert result.repairs == (
        "linkset: 'not a rel!' is not a relation type; skipped",
        "linkset: 'Item Collection' read as 2 relation types",
    )


@pytest.mark.parametrize(
    ("body", "repairs"),
    [
        pytest.param(b"not json", ("linkset: body is not JSON; no links read",), id="not-json"),
        pytest.param(b"", ("linkset: body is not JSON; no links read",), id="empty"),
        pytest.param(b"\xff\xfe\x00", ("linkset: body is not JSON; no links read",), id="not-text"),
        pytest.param(
            "[" * 100_000 + "]" * 100_000,
            ("linkset: body is not JSON; no links read",),
            id="too-deep",
        ),
        pytest.param(
            b"[1, 2]",
            ("linkset: no linkset array in the document; no links read",),
            id="top-level-array",
        ),
        pytest.param(
            b'{"links": []}',
            ("linkset: no linkset array in the document; no links read",),
            id="no-linkset-member",
        ),
        pytest.param(
            b'{"linkset": "x"}',
            ("linkset: no linkset array in the document; no links read",),
            id="linkset-a-string",
        ),
        pytest.param(b'{"linkset": []}', (), id="empty-linkset"),
    ],
)
def test_linkset_json_unreadable_bodies_give_no_links(
    body: bytes | str, repairs: tuple[str, ...]
) -> None:
    assert parse_linkset_json(body, LINKSET_URL) == LinkParse(links=(), repairs=repairs)


def test_linkset_json_object_instead_of_array_and_bom() -> None:
    body = '\ufeff{"linkset": {"anchor": "/x", "item": [{"href": "y"}]}}'
    result = parse_linkset_json(body, LINKSET_URL)
    assert result.links == (
        linkset_link("https://data.example.org/linksets/y", "item", "https://data.example.org/x"),
    )
    assert result.repairs == (
        "linkset: byte order mark removed",
        "linkset: linkset is an object, not an array; read as one context",
    )


def test_linkset_json_fuzz_never_raises() -> None:
    rng = random.Random(9264)

    def junk(depth: int) -> Any:
        choice = rng.randrange(7 if depth < 4 else 4)
        if choice == 0:
            return rng.choice(["", "x", "/rel", "http://[::1", "anchor", "href", "#f"])
        if choice == 1:
            return rng.choice([None, True, 0, 1.5])
        if choice in (2, 3):
            return rng.choice(["https://a.example/", "item", "title*", "profile"])
        if choice == 4:
            return [junk(depth + 1) for _ in range(rng.randrange(4))]
        keys = [
            "anchor",
            "href",
            "item",
            "type",
            "title",
            "title*",
            "hreflang",
            "profile",
            "scheme",
            "linkset",
            "value",
            "describedby",
        ]
        return {rng.choice(keys): junk(depth + 1) for _ in range(rng.randrange(5))}

    for _ in range(2000):
        document = {"linkset": junk(0)}
        result = parse_linkset_json(json.dumps(document), LINKSET_URL)
        for link in result.links:
            assert urlsplit(link.href).scheme
            assert link.anchor is not None and urlsplit(link.anchor).scheme


# --- HTML <link> and <meta> ---------------------------------------------------------------

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Dataset 42</title>
  <base target="_blank">
  <base href="/datasets/42/">
  <base href="/ignored/">
  <link rel="describedby item" href="metadata.jsonld" type="Application/LD+JSON"
        profile="https://w3id.org/cdif/core/1.0">
  <link rel="cite-as" href="https://doi.org/10.5555/42">
  <link REL="Alternate" href="/de/42" hreflang="de" title="Deutsch">
  <link rev="meta" scheme="DC" href="../../resources/42">
  <link rel="stylesheet">
  <link rel="icon" href="  ">
  <link href="no-rel.css">
  <!-- <link rel="describedby" href="commented-out.jsonld"> -->
  <script>document.write('<link rel="describedby" href="scripted.jsonld">')</script>
  <meta name="DC.Title" content="Ocean temperature, 2020" scheme="DCTERMS.Text">
  <meta name="description" property="og:description" content="Temperatures.">
  <meta property="og:title" content="Ocean temperature">
  <meta name="DC.Creator" content="Müller, Jörg" lang="de">
  <meta name="keywords">
  <meta http-equiv="refresh" content="30">
  <meta name="dcterms.language" xml:lang="fr" content="fr">
</head>
<body lang="">
  <link rel="license" href="https://creativecommons.org/licenses/by/4.0/">
  <meta name="citation_title" content="In the body">
</body>
</html>
"""


def test_html_head_links_meta_and_base() -> None:
    # Given a landing page with <base href>, several <link> forms and meta tags
    result = parse_html_head(PAGE.encode("utf-8"), "https://data.example.org/landing?id=42")
    # Then links resolve against the first <base href>, one link per rel/rev value
    base = "https://data.example.org/datasets/42/"
    assert result.base == base
    assert result.links == (
        html_link(
            base + "metadata.jsonld", "describedby", type="application/ld+json", profile=CDIF
        ),
        html_link(base + "metadata.jsonld", "item", type="application/ld+json", profile=CDIF),
        html_link("https://doi.org/10.5555/42", "cite-as"),
        html_link("https://data.example.org/de/42", "alternate", hreflang="de", title="Deutsch"),
        html_link("https://data.example.org/resources/42", "meta", scheme="DC", reverse=True),
        html_link("https://creativecommons.org/licenses/by/4.0/", "license"),
    )
    # And meta tags keep their content, scheme and (inherited) language
    assert result.meta == (
        MetaTag(
            name="dc.title", content="Ocean temperature, 2020", scheme="DCTERMS.Text", lang="en"
        ),
        MetaTag(name="description", content="Temperatures.", scheme=None, lang="en"),
        MetaTag(name="og:description", content="Temperatures.", scheme=None, lang="en"),
        MetaTag(name="og:title", content="Ocean temperature", scheme=None, lang="en"),
        MetaTag(name="dc.creator", content="Müller, Jörg", scheme=None, lang="de"),
        MetaTag(name="dcterms.language", content="fr", scheme=None, lang="fr"),
        MetaTag(name="citation_title", content="In the body", scheme=None, lang=None),
    )


def test_html_head_without_base_resolves_against_the_page_url() -> None:
    page = b'<link rel="describedby" href="../meta/42.jsonld"><base>'
    result = parse_html_head(page, "https://a.example/pages/42/index.html")
    assert result == HtmlHead(
        links=(html_link("https://a.example/pages/meta/42.jsonld", "describedby"),),
        meta=(),
        base="https://a.example/pages/42/index.html",
    )


def test_html_head_unusable_base_href_is_ignored() -> None:
    page = b'<base href="http://[::1"><link rel="item" href="x">'
    result = parse_html_head(page, "https://a.example/p/")
    assert result.base == "https://a.example/p/"
    assert result.links == (html_link("https://a.example/p/x", "item"),)


@pytest.mark.parametrize(
    ("body", "content"),
    [
        pytest.param(
            '<meta name="dc.creator" content="Jörg">'.encode(), "Jörg", id="undeclared-utf8"
        ),
        pytest.param(
            '<meta name="dc.creator" content="Jörg – €">'.encode("cp1252"),
            "Jörg – €",
            id="undeclared-windows-1252",
        ),
        pytest.param(
            '<meta charset="ISO-8859-1"><meta name="dc.creator" content="Jörg – €">'.encode(
                "cp1252"
            ),
            "Jörg – €",
            id="latin1-label-means-windows-1252",
        ),
        pytest.param(
            '<meta http-equiv="Content-Type" content="text/html; charset=koi8-r">'
            '<meta name="dc.creator" content="Фёдор">'.encode("koi8-r"),
            "Фёдор",
            id="http-equiv-declaration",
        ),
        pytest.param(
            '<meta name="dc.creator" content="Jörg">'.encode("utf-16"), "Jörg", id="utf16-bom"
        ),
        pytest.param(
            b'\xef\xbb\xbf<meta charset="windows-1252"><meta name="dc.creator" '
            b'content="J\xc3\xb6rg">',
            "Jörg",
            id="bom-beats-declaration",
        ),
        pytest.param(
            '<meta charset="no-such-charset"><meta name="dc.creator" content="Jörg">'.encode(),
            "Jörg",
            id="unknown-label",
        ),
        pytest.param(
            '<?xml version="1.0" encoding="iso-8859-1"?><html><head>'
            '<meta name="dc.creator" content="Jörg"></head></html>'.encode(),
            "Jörg",
            id="xml-declaration",
        ),
    ],
)
def test_html_head_encoding_is_sniffed(body: bytes, content: str) -> None:
    result = parse_html_head(body, "https://a.example/")
    assert [tag.content for tag in result.meta if tag.name == "dc.creator"] == [content]


@pytest.mark.parametrize("body", [b"", b"   \n\t", b"\x00", b"\xff\xfe", b"<", b"<!-- -->"])
def test_html_head_unparseable_or_empty_pages_give_an_empty_head(body: bytes) -> None:
    assert parse_html_head(body, "https://a.example/") == HtmlHead(
        links=(), meta=(), base="https://a.example/"
    )


def test_html_head_fuzz_never_raises() -> None:
    rng = random.Random(1997)
    pieces = [
        "<link ",
        "rel=",
        '"describedby"',
        "href=",
        "'x'",
        ">",
        "<base href=/b/>",
        "<meta ",
        "name=dc.title ",
        "content=t",
        "<!--",
        "-->",
        "\x00",
        "\xff",
        "&#0;",
        "<script>",
        "</script>",
        "<html lang=xx>",
        '"',
        " ",
        "rev=meta ",
        "http://[::1",
    ]
    for _ in range(1500):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        result = parse_html_head(text.encode("utf-8"), "https://a.example/")
        for link in result.links:
            assert urlsplit(link.href).scheme
            assert link.found_in == "html"


# --- what a change of stop characters or repair wording would get wrong ---------------------
# Every character is ordinary unless the grammar says otherwise (an upper-case X included), and
# the notes a publisher reads are exact.

EDGE_HEADER_CASES = [
    pytest.param(
        ['<https://x.example/XML/X>; rel=item; title="X marks"; X-Sort=1'],
        [header_link("https://x.example/XML/X", "item", title="X marks")],
        [],
        id="upper-case-x-in-target-quoted-value-and-parameter-name",
    ),
    pytest.param(
        ["<https://x.example/a>; rel=item; title=Xanadu"],
        [header_link("https://x.example/a", "item", title="Xanadu")],
        [],
        id="bare-value-starting-with-x",
    ),
    pytest.param(
        ["<https://x.example/X; rel=item"],
        [header_link("https://x.example/X", "item")],
        ["link-header: unclosed '<' before https://x.example/X repaired"],
        id="unclosed-bracket-target-with-x",
    ),
    pytest.param(
        ["https://x.example/X; rel=item"],
        [header_link("https://x.example/X", "item")],
        ["link-header: missing angle brackets around https://x.example/X repaired"],
        id="bare-target-with-x",
    ),
    pytest.param(
        ["<https://x.example/a>; rel=item; title='X marks'"],
        [header_link("https://x.example/a", "item", title="X marks")],
        ["link-header: single-quoted value of parameter title repaired"],
        id="single-quoted-value-with-x",
    ),
    pytest.param(
        ["<https://x.example/a>; rel=item; title=''; type=text/csv"],
        [header_link("https://x.example/a", "item", type="text/csv")],
        [
            "link-header: single-quoted value of parameter title repaired",
            "link-header: unquoted value 'text/csv' of parameter type (not a token) accepted",
        ],
        id="empty-single-quoted-value",
    ),
    pytest.param(
        ["<https://x.example/a>; rel=item; title"],
        [header_link("https://x.example/a", "item")],
        [],
        id="parameter-without-value-is-empty",
    ),
    pytest.param(
        ['<https://x.example/a>; rel=item; title="line\\\nbreak"'],
        [header_link("https://x.example/a", "item", title="line\nbreak")],
        [],
        id="quoted-pair-escaping-a-line-break",
    ),
    pytest.param(
        ['<https://x.example/a>; rel=item; title="unterminated value here'],
        [header_link("https://x.example/a", "item", title="unterminated value here")],
        ["link-header: unterminated quote in parameter title repaired"],  # one note, not two
        id="unterminated-double-quote-one-note",
    ),
    pytest.param(
        ["<https://x.example/a>; rel=item; title='unterminated value here"],
        [header_link("https://x.example/a", "item", title="unterminated value here")],
        ["link-header: unterminated quote in parameter title repaired"],
        id="unterminated-single-quote-one-note",
    ),
    pytest.param(
        ["<https://x.example/a>; rel=item;, <https://x.example/b>; rel=item"],
        [header_link("https://x.example/a", "item"), header_link("https://x.example/b", "item")],
        ["link-header: empty parameter ignored in link to https://x.example/a"],
        id="empty-parameter-before-a-comma",
    ),
    pytest.param(
        ["<https://x.example/a>; rel=item; <https://x.example/b>; rel=item"],
        [header_link("https://x.example/a", "item"), header_link("https://x.example/b", "item")],
        [
            "link-header: empty parameter ignored in link to https://x.example/a",
            "link-header: missing comma before link to <https://x.example/b>; rel=item",
        ],
        id="empty-parameter-before-a-link",
    ),
    pytest.param(
        ["<https://x.example/a>; rel=item,,"],
        [header_link("https://x.example/a", "item")],
        ["link-header: empty list element ignored"] * 2,
        id="two-trailing-commas",
    ),
    pytest.param(
        [",<https://x.example/a>; rel=item"],
        [header_link("https://x.example/a", "item")],
        ["link-header: empty list element ignored"],
        id="leading-comma-without-space",
    ),
    pytest.param(["", "   "], [], [], id="empty-values-say-nothing"),
    pytest.param(
        ['<https://x.example/a>; rel="item" Xjunk; title="T"'],
        [header_link("https://x.example/a", "item", title="T")],
        ["link-header: unparseable fragment 'Xjunk' skipped"],
        id="junk-after-a-value-then-more-parameters",
    ),
    pytest.param(
        ['<https://x.example/a>; rel="item" junk\n more; title="T"'],
        [header_link("https://x.example/a", "item", title="T")],
        ["link-header: unparseable fragment 'junk\\n more' skipped"],
        id="a-line-break-in-a-header-is-white-space",
    ),
    pytest.param(
        ["<https://x.example/a>; rel=item\n<https://x.example/b>; rel=next"],
        [header_link("https://x.example/a", "item"), header_link("https://x.example/b", "next")],
        ["link-header: missing comma before link to <https://x.example/b>; rel=next"],
        id="a-line-break-does-not-separate-header-links",
    ),
    pytest.param(
        ['junk "" x, "y" z, <https://x.example/a>; rel=item'],
        [header_link("https://x.example/a", "item")],
        [
            "link-header: unparseable fragment 'junk \"\" x' skipped",
            "link-header: unparseable fragment '\"y\" z' skipped",
        ],
        id="empty-quoted-string-in-junk",
    ),
    pytest.param(
        ["junk one\ntwo, <https://x.example/a>; rel=item"],
        [header_link("https://x.example/a", "item")],
        ["link-header: unparseable fragment 'junk one\\ntwo' skipped"],
        id="junk-link-value-across-a-line-break",
    ),
    pytest.param(
        ['junk "a,b", <https://x.example/a>; rel=item'],
        [header_link("https://x.example/a", "item")],
        ["link-header: unparseable fragment 'junk \"a,b\"' skipped"],
        id="comma-inside-quotes-in-junk",
    ),
    pytest.param(
        ["junk X here, <https://x.example/a>; rel=item"],
        [header_link("https://x.example/a", "item")],
        ["link-header: unparseable fragment 'junk X here' skipped"],
        id="junk-link-value-with-x",
    ),
    pytest.param(
        ["<https://x.example/a>; rel=item; junk X here; title=T"],
        [header_link("https://x.example/a", "item", title="T")],
        ["link-header: unparseable fragment 'X here' skipped"],
        id="junk-parameter-with-x",
    ),
    pytest.param(
        ['<https://x.example/a>; rel="item" ' + "j" * 60 + "; title=T"],
        [header_link("https://x.example/a", "item", title="T")],
        ["link-header: unparseable fragment '" + "j" * 60 + "' skipped"],
        id="a-60-character-fragment-is-quoted-whole",
    ),
    pytest.param(
        ['<https://x.example/a>; rel="item" ' + "j" * 61 + "; title=T"],
        [header_link("https://x.example/a", "item", title="T")],
        ["link-header: unparseable fragment '" + "j" * 57 + "...' skipped"],
        id="a-longer-fragment-is-clipped-to-60-characters",
    ),
]


@pytest.mark.parametrize(("values", "expected", "repairs"), EDGE_HEADER_CASES)
def test_link_header_edge_forms(
    values: list[str], expected: list[TypedLink], repairs: list[str]
) -> None:
    result = parse_link_header(values, BASE)
    assert result.links == tuple(expected)
    assert list(result.repairs) == repairs


def _no_anchor(*hrefs: str) -> list[str]:
    return [f"linkset: link to {href} has no anchor; anchor set to {LINKSET_URL}" for href in hrefs]


EDGE_LINKSET_CASES = [
    pytest.param(
        '<https://x.example/a>; rel="item" Xjunk\n<https://x.example/b>; rel="item"',
        ["https://x.example/a", "https://x.example/b"],
        ["linkset: unparseable fragment 'Xjunk' skipped"],
        id="junk-ends-at-the-line-end",
    ),
    pytest.param(
        "garbage X here\n<https://x.example/a>; rel=item",
        ["https://x.example/a"],
        ["linkset: unparseable fragment 'garbage X here' skipped"],
        id="junk-line-with-x",
    ),
    pytest.param(
        "<https://x.example/a>; rel=item <https://x.example/b>; rel=item",
        ["https://x.example/a", "https://x.example/b"],
        ["linkset: missing comma before link to <https://x.example/b>; rel=item"],
        id="missing-comma-on-one-line",
    ),
    pytest.param(
        "https://x.example/X; rel=item\nhttps://x.example/Y; rel=item",
        ["https://x.example/X", "https://x.example/Y"],
        [
            "linkset: missing angle brackets around https://x.example/X repaired",
            "linkset: missing angle brackets around https://x.example/Y repaired",
        ],
        id="bare-targets-with-x-one-per-line",
    ),
]


@pytest.mark.parametrize(("text", "hrefs", "repairs"), EDGE_LINKSET_CASES)
def test_linkset_text_edge_forms(text: str, hrefs: list[str], repairs: list[str]) -> None:
    result = parse_linkset_text(text, LINKSET_URL)
    assert result.links == tuple(linkset_link(href, "item", LINKSET_URL) for href in hrefs)
    assert list(result.repairs) == repairs + _no_anchor(*hrefs)


def test_linkset_json_a_bad_relation_does_not_hide_the_next_ones() -> None:
    document = {
        "linkset": [
            {
                "anchor": "https://a.example/d",
                "license": "https://l.example/",
                "describedby": [{"href": "https://a.example/m.json", "title": ["a", {"x": 1}]}],
            }
        ]
    }
    result = parse_linkset_json(json.dumps(document), LINKSET_URL)
    assert result.links == (
        linkset_link("https://a.example/m.json", "describedby", "https://a.example/d", title="a"),
    )
    assert result.repairs == (
        "linkset: targets of license are not an array; skipped",
        "linkset: title is an array; first value used",
        "linkset: unreadable value in title ignored",
    )


# --- HTML: which elements count, and bytes that do not decode ------------------------------


def test_html_only_link_and_meta_elements_count() -> None:
    page = (
        b'<p><a rel="describedby" href="a.jsonld">metadata</a>'
        b'<span property="dc:creator" content="Jane">Jane</span>'  # RDFa, not a meta tag
        b'<div name="dc.title" content="Not a meta"></div>'
        b'<link rel="describedby" href="http://[::1"><link rel="item" href="y">'
        b'<meta name="dc.title" content="Kelp"></p>'
    )
    result = parse_html_head(page, "https://a.example/")
    # a link whose href cannot be resolved is skipped, and the links after it still count
    assert result.links == (html_link("https://a.example/y", "item"),)
    assert result.meta == (MetaTag(name="dc.title", content="Kelp", scheme=None, lang=None),)


def test_html_links_survive_markup_errors() -> None:
    page = (
        b"<html><head><link rel=describedby href=x></div></span><p><table><td>"
        b"<link rel=item href=y></b></i><p>a</q>"
    )
    result = parse_html_head(page, "https://a.example/")
    assert result.links == (
        html_link("https://a.example/x", "describedby"),
        html_link("https://a.example/y", "item"),
    )


def _title(body: bytes) -> str:
    result = parse_html_head(body, "https://a.example/")
    (tag,) = [tag for tag in result.meta if tag.name == "dc.title"]
    return tag.content


@pytest.mark.parametrize(
    ("body", "content"),
    [
        pytest.param(
            b'<meta charset="utf-8"><meta name="dc.title" content="J\xf6rg \xff">',
            "J\ufffdrg \ufffd",
            id="declared-utf8-with-latin1-bytes",
        ),
        pytest.param(
            b'\xef\xbb\xbf<meta name="dc.title" content="J\xf6rg \xff">',
            "J\ufffdrg \ufffd",
            id="utf8-bom-with-latin1-bytes",
        ),
        pytest.param(
            b'<meta name="dc.title" content="J\xf6rg \x81">',
            "J\xf6rg \ufffd",
            id="undeclared-windows-1252-with-an-unassigned-byte",
        ),
    ],
)
def test_html_undecodable_bytes_are_replaced_not_fatal(body: bytes, content: str) -> None:
    assert _title(body) == content


def test_html_a_lone_surrogate_from_the_declared_charset_is_not_fatal() -> None:
    # UTF-7 can spell half a UTF-16 surrogate pair: decoded, it cannot be re-encoded as UTF-8.
    content = _title(b'<meta charset="utf-7"><meta name="dc.title" content="a+2D0-b">')
    assert content[0] == "a"
    assert content[-1] == "b"
    assert len(content) == 3


@pytest.mark.parametrize(("padding", "honoured"), [(0, True), (1, False)])
def test_html_charset_declaration_is_looked_for_in_the_first_1024_bytes(
    padding: int, honoured: bool
) -> None:
    head = b'<meta charset="windows-125'  # the label's last byte, "1", follows
    filler = b"<!--" + b"x" * (1023 + padding - len(head) - 7) + b"-->"
    body = filler + head + b'1">' + '<meta name="dc.title" content="Жук">'.encode("cp1251")
    # the label's last byte at offset 1023 (read) or 1024 (beyond the prescan: not read)
    assert body[1023 + padding : 1025 + padding] == b'1"'
    assert _title(body) == ("Жук" if honoured else "Жук".encode("cp1251").decode("cp1252"))
