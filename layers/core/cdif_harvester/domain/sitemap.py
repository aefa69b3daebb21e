"""Sitemaps: the lists of locations a publisher wants harvested.

CDIF discoverability, "Find metadata": CDIF recommends sitemaps (sitemaps.org protocol 0.9) to
tell harvesters where metadata is; a site announces them in robots.txt. This module reads one
sitemap document into values: a ``<urlset>`` (page locations), a ``<sitemapindex>`` (locations of
further sitemaps) or a plain-text sitemap (one URL per line). Signmaps (signposting.org) add typed
links to a ``<url>`` with ``<rs:ln>`` elements; they are kept on the entry as
:class:`~cdif_harvester.model.TypedLink` values.

Sitemaps come from anywhere, so the reader is defensive: gzip is inflated with a hard cap, XML is
read by a hardened streaming parser that never resolves entities nor loads DTDs, a document that
declares a DOCTYPE is refused outright (billion laughs, external entities), and memory stays flat
however many entries there are. The domain is pure: bytes in, values out.
"""

from __future__ import annotations

import io
import re
import zlib
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

from lxml import etree

from cdif_harvester.errors import PermanentError
from cdif_harvester.model import TypedLink

__all__ = [
    "MAX_SITEMAP_BYTES",
    "MAX_SITEMAP_URLS",
    "RS_NAMESPACE",
    "SITEMAP_NAMESPACE",
    "ParsedSitemap",
    "SitemapEntry",
    "SitemapError",
    "parse_sitemap",
]

SITEMAP_NAMESPACE = "http://www.sitemaps.org/schemas/sitemap/0.9"
RS_NAMESPACE = "http://www.openarchives.org/rs/terms/"
MAX_SITEMAP_URLS = 50_000  # sitemaps.org: at most 50,000 URLs per sitemap
MAX_SITEMAP_BYTES = 50 * 1024 * 1024  # sitemaps.org: at most 50 MiB uncompressed

_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = b"\xef\xbb\xbf"
_INFLATE_CHUNK = 64 * 1024
_PROLOG_SCAN = 64 * 1024
# XML declaration, processing instructions, comments and white space before the first tag.
_PROLOG = re.compile(rb"(?:\s+|<\?.*?\?>|<!--.*?-->)*", re.DOTALL)
_HTML_START = re.compile(rb"<!doctype\s+html|<html[\s>]|<head[\s>]|<body[\s>]", re.IGNORECASE)
_WEB_SCHEMES = frozenset({"http", "https"})
_ABSOLUTE = re.compile(r"https?://[^/?#\s]\S*", re.IGNORECASE)
_LINE_BREAK = re.compile(r"[ \t]*[\r\n]+[ \t]*")


class SitemapError(PermanentError):
    """A sitemap could not be read at all. ``reason`` is one of:

    * ``not-a-sitemap``: HTML, an unknown root element, or text without a single URL;
    * ``xml-entities-refused``: the document declares a DOCTYPE (entities, external DTD);
    * ``too-large``: more than ``max_bytes`` once inflated (e.g. a decompression bomb);
    * ``malformed-gzip``: gzip magic bytes but nothing could be inflated;
    * ``malformed-xml``: the XML broke before a single entry could be read.
    """

    reason = "not-a-sitemap"


@dataclass(frozen=True)
class SitemapEntry:
    """One ``<url>`` (or ``<sitemap>``, or text line): an absolute location, its ``lastmod`` as
    given (a W3C datetime string, stripped), and any Signmap links (``found_in="signmap"``,
    ``anchor`` = ``loc``)."""

    loc: str
    lastmod: str | None
    links: tuple[TypedLink, ...] = ()


@dataclass(frozen=True)
class ParsedSitemap:
    """A sitemap read into values.

    ``kind`` is ``"urlset"``, ``"sitemapindex"`` or ``"text"``. ``error`` is set (as
    ``"malformed-xml: <details>"``) when the document broke part-way: the complete entries
    before the break are kept. ``limit_hit`` is ``"max-urls"`` when entries past ``max_urls``
    were dropped.
    """

    kind: str
    entries: tuple[SitemapEntry, ...]
    error: str | None = None
    limit_hit: str | None = None


