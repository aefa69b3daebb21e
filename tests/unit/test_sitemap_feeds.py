"""RSS 2.0 and Atom 1.0 feeds read as sitemaps, and sitemaps with a broken XML declaration."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime, timedelta

import pytest

from cdif_harvester.domain.discovery.lastmod import normalise_lastmod
from cdif_harvester.domain.discovery.sitemap import (
    ParsedSitemap,
    SitemapEntry,
    SitemapError,
    iter_sitemap,
    parse_sitemap,
)

FEED_URL = "https://data.example.org/feeds/dataset.atom"
ATOM = "http://www.w3.org/2005/Atom"
SM_NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def parse(body: bytes | str, **kwargs: int) -> ParsedSitemap:
    raw = body.encode("utf-8") if isinstance(body, str) else body
    return parse_sitemap(raw, sitemap_url=FEED_URL, **kwargs)


def refused(body: bytes | str) -> str:
    with pytest.raises(SitemapError) as caught:
        parse(body)
    return caught.value.reason


def rss(items: str, *, rss_attrs: str = 'version="2.0"') -> str:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<rss {rss_attrs}><channel>'
        "<title>Datasets</title><link>https://data.example.org/</link>"
        "<description>New datasets</description>"
        "<image><url>https://data.example.org/logo.png</url><link>https://data.example.org/</link>"
        f"</image>{items}</channel></rss>"
    )


def atom(entries: str, *, ns: str = f'xmlns="{ATOM}"') -> str:
    return (
        f'<?xml version="1.0" encoding="utf-8"?>\n<feed {ns}><title>Datasets</title>'
        f'<link rel="self" href="{FEED_URL}"/><link href="https://data.example.org/"/>'
        f"<id>urn:feed</id><updated>2025-01-01T00:00:00Z</updated>{entries}</feed>"
    )


# -- RSS 2.0 ---------------------------------------------------------------------------------------

RSS_ITEMS = (
    "<item><title>a</title><link>https://data.example.org/d/a</link>"
    "<pubDate>Tue, 10 Jun 2003 04:00:00 GMT</pubDate></item>"
    "<item><title>relative</title><link>\n  ../d/b  \n</link>"
    "<pubDate>Wed, 11 Jun 2003 09:30:00 +0200</pubDate></item>"
    "<item><title>only a permalink guid</title><guid>https://data.example.org/d/c</guid></item>"
    '<item><title>a guid that is no link</title><guid isPermaLink="false">'
    "https://data.example.org/d/not</guid></item>"
    "<item><title>a guid that is no URL</title><guid>urn:uuid:1234</guid></item>"
    "<item><title>no link at all</title><description>text</description></item>"
    "<item><title>empty link</title><link> </link></item>"
)


def test_rss_items_are_read_as_urlset_entries() -> None:
    parsed = parse(rss(RSS_ITEMS))
    assert parsed.kind == "rss"
    assert parsed.entries == (
        SitemapEntry("https://data.example.org/d/a", "Tue, 10 Jun 2003 04:00:00 GMT"),
        SitemapEntry("https://data.example.org/d/b", "Wed, 11 Jun 2003 09:30:00 +0200"),
        SitemapEntry("https://data.example.org/d/c", None),
    )
    # the channel's own link and its image's are not locations
    assert parsed.error is None and parsed.limit_hit is None and parsed.notes == ()


def test_rss_pub_dates_normalise_like_sitemap_lastmods() -> None:
    lastmods = [normalise_lastmod(entry.lastmod) for entry in parse(rss(RSS_ITEMS)).entries]
    gmt = datetime(2003, 6, 10, 4, tzinfo=UTC)
    plus_two = datetime(2003, 6, 11, 9, 30, tzinfo=UTC) - timedelta(hours=2)
    assert lastmods == [
        gmt.strftime("%Y-%m-%dT%H:%M:%SZ"),
        plus_two.strftime("%Y-%m-%dT%H:%M:%SZ"),
        None,
    ]


def test_rss_in_a_namespace_and_dc_date() -> None:
    body = rss(
        "<item><link>https://data.example.org/d/a</link>"
        "<dc:date>2024-05-01T10:00:00Z</dc:date></item>",
        rss_attrs='version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/" '
        'xmlns="http://backend.userland.com/rss2"',
    )
    assert parse(body).entries == (
        SitemapEntry("https://data.example.org/d/a", "2024-05-01T10:00:00Z"),
    )


def test_rss_item_extensions_are_not_links() -> None:
    body = rss(
        '<item xmlns:atom="http://www.w3.org/2005/Atom">'
        '<atom:link rel="self" href="https://data.example.org/self"/>'
        "<link>https://data.example.org/d/a</link></item>",
    )
    assert [e.loc for e in parse(body).entries] == ["https://data.example.org/d/a"]


# -- Atom 1.0 --------------------------------------------------------------------------------------

ATOM_ENTRIES = (
    "<entry><title>edit first</title><id>urn:a</id>"
    '<link rel="edit" href="/api/a"/><link rel="alternate" type="text/html" href="/d/a"/>'
    "<updated>2025-04-01T10:00:00Z</updated><published>2024-01-01T00:00:00Z</published></entry>"
    '<entry><title>no rel</title><link href="https://elsewhere.example.net/d/b"/>'
    "<published>2025-02-03</published></entry>"
    '<entry><title>upper case</title><link rel="enclosure" href="/files/c.zip"/>'
    '<link rel=" ALTERNATE " href="d/c"/></entry>'
    '<entry><title>only self and edit</title><link rel="self" href="/api/d"/>'
    '<link rel="edit" href="/api/d"/><updated>2025-04-02T10:00:00Z</updated></entry>'
    "<entry><title>no link</title><updated>2025-04-03T10:00:00Z</updated></entry>"
    "<entry><title>empty href</title><link href=''/></entry>"
)


@pytest.mark.parametrize(
    "ns",
    [
        pytest.param(f'xmlns="{ATOM}"', id="default-namespace"),
        pytest.param("", id="no-namespace"),
    ],
)
def test_atom_entries_take_their_alternate_link(ns: str) -> None:
    parsed = parse(atom(ATOM_ENTRIES, ns=ns))
    assert parsed.kind == "atom"
    assert parsed.entries == (
        SitemapEntry("https://data.example.org/d/a", "2025-04-01T10:00:00Z"),
        SitemapEntry("https://elsewhere.example.net/d/b", "2025-02-03"),
        SitemapEntry("https://data.example.org/feeds/d/c", None),
    )


def test_atom_with_a_prefix() -> None:
    body = (
        f'<a:feed xmlns:a="{ATOM}"><a:title>t</a:title>'
        '<a:entry><a:link href="https://data.example.org/d/a"/>'
        "<a:updated>2025-04-01T10:00:00Z</a:updated></a:entry></a:feed>"
    )
    assert parse(body).entries == (
        SitemapEntry("https://data.example.org/d/a", "2025-04-01T10:00:00Z"),
    )


def test_a_feed_streams_and_knows_its_kind_first() -> None:
    stream = iter_sitemap(atom(ATOM_ENTRIES).encode(), sitemap_url=FEED_URL)
    assert stream.kind == "atom"
    assert len(list(stream)) == 3 and stream.count == 3


def test_a_gzipped_feed() -> None:
    assert parse(gzip.compress(rss(RSS_ITEMS).encode())) == parse(rss(RSS_ITEMS))


def test_the_url_cap_holds_for_feeds() -> None:
    items = "".join(f"<item><link>https://data.example.org/d/{n}</link></item>" for n in range(5))
    parsed = parse(rss(items), max_urls=3)
    assert [e.loc.rsplit("/", 1)[1] for e in parsed.entries] == ["0", "1", "2"]
    assert parsed.limit_hit == "max-urls"


def test_the_size_cap_holds_for_feeds() -> None:
    body = rss("<item><link>https://data.example.org/d/a</link></item>" * 100)
    assert len(parse(body, max_bytes=len(body)).entries) == 100
    with pytest.raises(SitemapError) as caught:
        parse(body, max_bytes=len(body) - 1)
    assert caught.value.reason == "too-large"


def test_a_truncated_feed_keeps_the_items_before_the_break() -> None:
    body = rss(
        "<item><link>https://data.example.org/d/a</link></item>"
        "<item><link>https://data.example.org/d/b</link></item>"
    )
    parsed = parse(body[: body.index("/d/b")])
    assert [e.loc for e in parsed.entries] == ["https://data.example.org/d/a"]
    assert parsed.error is not None and parsed.error.startswith("malformed-xml")


def test_rss_and_feed_roots_are_sitemaps_and_other_roots_still_are_not() -> None:
    assert parse("<rss version='2.0'><channel/></rss>") == ParsedSitemap("rss", ())
    assert parse(f"<feed xmlns='{ATOM}'/>") == ParsedSitemap("atom", ())
    assert refused("<opml version='2.0'><body/></opml>") == "not-a-sitemap"
    rdf = "<rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'/>"  # RSS 1.0
    assert refused(rdf) == "not-a-sitemap"


def test_billion_laughs_in_a_feed_is_refused() -> None:
    laughs = "".join(f'<!ENTITY l{n} "{f"&l{n - 1};" * 10}">' for n in range(1, 10))
    feed = "<rss><channel><item><link>https://x.example/&l9;</link></item></channel></rss>"
    body = f'<?xml version="1.0"?><!DOCTYPE rss [<!ENTITY l0 "lol">{laughs}]>{feed}'
    assert refused(body) == "xml-entities-refused"
    assert parse(feed.replace("&l9;", "")).entries == (SitemapEntry("https://x.example/", None),)
    # a broken declaration in front of it changes nothing
    assert refused(body.replace('version="1.0"', 'version="null"')) == "xml-entities-refused"


# -- a broken XML declaration ----------------------------------------------------------------------

URLSET = f"<urlset {SM_NS}><url><loc>https://data.example.org/d/a</loc></url></urlset>"


@pytest.mark.parametrize(
    "declaration",
    [
        '<?xml version="null" encoding="null"?>',
        '<?xml version="null"?>',
        '<?xml version="1.0" encoding="null"?>',
        "<?xml version='1.0' encoding='latin-1'?>",  # known to Python, not to libxml2
        '<?xml version="1.0"encoding="utf-8"?>',
        "<?xml?>",
    ],
)
@pytest.mark.parametrize("packed", [False, True], ids=["plain", "gzip"])
def test_a_broken_declaration_is_left_out_with_a_note(declaration: str, packed: bool) -> None:
    body = (declaration + "\n" + URLSET).encode()
    parsed = parse(gzip.compress(body) if packed else body)
    assert parsed.entries == (SitemapEntry("https://data.example.org/d/a", None),)
    (note,) = parsed.notes
    assert declaration in note and "read without it" in note
    assert iter_sitemap(body, sitemap_url=FEED_URL).notes == (note,)  # known from the start


@pytest.mark.parametrize(
    "declaration",
    [
        '<?xml version="1.0" encoding="UTF-8"?>',
        "<?xml version='1.0' encoding='utf8' standalone='yes' ?>",
        '<?xml version="1.1"?>',
        "",
    ],
)
def test_a_good_declaration_is_no_note(declaration: str) -> None:
    parsed = parse(declaration + URLSET)
    assert parsed.notes == () and len(parsed.entries) == 1


def test_the_end_of_a_broken_declaration_is_looked_for_near_the_start_only() -> None:
    assert parse('<?xml version="null" ' + " " * 500 + "?>" + URLSET).notes
    assert refused('<?xml version="null" ' + " " * 5000 + "?>" + URLSET) == "malformed-xml"
