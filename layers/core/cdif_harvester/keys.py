"""The object-store key layout, identical in S3 and in the local output directory.

Every key is built here: ``raw/`` (documents as fetched, when kept), ``staging/`` (hand-overs,
large documents on their way to the extractor, sitemap parts, fetch journals), ``records/``,
``reports/``, ``segments/`` (the records and reports of a batch in one object, on AWS when
asked; a reference ``<key>#<offset>-<length>`` names one of them), ``views/``, ``versions/``
and ``cache/``.
:func:`record_hash` and :func:`url_hash` are the short stable hashes (the first 32 hex digits of a
SHA-256) that name a record or a URL inside those keys: segments of keys, not keys.

See docs/decisions/0001-object-store-key-layout.md for the layout in full.
"""

from __future__ import annotations

import hashlib
import re
from urllib.parse import urlsplit

from cdif_harvester.domain.discovery.urls import canonical_origin
from cdif_harvester.errors import PermanentError

__all__ = [
    "RECORDS_PREFIX",
    "VIEW_NAMES",
    "content_hash",
    "journal_body_key",
    "journal_key",
    "normalised_record_key",
    "origin_of",
    "parse_normalised_record_key",
    "raw_key",
    "parse_segment_ref",
    "raw_meta_key",
    "record_hash",
    "record_report_key",
    "segment_key",
    "segment_ref",
    "segment_signposts_key",
    "sitemap_part_key",
    "signmap_key",
    "site_discovery_key",
    "site_discovery_prefix",
    "source_of",
    "staged_document_key",
    "staging_key",
    "url_hash",
    "view_key",
    "version_key",
    "view_keys",
]

RECORDS_PREFIX = "records/"
VIEW_NAMES: dict[str, str] = {
    "pid-kernel": "pid-kernel.json",
    "linkset-json": "linkset.json",
    "linkset": "linkset.txt",
    "link-header": "link-header.txt",
    "html-links": "links.html",
    "nquads": "record.nq",
}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def content_hash(body: bytes) -> str:
    """Return the full SHA-256 hex digest of ``body``."""
    return hashlib.sha256(body).hexdigest()


def source_of(url: str) -> str:
    """Return the source name of ``url``: its host (and port unless the scheme's default),
    file-name safe."""
    try:
        parts = urlsplit(canonical_origin(url))
        hostname, port = parts.hostname, parts.port
    except (PermanentError, ValueError):
        try:
            hostname, port = urlsplit(url).hostname, None
        except ValueError:  # not even splittable ("http://[x/"): a name that says so
            hostname, port = None, None
    host = (hostname or "unknown").lower()
    name = f"{host}_{port}" if port else host
    return _UNSAFE.sub("_", name)


def origin_of(url: str) -> str:
    """Return ``scheme://host[:port]`` of ``url`` in canonical form (lower case, IDNA host, no
    default port: :func:`~cdif_harvester.domain.discovery.urls.canonical_origin`), or merely
    lower-cased when it has none: the unit of robots.txt and politeness."""
    try:
        return canonical_origin(url)
    except PermanentError:
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.netloc}".lower()


def url_hash(url: str) -> str:
    """Return the short stable hash of a URL used in keys."""
    return _digest(url)


def record_hash(record_id: str) -> str:
    """Return the short stable hash of a metadata record id: the ``<record-hash>`` segment of a
    record's keys (and its DynamoDB key), not a key itself."""
    return _digest(record_id)


def raw_key(source: str, url: str, body: bytes, extension: str) -> str:
    """Key of a raw document: content-addressed under its URL, so a change keeps history."""
    return f"raw/{source}/{url_hash(url)}/{content_hash(body)[:32]}.{extension.lstrip('.')}"


def raw_meta_key(key: str) -> str:
    """Key of the provenance file that sits beside raw document ``key``."""
    stem = key.rsplit(".", 1)[0]
    return f"{stem}.meta.json"


def staging_key(run_id: str, url: str) -> str:
    """Key of the extractor's hand-over object for ``url`` in ``run_id``."""
    return f"staging/{run_id}/{url_hash(url)}.json"