def parse_sitemap(
    body: bytes,
    *,
    sitemap_url: str,
    max_urls: int = MAX_SITEMAP_URLS,
    max_bytes: int = MAX_SITEMAP_BYTES,
) -> ParsedSitemap:
    """Read a sitemap body fetched from ``sitemap_url``.

    Gzip is recognised by its magic bytes (whatever the URL or Content-Type says) and inflated
    up to ``max_bytes``. XML is read with or without the sitemaps.org namespace; locations are
    stripped of surrounding white space and resolved against ``sitemap_url``; entries whose
    location is not http(s) are skipped. A body that does not start with ``<`` is read as a
    plain-text sitemap. Only the first ``max_urls`` entries are kept.

    Raises :class:`SitemapError` when nothing could be read (see its reasons); a document that
    breaks after some entries is returned with ``error`` set instead.
    """
    data = _inflate(body, max_bytes) if body.startswith(_GZIP_MAGIC) else body
    if len(data) > max_bytes:
        raise SitemapError(
            f"sitemap is {len(data)} bytes, more than the {max_bytes} allowed", reason="too-large"
        )
    data = data.removeprefix(_UTF8_BOM)
    start = data.lstrip()
    if not start:
        raise SitemapError("empty sitemap", reason="not-a-sitemap")
    if start.startswith(b"<"):
        # White space before the XML declaration is a common slip libxml2 would reject.
        _refuse_prolog(start)
        return _parse_xml(start, sitemap_url=sitemap_url, max_urls=max_urls)
    return _parse_text(data, max_urls=max_urls)


def _inflate(body: bytes, max_bytes: int) -> bytes:
    """Inflate gzip (all members), never producing more than ``max_bytes + 1`` bytes."""
    out = bytearray()
    pending = body
    while pending.startswith(_GZIP_MAGIC):
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        feed = memoryview(pending)
        try:
            while True:
                room = max_bytes + 1 - len(out)
                chunk = inflater.decompress(feed, min(room, _INFLATE_CHUNK))
                out += chunk
                if len(out) > max_bytes:
                    raise SitemapError(
                        f"gzip sitemap inflates to more than {max_bytes} bytes",
                        reason="too-large",
                    )
                feed = memoryview(inflater.unconsumed_tail)
                if inflater.eof or (not chunk and not feed):
                    break
        except zlib.error as exc:
            if not out:
                raise SitemapError(
                    f"gzip stream unreadable: {exc}", reason="malformed-gzip"
                ) from exc
            break  # keep what was inflated; the XML reader reports where it broke
        if not inflater.eof:
            break  # truncated stream: what came out so far is all there is
        pending = inflater.unused_data.lstrip(b"\x00")  # members may be padded with NULs
    return bytes(out)


def _refuse_prolog(data: bytes) -> None:
    """Refuse HTML and any DOCTYPE before the XML parser sees the document."""
    head = data[:_PROLOG_SCAN]
    prolog = _PROLOG.match(head)
    first = head[prolog.end() if prolog else 0 :][:64]
    if _HTML_START.match(first):
        raise SitemapError("the document is HTML, not a sitemap", reason="not-a-sitemap")
    if first[:9].upper() == b"<!DOCTYPE" or first.startswith(b"<!ENTITY"):
        raise SitemapError(
            "sitemap declares a DOCTYPE; entities and DTDs are refused",
            reason="xml-entities-refused",
        )


def _local(tag: str) -> tuple[str, str]:
    """Split ``{ns}name`` into (ns, name)."""
    if tag.startswith("{"):
        ns, _, name = tag[1:].partition("}")
        return ns, name
    return "", tag


def _parse_xml(data: bytes, *, sitemap_url: str, max_urls: int) -> ParsedSitemap:
    kind: str | None = None
    entry_tag = loc_tag = lastmod_tag = ""
    entries: list[SitemapEntry] = []
    depth = 0
    limit_hit: str | None = None
    events = etree.iterparse(
        io.BytesIO(data),
        events=("start", "end"),
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
    )
    try:
        for event, element in events:
            if not isinstance(element.tag, str):
                continue  # entity references (never resolved)
            if event == "start":
                depth += 1
                if depth == 1:
                    kind = _root_kind(element)
                    ns = _local(element.tag)[0]
                    prefix = f"{{{ns}}}" if ns else ""
                    entry_tag = prefix + ("url" if kind == "urlset" else "sitemap")
                    loc_tag, lastmod_tag = prefix + "loc", prefix + "lastmod"
                continue
            depth -= 1
            if depth != 1:
                continue
            # A direct child of the root is complete: read it, then drop it (flat memory).
            if element.tag == entry_tag:
                entry = _read_entry(element, loc_tag, lastmod_tag, sitemap_url)
                if entry is not None:
                    if len(entries) >= max_urls:
                        limit_hit = "max-urls"
                        break
                    entries.append(entry)
            element.clear(keep_tail=False)
            parent = element.getparent()
            if parent is not None:
                while element.getprevious() is not None:
                    del parent[0]
    except etree.XMLSyntaxError as exc:
        detail = getattr(exc, "msg", None) or str(exc)  # "msg" leaves out lxml's "(<string>...)"
        if kind is None or not entries:
            raise SitemapError(
                f"sitemap is not well-formed XML: {detail}", reason="malformed-xml"
            ) from exc
        return ParsedSitemap(kind, tuple(entries), error=f"malformed-xml: {detail}")
    if kind is None:
        raise SitemapError("sitemap has no root element", reason="malformed-xml")
    return ParsedSitemap(kind, tuple(entries), limit_hit=limit_hit)


