"""robots.txt parsing: sitemaps, the CDIF1.0 group, allow/disallow, crawl-delay, messy input."""

from __future__ import annotations

import pytest

from cdif_harvester.domain.discovery.robots import RobotsPolicy, allow_all, parse_robots

ROBOTS_URL = "https://data.example.org/robots.txt"
HARVESTER = "cdif-harvester/0.1.0 (+https://github.com/cdif-harvester/cdif-harvester)"


def parse(text: str | bytes) -> RobotsPolicy:
    body = text.encode("utf-8") if isinstance(text, str) else text
    return parse_robots(body, robots_url=ROBOTS_URL)


def test_spec_example_announces_a_cdif_sitemap() -> None:
    # Given the example of CDIF discoverability, "Find metadata"
    policy = parse("User-agent: CDIF1.0\nSitemap: http://www.example.com/CDIFsitemap.xml\n")
    # Then the sitemap is listed, and listed as a CDIF one
    assert policy.sitemaps == ("http://www.example.com/CDIFsitemap.xml",)
    assert policy.cdif_sitemaps == ("http://www.example.com/CDIFsitemap.xml",)


def test_publisher_with_both_kinds_of_sitemap() -> None:
    policy = parse(
        "# Tidewater Ocean Data Archive\n"
        "User-agent: *\n"
        "Allow: /\n"
        "Disallow: /private/\n"
        "\n"
        "User-agent: CDIF1.0\n"
        "Allow: /\n"
        "Sitemap: https://data.example.org/cdif/signmap.xml\n"
        "\n"
        "Sitemap: https://data.example.org/sitemap-index.xml\n"
    )
    assert policy == RobotsPolicy(
        robots_url=ROBOTS_URL,
        sitemaps=(
            "https://data.example.org/cdif/signmap.xml",
            "https://data.example.org/sitemap-index.xml",
        ),
        cdif_sitemaps=("https://data.example.org/cdif/signmap.xml",),
    )
    assert policy.allows("https://data.example.org/datasets/ctd.html", HARVESTER)
    assert not policy.allows("https://data.example.org/private/whales.html", HARVESTER)
    # the CDIF1.0 group has no Disallow: an agent naming that token is let in
    assert policy.allows("https://data.example.org/private/whales.html", f"{HARVESTER} CDIF1.0")


def test_allow_disallow_longest_match_and_wildcards() -> None:
    policy = parse(
        "User-agent: *\n"
        "Disallow: /data/\n"
        "Allow: /data/public/\n"
        "Disallow: /*.zip$\n"
        "Disallow: /search?\n"
    )
    assert not policy.allows("https://data.example.org/data/raw.nc", HARVESTER)
    assert policy.allows("https://data.example.org/data/public/ctd.html", HARVESTER)
    assert not policy.allows("https://data.example.org/files/all.zip", HARVESTER)
    assert policy.allows("https://data.example.org/files/all.zip.html", HARVESTER)
    assert not policy.allows("https://data.example.org/search?q=kelp", HARVESTER)
    assert policy.allows("https://data.example.org/", HARVESTER)


def test_most_specific_group_wins() -> None:
    policy = parse(
        "User-agent: *\nDisallow: /\n\nUser-agent: cdif-harvester\nDisallow: /private/\n"
    )
    assert policy.allows("https://data.example.org/datasets/a.html", HARVESTER)
    assert not policy.allows("https://data.example.org/private/a.html", HARVESTER)
    assert not policy.allows("https://data.example.org/datasets/a.html", "OtherBot/2.0")


def test_crawl_delay_per_group() -> None:
    policy = parse(
        "User-agent: *\nCrawl-delay: 10\n\nUser-agent: cdif-harvester\nCrawl-delay: 0.5\n"
        "\nUser-agent: slowbot\nCrawl-delay: soon\n"
    )
    assert policy.crawl_delay(HARVESTER) == 0.5
    assert policy.crawl_delay("SomeBot") == 10.0
    assert policy.crawl_delay("slowbot") is None  # not a number: ignored
    assert parse("User-agent: *\nDisallow:\n").crawl_delay(HARVESTER) is None


