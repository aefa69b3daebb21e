"""Stage 6: the crosswalk makes the views of each valid record, and writes a source's Signmap.

A record's views (:data:`~cdif_harvester.keys.VIEW_NAMES`) are made when asked for:
:func:`record_view` from a record and its report, :func:`stored_record_view` from the store (the
API and ``cdif-harvest view``). :func:`note_record` is what a record landing under ``records/``
triggers on AWS (nothing to write); :func:`build_views` writes the views as files under
``views/<source>/<record-hash>/`` when a local harvest asks for them (``--views``);
:func:`build_source_signmap` writes ``views/<source>/signmap.xml`` of a source's valid records,
from what each record's segment or catalogue entry keeps of it (:func:`record_signposts`).

See docs/decisions/0081-views-derived-on-read.md, 0035-crosswalk-views.md,
0039-source-signmap.md, 0098-closing-reads-little.md and 0100-local-catalogue-keeps-signposts.md.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import pickle
import re
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import unquote_plus

from cdif_harvester.domain.discovery.sitemap import (
    MAX_SITEMAP_BYTES,
    MAX_SITEMAP_URLS,
    SitemapEntry,
)
from cdif_harvester.domain.records.contexts import JsonLdContexts
from cdif_harvester.domain.records.record_values import metadata_record
from cdif_harvester.domain.views.crosswalk import (
    NQUADS_MEDIA_TYPE,
    SIGNMAP_MEDIA_TYPE,
    SignmapPart,
    html_link_elements,
    iter_signmap,
    landing_page,
    latest_lastmod,
    link_header,
    linkset_json,
    linkset_text,
    pid_kernel_view,
    record_nquads,
    render_signmap_index,
    signposting_links,
)
from cdif_harvester.errors import PermanentError
from cdif_harvester.keys import (
    VIEW_NAMES,
    parse_normalised_record_key,
    parse_segment_ref,
    record_hash,
    record_report_key,
    segment_signposts_key,
    signmap_key,
    view_keys,
)
from cdif_harvester.model import CatalogEntry, TypedLink
from cdif_harvester.ports import CatalogIndex, KeptSignposts, ObjectStore, keeping_signposts
from cdif_harvester.wiring import Wiring

__all__ = [
    "VIEW_MEDIA_TYPES",
    "Signposts",
    "NotARecordKey",
    "UnknownView",
    "build_source_signmap",
    "build_views",
    "keys_from_s3_event",
    "note_record",
    "read_signposts",
    "read_signposts_text",
    "record_signposts",
    "record_view",
    "signmap_part_key",
    "signposts_body",
    "signposts_text",
    "stored_record_view",
]

# Discovery patterns whose harvested URL is a metadata document, not the resource's page.
_METADATA_PATTERNS = frozenset({"content-type", "item-list", "format-parameter"})
# The normaliser's fallback identities (normalisation: "<document>#resource-N", "#record",
# "#record-N", "#record-B-N", "#record:<resource id>").
_FALLBACK_ID = re.compile(r"#(?:(?:resource|record)(?:-\d+)*|record:[^#]*)$")
_LINK_FIELDS = frozenset(field.name for field in dataclasses.fields(TypedLink))


class NotARecordKey(PermanentError):
    """The notification names an object that is not a normalised record."""

    reason = "not-a-record-key"


def keys_from_s3_event(event: dict[str, Any]) -> list[str]:
    """Return the object keys named by an S3 event notification (URL-decoded).

    S3 sends a ``s3:TestEvent`` when a notification is configured; it names no object.
    """
    keys = []
    for record in event.get("Records", []):
        key = record.get("s3", {}).get("object", {}).get("key")
        if isinstance(key, str):
            keys.append(unquote_plus(key))
    return keys


def _invented(report: Mapping[str, Any]) -> frozenset[str]:
    if not report.get("identity_fallback"):
        return frozenset()
    ids = (report.get("record_id"), report.get("resource_id"))
    return frozenset(i for i in ids if isinstance(i, str) and _FALLBACK_ID.search(i))


def _seen_links(provenance: Mapping[str, Any], harvested: str | None) -> list[TypedLink]:
    seen: list[TypedLink] = []
    for raw in provenance.get("links") or []:
        if not isinstance(raw, Mapping) or not isinstance(raw.get("href"), str):
            continue
        if not isinstance(raw.get("rel"), str):
            continue
        link = TypedLink(**{k: v for k, v in raw.items() if k in _LINK_FIELDS})
        # A link without anchor is about the URL it was seen at: say so explicitly.
        seen.append(dataclasses.replace(link, anchor=link.anchor or harvested))
    return seen


def _signposts(
    report: Mapping[str, Any], record: Mapping[str, Any]
) -> tuple[str | None, list[TypedLink], frozenset[str]]:
    """The landing page, the merged Signposting links and the invented ids of a record."""
    provenance = report.get("provenance") or {}
    harvested = provenance.get("url") if isinstance(provenance.get("url"), str) else None
    is_page = provenance.get("pattern") not in _METADATA_PATTERNS
    invented = _invented(report)
    context = landing_page(record, harvested, harvested_is_page=is_page)
    links = signposting_links(
        record,
        _seen_links(provenance, harvested),
        context=context,
        aliases=[harvested] if harvested and is_page else [],
        invented=invented,
    )
    return context, links, invented


#: What a Signmap lists of one record: its landing page, its lastmod and its links.
Signposts = tuple[str | None, str | None, tuple[TypedLink, ...]]


def record_signposts(report: Mapping[str, Any], record: Mapping[str, Any]) -> Signposts:
    """What a Signmap lists of a valid record, from the record and its report."""
    context, links, _ = _signposts(report, record)
    return context, _lastmod(record), tuple(links)


def signposts_body(signposts: Mapping[str, Signposts]) -> bytes:
    """The JSON of a segment's signposts object: each record's :data:`Signposts`, by record
    hash (links as objects of their set fields)."""
    data = {rhash: _signposts_data(one) for rhash, one in signposts.items()}
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def read_signposts(body: bytes) -> dict[str, Signposts]:
    """The signposts :func:`signposts_body` wrote, by record hash. Raises ValueError when the
    body is not such an object."""
    data = json.loads(body)
    if not isinstance(data, dict):
        raise ValueError("a segment's signposts are a JSON object")
    return {rhash: _signposts_of_data(one) for rhash, one in data.items()}


def signposts_text(signposts: Signposts) -> str:
    """One record's :data:`Signposts` as JSON text, as a catalogue keeps it with the record's
    entry (:class:`~cdif_harvester.ports.KeptSignposts`; read by :func:`read_signposts_text`)."""
    return json.dumps(_signposts_data(signposts), ensure_ascii=False, separators=(",", ":"))


def read_signposts_text(text: str) -> Signposts:
    """The :data:`Signposts` :func:`signposts_text` wrote. Raises ValueError or TypeError when
    the text is not such a value."""
    return _signposts_of_data(json.loads(text))


def _signposts_data(signposts: Signposts) -> list[Any]:
    context, lastmod, links = signposts
    return [context, lastmod, [_link_data(link) for link in links]]


def _signposts_of_data(data: Any) -> Signposts:
    context, lastmod, links = data
    return (context, lastmod, tuple(TypedLink(**link) for link in links))


def _link_data(link: TypedLink) -> dict[str, Any]:
    # (the fields left at their defaults are left out: a link is about 100 bytes, not 300;
    # a link's fields are plain values, written as they are)
    found: dict[str, Any] = {}
    for name, default in _LINK_DEFAULTS:
        value = getattr(link, name)
        if value != default:
            found[name] = value
    return found


_NO_DEFAULT = object()
_LINK_DEFAULTS = tuple(
    (field.name, _NO_DEFAULT if field.default is dataclasses.MISSING else field.default)
    for field in dataclasses.fields(TypedLink)
)


def _put_if_changed(wiring: Wiring, key: str, body: bytes, content_type: str) -> bool:
    try:
        if wiring.store.get(key) == body:
            return False
    except KeyError:
        pass
    wiring.store.put(key, body, content_type=content_type)
    return True


def _json(value: Any) -> bytes:
    return json.dumps(value, indent=2, ensure_ascii=False).encode("utf-8")


#: Each view's media type (``Content-Type``), by name (:data:`~cdif_harvester.keys.VIEW_NAMES`).
VIEW_MEDIA_TYPES: dict[str, str] = {
    "pid-kernel": "application/json",
    "linkset-json": "application/linkset+json",
    "linkset": "application/linkset",
    "link-header": "text/plain; charset=utf-8",
    "html-links": "text/html; charset=utf-8",
    "nquads": NQUADS_MEDIA_TYPE,
}


class UnknownView(PermanentError):
    """A view name that is none of :data:`VIEW_MEDIA_TYPES`."""

    reason = "unknown-view"


def record_view(
    record: Mapping[str, Any], report: Mapping[str, Any], view: str, contexts: JsonLdContexts
) -> bytes:
    """Return the bytes of one view of a record, made from the record and its report.

    Pure: the same record and report give the same bytes, whether the view is written by the
    crosswalk or made when it is asked for. Raises UnknownView for a name outside
    :data:`VIEW_MEDIA_TYPES`, and NQuadsError (permanent) when the record cannot become RDF.
    """
    if view not in VIEW_MEDIA_TYPES:
        raise UnknownView(f"no view {view!r} (views: {', '.join(VIEW_MEDIA_TYPES)})")
    if view == "nquads":
        record_id = report.get("record_id")
        graph = record_id if isinstance(record_id, str) else None
        return record_nquads(record, graph=graph, contexts=contexts).encode("utf-8")
    context, links, invented = _signposts(report, record)
    if view == "pid-kernel":
        return _json(pid_kernel_view(record, invented=invented))
    anchor = context or str(record.get("@id") or "")
    if view == "linkset-json":
        return _json(linkset_json(anchor, links))
    if view == "linkset":
        return linkset_text(anchor, links).encode("utf-8")
    if view == "link-header":
        return link_header(links).encode("utf-8")
    return html_link_elements(links).encode("utf-8")


def stored_record_view(
    store: ObjectStore,
    contexts: JsonLdContexts,
    entry: CatalogEntry,
    view: str,
) -> bytes | None:
    """Return one view of the record of catalogue entry ``entry``, made now from its stored
    record and report; None when the record is not valid (it has no views).

    Reads the report and the record (two GETs, no write). Raises KeyError when either is
    missing, UnknownView and NQuadsError as :func:`record_view` does.
    """
    if view not in VIEW_MEDIA_TYPES:
        raise UnknownView(f"no view {view!r} (views: {', '.join(VIEW_MEDIA_TYPES)})")
    if not entry.valid or entry.record_key is None:
        return None
    report = json.loads(store.get(entry.report_key))
    if not report.get("valid"):
        return None
    record = json.loads(store.get(entry.record_key))
    return record_view(record, report, view, contexts)


def note_record(wiring: Wiring, key: str) -> dict[str, str]:
    """Acknowledge a record landing under ``key``: its views are made on read, so nothing is
    read or written; return no view keys.

    Raises NotARecordKey for a key outside ``records/`` (logged and skipped by the handler).
    """
    del wiring  # the same signature as build_views: the handler runs either
    if parse_normalised_record_key(key) is None:
        raise NotARecordKey(f"{key} is not a records/ key")
    return {}


def build_views(wiring: Wiring, key: str) -> dict[str, str]:
    """Write every view of the record under ``key``; return the view keys (empty if invalid).

    Views are made when asked for (the API, ``cdif-harvest view``); a local harvest calls this
    only when its views are asked to be written as files (``--views``). A view whose bytes did
    not change is not written again. Raises NotARecordKey for a key outside ``records/``,
    KeyError when the record or its report is missing, and
    :class:`~cdif_harvester.domain.views.nquads.NQuadsError` (permanent) when the record cannot be
    turned into RDF; then no view is written.
    """
    parsed = parse_normalised_record_key(key)
    if parsed is None:
        raise NotARecordKey(f"{key} is not a records/ key")
    source, rkey = parsed
    report = json.loads(wiring.store.get(record_report_key(source, rkey)))
    if not report.get("valid"):
        return {}
    record = json.loads(wiring.store.get(key))
    # Every body first: a record that cannot become RDF writes no view at all.
    bodies = {name: record_view(record, report, name, wiring.contexts) for name in VIEW_NAMES}
    targets = view_keys(source, rkey)
    for name, target in targets.items():
        _put_if_changed(wiring, target, bodies[name], VIEW_MEDIA_TYPES[name])
    return targets


def _lastmod(record: Mapping[str, Any]) -> str | None:
    subject = metadata_record(record) or {}
    candidates = [subject.get("schema:sdDatePublished"), record.get("schema:dateModified")]
    return latest_lastmod(c for c in candidates if isinstance(c, str))


def signmap_part_key(source: str, number: int) -> str:
    """Key of part ``number`` (from 1) of a Signmap too large for one sitemap."""
    return signmap_key(source).removesuffix(".xml") + f"-{number:05d}.xml"


_LIST_PAGE = 1000  # catalogue entries a Signmap build reads at a time
_READ_WINDOW = 256  # records read ahead at most while a Signmap is built


class _LandingPages:
    """The landing pages of a source's valid records with their lastmods and links, in a
    private temporary SQLite database (deleted when closed): what a Signmap lists, grouped
    and ordered by landing page without holding every record's links at once."""

    def __init__(self) -> None:
        self._db = sqlite3.connect("", isolation_level=None)
        self._db.execute(
            "CREATE TABLE page (seq TEXT PRIMARY KEY, loc BLOB NOT NULL, item BLOB NOT NULL)"
        )
        self._db.execute("CREATE INDEX page_by_loc ON page (loc, seq)")
        self._db.execute("BEGIN")  # never committed: nothing here outlives the Signmap

    def __enter__(self) -> _LandingPages:
        return self

    def __exit__(self, *exc: object) -> None:
        self._db.close()

    def add(self, loc: str, lastmod: str | None, links: Sequence[TypedLink], seq: str) -> None:
        """Note one record of the landing page ``loc``, ``seq`` its place among the records
        (its record hash: the records of a page merge their links in that order, whatever the
        reading order)."""
        # pickle: our own values, read back by this object only, never from elsewhere.
        item = pickle.dumps((lastmod, tuple(links)))
        self._db.execute(
            "INSERT INTO page (seq, loc, item) VALUES (?, ?, ?)",
            (seq, loc.encode("utf-8", "surrogatepass"), item),
        )

    def entries(self) -> Iterator[SitemapEntry]:
        """One entry per landing page, by landing page: the latest lastmod of its records and
        their links, each once, in the order the records were noted."""
        rows = self._db.execute("SELECT loc, item FROM page ORDER BY loc, seq")
        loc: bytes | None = None
        lastmods: list[str | None] = []
        kept: list[TypedLink] = []
        for at, item in rows:
            if at != loc:
                if loc is not None:
                    yield SitemapEntry(_text(loc), latest_lastmod(lastmods), tuple(kept))
                loc, lastmods, kept = at, [], []
            lastmod, links = pickle.loads(item)  # noqa: S301 - written by add() above
            lastmods.append(lastmod)
            kept.extend(link for link in links if link not in kept)
        if loc is not None:
            yield SitemapEntry(_text(loc), latest_lastmod(lastmods), tuple(kept))