def staged_document_key(run_id: str, url: str, body: bytes, extension: str) -> str:
    """Key of a document handed from the resolver to the extractor through the store (a body
    too large for its message, when bodies are not kept under ``raw/``)."""
    name = f"{content_hash(body)[:32]}.{extension.lstrip('.')}"
    return f"staging/{run_id}/documents/{url_hash(url)}/{name}"


def sitemap_part_key(run_id: str, url: str, index: int) -> str:
    """Key of part ``index`` (from 1) of a sitemap handed on by follow-up jobs."""
    return f"staging/{run_id}/sitemaps/{url_hash(url)}/{index:05d}.json"


def site_discovery_key(run_id: str, url: str) -> str:
    """Key of what the site root ``url`` of ``run_id`` led to (its sitemaps, and how found)."""
    return f"staging/{run_id}/sites/{url_hash(url)}.json"


def site_discovery_prefix(run_id: str) -> str:
    """Key prefix of every :func:`site_discovery_key` of ``run_id``."""
    return f"staging/{run_id}/sites/"


def journal_key(run_id: str, job: str) -> str:
    """Key of the fetch journal of the job whose key is ``job`` in ``run_id``."""
    return f"staging/{run_id}/journal/{job}/journal.json"


def journal_body_key(run_id: str, job: str, digest: str) -> str:
    """Key of a body in that journal, by its SHA-256 ``digest`` (each body stored once)."""
    return f"staging/{run_id}/journal/{job}/{digest}.body"


def normalised_record_key(source: str, rhash: str) -> str:
    """Key of the latest normalised record whose :func:`record_hash` is ``rhash``."""
    return f"{RECORDS_PREFIX}{source}/{rhash}.jsonld"


def record_report_key(source: str, rhash: str) -> str:
    """Key of a record's validation report (a run's own report is ``runs/<run-id>/report.html``,
    kept as ``Run.report_key``)."""
    return f"reports/{source}/{rhash}.json"


def view_key(source: str, rhash: str, view: str) -> str:
    """Key of one named view (see VIEW_NAMES) of a record."""
    return f"views/{source}/{rhash}/{VIEW_NAMES[view]}"


def view_keys(source: str, rhash: str) -> dict[str, str]:
    """Keys of every view of a record, by view name."""
    return {name: view_key(source, rhash, name) for name in VIEW_NAMES}


def signmap_key(source: str) -> str:
    """Key of the Signmap that republishes every harvested record of ``source``."""
    return f"views/{source}/signmap.xml"


def version_key(source: str, rhash: str, digest: str) -> str:
    """Key of one version of a record, by the SHA-256 ``digest`` of its canonical JSON."""
    return f"versions/{source}/{rhash}/{digest[:32]}.jsonld"


def parse_normalised_record_key(key: str) -> tuple[str, str] | None:
    """Return (source, record hash) of a ``records/`` key, or None for any other key."""
    match = re.fullmatch(r"records/([^/]+)/([0-9a-f]{32})\.jsonld", key)
    return (match.group(1), match.group(2)) if match else None


_SEGMENT_REF = re.compile(r"(segments/[^#]+\.seg)#([0-9]+)-([0-9]+)")


def segment_key(source: str, day: str, name: str) -> str:
    """Key of one segment of ``source`` written on ``day`` (``YYYY-MM-DD``), named ``name``
    (a fresh UUID: a segment is never written twice)."""
    return f"segments/{source}/{day}/{name}.seg"


def segment_signposts_key(key: str) -> str:
    """Key of the Signposting of the valid records of the segment ``key``, written beside it:
    what a source's Signmap reads instead of each record and report (decision 0098)."""
    return key.removesuffix(".seg") + ".signposts.json"


def segment_ref(key: str, offset: int, length: int) -> str:
    """The reference to ``length`` bytes at ``offset`` in the segment ``key``: what a catalogue
    entry holds in place of a record's or report's own key."""
    return f"{key}#{offset}-{length}"


def parse_segment_ref(ref: str) -> tuple[str, int, int] | None:
    """Return (segment key, offset, length) of a segment reference, or None for a plain key."""
    match = _SEGMENT_REF.fullmatch(ref)
    if match is None:
        return None
    return match.group(1), int(match.group(2)), int(match.group(3))
