"""Values shared by every layer: outcomes, typed links, fetched responses, catalogue entries.

These are small frozen dataclasses with no I/O. The message contracts between stages
(:mod:`cdif_harvester.contracts`) and the ports (:mod:`cdif_harvester.ports`) are built from them.
"""

from __future__ import annotations

import copy
import typing
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from enum import Enum, StrEnum
from typing import Any, Generic, TypeVar

__all__ = [
    "HTML_MEDIA_TYPES",
    "JSONLD_MEDIA_TYPES",
    "PAGE_READ_BUDGET",
    "QUEUED",
    "VERDICTS",
    "CatalogEntry",
    "ProfileQuery",
    "FetchResponse",
    "Outcome",
    "Page",
    "RecordRef",
    "RequestValidator",
    "RunState",
    "RunStatus",
    "Source",
    "TypedLink",
    "UrlOutcome",
    "UrlState",
    "entry_from_dict",
    "entry_to_dict",
    "fill_page",
    "keeper",
    "outcome_from_dict",
    "outcome_to_dict",
    "plain",
    "run_from_dict",
    "run_to_dict",
    "settle_moves",
    "source_from_dict",
    "source_to_dict",
    "url_state_from_dict",
    "url_state_to_dict",
]


_Item = TypeVar("_Item")
HTML_MEDIA_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_SCALARS = frozenset({str, int, float, bool, type(None)})
_FIELD_NAMES: dict[type[Any], tuple[str, ...]] = {}


def plain(value: Any) -> Any:
    """``value`` as plain data for JSON: dataclasses become dicts, tuples lists, enums their
    values; the same data :func:`dataclasses.asdict` gives, without its deep copies.

    It runs for every message and every link of a Signmap (hundreds of thousands in a large
    one), where ``asdict`` cost about twenty times as much as the parse that made the links.
    """
    if type(value) in _SCALARS:  # (exact types: an enum is not returned as it is)
        return value
    if isinstance(value, Enum):
        return value.value
    # (scalars inside are taken as they are without a call each: a record's tree is mostly
    # strings, and it travels in every hand-over)
    if isinstance(value, tuple | list):
        return [item if type(item) in _SCALARS else plain(item) for item in value]
    if isinstance(value, dict):
        return {key: item if type(item) in _SCALARS else plain(item) for key, item in value.items()}
    cls = type(value)
    names = _FIELD_NAMES.get(cls)
    if names is None:
        if not is_dataclass(value):
            raise TypeError(f"{cls.__name__} is not plain data")
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(value))
        _JSON_FIELDS[cls] = _json_fields(cls)
    kept = _JSON_FIELDS[cls]
    return {
        name: item
        if type(item := getattr(value, name)) in _SCALARS or (name in kept and type(item) is dict)
        else plain(item)
        for name in names
    }


_JSON_FIELDS: dict[type[Any], frozenset[str]] = {}
_JSON_HINTS = (dict[str, Any], dict[str, Any] | None)


def _json_fields(cls: type[Any]) -> frozenset[str]:
    """The fields of ``cls`` that hold JSON as parsed (``dict[str, Any]``: a record's tree, an
    ItemList's provenance): given as they are, not walked (a record's tree is most of a
    hand-over's values, and holds nothing but JSON)."""
    try:
        hints = typing.get_type_hints(cls)
    except (NameError, TypeError):  # (a hint not resolvable here: every field is walked)
        return frozenset()
    return frozenset(name for name, hint in hints.items() if hint in _JSON_HINTS)


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
    decoded into ``title``). ``href`` keeps its fragment, as published.

    ``used`` and ``ignored`` say what the resolver did with a link it read (None on links
    that did not go through it): ``used`` when it followed the link (a metadata target that
    gave a document, a linkset whose links it read) or took its value (``cite-as``, ``type``);
    ``ignored`` says why a link was set aside: ``anchor`` (it is about another resource) or
    ``overruled`` (a more authoritative source of the page says otherwise). See
    docs/decisions/0065-link-identity-and-authority.md.
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
    used: bool | None = None
    ignored: str | None = None


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
    # True when the body is only the first bytes of a larger one, cut at the size cap (asked
    # for with ``fetch(truncate=True)``): what is past the cut was never read.
    truncated: bool = False

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
    # Keys of view files: empty unless they were written (an earlier layout, or ``--views``)
    view_keys: dict[str, str] = field(default_factory=dict)
    # "core 1.1 valid", "discovery 1.1: 3 errors": the record's verdict per CDIF profile
    profiles: tuple[str, ...] = ()


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
    # The verdict of each CDIF profile judged, by "<profile>/<version>": "valid", "invalid" or
    # "unknown" (core at the record's version first; empty for entries written before).
    profiles: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Page(Generic[_Item]):
    """One page of a listing read a page at a time (``Catalog.records_page``,
    ``Catalog.outcomes_page``).

    ``after`` is where the next page starts, in the catalogue's own words (opaque to callers):
    None when nothing is left to read. A page may hold fewer items than were asked for with an
    ``after`` (a filter that kept few of the items one request may read), even none.
    """

    items: tuple[_Item, ...]
    after: str | None


