"""What an entry URL is, decided from what it answered: a sitemap, or a URL to resolve.

A harvest starts from one URL. robots.txt is known by its path (RFC 9309 fixes it); any other
entry URL is fetched once and :func:`entry_sitemap` reads the answer: a sitemap (whatever the
sitemap reader accepts: urlset, sitemap index, or further kinds it learns) or a text sitemap
served as plain text, or else a URL to resolve exactly as if a sitemap listed it (an HTML
landing page, a JSON-LD document, a 410 tombstone, a 204 with Link headers, anything). A
site root (``https://host/``) is first asked for the site's sitemaps: robots.txt's, then the
:data:`WELL_KNOWN_SITEMAP_PATHS`. Pure.

See docs/decisions/0067-what-an-entry-url-is.md and
docs/decisions/0070-site-roots-backoff-and-contact.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, overload
from urllib.parse import urlsplit

from cdif_harvester.domain.discovery.sitemap import (
    CompactEntry,
    SitemapEntry,
    SitemapError,
    SitemapStream,
    iter_sitemap,
)
from cdif_harvester.model import HTML_MEDIA_TYPES

__all__ = [
    "SITEMAP_STATUSES",
    "TEXT_SITEMAP_MEDIA_TYPES",
    "WELL_KNOWN_SITEMAP_PATHS",
    "SiteDiscovery",
    "entry_sitemap",
    "is_site_root",
]

WELL_KNOWN_SITEMAP_PATHS = ("/sitemap.xml", "/sitemap_index.xml", "/sitemap.xml.gz")
"""Where a site that announces no sitemap in robots.txt most often keeps one, asked in this
order, the first sitemap found ending the search: ``/sitemap.xml`` (the sitemaps.org example
and the default of most generators and repository platforms), ``/sitemap_index.xml`` (the
index the common CMS plugins serve) and ``/sitemap.xml.gz`` (generators that compress). Three
requests at most: see docs/decisions/0070-site-roots-backoff-and-contact.md."""

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


@overload
def entry_sitemap(
    status: int,
    media_type: str,
    body: bytes,
    *,
    url: str,
    max_urls: int,
    max_bytes: int,
    compact: Literal[False] = False,
) -> SitemapStream[SitemapEntry] | None: ...


@overload
def entry_sitemap(
    status: int,
    media_type: str,
    body: bytes,
    *,
    url: str,
    max_urls: int,
    max_bytes: int,
    compact: Literal[True],
) -> SitemapStream[CompactEntry] | None: ...


def entry_sitemap(
    status: int,
    media_type: str,
    body: bytes,
    *,
    url: str,
    max_urls: int,
    max_bytes: int,
    compact: bool = False,
) -> SitemapStream[SitemapEntry] | SitemapStream[CompactEntry] | None:
    """The sitemap an entry URL answered (its entries not yet read, as ``iter_sitemap`` gives
    them, ``compact`` or not), or None when the entry is a URL to resolve.

    ``media_type`` is the Content-Type without parameters, lower-cased. The sitemap reader is
    asked (never second-guessed by root element names), so whatever XML it accepts as a
    sitemap is one here. Raises :class:`SitemapError` when the body is a sitemap that cannot
    be read (``malformed-xml``, ``xml-entities-refused``, ``too-large``, ``malformed-gzip``):
    only ``not-a-sitemap`` makes the entry a URL to resolve.
    """
    if status not in SITEMAP_STATUSES or media_type in HTML_MEDIA_TYPES:
        return None
    stream: SitemapStream[SitemapEntry] | SitemapStream[CompactEntry]
    try:
        if compact:
            stream = iter_sitemap(
                body, sitemap_url=url, max_urls=max_urls, max_bytes=max_bytes, compact=True
            )
        else:
            stream = iter_sitemap(body, sitemap_url=url, max_urls=max_urls, max_bytes=max_bytes)
    except SitemapError as error:
        if error.reason == "not-a-sitemap":
            return None
        raise
    if stream.kind == "text" and media_type not in TEXT_SITEMAP_MEDIA_TYPES:
        return None
    return stream


def is_site_root(url: str) -> bool:
    """True for the address of a whole site: an http(s) URL whose path is empty or ``/``, with
    no query (``https://data.example.org/``). A fragment is ignored (never sent)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return (
        parts.scheme.lower() in {"http", "https"}
        and bool(parts.hostname)
        and parts.path in {"", "/"}
        and not parts.query
    )


ROBOTS = "robots.txt"
WELL_KNOWN = "well-known path"


@dataclass(frozen=True)
class SiteDiscovery:
    """What a site root led to: its sitemaps and how they were found (``found_by``: robots.txt,
    a well-known path, or nothing, when the page itself is resolved), and what each well-known
    path probed answered (``probed``: ``(url, answer)`` pairs)."""

    site: str
    found_by: str | None
    sitemaps: tuple[str, ...] = ()
    probed: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON form kept for the run's summary."""
        return {
            "site": self.site,
            "found_by": self.found_by,
            "sitemaps": list(self.sitemaps),
            "probed": [{"url": url, "answer": answer} for url, answer in self.probed],
            "note": self.describe(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SiteDiscovery:
        """The discovery :meth:`to_dict` wrote."""
        return cls(
            site=str(data["site"]),
            found_by=data.get("found_by"),
            sitemaps=tuple(str(url) for url in data.get("sitemaps") or ()),
            probed=tuple((str(p["url"]), str(p["answer"])) for p in data.get("probed") or ()),
        )

    def describe(self) -> str:
        """One line for people: which sitemaps were found and how."""
        if self.found_by == ROBOTS:
            count = len(self.sitemaps)
            return (
                f"site {self.site}: {count} sitemap{'s' if count != 1 else ''} announced in "
                f"robots.txt: {', '.join(self.sitemaps)}"
            )
        tried = ", ".join(f"{url} ({answer})" for url, answer in self.probed)
        if self.found_by == WELL_KNOWN:
            return (
                f"site {self.site}: robots.txt announces no sitemap; found at a well-known "
                f"path: {', '.join(self.sitemaps)}" + (f" (after {tried})" if tried else "")
            )
        return (
            f"site {self.site}: no sitemap announced in robots.txt nor found at "
            f"{tried or 'a well-known path'}; the page itself is resolved"
        )