def test_bom_crlf_junk_and_non_utf8_bytes() -> None:
    body = (
        b"\xef\xbb\xbfUser-agent: *\r\n"
        b"this line is junk\r\n"
        b"<html><body>oops</body></html>\r\n"
        b"Disallow: /caf\xe9/\r\n"  # Latin-1, not UTF-8
        b"\xff\xfe\x00 binary rubbish\r\n"
        b"Sitemap https://data.example.org/no-colon.xml\r"  # bare CR line end
        b"Sitemap: /relative.xml\n"
    )
    policy = parse(body)
    assert policy.sitemaps == (
        "https://data.example.org/no-colon.xml",
        "https://data.example.org/relative.xml",
    )
    assert policy.cdif_sitemaps == ()
    assert not policy.allows("https://data.example.org/caf%C3%A9/menu", HARVESTER)
    assert policy.allows("https://data.example.org/cafe/menu", HARVESTER)


def test_sitemaps_made_absolute_deduplicated_and_http_only() -> None:
    policy = parse(
        "Sitemap: /sitemap.xml\n"
        "Sitemap: https://data.example.org/sitemap.xml\n"
        "Sitemap: ftp://data.example.org/sitemap.xml\n"
        "sitemap:   https://mirror.example.net/sitemap.xml   # comment\n"
    )
    assert policy.sitemaps == (
        "https://data.example.org/sitemap.xml",
        "https://mirror.example.net/sitemap.xml",
    )


@pytest.mark.parametrize(
    ("robots", "expected"),
    [
        pytest.param("Sitemap: /s.xml\nUser-agent: CDIF1.0\nAllow: /\n", (), id="before-any-group"),
        pytest.param("User-agent: cdif1.0\nSitemap: /s.xml\n", ("/s.xml",), id="case-insensitive"),
        pytest.param(
            "User-agent: *\nUser-agent: CDIF1.0\nDisallow: /x\nSitemap: /s.xml\n",
            ("/s.xml",),
            id="group-shared-with-star",
        ),
        pytest.param("User-agent: CDIF1.0\n\nSitemap: /s.xml\n", (), id="blank-line-ends-group"),
        pytest.param(
            "User-agent: CDIF1.0\n# the CDIF sitemap\nSitemap: /s.xml\n",
            ("/s.xml",),
            id="comment-line-does-not-end-group",
        ),
        pytest.param(
            "User-agent: CDIF1.0\nAllow: /\nUser-agent: *\nSitemap: /s.xml\n",
            (),
            id="user-agent-after-rule-starts-new-group",
        ),
        pytest.param(
            "User-agent: CDIF1.0\nSitemap: /a.xml\nUser-agent: googlebot\nSitemap: /b.xml\n",
            ("/a.xml", "/b.xml"),
            id="sitemap-is-no-rule-so-the-group-continues",
        ),
        pytest.param("User-agent: CDIF1.01\nSitemap: /s.xml\n", (), id="other-token"),
        pytest.param("User agent CDIF1.0\nSitemap /s.xml\n", ("/s.xml",), id="sloppy-syntax"),
    ],
)
def test_cdif_group_membership(robots: str, expected: tuple[str, ...]) -> None:
    policy = parse(robots)
    assert policy.cdif_sitemaps == tuple(f"https://data.example.org{path}" for path in expected)
    assert set(policy.cdif_sitemaps) <= set(policy.sitemaps)


def test_empty_or_junk_robots_allows_everything() -> None:
    for body in (b"", b"\n\n", b"<!DOCTYPE html><html><body>Not here</body></html>"):
        policy = parse(body)
        assert policy.sitemaps == ()
        assert policy.allows("https://data.example.org/private/x", HARVESTER)
        assert policy.crawl_delay(HARVESTER) is None


def test_only_the_first_max_bytes_are_read() -> None:
    filler = "# " + "x" * 98 + "\n"
    body = ("User-agent: *\n" + filler * 20 + "Disallow: /late/\n").encode()
    cut = parse_robots(body, robots_url=ROBOTS_URL, max_bytes=1000)
    full = parse_robots(body, robots_url=ROBOTS_URL)
    assert cut.allows("https://data.example.org/late/x", HARVESTER)
    assert not full.allows("https://data.example.org/late/x", HARVESTER)