def _text(data: bytes) -> str:
    return bytes(data).decode("utf-8", "surrogatepass")


class _Listed:
    """The valid records a Signmap lists, by record hash, and how each is still to be read, in
    a private temporary SQLite database (deleted when closed): a source of a million records
    is not held in memory (some 300 MB of keys as Python objects).

    A record is ``seg`` (its segment's signposts object names it), ``loose`` (no segment: the
    catalogue may keep its signposts), ``read`` (to be read by its own report and record) or
    ``done``.
    """

    def __init__(self, entries: Iterable[CatalogEntry]) -> None:
        self._db = sqlite3.connect("", isolation_level=None)
        self._db.execute(
            "CREATE TABLE rec (rh TEXT PRIMARY KEY, report_key TEXT NOT NULL, record_key TEXT"
            " NOT NULL, segment TEXT, status TEXT NOT NULL) WITHOUT ROWID"
        )
        self._db.execute("BEGIN")  # never committed: nothing here outlives the Signmap
        rows = (
            (record_hash(entry.record_id), entry.report_key, entry.record_key, *_place(entry))
            for entry in entries
            if entry.valid and not entry.withdrawn_at and entry.record_key is not None
        )
        self._db.executemany("INSERT OR REPLACE INTO rec VALUES (?, ?, ?, ?, ?)", rows)
        self._db.execute("CREATE INDEX rec_by_segment ON rec (segment, rh)")

    def __enter__(self) -> _Listed:
        return self

    def __exit__(self, *exc: object) -> None:
        self._db.close()

    def any_loose(self) -> bool:
        """Whether a record has no segment."""
        return bool(self._db.execute("SELECT 1 FROM rec WHERE status = 'loose' LIMIT 1").fetchall())

    def loose(self, rh: str) -> bool:
        """Whether the record of hash ``rh`` is listed, with no segment and not read yet."""
        found = self._db.execute("SELECT status FROM rec WHERE rh = ?", (rh,)).fetchone()
        return found is not None and found[0] == "loose"

    def mark(self, rh: str, status: str) -> None:
        """Note that the record of hash ``rh`` is now ``status`` (``done``, ``read``)."""
        self._db.execute("UPDATE rec SET status = ? WHERE rh = ?", (status, rh))

    def segments(self) -> Iterator[list[str]]:
        """The signposts objects of the records' segments, in order, ``_READ_WINDOW`` at once."""
        last = ""
        while window := [
            str(row[0])
            for row in self._db.execute(
                "SELECT DISTINCT segment FROM rec WHERE segment > ? ORDER BY segment LIMIT ?",
                (last, _READ_WINDOW),
            ).fetchall()
        ]:
            yield window
            last = window[-1]

    def in_segment(self, segment: str) -> list[str]:
        """The hashes of the records of the signposts object ``segment``, in order."""
        rows = self._db.execute("SELECT rh FROM rec WHERE segment = ? ORDER BY rh", (segment,))
        return [str(row[0]) for row in rows.fetchall()]

    def unread(self) -> Iterator[list[tuple[str, str, str]]]:
        """The records still to be read one by one (hash, report key, record key), by hash,
        ``_READ_WINDOW`` at once."""
        last = ""
        while window := [
            (str(rh), str(report_key), str(record_key))
            for rh, report_key, record_key in self._db.execute(
                "SELECT rh, report_key, record_key FROM rec WHERE status IN ('loose', 'read')"
                " AND rh > ? ORDER BY rh LIMIT ?",
                (last, _READ_WINDOW),
            ).fetchall()
        ]:
            yield window
            last = window[-1][0]


