"""Message contracts between the stages: one module, versioned, validated at every boundary.

Every message is ``{"v": <version>, "kind": <kind>, ...fields}``: producers build a frozen
dataclass and call :func:`encode`; consumers call :func:`decode`, which checks version, kind and
the type of every field and raises :class:`~cdif_harvester.errors.ContractError` (permanent).
Large payloads travel as object-store keys (claim check); :func:`encode` refuses a message over
:data:`MAX_MESSAGE_BYTES`.

The extractor's hand-over to the indexer, :class:`StagedRecords` (an :class:`IndexJob` carries it
as text, or names it by ``staged_key`` when too large), follows the same rules through
:func:`encode_staged` and :func:`decode_staged`, with a version of its own
(:data:`STAGED_VERSION`), no size cap and its keys in their order; older ones are still read.

See docs/decisions/0002-message-contracts.md, with the version history (a bump adds a line there),
and docs/decisions/0041-staged-records-handover.md, with the staged objects' history.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Sequence
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any, ClassVar, TypeVar, Union

from cdif_harvester.errors import ContractError
from cdif_harvester.model import RequestValidator, TypedLink, UrlState, plain

__all__ = [
    "CONTRACT_VERSION",
    "CROSSWALK_QUEUE",
    "DOCUMENT_QUEUE",
    "INDEX_QUEUE",
    "RENDER_QUEUE",
    "SITEMAP_QUEUE",
    "URL_QUEUE",
    "MAX_MESSAGE_BYTES",
    "RENDER_MODES",
    "RESOLUTION_OPTIONS",
    "DocumentJob",
    "DocumentRef",
    "PageScripts",
    "ScriptBlock",
    "IndexJob",
    "Message",
    "RecordStored",
    "ProfileStatus",
    "ReportIssue",
    "STAGED_VERSION",
    "SitemapJob",
    "SkippedBlock",
    "StagedRecord",
    "StagedRecords",
    "StagedReport",
    "UrlJob",
    "UrlJobEncoder",
    "carries_state",
    "decode",
    "decode_staged",
    "encode",
    "encode_staged",
]

CONTRACT_VERSION = 11
READABLE_VERSIONS = frozenset({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
STAGED_VERSION = 6
STAGED_READABLE_VERSIONS = frozenset({1, 2, 3, 4, 5, 6})
MAX_MESSAGE_BYTES = 200 * 1024

# Resolution options a source may set, carried on its sitemap and URL jobs:
# ``format_parameter``: ``name=value`` appended to each URL's query to ask a metadata server
# for CDIF (CDIF metadata publication, Option 2; e.g. ``format=CDIF1.0``).
# ``render``: ``never`` (default), ``fallback`` (render the page in a browser when it yields no
# metadata as served) or ``always`` (docs/decisions/0075-rendering-pages-in-a-browser.md).
# ``keep_bodies``: ``true`` keeps each document fetched under ``raw/`` and each answer with a
# validator under ``cache/`` (``false``, the default: neither; 0080-bodies-kept-only-when-asked).
RESOLUTION_OPTIONS = frozenset({"format_parameter", "keep_bodies", "render"})
#: The values of the ``render`` option.
RENDER_MODES = ("never", "fallback", "always")

# Logical queue names; adapters map them to SQS queue URLs or in-process queues.
SITEMAP_QUEUE = "sitemap"
URL_QUEUE = "url"
DOCUMENT_QUEUE = "document"
INDEX_QUEUE = "index"
CROSSWALK_QUEUE = "crosswalk"
# URL jobs that need a browser, handed by a resolver without one to the renderer, which resolves
# them as they are (docs/decisions/0079-rendering-on-aws-hand-over.md).
RENDER_QUEUE = "render"


@dataclass(frozen=True)
class SitemapJob:
    """Expand one robots.txt, sitemap, sitemap index or single page URL into URL jobs.

    ``depth`` counts sitemap-index levels followed so far; ``cdif_agent`` is set when the sitemap
    was announced for ``User-agent: CDIF1.0`` (its locations are metadata or Signposting
    resources, not HTML with embedded scripts). ``ancestors`` lists the sitemaps that led here,
    so an index that lists one of them again is not followed. A follow-up job of a sitemap too
    big for one invocation has ``offset`` (entries handed on before its part) and ``body_key``
    (the key of its part in the object store). ``options`` are the source's resolution options
    (see :data:`RESOLUTION_OPTIONS`), handed down to every URL job, as are the source's own
    politeness limits: ``requests_per_host`` (at most that many requests in flight on a host)
    and ``crawl_delay`` (seconds between the starts of two requests), each tightening the
    deployment's defaults and the host's robots.txt, never loosening them.
    """

    KIND: ClassVar[str] = "sitemap-job"
    run_id: str
    source: str
    url: str
    depth: int = 0
    cdif_agent: bool = False
    parent: str | None = None
    ancestors: tuple[str, ...] = ()
    offset: int = 0
    body_key: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    requests_per_host: int | None = None
    crawl_delay: float | None = None


@dataclass(frozen=True)
class UrlJob:
    """Resolve one URL (a sitemap ``<loc>``) to its metadata (``options``, ``requests_per_host``
    and ``crawl_delay``: the source's, as on :class:`SitemapJob`)."""

    KIND: ClassVar[str] = "url-job"
    run_id: str
    source: str
    url: str
    sitemap: str | None = None
    lastmod: str | None = None
    cdif_agent: bool = False
    links: tuple[TypedLink, ...] = ()
    options: dict[str, str] = field(default_factory=dict)
    requests_per_host: int | None = None
    crawl_delay: float | None = None


@dataclass(frozen=True)
class ScriptBlock:
    """One JSON-LD ``<script>`` element of a page: its place among them, its text and the
    profile it declares."""

    index: int
    text: str
    profile: str | None = None


@dataclass(frozen=True)
class PageScripts:
    """The JSON-LD blocks the resolver read from the page its document job names by ``key``
    (the document's), and how many more it left unread (past the most a page is read for)."""

    key: str
    blocks: tuple[ScriptBlock, ...]
    unread: int = 0


@dataclass(frozen=True)
class DocumentRef:
    """A fetched document, named by ``key``: its content-addressed key under ``raw/``.

    ``kept`` says whether the document is stored under ``key`` (when the run or source asks to
    keep bodies, and in every message of contract version 7 and before). When it is not, its
    bytes travel in ``body`` (UTF-8 text, or base64 when ``encoding`` is ``base64``) or wait
    under ``staged_key`` in the run's staging area (a body too large for the message); the
    extractor's hand-over keeps neither. ``status``, ``redirects``,
    ``headers`` (the few that matter to provenance) and ``fetched_at`` say how it was fetched.
    ``via`` says how the resolver reached it (``self``, ``describedby``, ``meta``, ``linkset``
    ...). ``authority`` is the anti-spoofing verdict (1997 draft, "Metadata Spoofing"):
    ``None`` when the document claims nothing about another origin, else ``authoritative``,
    ``not-authoritative`` or ``unverified``. ``warnings`` (``<code>: <details>``) are what the
    record's report must say about the document: an ``unverified-claim`` and why, a
    ``truncated-page`` read only up to its size cap.
    """

    key: str
    url: str
    media_type: str
    via: str | None = None
    authority: str | None = None
    warnings: tuple[str, ...] = ()
    kept: bool = True
    body: str | None = None
    encoding: str | None = None
    staged_key: str | None = None
    status: int | None = None
    redirects: tuple[str, ...] = ()
    headers: dict[str, str] = field(default_factory=dict)
    fetched_at: str | None = None


@dataclass(frozen=True)
class DocumentJob:
    """Extract, normalise and validate the metadata documents found for one URL.

    ``validators`` are those of every request the resolution made (see
    :class:`~cdif_harvester.model.RequestValidator`; empty when one answer had none), carried to
    the URL's state for the next harvest's conditional requests.

    ``state`` is the URL's harvest state as the resolver read it from the catalogue when
    ``state_read`` (None: the catalogue held none), so the extractor need not read it again;
    without ``state_read`` (incremental harvesting off, an older message) the extractor reads
    it itself.

    ``scripts`` (from version 11) are the JSON-LD blocks of HTML pages the resolver read
    already, each in place of its page's ``body`` (a document with neither body, staged key
    nor copy kept): the extractor reads nothing else of a page, so the page is neither sent
    nor parsed again (decision 0101).
    """

    KIND: ClassVar[str] = "document-job"
    run_id: str
    source: str
    url: str
    pattern: str
    documents: tuple[DocumentRef, ...]
    links: tuple[TypedLink, ...] = ()
    notes: tuple[str, ...] = ()
    sitemap: str | None = None
    lastmod: str | None = None
    validators: tuple[RequestValidator, ...] = ()
    state: UrlState | None = None
    state_read: bool = False
    scripts: tuple[PageScripts, ...] = ()


@dataclass(frozen=True)
class IndexJob:
    """Store and index the records extracted from one URL.

    They travel in ``staged``, the :class:`StagedRecords` as :func:`encode_staged` writes it
    (JSON text: a string keeps the records' keys in their order), or, when the message would
    pass :data:`MAX_MESSAGE_BYTES`, wait under ``staged_key`` in the run's staging area (as in
    every message of contract version 8 and before). Exactly one of the two is set.
    """

    KIND: ClassVar[str] = "index-job"
    run_id: str
    source: str
    url: str
    pattern: str
    staged_key: str | None = None
    staged: str | None = None

    def __post_init__(self) -> None:
        if (self.staged is None) == (self.staged_key is None):
            raise ContractError("index-job: exactly one of 'staged' and 'staged_key' must be given")


@dataclass(frozen=True)
class RecordStored:
    """A normalised record landed in the object store (S3 notification, or its local twin)."""

    KIND: ClassVar[str] = "record-stored"
    key: str
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ReportIssue:
    """One problem found in a record: where (JSON Pointer), what, and the keyword of the rule
    (a JSON Schema keyword, ``shacl:<constraint>``, or why normalisation failed)."""

    pointer: str
    message: str
    keyword: str


@dataclass(frozen=True)
class ProfileStatus:
    """The verdict of one CDIF profile at one version on a record: ``valid``, ``invalid``
    (``errors`` say why) or ``unknown`` (no rules held; ``rules`` None). ``declared`` is false
    for the core verdict of a record that does not claim core at its version."""

    profile: str
    version: str
    status: str
    rules: str | None
    declared: bool
    errors: tuple[ReportIssue, ...] = ()


@dataclass(frozen=True)
class StagedReport:
    """The extractor's verdict on one record, as its report object holds it.

    ``conformance`` and ``rules`` are ``None`` for a record that could not be normalised (its one
    error says why); ``shacl`` is true when the SHACL shapes were run too (their violations are
    among the errors). ``profiles`` holds the verdict of core at the record's version, then
    of each other CDIF profile it claims; ``valid``, ``rules`` and ``errors`` are core's.
    """

    valid: bool
    conformance: str | None
    rules: str | None
    errors: tuple[ReportIssue, ...]
    warnings: tuple[ReportIssue, ...]
    shacl: bool = False
    profiles: tuple[ProfileStatus, ...] = ()


@dataclass(frozen=True)
class StagedRecord:
    """One record the extractor found, judged and staged for the indexer.

    ``document`` (its key), ``block``, ``via`` and ``authority`` say where it was found (see
    :class:`DocumentRef`). ``record`` is the normalised CDIF record, ``None`` when normalisation
    failed (``identity_fallback`` is then true and the ids are the block's). ``repairs`` are what
    the JSON-LD parser had to repair, ``notes`` what normalisation noted, and ``item_list`` the
    CDIF-list-1.0 ItemList the record is an element of, if any (its ``id``, ``name``, ``url``
    where declared, and ``position``).
    """

    document: str
    block: int
    via: str | None
    authority: str | None
    record_id: str
    resource_id: str
    record: dict[str, Any] | None
    report: StagedReport
    repairs: tuple[str, ...]
    notes: tuple[str, ...]
    identity_fallback: bool
    item_list: dict[str, Any] | None = None


@dataclass(frozen=True)
class SkippedBlock:
    """A JSON-LD block that gave no record, with why (where it was found: as on StagedRecord)."""

    document: str
    block: int
    via: str | None
    authority: str | None
    reason: str


@dataclass(frozen=True)
class StagedRecords:
    """The extractor's hand-over to the indexer: the records found for one URL (claim check).

    Besides the records and the skipped blocks it carries what the indexer writes in each
    report's provenance (``links``, ``resolution_notes``) and in the URL's state (``documents``
    for its fingerprint, ``sitemap``, ``lastmod``, the ``blocks`` hashes and ``sd_dates``
    of :mod:`cdif_harvester.domain.discovery.incremental`, and the resolution's ``validators``).
    Its documents never carry their bodies.
    """

    KIND: ClassVar[str] = "staged-records"
    url: str
    pattern: str
    links: tuple[TypedLink, ...]
    documents: tuple[DocumentRef, ...]
    resolution_notes: tuple[str, ...]
    records: tuple[StagedRecord, ...]
    skipped: tuple[SkippedBlock, ...]
    sitemap: str | None
    lastmod: str | None
    blocks: tuple[str, ...]
    sd_dates: tuple[str, ...]
    validators: tuple[RequestValidator, ...] = ()


Message = SitemapJob | UrlJob | DocumentJob | IndexJob | RecordStored
_KINDS: dict[str, type[Any]] = {
    cls.KIND: cls for cls in (SitemapJob, UrlJob, DocumentJob, IndexJob, RecordStored)
}
_T = TypeVar("_T")


def encode(message: Message) -> str:
    """Serialise ``message`` to its JSON wire form.

    Raises ContractError when the result is larger than MAX_MESSAGE_BYTES (large payloads go by
    object-store key, never inline).
    """
    body = {"v": CONTRACT_VERSION, "kind": message.KIND, **plain(message)}
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    # (an ASCII text's length is its size: no encoded copy of a page is made to measure it)
    size = len(text) if text.isascii() else len(text.encode("utf-8"))
    if size > MAX_MESSAGE_BYTES:
        raise ContractError(
            f"{message.KIND} message is {size} bytes, over {MAX_MESSAGE_BYTES}: "
            "put the payload in the object store and send its key",
            reason="message-too-large",
        )
    return text


def carries_state(message: str) -> bool:
    """Whether the document-job ``message``, as :func:`encode` wrote it, carries its URL's
    state (``state_read``), told without parsing it (a message holds a whole page).

    Exact for what :func:`encode` writes: without spaces, the field is ``"state_read":true``,
    and no string can hold that text, as a quote inside a JSON string is escaped.
    """
    return '"state_read":true' in message


def decode(raw: str | bytes | dict[str, Any], expected: type[_T] | None = None) -> _T:
    """Parse and validate a message; with ``expected``, also check it is of that kind.

    Raises ContractError on malformed JSON, an unknown version or kind, a missing required field,
    an unknown field, or a field of the wrong type.
    """
    data = _json_object(raw, "message")
    _check_version(data.get("v"), READABLE_VERSIONS, CONTRACT_VERSION, "message")
    kind = data.get("kind")
    cls = _KINDS.get(str(kind))
    if cls is None:
        raise ContractError(f"unknown message kind {kind!r}")
    if expected is not None and cls is not expected:
        raise ContractError(f"expected a {getattr(expected, 'KIND', expected)} message, got {kind}")
    payload = {k: v for k, v in data.items() if k not in ("v", "kind")}
    result: _T = _build(cls, payload, str(kind))
    return result


def encode_staged(staged: StagedRecords) -> bytes:
    """Serialise the extractor's hand-over to the JSON kept in the object store.

    Unlike :func:`encode` there is no size limit (this is the payload a message names by key)
    and keys are not sorted: records keep the order of their keys.
    """
    body = {"v": STAGED_VERSION, "kind": StagedRecords.KIND, **plain(staged)}
    # (compact: it usually travels in an index job's message, whose size is billed)
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


def decode_staged(raw: str | bytes | dict[str, Any]) -> StagedRecords:
    """Parse and validate a staged object, of this version or an older one still read.

    Raises ContractError on malformed JSON, an unknown version, another kind, a missing
    required field, an unknown field, or a field of the wrong type (the message names the
    field, e.g. ``staged-records.records[0].report.valid``).
    """
    data = _json_object(raw, "staged object")
    if "v" not in data and "kind" not in data:
        # Written before the hand-over was a contract (v1): the same fields, unmarked.
        payload = data
    else:
        _check_version(data.get("v"), STAGED_READABLE_VERSIONS, STAGED_VERSION, "staged object")
        kind = data.get("kind")
        if kind != StagedRecords.KIND:
            raise ContractError(f"expected a {StagedRecords.KIND} object, got {kind!r}")
        payload = {k: v for k, v in data.items() if k not in ("v", "kind")}
    staged: StagedRecords = _build(StagedRecords, payload, StagedRecords.KIND)
    return staged


def _json_object(raw: str | bytes | dict[str, Any], what: str) -> dict[str, Any]:
    """``raw`` parsed as a JSON object; raises ContractError when it is not JSON or no object."""
    if isinstance(raw, dict):
        data = raw
    else:
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ContractError(f"{what} is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ContractError(f"{what} is not a JSON object")
    return data


def _check_version(version: Any, readable: frozenset[int], current: int, what: str) -> None:
    """Raise ContractError (``bad-version``) unless ``version`` is one of ``readable``."""
    if isinstance(version, bool) or not isinstance(version, int) or version not in readable:
        raise ContractError(
            f"{what} version {version!r} not supported (expected {current})",
            reason="bad-version",
        )


_TYPE_HINTS: dict[type[Any], dict[str, Any]] = {}


def _type_hints(cls: type[Any]) -> dict[str, Any]:
    # Resolved once per class (a handful of contract classes): resolving them for each object
    # built was a third of the time a hand-over of 10,000 records took to read.
    hints = _TYPE_HINTS.get(cls)
    if hints is None:
        hints = _TYPE_HINTS[cls] = typing.get_type_hints(cls)
    return hints


def _build(cls: type[Any], data: Any, where: str) -> Any:
    return _coercer(cls)(data, where)


#: Checks and converts one JSON value to a field's type; raises ContractError naming ``where``.
_Coercer = typing.Callable[[Any, str], Any]

_COERCERS: dict[Any, _Coercer] = {}


def _coercer(hint: Any) -> _Coercer:
    """The coercer of ``hint``, made once per type (a handful of contract types): reading each
    type's shape from its hints for every value was most of the time a message took to
    decode. (A race makes one twice; either is kept.)"""
    found = _COERCERS.get(hint)
    if found is None:
        found = _COERCERS[hint] = _make_coercer(hint)
    return found


def _make_coercer(hint: Any) -> _Coercer:  # noqa: PLR0911 - one branch per shape
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        return _union_coercer(hint)
    if hint is type(None):
        return _null
    if origin is tuple:
        (item_hint, _ellipsis) = typing.get_args(hint)
        return _tuple_coercer(item_hint)
    if origin is dict:
        (_key_hint, value_hint) = typing.get_args(hint)
        return _json_dict if value_hint is Any else _string_dict
    scalar = _SCALARS.get(hint)
    if scalar is not None:
        return scalar
    if isinstance(hint, type) and hasattr(hint, "__dataclass_fields__"):
        return _DataclassCoercer(hint)

    def unsupported(_value: Any, where: str) -> Any:  # pragma: no cover
        raise ContractError(f"{where}: unsupported field type {hint}")

    return unsupported


def _union_coercer(hint: Any) -> _Coercer:
    options = [_coercer(option) for option in typing.get_args(hint)]
    # Null is taken by the null option alone (every other coercer refuses it): answered
    # without the others' refusals, which cost an exception each.
    nullable = _null in options

    def coerce(value: Any, where: str) -> Any:
        if value is None and nullable:
            return None
        for option in options:
            try:
                return option(value, where)
            except ContractError:
                continue
        raise ContractError(f"{where}: {value!r} matches none of {hint}")

    return coerce


def _tuple_coercer(item_hint: Any) -> _Coercer:
    def coerce(value: Any, where: str) -> Any:
        if not isinstance(value, list | tuple):
            raise ContractError(f"{where}: expected an array")
        item = _coercer(item_hint)  # (looked up on use: a type may hold tuples of itself)
        if item is _string and all(isinstance(one, str) for one in value):
            return tuple(value)  # (the common case, checked at once; else named item by item)
        return tuple(item(one, f"{where}[{i}]") for i, one in enumerate(value))

    return coerce


class _DataclassCoercer:
    """Builds one contract dataclass from a JSON object: its fields' coercers are looked up
    on first use (a type may hold values of its own type)."""

    def __init__(self, cls: type[Any]) -> None:
        self.cls = cls
        self.plan: list[tuple[str, _Coercer, bool]] | None = None
        self.known: frozenset[str] = frozenset()

    def __call__(self, data: Any, where: str) -> Any:
        if not isinstance(data, dict):
            raise ContractError(f"{where}: expected an object")
        plan = self.plan
        if plan is None:
            hints = _type_hints(self.cls)
            plan = [
                (
                    f.name,
                    _coercer(hints[f.name]),
                    f.default is MISSING and f.default_factory is MISSING,
                )
                for f in fields(self.cls)
            ]
            self.known = frozenset(name for name, _, _ in plan)
            self.plan = plan
        if not self.known.issuperset(data):
            raise ContractError(f"{where}: unknown field(s) {sorted(set(data) - self.known)}")
        values: dict[str, Any] = {}
        for name, coerce, required in plan:
            if name in data:
                values[name] = coerce(data[name], f"{where}.{name}")
            elif required:
                raise ContractError(f"{where}: missing required field {name!r}")
        return self.cls(**values)


def _null(value: Any, where: str) -> None:
    if value is None:
        return None
    raise ContractError(f"{where}: expected null")


def _json_dict(value: Any, where: str) -> dict[str, Any]:
    # JSON kept as it is (a record, an ItemList's provenance): passed on, not read.
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return value
    raise ContractError(f"{where}: expected an object")


def _string_dict(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ContractError(f"{where}: expected an object of strings")
    return dict(value)


def _boolean(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    raise ContractError(f"{where}: expected a boolean")


def _integer(value: Any, where: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ContractError(f"{where}: expected an integer")


def _number(value: Any, where: str) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise ContractError(f"{where}: expected a number")


def _string(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    raise ContractError(f"{where}: expected a string")


_SCALARS: dict[Any, _Coercer] = {bool: _boolean, int: _integer, float: _number, str: _string}


# -- the URL jobs of one sitemap job, encoded fast -------------------------------------------------

# Stand-ins for the values that differ from one URL job (or link) to the next: private-use
# characters, which :func:`encode` writes as they are (``ensure_ascii=False``).
_URL_MARK, _LASTMOD_MARK, _HREF_MARK, _ANCHOR_MARK = (
    f"\ue000{name}\ue000" for name in ("url", "lastmod", "href", "anchor")
)
_LINK_MARK = TypedLink(_HREF_MARK, "\ue000rel\ue000")
_LinkShape = tuple[Any, ...]  # a link's fields but href and anchor, and whether it has an anchor
# A link found in a Signmap, as the sitemap reader keeps it: (href, rel, type, profile).
_SignmapRow = tuple[str, str, str | None, str | None]


def _template(text: str, marks: dict[str, str]) -> str | None:
    """``text`` as a :meth:`str.format` template: each piece of it that ``marks`` maps to a
    field name becomes ``{name}``; None unless each is in ``text`` exactly once."""
    if any(text.count(written) != 1 for written in marks):
        return None
    pieces: list[str] = []
    at = 0
    for start, written in sorted((text.index(written), written) for written in marks):
        if start < at:
            return None  # (overlapping: cannot be, with the stand-ins used)
        pieces += [text[at:start].replace("{", "{{").replace("}", "}}"), f"{{{marks[written]}}}"]
        at = start + len(written)
    pieces.append(text[at:].replace("{", "{{").replace("}", "}}"))
    return "".join(pieces)


def _signmap_link(row: _SignmapRow, anchor: str) -> TypedLink:
    """The link a Signmap row stands for."""
    href, rel, media_type, profile = row
    return TypedLink(href, rel, type=media_type, profile=profile, anchor=anchor, found_in="signmap")


def _link_json(link: TypedLink) -> str:
    """``link`` as :func:`encode` writes it inside a message."""
    return json.dumps(plain(link), separators=(",", ":"), ensure_ascii=False, sort_keys=True)


class UrlJobEncoder:
    """The wire form of the URL jobs one sitemap job sends, byte for byte what :func:`encode`
    gives for each, refusing a message over :data:`MAX_MESSAGE_BYTES` alike.

    The fields the jobs share are written once: ``encode`` of a job with stand-ins for ``url``,
    ``lastmod`` and ``links`` becomes a template, and each typed link of a kind (its fields but
    ``href`` and ``anchor``) one more. A Signmap's thousands of jobs cost a string format each
    instead of building and encoding a dictionary per job and per link. Should ``encode`` ever
    write the stand-ins otherwise, it is used as it is, job by job (same text, slower).
    """

    def __init__(
        self,
        *,
        run_id: str,
        source: str,
        sitemap: str | None,
        cdif_agent: bool,
        options: dict[str, str],
        requests_per_host: int | None,
        crawl_delay: float | None,
    ) -> None:
        self._shared: dict[str, Any] = {
            "run_id": run_id,
            "source": source,
            "sitemap": sitemap,
            "cdif_agent": cdif_agent,
            "options": options,
            "requests_per_host": requests_per_host,
            "crawl_delay": crawl_delay,
        }
        self._links: dict[_LinkShape, str | None] = {}
        self._rows: dict[tuple[str | None, ...], str | None] = {}  # by (rel, type, profile)
        try:
            probe = encode(
                UrlJob(url=_URL_MARK, lastmod=_LASTMOD_MARK, links=(_LINK_MARK,), **self._shared)
            )
        except ContractError:  # shared fields over the size cap: every job says so itself
            self._job: str | None = None
            return
        string = json.encoder.encode_basestring
        self._job = _template(
            probe,
            {
                string(_URL_MARK): "url",
                string(_LASTMOD_MARK): "lastmod",
                f"[{_link_json(_LINK_MARK)}]": "links",
            },
        )

    def encode(
        self,
        url: str,
        lastmod: str | None,
        links: Sequence[TypedLink | _SignmapRow],
        *,
        anchor: str | None = None,
    ) -> str:
        """The text :func:`encode` gives for the URL job of ``url`` with these fields shared.

        A link may also be given as a Signmap row, ``(href, rel, type, profile)``: the
        TypedLink with those fields found in a Signmap (``found_in="signmap"``) and anchored at
        ``anchor`` (``url`` when not given), as the sitemap reader keeps them. Raises
        ContractError as :func:`encode` does (``message-too-large``).
        """
        if self._job is None:
            return encode(self._url_job(url, lastmod, links, anchor))
        string = json.encoder.encode_basestring
        anchor = url if anchor is None else anchor
        anchor_text = string(anchor)
        text = self._job.format(
            url=string(url),
            lastmod="null" if lastmod is None else string(lastmod),
            links=f"[{','.join([self._link(link, anchor, anchor_text) for link in links])}]",
        )
        # (A character is at most four bytes: only a long text needs counting.)
        if len(text) * 4 > MAX_MESSAGE_BYTES and len(text.encode("utf-8")) > MAX_MESSAGE_BYTES:
            return encode(self._url_job(url, lastmod, links, anchor))
        return text

    def _url_job(
        self,
        url: str,
        lastmod: str | None,
        links: Sequence[TypedLink | _SignmapRow],
        anchor: str | None,
    ) -> UrlJob:
        """The URL job :meth:`encode` writes."""
        typed = tuple(
            link if isinstance(link, TypedLink) else _signmap_link(link, anchor or url)
            for link in links
        )
        return UrlJob(url=url, lastmod=lastmod, links=typed, **self._shared)

    def _link(self, link: TypedLink | _SignmapRow, anchor: str, anchor_text: str) -> str:
        """``link`` as :func:`_link_json` writes it (a row anchored at ``anchor``, whose JSON
        is ``anchor_text``)."""
        string = json.encoder.encode_basestring
        if not isinstance(link, TypedLink):
            kind = link[1:]
            try:
                template = self._rows[kind]
            except KeyError:
                template = self._rows[kind] = self._link_template(_signmap_link(link, ""))
            if template is None:
                return _link_json(_signmap_link(link, anchor))
            return template.format(href=string(link[0]), anchor=anchor_text)
        shape = (
            link.rel,
            link.type,
            link.profile,
            link.found_in,
            link.title,
            link.hreflang,
            link.scheme,
            link.reverse,
            link.used,
            link.ignored,
            link.anchor is None,
        )
        try:
            template = self._links[shape]
        except KeyError:
            template = self._links[shape] = self._link_template(link)
        if template is None:
            return _link_json(link)
        if link.anchor is None:
            return template.format(href=string(link.href))
        return template.format(href=string(link.href), anchor=string(link.anchor))

    @staticmethod
    def _link_template(link: TypedLink) -> str | None:
        """The template of the links shaped as ``link`` is (None if one cannot be made)."""
        string = json.encoder.encode_basestring
        marks = {string(_HREF_MARK): "href"}
        if link.anchor is not None:
            marks[string(_ANCHOR_MARK)] = "anchor"
        probe = replace(link, href=_HREF_MARK, anchor=None if link.anchor is None else _ANCHOR_MARK)
        return _template(_link_json(probe), marks)