def _root_kind(root: Any) -> str:
    """Return the sitemap kind of the root element, refusing DTDs and anything else."""
    if root.getroottree().docinfo.doctype:
        # Defence in depth: the prolog scan refuses a DOCTYPE before parsing; this catches one
        # the scan could not see (after a prolog longer than the scan, say).
        raise SitemapError(
            "sitemap declares a DOCTYPE; entities and DTDs are refused",
            reason="xml-entities-refused",
        )
    name = _local(root.tag)[1]
    if name in {"urlset", "sitemapindex"}:
        return name
    raise SitemapError(f"root element <{name}> is not a sitemap", reason="not-a-sitemap")


def _read_entry(element: Any, loc_tag: str, lastmod_tag: str, base: str) -> SitemapEntry | None:
    loc: str | None = None
    lastmod: str | None = None
    link_elements: list[Any] = []
    for child in element:
        if child.tag == loc_tag and loc is None:
            loc = _clean_url("".join(child.itertext()), base)
            link_elements.extend(child.iterchildren(f"{{{RS_NAMESPACE}}}ln"))
        elif child.tag == lastmod_tag and lastmod is None:
            lastmod = (child.text or "").strip() or None
        elif child.tag == f"{{{RS_NAMESPACE}}}ln":
            link_elements.append(child)
    if loc is None:
        return None
    links = tuple(link for ln in link_elements for link in _read_links(ln, loc, base))
    return SitemapEntry(loc=loc, lastmod=lastmod, links=links)


def _read_links(ln: Any, anchor: str, base: str) -> list[TypedLink]:
    """One ``<rs:ln>`` gives a typed link per relation type in its ``rel``."""
    href = _clean_url(ln.get("href") or "", base)
    if href is None:
        return []
    media_type = (ln.get("type") or "").strip() or None
    profile = (ln.get("profile") or "").strip() or None
    return [
        TypedLink(
            href=href,
            rel=rel,
            type=media_type,
            profile=profile,
            anchor=anchor,
            found_in="signmap",
        )
        for rel in (ln.get("rel") or "").lower().split()
    ]


def _clean_url(raw: str, base: str) -> str | None:
    """Resolve a location leniently: strip white space around it, join a URL wrapped across
    lines (a line break and the indentation around it vanish, as do tabs), encode the spaces
    left, resolve against ``base``. None unless the result is http(s)."""
    text = raw.strip()
    if _ABSOLUTE.fullmatch(text):
        return text  # the common case, without the cost of urljoin
    text = _LINE_BREAK.sub("", text).replace("\t", "").replace(" ", "%20")
    if not text:
        return None
    url = urljoin(base, text)
    return url if urlsplit(url).scheme.lower() in _WEB_SCHEMES else None


def _parse_text(data: bytes, *, max_urls: int) -> ParsedSitemap:
    """sitemaps.org text format: one absolute URL per line, nothing else."""
    entries: list[SitemapEntry] = []
    limit_hit: str | None = None
    for raw_line in data.splitlines():
        line = raw_line.decode("utf-8", "replace").strip()
        if not line or any(c.isspace() for c in line):
            continue
        if urlsplit(line).scheme.lower() not in _WEB_SCHEMES or not urlsplit(line).netloc:
            continue
        if len(entries) >= max_urls:
            limit_hit = "max-urls"
            break
        entries.append(SitemapEntry(loc=line, lastmod=None))
    if not entries:
        raise SitemapError("text sitemap without a single http(s) URL", reason="not-a-sitemap")
    return ParsedSitemap("text", tuple(entries), limit_hit=limit_hit)
