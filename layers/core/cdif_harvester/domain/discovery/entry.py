"""What an entry URL is, decided from what it answered: a sitemap, or a URL to resolve.

A harvest starts from one URL. robots.txt is known by its path (RFC 9309 fixes it); any other
entry URL is fetched once and :func:`entry_sitemap` reads the answer: a sitemap (whatever the
sitemap reader accepts: urlset, sitemap index, or further kinds it learns) or a text sitemap
served as plain text, or else a URL to resolve exactly as if a sitemap listed it (an HTML
landing page, a JSON-LD document, a 410 tombstone, a 204 with Link headers, anything). Pure.

See docs/decisions/0067-what-an-entry-url-is.md.
"""

from __future__ import annotations

from cdif_harvester.domain.discovery.sitemap import SitemapError, SitemapStream, iter_sitemap
from cdif_harvester.model import HTML_MEDIA_TYPES

__all__ = ["SITEMAP_STATUSES", "TEXT_SITEMAP_MEDIA_TYPES", "entry_sitemap"]

SITEMAP_STATUSES = frozenset({200, 203})
"""Answers whose body may be a sitemap (a 203 is a 200 a proxy transformed, RFC 9110 15.3.4).
Any other status the resolver reads (204, 410) makes the entry a URL to resolve."""

TEXT_SITEMAP_MEDIA_TYPES = frozenset(
    {
        "",  # no Content-Type: the body decides
        "text/plain",  # sitemaps.org, "Text file"
        "text/uri-list",  # RFC 2483: a list of URIs, one per line
        "application/octet-stream",
        "binary/octet-stream",
        "application/gzip",  # a gzipped sitemap.txt
        "application/x-gzip",
    }
)
"""The media types under which a body read as a text sitemap is one. A document that declares
another type (``application/ld+json``, ``text/turtle``...) is that document, whatever lines
it holds."""


def entry_sitemap(
    status: int,
    media_type: str,
    body: bytes,
    *,
    url: str,
    max_urls: int,
    max_bytes: int,
) -> SitemapStream | None:
    """The sitemap an entry URL answered (its entries not yet read), or None when the entry
    is a URL to resolve.

    ``media_type`` is the Content-Type without parameters, lower-cased. The sitemap reader is
    asked (never second-guessed by root element names), so whatever XML it accepts as a
    sitemap is one here. Raises :class:`SitemapError` when the body is a sitemap that cannot
    be read (``malformed-xml``, ``xml-entities-refused``, ``too-large``, ``malformed-gzip``):
    only ``not-a-sitemap`` makes the entry a URL to resolve.
    """
    if status not in SITEMAP_STATUSES or media_type in HTML_MEDIA_TYPES:
        return None
    try:
        stream = iter_sitemap(body, sitemap_url=url, max_urls=max_urls, max_bytes=max_bytes)
    except SitemapError as error:
        if error.reason == "not-a-sitemap":
            return None
        raise
    if stream.kind == "text" and media_type not in TEXT_SITEMAP_MEDIA_TYPES:
        return None
    return stream
