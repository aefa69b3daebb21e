"""What an entry URL's answer is: a sitemap (as the sitemap reader says) or a URL to resolve."""

from __future__ import annotations

import pytest

from cdif_harvester.domain.discovery.entry import entry_sitemap
from cdif_harvester.domain.discovery.sitemap import SitemapError

URL = "https://example.org/entry"
URLSET = (
    b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
    b"<url><loc>https://example.org/a</loc></url></urlset>"
)
INDEX = (
    b'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
    b"<sitemap><loc>https://example.org/s.xml</loc></sitemap></sitemapindex>"
)
LIST = b"https://example.org/a\nhttps://example.org/b\n"


def _kind(status: int, media_type: str, body: bytes) -> str | None:
    stream = entry_sitemap(status, media_type, body, url=URL, max_urls=100, max_bytes=10_000)
    return None if stream is None else stream.kind


@pytest.mark.parametrize(
    ("status", "media_type", "body", "kind"),
    [
        (200, "application/xml", URLSET, "urlset"),
        (200, "text/plain", URLSET, "urlset"),  # XML is XML whatever its label
        (203, "text/xml", INDEX, "sitemapindex"),
        (200, "text/plain", LIST, "text"),
        (200, "", LIST, "text"),
        (200, "text/uri-list", LIST, "text"),
        (200, "application/octet-stream", LIST, "text"),
        # not sitemaps: URLs to resolve
        (200, "text/csv", LIST, None),
        (200, "application/ld+json", b'{"@type": "Dataset"}', None),
        (200, "text/plain", b"no URL here\n", None),
        (200, "application/xml", b"<catalogue><item/></catalogue>", None),
        (200, "text/html", URLSET, None),
        (200, "", b"<!doctype html><html><body>page</body></html>", None),
        (204, "", b"", None),
        (410, "application/xml", URLSET, None),
    ],
)
def test_an_entry_answer_is_a_sitemap_or_a_url_to_resolve(
    status: int, media_type: str, body: bytes, kind: str | None
) -> None:
    assert _kind(status, media_type, body) == kind


def test_a_sitemap_that_cannot_be_read_is_still_a_failed_sitemap() -> None:
    with pytest.raises(SitemapError) as caught:
        _kind(200, "application/xml", b'<!DOCTYPE x [<!ENTITY a "b">]><urlset/>')
    assert caught.value.reason == "xml-entities-refused"
