"""URL identity: the canonical form of a location, and what has none."""

from __future__ import annotations

import pytest

from cdif_harvester.domain.discovery.urls import (
    MAX_URL_LENGTH,
    InvalidUrl,
    canonical_origin,
    canonical_url,
)
from cdif_harvester.errors import AddressRefused
from cdif_harvester.keys import origin_of, source_of

CANONICAL = [
    ("http://h/x", "http://h/x"),
    ("http://h:80/x", "http://h/x"),
    ("https://h:443/x", "https://h/x"),
    ("https://h:80/x", "https://h:80/x"),
    ("http://h:8080/x", "http://h:8080/x"),
    ("HTTP://Data.Example.ORG/Path/A?Q=B", "http://data.example.org/Path/A?Q=B"),
    ("http://h/x#frag", "http://h/x"),
    ("http://h/x?a=1#frag", "http://h/x?a=1"),
    ("http://h", "http://h/"),
    ("http://h:80", "http://h/"),
    ("http://h?q", "http://h/?q"),
    ("http://Bücher.Example/x", "http://xn--bcher-kva.example/x"),
    ("http://[0:0:0:0:0:0:0:1]:8080/x", "http://[::1]:8080/x"),
    ("http://[::1]:80/", "http://[::1]/"),
    ("http://127.0.0.1:8000/a%20b", "http://127.0.0.1:8000/a%20b"),
    ("http://h./x", "http://h./x"),
    ("http://under_score.example/x", "http://under_score.example/x"),
    ("http://user@h:80/x", "http://user@h/x"),
]


@pytest.mark.parametrize(("url", "expected"), CANONICAL)
def test_canonical_form(url: str, expected: str) -> None:
    assert canonical_url(url) == expected
    assert canonical_url(expected) == expected  # idempotent


@pytest.mark.parametrize(("url", "_expected"), CANONICAL)
def test_the_origin_is_the_origin_of_the_canonical_form(url: str, _expected: str) -> None:
    origin = canonical_origin(url)
    assert canonical_url(url).startswith(origin + "/") or "@" in url
    assert origin_of(url) == origin


def test_variants_of_one_url_are_one_url_and_one_origin() -> None:
    variants = ["http://h:80/x", "http://h/x", "HTTP://H/x", "http://h/x#a", "http://H:80/x#b"]
    assert {canonical_url(url) for url in variants} == {"http://h/x"}
    assert {canonical_origin(url) for url in variants} == {"http://h"}
    assert {source_of(url) for url in variants} == {"h"}
    assert source_of("http://h:8080/x") == "h_8080"


@pytest.mark.parametrize(
    "url",
    [
        "http://[::1/x",  # unclosed bracket
        "http://h:99999/x",  # port out of range
        "http://h:0/x",
        "http://h:port/x",
        "http:///x",  # no host
        "http://exa%20mple.org/x",
        "http://exa mple.org/x",
        "http://a..b/x",
        "http://-a.example/x",
        "http://[fe80::1%25eth0/x",
        "http://[not:an:ip]/x",
        "http://" + "a" * 64 + ".example/x",  # a label over 63 characters
        "http://h/" + "a" * MAX_URL_LENGTH,
    ],
)
def test_what_can_never_be_fetched_is_an_invalid_url(url: str) -> None:
    with pytest.raises(InvalidUrl) as raised:
        canonical_url(url)
    assert raised.value.reason == "invalid-url" and raised.value.outcome == "failed"


@pytest.mark.parametrize(
    "url", ["ftp://h/x", "mailto:data@example.org", "javascript:alert(1)", "file:///etc/passwd"]
)
def test_a_scheme_other_than_http_is_refused_as_the_fetcher_refuses_it(url: str) -> None:
    with pytest.raises(AddressRefused) as raised:
        canonical_url(url)
    assert raised.value.reason == "scheme-not-allowed" and raised.value.outcome == "blocked"


def test_a_url_just_under_the_sitemaps_org_limit_is_kept() -> None:
    url = "http://h/" + "a" * (MAX_URL_LENGTH - len("http://h/") - 1)
    assert canonical_url(url) == url
