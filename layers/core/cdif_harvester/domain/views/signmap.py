"""Writing a Signmap: a sitemap whose ``<url>`` entries carry Signposting links.

:func:`render_signmap` writes the ``<urlset>`` parts of a Signmap (signposting.org, "Signposting
Signmaps") within the sitemaps.org limits, :func:`render_signmap_index` the index of several
parts. It is the inverse of :func:`cdif_harvester.domain.discovery.sitemap.parse_sitemap` and
takes the :class:`~cdif_harvester.domain.discovery.sitemap.SitemapEntry` values that gives.

See docs/decisions/0039-source-signmap.md.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote

from cdif_harvester.domain.discovery.lastmod import parse_lastmod
from cdif_harvester.domain.discovery.sitemap import (
    MAX_SITEMAP_BYTES,
    MAX_SITEMAP_URLS,
    RS_NAMESPACE,
    SITEMAP_NAMESPACE,
    SitemapEntry,
)
from cdif_harvester.model import TypedLink

__all__ = [
    "SIGNMAP_MEDIA_TYPE",
    "SignmapPart",
    "latest_lastmod",
    "iter_signmap",
    "render_signmap",
    "render_signmap_index",
    "signmap_links",
]

SIGNMAP_MEDIA_TYPE = "application/xml"

_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>\n'
_URLSET_OPEN = f'<urlset xmlns="{SITEMAP_NAMESPACE}" xmlns:rs="{RS_NAMESPACE}">\n'
_URLSET_CLOSE = "</urlset>\n"
_INDEX_OPEN = f'<sitemapindex xmlns="{SITEMAP_NAMESPACE}">\n'
_INDEX_CLOSE = "</sitemapindex>\n"
# Characters XML 1.0 cannot carry at all (section 2.2), even as character references.
# What a URI reference may not hold as is: white space, controls, non-ASCII, < > ".
_NOT_URI = re.compile(r'[^\x21-\x7e]|[<>"]')
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _uri(reference: str) -> str:
    reference = reference.strip()
    if not _NOT_URI.search(reference):  # the common case: nothing to encode
        return reference
    return "".join(quote(c, safe="") if _NOT_URI.match(c) else c for c in reference)


def _escape(value: str) -> str:
    value = _NOT_XML.sub("", value)
    return (
        value.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("\t", "&#9;")
        .replace("\n", "&#10;")
        .replace("\r", "&#13;")
    )


def signmap_links(loc: str, links: Iterable[TypedLink]) -> tuple[TypedLink, ...]:
    """The links a Signmap entry for ``loc`` can carry: those whose context is ``loc``."""
    return tuple(link for link in links if link.anchor in (None, loc) and not link.reverse)


def _entry_xml(entry: SitemapEntry) -> str:
    parts = [f"  <url>\n    <loc>{_escape(_uri(entry.loc))}</loc>\n"]
    if entry.lastmod:
        parts.append(f"    <lastmod>{_escape(entry.lastmod.strip())}</lastmod>\n")
    for link in signmap_links(entry.loc, entry.links):
        attributes = [("rel", link.rel), ("href", _uri(link.href))]
        if link.type:
            attributes.append(("type", link.type))
        if link.profile:
            attributes.append(("profile", link.profile))
        rendered = " ".join(f'{name}="{_escape(value)}"' for name, value in attributes)
        parts.append(f"    <rs:ln {rendered}/>\n")
    parts.append("  </url>\n")
    return "".join(parts)


@dataclass(frozen=True)
class SignmapPart:
    """One ``<urlset>`` document of a Signmap: its bytes, how many entries it holds, and the
    latest ``lastmod`` among them (for the sitemap index; None when none has one)."""

    body: bytes
    urls: int
    lastmod: str | None


def render_signmap(
    entries: Iterable[SitemapEntry],
    *,
    max_urls: int = MAX_SITEMAP_URLS,
    max_bytes: int = MAX_SITEMAP_BYTES,
) -> list[SignmapPart]:
    """Write ``entries``, in their order, as one or more Signmap ``<urlset>`` documents.

    Each document holds at most ``max_urls`` entries and ``max_bytes`` bytes (an entry that
    alone is larger still gets a document of its own). No entries give one empty
    ``<urlset>``. Never raises. Every part is held: :func:`iter_signmap` gives them one at a
    time.
    """
    return list(iter_signmap(entries, max_urls=max_urls, max_bytes=max_bytes))


def iter_signmap(
    entries: Iterable[SitemapEntry],
    *,
    max_urls: int = MAX_SITEMAP_URLS,
    max_bytes: int = MAX_SITEMAP_BYTES,
) -> Iterator[SignmapPart]:
    """The parts :func:`render_signmap` writes, each given as soon as it is complete (and the
    entries read no further than that), so that a writer holds one part at a time: a source of
    a million records makes some twenty parts of up to 50 MB each."""
    head = (_DECLARATION + _URLSET_OPEN).encode("utf-8")
    tail = _URLSET_CLOSE.encode("utf-8")
    # Each document is written into one buffer as its entries come, and its latest lastmod
    # kept as they go: a part of 50,000 entries is held once, not as pieces and their join.
    body = io.BytesIO()
    count, latest, size = 0, None, len(head) + len(tail)
    written = 0  # parts given
    body.write(head)
    for entry in entries:
        chunk = _entry_xml(entry).encode("utf-8")
        if count and (count >= max_urls or size + len(chunk) > max_bytes):
            body.write(tail)
            yield SignmapPart(body.getvalue(), count, latest)
            written += 1
            body = io.BytesIO()
            count, latest, size = 0, None, len(head) + len(tail)
            body.write(head)
        body.write(chunk)
        count += 1
        latest = latest_lastmod((latest, entry.lastmod))
        size += len(chunk)
    if count or not written:
        body.write(tail)
        yield SignmapPart(body.getvalue(), count, latest)


def render_signmap_index(parts: Sequence[tuple[str, str | None]]) -> bytes:
    """Write a sitemap index listing ``parts``: (location, lastmod or None) each, in order.

    Locations may be relative references (they resolve against the index's own URL). Never
    raises.
    """
    lines = [_DECLARATION, _INDEX_OPEN]
    for loc, lastmod in parts:
        lines.append(f"  <sitemap>\n    <loc>{_escape(_uri(loc))}</loc>\n")
        if lastmod:
            lines.append(f"    <lastmod>{_escape(lastmod.strip())}</lastmod>\n")
        lines.append("  </sitemap>\n")
    lines.append(_INDEX_CLOSE)
    return "".join(lines).encode("utf-8")


def latest_lastmod(values: Iterable[str | None]) -> str | None:
    """The latest of W3C datetime strings, as written; values that are not dates are ignored."""
    best: tuple[datetime, str] | None = None
    for value in values:
        moment = parse_lastmod(value)
        if moment is None or value is None:
            continue
        if best is None or moment > best[0]:
            best = (moment, value.strip())
    return best[1] if best else None
