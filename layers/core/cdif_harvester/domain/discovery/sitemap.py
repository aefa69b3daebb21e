"""Sitemaps: the lists of locations a publisher wants harvested.

CDIF discoverability, "Find metadata": CDIF recommends sitemaps (sitemaps.org protocol 0.9) to
tell harvesters where metadata is; a site announces them in robots.txt. This module reads one
sitemap document into values: a ``<urlset>`` (page locations), a ``<sitemapindex>`` (locations of
further sitemaps), a plain-text sitemap (one URL per line), or an RSS 2.0 or Atom 1.0 feed, which
the protocol accepts as a sitemap (each item's or entry's link is a location). Signmaps
(signposting.org) add typed links to a ``<url>`` with ``<rs:ln>`` elements; they are kept on the
entry as :class:`~cdif_harvester.model.TypedLink` values.

Sitemaps come from anywhere, so the reader is defensive: gzip is inflated with a hard cap, XML is
read by a hardened streaming parser that never resolves entities nor loads DTDs, a document that
declares a DOCTYPE is refused outright (billion laughs, external entities), and memory stays flat
however many entries there are. The domain is pure: bytes in, values out.

See docs/decisions/0050-parsing-in-bounded-memory.md, 0068-feeds-as-sitemaps.md and
0084-expander-speed.md (compact entries).
"""

from __future__ import annotations

import gc
import itertools
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Generic, Literal, TypeVar, cast, overload
from urllib.parse import urljoin, urlsplit

from lxml import etree

from cdif_harvester.errors import PermanentError
from cdif_harvester.model import TypedLink

__all__ = [
    "MAX_SITEMAP_BYTES",
    "MAX_SITEMAP_URLS",
    "RS_NAMESPACE",
    "SITEMAP_NAMESPACE",
    "CompactEntry",
    "LinkRow",
    "ParsedSitemap",
    "SitemapEntry",
    "SitemapError",
    "SitemapStream",
    "iter_sitemap",
    "parse_sitemap",
]

SITEMAP_NAMESPACE = "http://www.sitemaps.org/schemas/sitemap/0.9"
RS_NAMESPACE = "http://www.openarchives.org/rs/terms/"
MAX_SITEMAP_URLS = 50_000  # sitemaps.org: at most 50,000 URLs per sitemap
MAX_SITEMAP_BYTES = 50 * 1024 * 1024  # sitemaps.org: at most 50 MiB uncompressed

_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = b"\xef\xbb\xbf"
_INFLATE_INPUT = 16 * 1024  # compressed bytes given to the inflater at a time
_XML_CHUNK = 32 * 1024  # what the XML parser is fed at a time (lxml iterparse's read size)
_INFLATE_CHUNK = _XML_CHUNK  # inflated at a time: pieces the XML parser takes as they are
_PROLOG_SCAN = 64 * 1024
# XML declaration, processing instructions, comments and white space before the first tag.
_PROLOG = re.compile(rb"(?:\s+|<\?.*?\?>|<!--.*?-->)*", re.DOTALL)
_HTML_START = re.compile(rb"<!doctype\s+html|<html[\s>]|<head[\s>]|<body[\s>]", re.IGNORECASE)
_WEB_SCHEMES = frozenset({"http", "https"})
_ABSOLUTE = re.compile(r"https?://[^/?#\s]\S*", re.IGNORECASE)
_LINE_BREAK = re.compile(r"[ \t]*[\r\n]+[ \t]*")
_WEB_PREFIXES = ("https://", "http://")
_Event = Literal["start", "end"]
_LN_TAG = f"{{{RS_NAMESPACE}}}ln"
_MEMO_SIZE = 4096  # distinct attribute values remembered per sitemap
# The XML declaration (XML 1.0 section 2.8) as libxml2 takes it; anything else that starts with
# "<?xml" is a broken one (``version="null"`` from some exporters), which libxml2 refuses.
_DECLARATION_START = re.compile(rb"<\?xml(?=[\s?])")
_DECLARATION = re.compile(
    rb"""<\?xml\s+version\s*=\s*(["'])1\.[0-9]+\1
    (?:\s+encoding\s*=\s*(["'])(?P<encoding>[A-Za-z][A-Za-z0-9._-]{0,39})\2)?
    (?:\s+standalone\s*=\s*(["'])(?:yes|no)\4)?\s*\?>""",
    re.VERBOSE,
)
_DECLARATION_SCAN = 1024  # how far the end of a broken declaration is looked for
_ALTERNATE = frozenset({"alternate", "http://www.iana.org/assignments/relation/alternate"})
_DC_DATE = "{http://purl.org/dc/elements/1.1/}date"
_new_link = _new_entry = object.__new__


class SitemapError(PermanentError):
    """A sitemap could not be read at all. ``reason`` is one of:

    * ``not-a-sitemap``: HTML, an unknown root element (neither a sitemap nor an RSS or Atom
      feed), or text without a single URL;
    * ``xml-entities-refused``: the document declares a DOCTYPE (entities, external DTD);
    * ``too-large``: more than ``max_bytes`` once inflated (e.g. a decompression bomb);
    * ``malformed-gzip``: gzip magic bytes but nothing could be inflated;
    * ``malformed-xml``: the XML broke before a single entry could be read.
    """

    reason = "not-a-sitemap"


