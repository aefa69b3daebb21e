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


def test_a_url_of_exactly_the_sitemaps_org_limit_is_refused() -> None:
    url = "http://h/" + "a" * (MAX_URL_LENGTH - len("http://h/"))
    with pytest.raises(InvalidUrl) as raised:
        canonical_url(url)
    assert str(raised.value) == (
        f"{url[:80]}... is {MAX_URL_LENGTH} characters long (sitemaps.org: less than "
        f"{MAX_URL_LENGTH})"
    )


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://[::1/x", "'http://[::1/x' cannot be parsed: "),
        ("http://h:port/x", "'http://h:port/x' has an invalid port: "),
        ("http://h:0/x", "'http://h:0/x' has an invalid port: 0"),
        ("http:///x", "'http:///x' has no host"),
        ("http://[v1.a:b]/x", "'http://[v1.a:b]/x' has an invalid IPv6 host: "),
        ("http://bü-.example/x", "'http://bü-.example/x' has a host that is not a valid IDNA"),
        ("http://a..b/x", "'http://a..b/x' has an invalid host 'a..b'"),
        ("http://A-.example/x", "'http://A-.example/x' has an invalid host 'a-.example'"),
    ],
)
def test_an_invalid_url_names_itself_and_what_is_wrong(url: str, says: str) -> None:
    with pytest.raises(InvalidUrl) as raised:
        canonical_url(url)
    assert str(raised.value).startswith(says)


@pytest.mark.parametrize(
    ("url", "scheme"), [("ftp://h/x", "'ftp'"), ("FTP://h/x", "'ftp'"), ("//h/x", "'(none)'")]
)
def test_a_refused_scheme_is_named_in_the_reason(url: str, scheme: str) -> None:
    with pytest.raises(AddressRefused) as raised:
        canonical_url(url)
    assert str(raised.value) == (
        f"refused {url!r}: scheme {scheme} is not allowed (http, https only)"
    )


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        # UTS 46 mapping: full-width letters and a full-width full stop are the ASCII name
        ("http://ＥＸＡＭＰＬＥ.ｏｒｇ/x", "http://example.org/x"),
        ("http://Ｂücher．example/x", "http://xn--bcher-kva.example/x"),
        ("http://ⅷ.example/x", "http://viii.example/x"),
    ],
)
def test_a_host_is_mapped_as_browsers_map_it(url: str, expected: str) -> None:
    assert canonical_url(url) == expected


def test_a_fully_qualified_name_keeps_its_labels_and_is_checked_label_by_label() -> None:
    assert canonical_url("http://Data.Example.ORG./x") == "http://data.example.org./x"
    assert canonical_url("http://bücher.example./x") == "http://xn--bcher-kva.example./x"
    for url in ["http://a..b./x", "http://a.-b./x", "http://a.b-./x"]:
        with pytest.raises(InvalidUrl):
            canonical_url(url)


# A host name of 253 characters, the most DNS allows (four labels, 63 + 63 + 63 + 61).
LONGEST_HOST = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])


def test_a_host_name_may_be_253_characters_long_and_no_longer() -> None:
    assert len(LONGEST_HOST) == 253
    assert canonical_url(f"http://{LONGEST_HOST}/x") == f"http://{LONGEST_HOST}/x"
    # the root dot of a fully qualified name is not part of the limit
    assert canonical_url(f"http://{LONGEST_HOST}./x") == f"http://{LONGEST_HOST}./x"
    one_more = LONGEST_HOST + "d"  # every label still 63 characters or fewer
    for url in [f"http://{one_more}/x", f"http://{one_more}./x"]:
        with pytest.raises(InvalidUrl) as raised:
            canonical_url(url)
        assert "has an invalid host" in str(raised.value)


def test_user_information_is_kept_whole_so_two_of_them_stay_two_urls() -> None:
    # The host follows the last "@" (as urlsplit reads it); everything before it is userinfo.
    assert canonical_url("http://a@b@H:80/x") == "http://a@b@h/x"
    assert canonical_url("http://a@b@h/x") != canonical_url("http://a@c@h/x")
    assert canonical_url("http://user:pw@h/x") == "http://user:pw@h/x"
    assert canonical_url("http://a@b@[0::1]:80/x") == "http://a@b@[::1]/x"


@pytest.mark.parametrize("url", ["http://[v1.ab]/x", "http://[v7.h]:80/x", "http://u@[v1.ab]/x"])
def test_an_ipvfuture_literal_is_no_host_name(url: str) -> None:
    # [v1.ab] is an address of an unknown future kind: never the DNS name v1.ab, and unreachable
    with pytest.raises(InvalidUrl) as raised:
        canonical_url(url)
    assert "has an invalid IPv6 host" in str(raised.value)
    assert canonical_url("http://v1.ab/x") == "http://v1.ab/x"
