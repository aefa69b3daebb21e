"""Values shared by every layer: outcomes, typed links, fetched responses, catalogue entries.

These are small frozen dataclasses with no I/O. The message contracts between stages
(:mod:`cdif_harvester.contracts`) and the ports (:mod:`cdif_harvester.ports`) are built from them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any

__all__ = [
    "HTML_MEDIA_TYPES",
    "JSONLD_MEDIA_TYPES",
    "CatalogEntry",
    "FetchResponse",
    "Outcome",
    "RecordRef",
    "TypedLink",
    "UrlOutcome",
    "UrlState",
    "entry_from_dict",
    "entry_to_dict",
    "outcome_from_dict",
    "outcome_to_dict",
    "url_state_from_dict",
    "url_state_to_dict",
]


HTML_MEDIA_TYPES = frozenset({"text/html", "application/xhtml+xml"})
JSONLD_MEDIA_TYPES = frozenset({"application/ld+json", "application/json"})


class Outcome(StrEnum):
    """The one recorded outcome every URL that enters the pipeline ends in."""

    RECORD = "record"
    NO_METADATA = "no-metadata"
    UNCHANGED = "unchanged"
    DISALLOWED = "disallowed"
    BLOCKED = "blocked"
    FAILED = "failed"


@dataclass(frozen=True)
class TypedLink:
    """A typed web link (RFC 8288): from an HTTP Link header, HTML ``<link>``, a linkset or a
    Signmap ``<rs:ln>``. ``rel`` is a single relation type, lower-cased.

    ``href`` and ``anchor`` are absolute (resolved against the right base when read).
    ``reverse`` marks a ``rev`` link of the 1997 metadata-linking draft: ``href`` is the
    resource this document is metadata *of*, not metadata for it. ``scheme`` is that draft's
    metadata scheme (e.g. ``DC``); ``title`` and ``hreflang`` are kept as found (``title*`` is
    decoded into ``title``).
    """

    href: str
    rel: str
    type: str | None = None
    profile: str | None = None
    anchor: str | None = None
    found_in: str | None = None  # "http-header", "html", "linkset", "signmap", "record"
    title: str | None = None
    hreflang: str | None = None
    scheme: str | None = None
    reverse: bool = False


@dataclass(frozen=True)
class FetchResponse:
    """What the safe fetcher got: the final URL after redirects, status, headers, body.

    ``headers`` keeps every header line in order with lower-cased names, so repeated headers
    such as ``Link`` are not lost.
    """

    url: str
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    redirects: tuple[str, ...] = ()
    elapsed: float = 0.0
    # True when the publisher answered a conditional request with 304 Not Modified and this
    # response (status, headers, body) is the one kept from the earlier answer.
    revalidated: bool = False

    def header(self, name: str) -> str | None:
        """Return the first value of header ``name`` (case-insensitive), or None."""
        wanted = name.lower()
        for key, value in self.headers:
            if key == wanted:
                return value
        return None

    def header_all(self, name: str) -> list[str]:
        """Return every value of header ``name`` (case-insensitive), in order."""
        wanted = name.lower()
        return [value for key, value in self.headers if key == wanted]

    @property
    def media_type(self) -> str:
        """The Content-Type without parameters, lower-cased ('' when absent)."""
        raw = self.header("content-type") or ""
        return raw.split(";", 1)[0].strip().lower()


@dataclass(frozen=True)
class RecordRef:
    """One record produced from a URL, as listed in the URL's outcome."""

    record_id: str
    resource_id: str
    valid: bool
    errors: tuple[str, ...]  # the validation error messages, most important first
    record_key: str | None  # None when normalisation failed and only the raw document is kept
    report_key: str
    view_keys: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class UrlOutcome:
    """The recorded outcome of one URL in one harvest run."""

    run_id: str
    source: str
    url: str
    outcome: Outcome
    reason: str | None = None
    pattern: str | None = None
    records: tuple[RecordRef, ...] = ()
    recorded_at: str | None = None