def test_allow_all_for_a_missing_robots_txt() -> None:
    policy = allow_all(ROBOTS_URL)
    assert policy == RobotsPolicy(robots_url=ROBOTS_URL)
    assert policy.sitemaps == policy.cdif_sitemaps == ()
    assert policy.allows("https://data.example.org/private/anything", HARVESTER)
    assert policy.crawl_delay(HARVESTER) is None


def test_covers_only_its_own_origin() -> None:
    policy = parse("User-agent: *\nDisallow: /\n")
    assert policy.covers("https://data.example.org/a")
    assert policy.covers("https://DATA.example.org:443/a")
    assert not policy.covers("http://data.example.org/a")
    assert not policy.covers("https://data.example.org:8443/a")
    assert not policy.covers("https://other.example.org/a")


# --- reading a file cut at the size cap (RFC 9309 section 2.5) ------------------------------


def test_an_oversize_file_is_cut_at_the_last_line_end() -> None:
    # The cap falls inside "Disallow: /private-area/": reading that half line would refuse
    # /priv*, everything the rules before it say still holds.
    body = b"User-agent: *\nDisallow: /a/\nDisallow: /b/\nDisallow: /private-area/\n"
    policy = parse_robots(body, robots_url=ROBOTS_URL, max_bytes=body.index(b"ate-area"))
    assert not policy.allows("https://data.example.org/a/x", HARVESTER)
    assert not policy.allows("https://data.example.org/b/x", HARVESTER)
    assert not policy.allows("https://data.example.org/b/", HARVESTER)
    assert policy.allows("https://data.example.org/bx", HARVESTER)  # "/b/" read whole
    assert policy.allows("https://data.example.org/privacy.html", HARVESTER)
    assert policy.allows("https://data.example.org/private-area/x", HARVESTER)


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"], ids=["lf", "crlf", "cr"])
def test_the_cut_keeps_every_whole_line_whatever_the_line_ends(end: bytes) -> None:
    lines = [b"User-agent: *", b"Disallow: /one/", b"Disallow: /two/", b"Disallow: /three/"]
    body = end.join(lines) + end
    # the cap cuts "Disallow: /three/" to "Disallow: /t", which would refuse /three/ and /tx
    policy = parse_robots(body, robots_url=ROBOTS_URL, max_bytes=body.index(b"hree/"))
    assert not policy.allows("https://data.example.org/one/x", HARVESTER)
    assert not policy.allows("https://data.example.org/two/x", HARVESTER)
    assert policy.allows("https://data.example.org/three/x", HARVESTER)
    assert policy.allows("https://data.example.org/tx", HARVESTER)


def test_a_line_cut_by_the_cap_is_not_read_even_after_a_leading_line_end() -> None:
    sitemap = b"Sitemap: https://data.example.org/" + b"a" * 200 + b".xml\n"
    policy = parse_robots(b"\n" + sitemap, robots_url=ROBOTS_URL, max_bytes=100)
    assert policy.sitemaps == ()  # not the truncated https://data.example.org/aaa...


def test_an_oversize_file_without_any_line_end_is_read_up_to_the_cap() -> None:
    # One line: a complete directive and a long comment; the cap only cuts the comment.
    body = b"Sitemap: https://data.example.org/s.xml # " + b"x" * 500
    policy = parse_robots(body, robots_url=ROBOTS_URL, max_bytes=100)
    assert policy.sitemaps == ("https://data.example.org/s.xml",)


@pytest.mark.parametrize("size", ["small", "exactly-the-cap"])
def test_a_file_without_a_final_newline_is_read_whole(size: str) -> None:
    body = b"User-agent: CDIF1.0\nDisallow: /x/\nSitemap: https://data.example.org/s.xml"
    max_bytes = len(body) if size == "exactly-the-cap" else len(body) * 2
    policy = parse_robots(body, robots_url=ROBOTS_URL, max_bytes=max_bytes)
    assert policy.cdif_sitemaps == ("https://data.example.org/s.xml",)
    assert policy.sitemaps == ("https://data.example.org/s.xml",)
    policy = parse(b"User-agent: *\nDisallow: /x/")
    assert not policy.allows("https://data.example.org/x/1", HARVESTER)