#: The items one page may read at most, kept or not: a filter that keeps few of a large
#: listing ends the page early (with where to go on) rather than reading on.
PAGE_READ_BUDGET = 5000


def fill_page(
    listed: Iterator[tuple[str, _Item | None]],
    *,
    limit: int,
    keep: Callable[[_Item], bool] | None = None,
    budget: int | None = None,
) -> Page[_Item]:
    """The page of ``listed`` (each item with the position just after it, in listing order;
    None for an item read that the listing does not show): its first ``limit`` items kept by
    ``keep``, and, when more follow, the position the next page starts from: just before the
    next item kept (read to know that one follows), so that the items left out between are not
    read again. When more than ``budget`` items are left to read, the page ends after
    ``budget`` of them, with the position after the last (``budget``: by default
    :data:`PAGE_READ_BUDGET`). Reads nothing beyond that but the one item that says more
    follow."""
    if limit < 1:
        raise ValueError(f"a page holds at least one item, not {limit}")
    budget = PAGE_READ_BUDGET if budget is None else budget
    kept: list[_Item] = []
    last = ""  # the position after the last item read
    for read, (after, item) in enumerate(listed):
        if read == budget:  # (this one is past the budget: the next page starts with it)
            return Page(tuple(kept), last)
        if item is not None and (keep is None or keep(item)):
            if len(kept) == limit:  # one more: the page is full, the next starts with this one
                return Page(tuple(kept), last)
            kept.append(item)
        last = after
    return Page(tuple(kept), None)


@dataclass(frozen=True)
class RequestValidator:
    """One request a URL's resolution made, with the validator its answer carried.

    ``method``, ``url`` and ``accept`` (``""``: none sent) say what was asked; ``etag`` or, when
    the answer had none, ``last_modified`` is what the next harvest sends back in
    ``If-None-Match`` / ``If-Modified-Since`` (RFC 9110, 13.1). ``url`` is ``""`` for the URL
    itself, which keeps the catalogue's item small.
    """

    method: str
    url: str
    accept: str = ""
    etag: str = ""
    last_modified: str = ""