def _every_entry(catalog: CatalogIndex, source: str) -> Iterator[CatalogEntry]:
    """Every entry of ``source``, a page at a time in the catalogue's own order: _Listed orders
    them by record hash itself, so the order by id of ``records()`` (on DynamoDB, a
    sort spilled to local disk past 10,000 entries) would be work done for nothing."""
    after: str | None = None
    while True:
        page = catalog.records_page(source, limit=_LIST_PAGE, after=after)
        after = page.after
        yield from page.items
        del page  # (before the next is read: one page of entries held at a time)
        if after is None:
            return


def _place(entry: CatalogEntry) -> tuple[str | None, str]:
    """The signposts object of ``entry``'s segment and its first status (see _Listed)."""
    segment = parse_segment_ref(entry.record_key or "")
    if segment is None:
        return None, "loose"
    return segment_signposts_key(segment[0]), "seg"


def _add_kept(catalog: KeptSignposts, source: str, listed: _Listed, pages: _LandingPages) -> None:
    """Note the records without a segment whose entries keep their signposts (the others are
    read one by one)."""
    for record_id, text in catalog.kept_signposts(source):
        rh = record_hash(record_id)
        if not listed.loose(rh):  # (not listed: withdrawn, not valid, or in a segment)
            continue
        try:
            context, lastmod, links = read_signposts_text(text)
        except (ValueError, TypeError):  # unreadable: the record is read itself
            continue
        listed.mark(rh, "done")
        if context:
            pages.add(context, lastmod, links, rh)