# --- the CDIF1.0 group: lines protego reads one way and we must read alike -----------------


@pytest.mark.parametrize(
    ("robots", "expected"),
    [
        pytest.param(
            "this line is junk\nfoo:\nx:y\n<p>oops</p>\nUser-agent: CDIF1.0\nSitemap: /s.xml\n",
            ("/s.xml",),
            id="junk-lines-before-the-group",
        ),
        pytest.param(
            "User-agent: CDIF1.0\nthis line is junk\nSitemap: /s.xml\n",
            ("/s.xml",),
            id="junk-line-inside-the-group",
        ),
        pytest.param(
            "User-agent: CDIF1.0\nSitemap: /s.xml # CDIF # core\n",
            ("/s.xml",),
            id="comment-with-hashes-after-a-sitemap",
        ),
        pytest.param(
            "User-agent :CDIF1.0\nSitemap :/s.xml\n", ("/s.xml",), id="space-before-the-colon"
        ),
        pytest.param(
            "User-agent: CDIF1.0\nSitemap https://data.example.org/s.xml\n",
            ("/s.xml",),
            id="absolute-url-without-colon-after-field",
        ),
        pytest.param(
            "User-agent: CDIF1.0\nSitemap https://data.example.org/cdif sitemap.xml\n",
            ("/cdif sitemap.xml",),
            id="url-with-a-space-without-colon-after-field",
        ),
        pytest.param(
            "User-agent: CDIF1.0\nSitemap: ftp://data.example.org/s.xml\n"
            "Sitemap: /s.xml\nSitemap: https://data.example.org/s.xml\n",
            ("/s.xml",),
            id="http-only-and-deduplicated",
        ),
    ],
)
def test_cdif_group_in_messy_files(robots: str, expected: tuple[str, ...]) -> None:
    policy = parse(robots)
    assert policy.cdif_sitemaps == tuple(f"https://data.example.org{path}" for path in expected)
    assert set(policy.cdif_sitemaps) <= set(policy.sitemaps)


@pytest.mark.parametrize("directive", ["Noindex: /x", "Noindex:/x"])
def test_an_unknown_directive_ends_a_group_as_protego_reads_it(directive: str) -> None:
    # RFC 9309: a User-agent line after a rule starts a new group; protego counts a directive
    # it does not know as such a line, and so must the CDIF reading.
    rules = parse(f"User-agent: cdif-harvester\n{directive}\nUser-agent: other\nDisallow: /y\n")
    assert rules.allows("https://data.example.org/y", HARVESTER)
    cdif = parse(f"User-agent: CDIF1.0\n{directive}\nUser-agent: other\nSitemap: /s.xml\n")
    assert cdif.cdif_sitemaps == ()
    assert cdif.sitemaps == ("https://data.example.org/s.xml",)


def test_a_junk_line_does_not_end_a_group_as_protego_reads_it() -> None:
    rules = parse("User-agent: cdif-harvester\njunk line\nUser-agent: other\nDisallow: /y\n")
    assert not rules.allows("https://data.example.org/y", HARVESTER)
    cdif = parse("User-agent: CDIF1.0\njunk line\nUser-agent: other\nSitemap: /s.xml\n")
    assert cdif.cdif_sitemaps == ("https://data.example.org/s.xml",)


# --- origins ---------------------------------------------------------------------------------


def test_default_ports_are_the_same_origin() -> None:
    http = parse_robots(b"User-agent: *\n", robots_url="http://data.example.org/robots.txt")
    assert http.covers("http://data.example.org:80/a")
    assert http.covers("http://DATA.example.org/a")
    assert not http.covers("http://data.example.org:81/a")
    assert not http.covers("http://data.example.org:443/a")
    on_80 = parse_robots(b"", robots_url="http://data.example.org:80/robots.txt")
    assert on_80.covers("http://data.example.org/a")
    on_443 = parse_robots(b"", robots_url="https://data.example.org:443/robots.txt")
    assert on_443.covers("https://data.example.org/a")
    assert not on_443.covers("http://data.example.org/a")