@dataclass(frozen=True)
class UrlState:
    """What the catalogue knows about one harvested URL, across runs.

    ``outcome``/``last_run``/``last_seen`` follow every recorded outcome that changes the URL's
    latest one (the DynamoDB catalogue does not write the same outcome again, so its run and
    time are those of the first run that recorded it; decision 0082). The rest is written
    only when the URL produced records: the sitemap ``lastmod`` then, the ``fingerprint`` of the
    documents the records came from (pattern plus content-addressed keys), the hashes of the
    JSON-LD blocks, the records' ``sdDatePublished`` values and ids, the run that harvested
    them (``harvest_run``) and the ``validators`` of every request that resolution made (empty
    when one of its answers had none: such a URL cannot be revalidated without its bodies).
    Incremental harvesting compares a new harvest against these, never against what its own run
    wrote (a retried or redelivered job must end as its first attempt).
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
    harvest_run: str | None = None
    validators: tuple[RequestValidator, ...] = ()


def url_state_to_dict(state: UrlState) -> dict[str, Any]:
    """Return the JSON form of a URL's state (each validator a list of its five strings, none
    when there are none: the state is a catalogue item, paid by the kilobyte)."""
    # Field by field, not dataclasses.asdict (which copies deeply, and cost more than the
    # catalogue write around it): the same dict, as a unit test checks against asdict.
    data: dict[str, Any] = {
        "url": state.url,
        "source": state.source,
        "outcome": state.outcome,
        "last_run": state.last_run,
        "last_seen": state.last_seen,
        "sitemap": state.sitemap,
        "lastmod": state.lastmod,
        "fingerprint": state.fingerprint,
        "blocks": _copy(state.blocks),
        "sd_dates": _copy(state.sd_dates),
        "record_ids": _copy(state.record_ids),
        "withdrawn_at": state.withdrawn_at,
        "harvest_run": state.harvest_run,
    }
    if state.validators:
        data["validators"] = [
            [v.method, v.url, v.accept, v.etag, v.last_modified] for v in state.validators
        ]
    return data


def url_state_from_dict(data: dict[str, Any]) -> UrlState:
    """Inverse of :func:`url_state_to_dict` (lists become tuples; a state written before
    validators were kept has none)."""
    known: dict[str, Any] = {
        key: tuple(value) if isinstance(value, list) else value
        for key, value in data.items()
        if key in _URL_STATE_FIELDS
    }
    known["validators"] = tuple(
        RequestValidator(*(str(part) for part in item))
        for item in known.get("validators") or ()
        if isinstance(item, list | tuple) and len(item) == len(_VALIDATOR_FIELDS)
    )
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
                # Views are made on read (docs/decisions/0081-views-derived-on-read.md): only
                # an outcome of an earlier layout, or a harvest that wrote them, names files.
                **({"views": dict(r.view_keys)} if r.view_keys else {}),
                **({"profiles": list(r.profiles)} if r.profiles else {}),
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
                profiles=tuple(str(p) for p in r.get("profiles") or ()),
            )
            for r in data.get("records") or []
        ),
        recorded_at=data.get("recorded_at"),
    )


def entry_to_dict(entry: CatalogEntry) -> dict[str, Any]:
    """Return the JSON form of a catalogue entry."""
    # Field by field, not dataclasses.asdict (see url_state_to_dict): the same dict.
    return {
        "record_id": entry.record_id,
        "resource_id": entry.resource_id,
        "source": entry.source,
        "url": entry.url,
        "title": entry.title,
        "pattern": entry.pattern,
        "valid": entry.valid,
        "conformance": entry.conformance,
        "date_modified": entry.date_modified,
        "sd_date_published": entry.sd_date_published,
        "content_hash": entry.content_hash,
        "record_key": entry.record_key,
        "report_key": entry.report_key,
        "run_id": entry.run_id,
        "harvested_at": entry.harvested_at,
        "extra": _copy(entry.extra),
        "changed_at": entry.changed_at,
        "withdrawn_at": entry.withdrawn_at,
        "profiles": _copy(entry.profiles),
    }


def _copy(value: Any) -> Any:
    """``value`` as :func:`dataclasses.asdict` gives a field of plain data (nothing mutable
    shared with the value), without its deep copy of what needs none."""
    kind = type(value)
    if kind in _SCALARS or (kind is tuple and all(type(v) in _SCALARS for v in value)):
        return value
    if kind is dict:
        return {key: _copy(item) for key, item in value.items()}
    return copy.deepcopy(value)


def entry_from_dict(data: dict[str, Any]) -> CatalogEntry:
    """Inverse of :func:`entry_to_dict`. Raises TypeError on unknown or missing fields."""
    return CatalogEntry(**data)


VERDICTS = ("valid", "invalid", "unknown")


@dataclass(frozen=True)
class ProfileQuery:
    """Which records a catalogue query keeps, by their profile verdicts.

    ``profile`` (``discovery``) and ``version`` (``1.1``, or None for any version) select the
    records judged by that profile, with the verdict ``verdict`` when given; ``verdict`` alone
    is the record's own verdict (core's at its version: ``valid`` or ``invalid``).
    """

    profile: str | None = None
    version: str | None = None
    verdict: str | None = None

    def matches(self, entry: CatalogEntry) -> bool:
        """True when ``entry`` is one of the records this query keeps."""
        if self.profile is None:
            wanted = self.verdict
            return wanted is None or wanted == ("valid" if entry.valid else "invalid")
        for key, status in entry.profiles.items():
            profile, _, version = key.partition("/")
            if profile != self.profile or self.version not in (None, version):
                continue
            if self.verdict is None or status == self.verdict:
                return True
        return False


def keeper(query: ProfileQuery | None) -> Callable[[CatalogEntry], bool] | None:
    """What keeps an entry in a listing filtered by ``query``: None when it keeps every entry
    (no query, or one that names no profile nor verdict), so that a listing can read exactly a
    page (see fill_page)."""
    if query is None or query == ProfileQuery():
        return None
    return query.matches


@dataclass(frozen=True)
class Source:
    """A publisher registered for harvesting (the sources registry).

    ``source_id`` is the operator's name for it (a slug). ``entry_url`` is where a harvest
    starts (robots.txt, a sitemap or a page); ``hosts`` are the hosts the publisher may announce
    sitemaps and pages on (the entry URL's host always counts). ``schedule`` is how often it is
    harvested (``30m``, ``6h``, ``1d``, ``7d``...; None: only on demand). ``requests_per_host``
    and ``crawl_delay`` tighten the defaults for a fragile site; ``options`` are the resolution
    options (``format_parameter``); ``publisher_keys`` are the API key ids the publisher calls
    the intake API with. ``active_run`` is the run under way (one at a time per source).
    """

    source_id: str
    entry_url: str
    hosts: tuple[str, ...] = ()
    schedule: str | None = None
    requests_per_host: int | None = None
    crawl_delay: float | None = None
    options: dict[str, str] = field(default_factory=dict)
    contact: str | None = None
    publisher_keys: tuple[str, ...] = ()
    created_at: str | None = None
    updated_at: str | None = None
    last_run_id: str | None = None
    last_run_at: str | None = None
    active_run: str | None = None


def source_to_dict(source: Source) -> dict[str, Any]:
    """Return the JSON form of a registered source."""
    return asdict(source)


def source_from_dict(data: dict[str, Any]) -> Source:
    """Inverse of :func:`source_to_dict` (lists become tuples; unknown keys are ignored)."""
    known: dict[str, Any] = {
        key: tuple(value) if isinstance(value, list) else value
        for key, value in data.items()
        if key in _SOURCE_FIELDS
    }
    return Source(**known)


class RunState(StrEnum):
    """Where a harvest run is: under way, finished (every URL that entered has its outcome),
    stalled (no progress for a long time: jobs dead-lettered; a redrive can finish it), or
    interrupted (a local run stopped by Ctrl-C or SIGTERM; the next harvest starts a new run)."""

    RUNNING = "running"
    FINISHED = "finished"
    STALLED = "stalled"
    INTERRUPTED = "interrupted"


# How a catalogue marks a URL that entered a run and is still on its way (never an Outcome).
QUEUED = "queued"


def settle_moves(moves: Iterable[tuple[str | None, str]]) -> Counter[str]:
    """How a run's counters move when URLs' outcomes go from ``old`` to ``new``: ``entered``,
    ``settled`` and one count per outcome. A URL settles once (from :data:`QUEUED`, or from
    nothing: it then enters too); a changed outcome moves from one count to the other; writing
    the same outcome again moves nothing. Both catalogue adapters count with this."""
    deltas: Counter[str] = Counter()
    for old, new in moves:
        if old == new:
            continue
        deltas[new] += 1
        if old is None:
            deltas.update(entered=1, settled=1)
        elif old == QUEUED:
            deltas["settled"] += 1
        else:
            deltas[old] -= 1
    return Counter({name: n for name, n in deltas.items() if n})


@dataclass(frozen=True)
class RunStatus:
    """A harvest run's progress, kept by atomic counters as the run goes.

    ``entered`` counts the URLs that entered the run (each once, however many sitemaps list
    it), ``settled`` those that have their outcome, ``outcomes`` the settled ones by outcome.
    ``sitemaps`` counts the sitemap jobs still to do. The run is finished when no sitemap job
    is left and every URL that entered has its outcome. ``closed_at`` is set once the end of
    the run has been dealt with (tombstones, the source's Signmap, the publisher report).
    """

    run_id: str
    entry_urls: tuple[str, ...]
    started_at: str
    source_id: str | None = None
    trigger: str = "manual"
    state: RunState = RunState.RUNNING
    entered: int = 0
    settled: int = 0
    sitemaps: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    updated_at: str | None = None
    finished_at: str | None = None
    closed_at: str | None = None
    report_key: str | None = None

    @property
    def done(self) -> bool:
        """True when every URL that entered has its outcome and no sitemap job is left."""
        return self.sitemaps <= 0 and self.settled >= self.entered


def run_to_dict(run: RunStatus) -> dict[str, Any]:
    """Return the JSON form of a run's status (the body of ``GET /runs/{id}``)."""
    data = asdict(run)
    data["state"] = run.state.value
    data["entry_urls"] = list(run.entry_urls)
    data["outcomes"] = {kind.value: int(run.outcomes.get(kind.value, 0)) for kind in Outcome}
    data["queued"] = max(0, run.entered - run.settled)
    return data


def run_from_dict(data: dict[str, Any]) -> RunStatus:
    """Inverse of :func:`run_to_dict` (derived keys such as ``queued`` are ignored)."""
    known: dict[str, Any] = {key: value for key, value in data.items() if key in _RUN_FIELDS}
    known["entry_urls"] = tuple(known.get("entry_urls") or ())
    known["state"] = RunState(known.get("state", RunState.RUNNING.value))
    known["outcomes"] = {str(k): int(v) for k, v in (known.get("outcomes") or {}).items()}
    for name in ("entered", "settled", "sitemaps"):
        known[name] = int(known.get(name) or 0)
    return RunStatus(**known)


_URL_STATE_FIELDS = frozenset(f.name for f in fields(UrlState))
_VALIDATOR_FIELDS = tuple(f.name for f in fields(RequestValidator))
_SOURCE_FIELDS = frozenset(f.name for f in fields(Source))
_RUN_FIELDS = frozenset(f.name for f in fields(RunStatus))