@dataclass(frozen=True)
class SitemapEntry:
    """One ``<url>`` (or ``<sitemap>``, text line, feed item or entry): a location (absolute, or
    as written when it cannot be resolved; not necessarily http(s): the expander judges it), its
    ``lastmod`` as given (a W3C datetime string, or an RSS ``pubDate``, stripped), and any
    Signmap links (``found_in="signmap"``, ``anchor`` = ``loc``)."""

    loc: str
    lastmod: str | None
    links: tuple[TypedLink, ...] = ()


# A Signmap link as :class:`CompactEntry` keeps it: ``(href, rel, type, profile)``.
LinkRow = tuple[str, str, str | None, str | None]


@dataclass(frozen=True)
class CompactEntry:
    """An entry as :func:`iter_sitemap` gives it with ``compact=True``: each Signmap link a
    :data:`LinkRow`, which stands for the :class:`~cdif_harvester.model.TypedLink` with those
    fields, ``anchor`` = ``loc`` and ``found_in="signmap"`` (the only links a sitemap entry
    has). For a reader that hands most entries on without reading their links: the expander
    stores them in parts as these rows (docs/decisions/0084-expander-speed.md)."""

    loc: str
    lastmod: str | None
    links: tuple[LinkRow, ...] = ()

    def entry(self) -> SitemapEntry:
        """The :class:`SitemapEntry` this stands for (what ``compact=False`` gives)."""
        loc = self.loc
        return SitemapEntry(
            loc=loc,
            lastmod=self.lastmod,
            links=tuple(
                TypedLink(href, rel, type=type_, profile=profile, anchor=loc, found_in="signmap")
                for href, rel, type_, profile in self.links
            ),
        )


_Entry = TypeVar("_Entry", SitemapEntry, CompactEntry)
_AnyEntry = SitemapEntry | CompactEntry  # what the readers give (see iter_sitemap)