def build_source_signmap(
    wiring: Wiring,
    source: str,
    *,
    base_url: str | None = None,
    max_urls: int = MAX_SITEMAP_URLS,
    max_bytes: int = MAX_SITEMAP_BYTES,
    readers: int = 16,
) -> str:
    """Write the Signmap of every valid record of ``source``; return its key.

    Takes each valid entry of the source in the catalogue: from the signposts object of its
    record's segment (one read per segment, decision 0098), or from the signposts the
    catalogue keeps with the entry (one query, decision 0100), else by reading its report and
    record by the keys the entry holds (``records/`` and ``reports/``, or ranges of a segment
    written before those objects; a report without its record is skipped). Writes
    :func:`~cdif_harvester.keys.signmap_key`: a ``<urlset>``, or, beyond ``max_urls`` entries or
    ``max_bytes`` (the sitemaps.org limits by default), a sitemap index of
    ``signmap-NNNNN.xml`` parts (see the module docstring). Objects are read by up to
    ``readers`` threads at once. Unchanged objects are not written again. Raises StorageError
    when the store fails.
    """
    # (in the order of the record hashes, as the reports were listed before the entries were
    # read: records that share a landing page merge their links in that order, their place in
    # it given to each however it is read)

    def read_segment(key: str) -> dict[str, Signposts]:
        try:
            return read_signposts(wiring.store.get(key))
        except (KeyError, ValueError, TypeError):  # none (older segments), or unreadable
            return {}

    def read(keys: tuple[str, str, str]) -> Signposts | None:
        _, report_key, record_key = keys
        try:
            report = json.loads(wiring.store.get(report_key))
            if not isinstance(report, dict) or not report.get("valid"):
                return None
            if report.get("withdrawn_at"):
                return None
            record = json.loads(wiring.store.get(record_key))
        except (KeyError, ValueError):  # gone meanwhile, or not JSON: not a harvested record
            return None
        return record_signposts(report, record) if isinstance(record, dict) else None

    # On S3 the time is in the round trips, so reads run side by side (in key order all the
    # same, so the result does not depend on timing), a window of keys at a time so that the
    # readers never run far ahead of what is written down. The records listed and the landing
    # pages are on local disk (_Listed, _LandingPages), not in memory.
    with (
        _Listed(_every_entry(wiring.catalog, source)) as listed,
        _LandingPages() as pages,
        ThreadPoolExecutor(max_workers=max(1, readers)) as pool,
    ):
        keeping = keeping_signposts(wiring.catalog)
        if keeping is not None and listed.any_loose():
            _add_kept(keeping, source, listed, pages)
        for window in listed.segments():
            for key, found in zip(window, pool.map(read_segment, window), strict=True):
                for rh in listed.in_segment(key):
                    signposts = found.get(rh)
                    if signposts is None:
                        listed.mark(rh, "read")  # not in its segment's signposts: read it
                        continue
                    listed.mark(rh, "done")
                    if signposts[0]:
                        pages.add(signposts[0], signposts[1], signposts[2], rh)
        for keys in listed.unread():
            for (rh, _, _), signposts in zip(keys, pool.map(read, keys), strict=True):
                if signposts is not None and signposts[0]:
                    pages.add(signposts[0], signposts[1], signposts[2], rh)
        parts = iter_signmap(pages.entries(), max_urls=max_urls, max_bytes=max_bytes)
        return _write_signmap(wiring, source, parts, base_url)