@dataclass(frozen=True)
class CatalogEntry:
    """The catalogue's entry for one record (issue 6 adds history and incremental fields)."""

    record_id: str
    resource_id: str
    source: str
    url: str
    title: str | None
    pattern: str
    valid: bool
    conformance: str | None
    date_modified: str | None
    sd_date_published: str | None
    content_hash: str
    record_key: str | None
    report_key: str
    run_id: str
    harvested_at: str
    extra: dict[str, Any] = field(default_factory=dict)
    # When the record's content last changed (first harvest, or a harvest that rewrote it),
    # and when its URL vanished from the source's sitemaps (a tombstone; None while listed).
    changed_at: str | None = None
    withdrawn_at: str | None = None


@dataclass(frozen=True)
class UrlState:
    """What the catalogue knows about one harvested URL, across runs.

    ``outcome``/``last_run``/``last_seen`` follow every recorded outcome. The rest is written
    only when the URL produced records: the sitemap ``lastmod`` then, the ``fingerprint`` of the
    documents the records came from (pattern plus content-addressed keys), the hashes of the
    JSON-LD blocks, the records' ``sdDatePublished`` values and ids. Incremental harvesting
    compares a new harvest against these.
    """

    url: str
    source: str
    outcome: str | None = None
    last_run: str | None = None
    last_seen: str | None = None
    sitemap: str | None = None
    lastmod: str | None = None
    fingerprint: str | None = None
    blocks: tuple[str, ...] = ()
    sd_dates: tuple[str, ...] = ()
    record_ids: tuple[str, ...] = ()
    withdrawn_at: str | None = None


def url_state_to_dict(state: UrlState) -> dict[str, Any]:
    """Return the JSON form of a URL's state."""
    return asdict(state)


def url_state_from_dict(data: dict[str, Any]) -> UrlState:
    """Inverse of :func:`url_state_to_dict` (lists become tuples)."""
    known: dict[str, Any] = {
        key: tuple(value) if isinstance(value, list) else value
        for key, value in data.items()
        if key in _URL_STATE_FIELDS
    }
    return UrlState(**known)


def outcome_to_dict(outcome: UrlOutcome) -> dict[str, Any]:
    """Return the JSON form of an outcome (the shape of one line of outcomes.jsonl)."""
    return {
        "run_id": outcome.run_id,
        "source": outcome.source,
        "url": outcome.url,
        "outcome": outcome.outcome.value,
        "reason": outcome.reason,
        "pattern": outcome.pattern,
        "records": [
            {
                "record_id": r.record_id,
                "resource_id": r.resource_id,
                "valid": r.valid,
                "errors": list(r.errors),
                "record": r.record_key,
                "report": r.report_key,
                "views": dict(r.view_keys),
            }
            for r in outcome.records
        ],
        "recorded_at": outcome.recorded_at,
    }


def outcome_from_dict(data: dict[str, Any]) -> UrlOutcome:
    """Inverse of :func:`outcome_to_dict`. Raises KeyError or ValueError on a malformed dict."""
    return UrlOutcome(
        run_id=data["run_id"],
        source=data["source"],
        url=data["url"],
        outcome=Outcome(data["outcome"]),
        reason=data.get("reason"),
        pattern=data.get("pattern"),
        records=tuple(
            RecordRef(
                record_id=r["record_id"],
                resource_id=r["resource_id"],
                valid=bool(r["valid"]),
                errors=tuple(str(e) for e in r.get("errors") or ()),
                record_key=r.get("record"),
                report_key=r["report"],
                view_keys=dict(r.get("views") or {}),
            )
            for r in data.get("records") or []
        ),
        recorded_at=data.get("recorded_at"),
    )


def entry_to_dict(entry: CatalogEntry) -> dict[str, Any]:
    """Return the JSON form of a catalogue entry."""
    return asdict(entry)


def entry_from_dict(data: dict[str, Any]) -> CatalogEntry:
    """Inverse of :func:`entry_to_dict`. Raises TypeError on unknown or missing fields."""
    return CatalogEntry(**data)


_URL_STATE_FIELDS = frozenset(f.name for f in fields(UrlState))