@dataclass(frozen=True)
class ParsedSitemap:
    """A sitemap read into values.

    ``kind`` is ``"urlset"``, ``"sitemapindex"``, ``"text"``, ``"rss"`` or ``"atom"`` (the
    feeds give locations, as a urlset does). ``error`` is set (as ``"malformed-xml:
    <details>"``) when the document broke part-way: the complete entries before the break are
    kept. ``limit_hit`` is ``"max-urls"`` when entries past ``max_urls`` were dropped.
    ``notes`` say what was read leniently (a broken XML declaration left out).
    """

    kind: str
    entries: tuple[SitemapEntry, ...]
    error: str | None = None
    limit_hit: str | None = None
    notes: tuple[str, ...] = ()


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
    location is empty are skipped; a location that is not http(s) or not a URL at all is kept
    as written, for the expander to record why it is not harvested. A body that does not start
    with ``<`` is read as a plain-text sitemap. Only the first ``max_urls`` entries are kept.

    Raises :class:`SitemapError` when nothing could be read (see its reasons); a document that
    breaks after some entries is returned with ``error`` set instead.
    """
    # (The stream pauses the cyclic garbage collector while it is read: see SitemapStream.)
    stream = iter_sitemap(body, sitemap_url=sitemap_url, max_urls=max_urls, max_bytes=max_bytes)
    entries = tuple(stream)
    return ParsedSitemap(stream.kind, entries, stream.error, stream.limit_hit, stream.notes)


@dataclass
class _Status:
    """What a reader is asked (whether its entries are compact) and learns as it goes: the
    kind first, the count, and how it ended."""

    compact: bool = False
    kind: str = ""
    count: int = 0
    error: str | None = None
    limit_hit: str | None = None
    notes: tuple[str, ...] = ()


class SitemapStream(Generic[_Entry]):
    """The entries of one sitemap, read one at a time (see :func:`iter_sitemap`).

    ``kind`` is known from the start; ``count``, ``error`` and ``limit_hit`` are final once the
    iteration has ended. Iterate once.
    """

    def __init__(self, entries: Iterator[_Entry], status: _Status) -> None:
        self._status = status
        # Read up to the first entry now, so that the kind is known and a document that is not
        # a sitemap at all fails here rather than in the middle of the caller's loop.
        self._first: _Entry | None = next(entries, None)
        self._entries: Iterator[_Entry] = entries

    @property
    def kind(self) -> str:
        """``urlset``, ``sitemapindex``, ``text``, ``rss`` or ``atom``."""
        return self._status.kind

    @property
    def notes(self) -> tuple[str, ...]:
        """What was read leniently (known from the start: a broken XML declaration left out)."""
        return self._status.notes

    @property
    def count(self) -> int:
        """Entries read so far."""
        return self._status.count

    @property
    def error(self) -> str | None:
        """Why the document broke part-way (the entries before the break were given)."""
        return self._status.error

    @property
    def limit_hit(self) -> str | None:
        """``max-urls`` when the document had more entries than allowed."""
        return self._status.limit_hit

    def __iter__(self) -> Iterator[_Entry]:
        # Tens of thousands of entries and links are small objects without cycles that the
        # cyclic collector would scan over and over while they pile up (a sixth of the time on
        # a large Signmap); it waits until the iteration ends (or the iterator is dropped,
        # which closes it). Only who paused it resumes it: another thread may be parsing too.
        pause = gc.isenabled()
        if pause:
            gc.disable()
        try:
            if self._first is not None:
                first, self._first = self._first, None
                yield first
            yield from self._entries
        finally:
            if pause:
                gc.enable()


@overload
def iter_sitemap(
    body: bytes,
    *,
    sitemap_url: str,
    max_urls: int = ...,
    max_bytes: int = ...,
    compact: Literal[False] = False,
) -> SitemapStream[SitemapEntry]: ...


@overload
def iter_sitemap(
    body: bytes,
    *,
    sitemap_url: str,
    max_urls: int = ...,
    max_bytes: int = ...,
    compact: Literal[True],
) -> SitemapStream[CompactEntry]: ...


def iter_sitemap(
    body: bytes,
    *,
    sitemap_url: str,
    max_urls: int = MAX_SITEMAP_URLS,
    max_bytes: int = MAX_SITEMAP_BYTES,
    compact: bool = False,
) -> SitemapStream[SitemapEntry] | SitemapStream[CompactEntry]:
    """Read a sitemap like :func:`parse_sitemap`, giving its entries one at a time; with
    ``compact``, as :class:`CompactEntry` values (the same entries, Signmap links as rows).

    Memory stays flat whatever the number of entries: a caller that hands entries on as they
    come (the expander writes them out in parts) never holds them all. Raises
    :class:`SitemapError` here when the document is not a sitemap at all, and during the
    iteration when it proves too large (the rest of a gzip stream is always inflated, and
    dropped, so that being too large is reported before the iteration ends).
    """
    status = _Status(compact=compact)
    entries = _entries(
        body, sitemap_url=sitemap_url, max_urls=max_urls, max_bytes=max_bytes, status=status
    )
    # (Each reader gives CompactEntry values when status.compact says so, else SitemapEntry.)
    if compact:
        return SitemapStream(cast("Iterator[CompactEntry]", entries), status)
    return SitemapStream(cast("Iterator[SitemapEntry]", entries), status)


def _compact(entry: SitemapEntry) -> CompactEntry:
    """``entry`` as a :class:`CompactEntry` (for the readers of feed items, which have no
    links)."""
    links = tuple(_row(link, entry.loc) for link in entry.links)
    return CompactEntry(entry.loc, entry.lastmod, links)


def _row(link: TypedLink, loc: str) -> LinkRow:
    """``link`` as a :data:`LinkRow`; raises ValueError unless it is one (the ``<rs:ln>`` of the
    entry of ``loc``, with no other fields)."""
    row = (link.href, link.rel, link.type, link.profile)
    signmap = TypedLink(*row, anchor=loc, found_in="signmap")
    if link != signmap:
        raise ValueError(f"not a Signmap link of {loc}: {link!r}")
    return row


def _entries(
    body: bytes, *, sitemap_url: str, max_urls: int, max_bytes: int, status: _Status
) -> Iterator[_AnyEntry]:
    if not body.startswith(_GZIP_MAGIC):
        if len(body) > max_bytes:
            raise SitemapError(
                f"sitemap is {len(body)} bytes, more than the {max_bytes} allowed",
                reason="too-large",
            )
        yield from _parse_data(body, sitemap_url=sitemap_url, max_urls=max_urls, status=status)
        return
    # Gzip is inflated while the parser reads it, so the inflated document is never held whole
    # (it would cost up to max_bytes, twice). Being too large still wins over whatever the
    # parse concluded: the rest of the stream is inflated (and dropped) before the end.
    inflated = _inflate(body, max_bytes)
    failure: Exception | None = None
    try:
        yield from _parse_stream(
            inflated, sitemap_url=sitemap_url, max_urls=max_urls, status=status
        )
    except Exception as exc:  # given below, unless the document turns out too large
        failure = exc
    for _ in inflated:  # raises "too-large" past max_bytes
        pass
    if failure is not None:
        raise failure


def _inflate(body: bytes, max_bytes: int) -> Iterator[bytes]:
    """Inflate gzip (all members) piece by piece, never producing more than ``max_bytes + 1``
    bytes in all."""
    total = 0
    pending = body
    while pending.startswith(_GZIP_MAGIC):
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        source = memoryview(pending)
        taken = 0  # how much of ``pending`` the inflater has been given
        tail = b""
        try:
            while True:
                # The input goes in in small pieces: what an output cap leaves over comes back
                # as a copy (``unconsumed_tail``), and copying all the rest of the body after
                # each piece of output cost as much as the inflating.
                if tail:
                    feed: bytes | memoryview = tail
                else:
                    feed = source[taken : taken + _INFLATE_INPUT]
                    taken += len(feed)
                room = max_bytes + 1 - total
                chunk = inflater.decompress(feed, min(room, _INFLATE_CHUNK))
                total += len(chunk)
                if total > max_bytes:
                    raise SitemapError(
                        f"gzip sitemap inflates to more than {max_bytes} bytes",
                        reason="too-large",
                    )
                if chunk:
                    yield chunk
                tail = inflater.unconsumed_tail
                if inflater.eof or (not chunk and not tail and taken >= len(pending)):
                    break  # (output can still be held back after the last input went in)
        except zlib.error as exc:
            if not total:
                raise SitemapError(
                    f"gzip stream unreadable: {exc}", reason="malformed-gzip"
                ) from exc
            break  # keep what was inflated; the XML reader reports where it broke
        if not inflater.eof:
            break  # truncated stream: what came out so far is all there is
        # Members may be padded with NULs; what the last piece held past this member's end is
        # where the next one starts.
        after = taken - len(inflater.unused_data)
        pending = pending[after:].lstrip(b"\x00")


def _parse_data(
    data: bytes, *, sitemap_url: str, max_urls: int, status: _Status
) -> Iterator[_AnyEntry]:
    """Read a whole document: XML or text."""
    data = data.removeprefix(_UTF8_BOM)
    start = data.lstrip()
    if not start:
        raise SitemapError("empty sitemap", reason="not-a-sitemap")
    if start.startswith(b"<"):
        # White space before the XML declaration is a common slip libxml2 would reject.
        start = _mend_declaration(start, status)
        _refuse_prolog(start)
        return _parse_xml(_slices(start), sitemap_url=sitemap_url, max_urls=max_urls, status=status)
    return _parse_text(data, max_urls=max_urls, status=status)


def _parse_stream(
    chunks: Iterator[bytes], *, sitemap_url: str, max_urls: int, status: _Status
) -> Iterator[_AnyEntry]:
    """Read a document that arrives in ``chunks`` exactly as :func:`_parse_data` reads it
    whole, holding no more of it than the prolog scan needs: XML goes to the parser as it
    arrives; text, and documents shorter than the scan, are read whole."""
    head = bytearray()
    bom: int | None = None  # length of the BOM, once known
    blank = 0  # the BOM and the white space known to start the document
    for chunk in chunks:
        head += chunk
        if bom is None:
            if len(head) < len(_UTF8_BOM) and _UTF8_BOM.startswith(head):
                continue
            bom = blank = len(_UTF8_BOM) if head.startswith(_UTF8_BOM) else 0
        unseen = head[blank:]
        blank += len(unseen) - len(unseen.lstrip())
        if len(head) - blank >= _PROLOG_SCAN:
            break
    else:  # all of it is here
        return _parse_data(bytes(head), sitemap_url=sitemap_url, max_urls=max_urls, status=status)
    start = bytes(head[blank:])
    if not start.startswith(b"<"):
        text = bytes(head[bom:])
        del head
        return _parse_text(text + b"".join(chunks), max_urls=max_urls, status=status)
    del head
    start = _mend_declaration(start, status)
    _refuse_prolog(start)
    return _parse_xml(
        _rechunk(start, chunks), sitemap_url=sitemap_url, max_urls=max_urls, status=status
    )


def _slices(data: bytes) -> Iterator[bytes]:
    """``data`` in the pieces the parser is fed."""
    for offset in range(0, len(data), _XML_CHUNK):
        yield data[offset : offset + _XML_CHUNK]


def _rechunk(first: bytes, chunks: Iterator[bytes]) -> Iterator[bytes]:
    """``first`` and then ``chunks``, in the pieces :func:`_slices` would cut the whole into."""
    pending = bytearray(first)
    for chunk in chunks:
        if not pending and len(chunk) == _XML_CHUNK:
            yield chunk  # already one piece (the inflater makes pieces of this size)
            continue
        pending += chunk
        whole = len(pending) - len(pending) % _XML_CHUNK
        for offset in range(0, whole, _XML_CHUNK):
            yield bytes(pending[offset : offset + _XML_CHUNK])
        del pending[:whole]
    if pending:
        yield bytes(pending)


def _mend_declaration(data: bytes, status: _Status) -> bytes:
    """``data`` without its XML declaration when that is broken (libxml2 refuses the document
    then; the declaration says nothing a sitemap needs: read as UTF-8, the XML default), said
    in ``status.notes``; else ``data`` itself. Only the start of ``data`` is looked at."""
    if not _DECLARATION_START.match(data):
        return data
    good = _DECLARATION.match(data)
    if good is not None:
        encoding = good.group("encoding")
        if encoding is None or _libxml2_reads(encoding.decode("ascii")):
            return data
        end = good.end()
    else:
        end = data.find(b"?>", 0, _DECLARATION_SCAN)
        if end < 0:
            return data  # no end in sight: the parser says what is wrong
        end += 2
    shown = data[:end].decode("ascii", "replace")
    status.notes += (f"XML declaration {shown} is not valid: read without it, as UTF-8",)
    return data[end:].lstrip()


@lru_cache(maxsize=64)
def _libxml2_reads(encoding: str) -> bool:
    """Whether libxml2 takes ``encoding`` in an XML declaration (its list, not Python's:
    ``latin-1`` is refused)."""
    try:
        etree.fromstring(f'<?xml version="1.0" encoding="{encoding}"?><a/>'.encode("ascii"))
    except etree.XMLSyntaxError:
        return False
    return True


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


def _pull_parser(events: tuple[_Event, ...], tag: tuple[str, ...] | None = None) -> Any:
    """A hardened streaming parser: no DTD, no entities, no network; comments and processing
    instructions dropped (iterparse's settings, which this module used before), and the white
    space between elements (a text node fewer per element for libxml2 to make and free; white
    space around locations and dates is stripped anyway)."""
    return etree.XMLPullParser(
        events,
        tag=tag,
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
        remove_blank_text=True,
    )


def _find_root(chunks: Iterator[bytes], seen: list[bytes]) -> Any:
    """Parse just far enough to meet the root element (appending the chunks used to ``seen``);
    None if the document breaks or ends before it."""
    parser = _pull_parser(("start",))
    events = parser.read_events()
    for chunk in chunks:
        seen.append(chunk)
        try:
            parser.feed(chunk)
        except Exception:
            broken = True  # the events before the break still count
        else:
            broken = False
        for _, element in events:
            return element
        if broken:
            break
    return None


def _parse_xml(
    chunks: Iterator[bytes], *, sitemap_url: str, max_urls: int, status: _Status
) -> Iterator[_AnyEntry]:
    """Read XML, fed in ``chunks``: only the root element, an RSS channel and the entries
    reach Python (a lookahead parse meets the root first, to know what the entries are
    called); everything else stays in libxml2 and is dropped chunk by chunk (flat memory)."""
    seen: list[bytes] = []
    first = _find_root(chunks, seen)
    replay = itertools.chain(seen, chunks)
    if first is None or not isinstance(first.tag, str):
        yield from _parse_xml_generic(
            replay, sitemap_url=sitemap_url, max_urls=max_urls, status=status
        )
        return
    kind = status.kind = _root_kind(first)
    feed = _FEEDS.get(kind)
    tags, channel_tag, loc_tag, lastmod_tag = _tags(kind, first.tag)
    del first
    parser = _pull_parser(("start", "end"), tags)
    events = parser.read_events()
    memo = _Memo(compact=status.compact)
    root: Any = None
    container: Any = None
    failure: Exception | None = None
    for chunk in itertools.chain(replay, (None,)):
        # (as in iterparse: the events before the break come first)
        failure = _push(parser, chunk) or failure
        for event, element in events:
            if event == "start":
                if root is None:
                    root = container = element  # the first element to start is the root
                elif (
                    channel_tag is not None
                    and element.tag == channel_tag
                    and element.getparent() is root
                ):
                    container = element
                continue
            if element.getparent() is not container:
                continue  # the root itself, or an entry tag deeper down
            if feed is None:
                entry = _read_entry(element, loc_tag, lastmod_tag, sitemap_url, memo)
            else:
                item = feed.read(element, loc_tag, lastmod_tag, sitemap_url)
                entry = _compact(item) if item is not None and status.compact else item
            if entry is not None:
                if status.count >= max_urls:
                    status.limit_hit = "max-urls"
                    return
                status.count += 1
                yield entry
        if root is not None and len(root) > 1:
            # Every child of the root but the last (which may still be open) is complete and,
            # if it was an entry, read: drop them.
            del root[: len(root) - 1]
        if container is not root and len(container) > 1:
            del container[: len(container) - 1]  # the same in an RSS <channel>
        if failure is not None:
            break
    if failure is not None:
        _broke(failure, status)


def _broke(failure: Exception, status: _Status) -> None:
    """Say how the document broke: raise when nothing was read before, or it is not an XML
    error; else set ``status.error`` (the entries before the break were given)."""
    if not isinstance(failure, etree.XMLSyntaxError):
        raise failure
    detail = getattr(failure, "msg", None) or str(failure)
    if not status.count:
        raise SitemapError(
            f"sitemap is not well-formed XML: {detail}", reason="malformed-xml"
        ) from failure
    status.error = f"malformed-xml: {detail}"


def _tags(kind: str, root_tag: str) -> tuple[tuple[str, ...], str | None, str, str]:
    """What the entries of a document of ``kind`` are made of, in the root's namespace: the
    tags the pull parser reports (root, container, entry), the container's tag when it is not
    the root (an RSS ``<channel>``), the location's tag, and the lastmod's tag (for a feed: the
    namespace prefix, which its reader needs for several tags)."""
    ns = _local(root_tag)[0]
    prefix = f"{{{ns}}}" if ns else ""
    feed = _FEEDS.get(kind)
    if feed is None:
        entry_tag = prefix + ("url" if kind == "urlset" else "sitemap")
        return (root_tag, entry_tag), None, prefix + "loc", prefix + "lastmod"
    entry_tag = prefix + feed.entry
    if feed.channel is None:
        return (root_tag, entry_tag), None, prefix + "link", prefix
    channel_tag = prefix + feed.channel
    return (root_tag, channel_tag, entry_tag), channel_tag, prefix + "link", prefix


def _parse_xml_generic(
    chunks: Iterator[bytes], *, sitemap_url: str, max_urls: int, status: _Status
) -> Iterator[_AnyEntry]:
    """Every element through Python, as this module read XML before: for documents that break
    or end before their root element is met."""
    kind: str | None = None
    entry_tag = loc_tag = lastmod_tag = ""
    memo = _Memo(compact=status.compact)
    depth = 0
    try:
        for event, element in _iterparse(chunks):
            if not isinstance(element.tag, str):
                continue  # entity references (never resolved)
            if event == "start":
                depth += 1
                if depth == 1:
                    kind = status.kind = _root_kind(element)
                    ns = _local(element.tag)[0]
                    prefix = f"{{{ns}}}" if ns else ""
                    # (A feed's entries are not read here: this way only runs for documents
                    # that break before their root is met, when there are none to read.)
                    entry_tag = prefix + ("url" if kind == "urlset" else "sitemap")
                    loc_tag, lastmod_tag = prefix + "loc", prefix + "lastmod"
                continue
            depth -= 1
            if depth != 1:
                continue
            # A direct child of the root is complete: read it, then drop it (flat memory).
            if kind not in _FEEDS and element.tag == entry_tag:
                entry = _read_entry(element, loc_tag, lastmod_tag, sitemap_url, memo)
                if entry is not None:
                    if status.count >= max_urls:
                        status.limit_hit = "max-urls"
                        break
                    status.count += 1
                    yield entry
            element.clear(keep_tail=False)
            parent = element.getparent()
            if parent is not None:
                while element.getprevious() is not None:
                    del parent[0]
    except etree.XMLSyntaxError as exc:
        detail = getattr(exc, "msg", None) or str(exc)  # "msg" leaves out lxml's "(<string>...)"
        if kind is None or not status.count:
            raise SitemapError(
                f"sitemap is not well-formed XML: {detail}", reason="malformed-xml"
            ) from exc
        status.error = f"malformed-xml: {detail}"
        return
    if kind is None:
        raise SitemapError("sitemap has no root element", reason="malformed-xml")


def _iterparse(chunks: Iterator[bytes]) -> Iterator[tuple[str, Any]]:
    """lxml's iterparse over ``chunks``: start and end events; the events before a break are
    given before the error is raised."""
    parser = _pull_parser(("start", "end"))
    events = parser.read_events()
    for chunk in itertools.chain(chunks, (None,)):
        failure = _push(parser, chunk)
        yield from events
        if failure is not None:
            raise failure


def _push(parser: Any, chunk: bytes | None) -> Exception | None:
    """Feed ``chunk`` to ``parser`` (None: close it); return the error it raised, if any.

    The events a failed ``close()`` queued are dropped: all input was fed before it, so they
    are the ends libxml2 makes up for the elements a broken document left open (lxml 6.2 and
    later report them, earlier versions did not). An entry cut off by the break is never read:
    its text may be cut too (a location that ends mid-URL).
    """
    try:
        if chunk is None:
            parser.close()
        else:
            parser.feed(chunk)
    except Exception as exc:
        if chunk is None:
            for _ in parser.read_events():
                pass
        return exc
    return None


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
    if name == "rss":
        return "rss"
    if name == "feed":
        return "atom"
    raise SitemapError(f"root element <{name}> is not a sitemap", reason="not-a-sitemap")


def _read_entry(
    element: Any, loc_tag: str, lastmod_tag: str, base: str, memo: _Memo
) -> SitemapEntry | CompactEntry | None:
    """A ``<url>`` or ``<sitemap>``: its first location that is not empty, its first lastmod
    that is not empty, its ``<rs:ln>`` links. The children are picked by tag inside lxml (no
    string is made for the tag of each child, nor an object for the children not read: a
    tenth of a large Signmap's parse); a ``<loc>`` with elements inside is read by
    :func:`_read_entry_in_order`."""
    for child in element.iterchildren(loc_tag):
        if len(child):
            return _read_entry_in_order(element, loc_tag, lastmod_tag, base, memo)
        text = child.text or ""
        loc = text if _is_plain_absolute(text) else _clean_loc(text, base)
        if loc is not None:
            break
    else:
        return None
    lastmod: str | None = None
    for child in element.iterchildren(lastmod_tag):
        lastmod = (child.text or "").strip() or None
        if lastmod is not None:
            break
    return _made_entry(loc, lastmod, list(element.iterchildren(_LN_TAG)), base, memo)


def _read_entry_in_order(
    element: Any, loc_tag: str, lastmod_tag: str, base: str, memo: _Memo
) -> SitemapEntry | CompactEntry | None:
    """:func:`_read_entry`, child by child: the ``<rs:ln>`` inside the location taken count
    among the links, where it stands."""
    loc: str | None = None
    lastmod: str | None = None
    link_elements: list[Any] = []
    for child in element[:]:  # (a slice makes the children in one call: faster than iterating)
        tag = child.tag
        if tag == _LN_TAG:
            link_elements.append(child)
        elif tag == loc_tag:
            if loc is None:
                if len(child):
                    loc = _clean_loc("".join(child.itertext()), base)
                    link_elements.extend(child.iterchildren(_LN_TAG))
                else:  # no children: its text is all there is
                    text = child.text or ""
                    loc = text if _is_plain_absolute(text) else _clean_loc(text, base)
        elif tag == lastmod_tag and lastmod is None:
            lastmod = (child.text or "").strip() or None
    if loc is None:
        return None
    return _made_entry(loc, lastmod, link_elements, base, memo)


def _made_entry(
    loc: str, lastmod: str | None, link_elements: list[Any], base: str, memo: _Memo
) -> SitemapEntry | CompactEntry:
    """The entry of ``loc``, compact or not as ``memo`` says."""
    if memo.compact:
        compact = _new_entry(CompactEntry)  # (filled like the links: see _read_links)
        compact.__dict__.update(
            loc=loc,
            lastmod=lastmod,
            links=_read_link_rows(link_elements, base, memo) if link_elements else (),
        )
        return compact
    entry = _new_entry(SitemapEntry)
    entry.__dict__.update(
        loc=loc,
        lastmod=lastmod,
        links=_read_links(link_elements, loc, base, memo) if link_elements else (),
    )
    return entry


def _read_rss_item(element: Any, link_tag: str, prefix: str, base: str) -> SitemapEntry | None:
    """An RSS ``<item>``: its ``<link>``, else its ``<guid>`` when that is a permalink (RSS 2.0:
    ``isPermaLink`` is true unless said otherwise) and an absolute http(s) URL; dated by
    ``<pubDate>`` (RFC 822), else ``<dc:date>``. None without a location."""
    loc: str | None = None
    guid: str | None = None
    lastmod: str | None = None
    dc_date: str | None = None
    for child in element[:]:
        tag = child.tag
        if tag == link_tag:
            if loc is None:
                loc = _clean_loc("".join(child.itertext()), base)
        elif tag == prefix + "pubDate":
            lastmod = lastmod or (child.text or "").strip() or None
        elif tag == prefix + "guid":
            if guid is None and (child.get("isPermaLink") or "").strip().lower() != "false":
                text = (child.text or "").strip()
                guid = text if _ABSOLUTE.fullmatch(text) else None
        elif tag == _DC_DATE:
            dc_date = dc_date or (child.text or "").strip() or None
    loc = loc or guid
    if loc is None:
        return None
    return SitemapEntry(loc=loc, lastmod=lastmod or dc_date)


def _read_atom_entry(element: Any, link_tag: str, prefix: str, base: str) -> SitemapEntry | None:
    """An Atom ``<entry>``: the ``href`` of its first ``<link>`` that is ``rel="alternate"``
    or has no ``rel`` (RFC 4287 section 4.2.7.2: the same), dated by ``<updated>``, else
    ``<published>`` (Atom 0.3: ``<modified>``, ``<issued>``). None without such a link."""
    loc: str | None = None
    dates: dict[str, str] = {}
    for child in element[:]:
        tag = child.tag
        if tag == link_tag:
            if loc is None and (child.get("rel") or "alternate").strip().lower() in _ALTERNATE:
                loc = _clean_loc(child.get("href") or "", base)
        elif isinstance(tag, str) and tag.startswith(prefix):
            name = tag[len(prefix) :]
            if name in _ATOM_DATES and name not in dates:
                text = (child.text or "").strip()
                if text:
                    dates[name] = text
    if loc is None:
        return None
    lastmod = next((dates[name] for name in _ATOM_DATES if name in dates), None)
    return SitemapEntry(loc=loc, lastmod=lastmod)


_ATOM_DATES = ("updated", "modified", "published", "issued")  # first found wins, in this order


@dataclass(frozen=True)
class _Feed:
    """How a feed holds its entries: the entry element, the container between it and the root
    (``channel`` for RSS; none for Atom), and the reader of one entry."""

    entry: str
    channel: str | None
    read: Callable[[Any, str, str, str], SitemapEntry | None]


_FEEDS = {
    "rss": _Feed("item", "channel", _read_rss_item),
    "atom": _Feed("entry", None, _read_atom_entry),
}


def _read_links(
    link_elements: list[Any], anchor: str, base: str, memo: _Memo
) -> tuple[TypedLink, ...]:
    """Each ``<rs:ln>`` gives a typed link per relation type in its ``rel``."""
    links: list[TypedLink] = []
    append = links.append
    kinds = memo.kinds
    for ln in link_elements:
        get = ln.get
        href = get("href")
        if href is None:
            continue
        if not _is_plain_absolute(href):
            href = _clean_url(href, base)
            if href is None:
                continue
        key = (get("rel"), get("type"), get("profile"))
        fields = kinds.get(key)
        if fields is None:
            fields = memo.read_kind(key)
        for shared in fields:
            # Hundreds of thousands of links in a large Signmap: the frozen dataclass's __init__
            # (one object.__setattr__ per field) costs several times as much as filling the
            # instance dict directly, which builds exactly the same value.
            link = _new_link(TypedLink)
            values = link.__dict__
            values.update(shared)
            values["href"] = href
            values["anchor"] = anchor
            append(link)
    return tuple(links)


def _read_link_rows(link_elements: list[Any], base: str, memo: _Memo) -> tuple[LinkRow, ...]:
    """The links :func:`_read_links` reads, as :data:`LinkRow` values."""
    rows: list[LinkRow] = []
    append = rows.append
    kinds = memo.rows
    for ln in link_elements:
        get = ln.get
        href = get("href")
        if href is None:
            continue
        if not _is_plain_absolute(href):
            href = _clean_url(href, base)
            if href is None:
                continue
        key = (get("rel"), get("type"), get("profile"))
        fields = kinds.get(key)
        if fields is None:
            fields = memo.read_rows(key)
        for rel, media_type, profile in fields:
            append((href, rel, media_type, profile))
    return tuple(rows)


class _Memo:
    """What the ``rel``, ``type`` and ``profile`` of an ``<rs:ln>`` mean: the same few
    combinations repeat all through a sitemap, so each is worked out once, and equal values
    share one string (a few hundred bytes less per link)."""

    __slots__ = ("compact", "kinds", "rows", "_strings")

    def __init__(self, *, compact: bool = False) -> None:
        self.compact = compact  # whether entries are CompactEntry values
        # (rel, type, profile) as written -> the fields of each link it gives but href, anchor.
        self.kinds: dict[tuple[str | None, str | None, str | None], tuple[dict[str, Any], ...]]
        self.kinds = {}
        # The same, as (rel, type, profile) of each link it gives (for LinkRow values).
        self.rows: dict[
            tuple[str | None, str | None, str | None],
            tuple[tuple[str, str | None, str | None], ...],
        ] = {}
        self._strings: dict[str, str] = {}

    def read_kind(
        self, key: tuple[str | None, str | None, str | None]
    ) -> tuple[dict[str, Any], ...]:
        """The shared fields of the links an ``<rs:ln>`` with these attributes gives: one per
        relation type (lower case, split on white space); ``type`` and ``profile`` stripped,
        None if empty."""
        rel, media_type, profile = key
        kind = tuple(
            {
                "rel": self._share(name),
                "type": self._value(media_type),
                "profile": self._value(profile),
                "found_in": "signmap",
            }
            for name in (rel or "").lower().split()
        )
        if len(self.kinds) < _MEMO_SIZE:
            self.kinds[key] = kind
        return kind

    def read_rows(
        self, key: tuple[str | None, str | None, str | None]
    ) -> tuple[tuple[str, str | None, str | None], ...]:
        """:meth:`read_kind` as the (rel, type, profile) of each link."""
        rows = tuple((f["rel"], f["type"], f["profile"]) for f in self.read_kind(key))
        if len(self.rows) < _MEMO_SIZE:
            self.rows[key] = rows
        return rows

    def _value(self, raw: str | None) -> str | None:
        value = (raw or "").strip()
        return self._share(value) if value else None

    def _share(self, value: str) -> str:
        if len(self._strings) < _MEMO_SIZE:
            return self._strings.setdefault(value, value)
        return self._strings.get(value, value)


def _is_plain_absolute(text: str) -> bool:
    """Whether ``text`` is an absolute http(s) URL that :func:`_clean_url` would give back as it
    is: the case of nearly every location and link, worth telling apart fast (it runs for
    every one of them; the regular expression took four times as long on a typical URL).

    ASCII only, so that the white space to rule out is space, tab, LF and CR: the other ASCII
    white space (VT, FF, FS to US) is not allowed in XML, not even as a character reference,
    and this only sees text read from XML. Anything else takes the general way.
    """
    if not text.startswith(_WEB_PREFIXES):
        return False
    host = 8 if text[4] == "s" else 7  # where the host starts
    return (
        text[host : host + 1] not in "/?#"  # (an empty slice is "in" it too)
        and text.isascii()
        and " " not in text
        and "\n" not in text
        and "\t" not in text
        and "\r" not in text
    )


def _clean_loc(raw: str, base: str) -> str | None:
    """A ``<loc>`` read as :func:`_clean_url` does, but kept whatever its scheme (and as written
    when it cannot be resolved): only an empty one is None. What cannot be fetched is the
    expander's to record (``scheme-not-allowed``, ``invalid-url``), so the publisher learns."""
    text = raw.strip()
    if not text:
        return None
    try:
        return _clean_url(text, base) or text
    except ValueError:  # e.g. "http://[::1/x": urljoin cannot split it
        return text


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


def _parse_text(data: bytes, *, max_urls: int, status: _Status) -> Iterator[_AnyEntry]:
    """sitemaps.org text format: one absolute URL per line, nothing else."""
    status.kind = "text"
    for raw_line in data.splitlines():
        line = raw_line.decode("utf-8", "replace").strip()
        if not line or any(c.isspace() for c in line):
            continue
        if urlsplit(line).scheme.lower() not in _WEB_SCHEMES or not urlsplit(line).netloc:
            continue
        if status.count >= max_urls:
            status.limit_hit = "max-urls"
            break
        status.count += 1
        yield CompactEntry(loc=line, lastmod=None) if status.compact else SitemapEntry(line, None)
    if not status.count:
        raise SitemapError("text sitemap without a single http(s) URL", reason="not-a-sitemap")