def _write_signmap(
    wiring: Wiring, source: str, parts: Iterator[SignmapPart], base_url: str | None
) -> str:
    """Write the Signmap of ``source`` from ``parts``, each as it is made: one ``<urlset>``,
    or the parts and their index. Two parts are held at most (a million records make some
    twenty of up to 50 MB), the second only to know that there is an index. Returns its key."""
    target = signmap_key(source)
    held = list(itertools.islice(parts, 2))
    if len(held) == 1:
        _put_if_changed(wiring, target, held[0].body, SIGNMAP_MEDIA_TYPE)
        return target
    listed: list[tuple[str, str | None]] = []
    for number, part in enumerate(_handed_over(held, parts), start=1):
        part_key = signmap_part_key(source, number)
        _put_if_changed(wiring, part_key, part.body, SIGNMAP_MEDIA_TYPE)
        location = part_key.rsplit("/", 1)[1]
        if base_url:
            location = base_url.rstrip("/") + "/" + part_key
        listed.append((location, part.lastmod))
    _put_if_changed(wiring, target, render_signmap_index(listed), SIGNMAP_MEDIA_TYPE)
    return target


def _handed_over(held: list[SignmapPart], rest: Iterator[SignmapPart]) -> Iterator[SignmapPart]:
    """``held``, then ``rest``; each part of ``held`` is let go of as it is given."""
    while held:
        yield held.pop(0)
    yield from rest
