"""Message contracts between the stages: one module, versioned, validated at every boundary.

Every message is ``{"v": <version>, "kind": <kind>, ...fields}``: producers build a frozen
dataclass and call :func:`encode`; consumers call :func:`decode`, which checks version, kind and
the type of every field and raises :class:`~cdif_harvester.errors.ContractError` (permanent).
Large payloads travel as object-store keys (claim check); :func:`encode` refuses a message over
:data:`MAX_MESSAGE_BYTES`.

See docs/decisions/0002-message-contracts.md, with the version history (a bump adds a line there).
"""

from __future__ import annotations

import json
import types
import typing
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, TypeVar, Union

from cdif_harvester.errors import ContractError
from cdif_harvester.model import TypedLink, plain

__all__ = [
    "CONTRACT_VERSION",
    "CROSSWALK_QUEUE",
    "DOCUMENT_QUEUE",
    "INDEX_QUEUE",
    "SITEMAP_QUEUE",
    "URL_QUEUE",
    "MAX_MESSAGE_BYTES",
    "RESOLUTION_OPTIONS",
    "DocumentJob",
    "DocumentRef",
    "IndexJob",
    "Message",
    "RecordStored",
    "SitemapJob",
    "UrlJob",
    "decode",
    "encode",
]

CONTRACT_VERSION = 5
READABLE_VERSIONS = frozenset({1, 2, 3, 4, 5})
MAX_MESSAGE_BYTES = 200 * 1024

# Resolution options a source may set, carried on its sitemap and URL jobs:
# ``format_parameter``: ``name=value`` appended to each URL's query to ask a metadata server
# for CDIF (CDIF metadata publication, Option 2; e.g. ``format=CDIF1.0``).
RESOLUTION_OPTIONS = frozenset({"format_parameter"})

# Logical queue names; adapters map them to SQS queue URLs or in-process queues.
SITEMAP_QUEUE = "sitemap"
URL_QUEUE = "url"
DOCUMENT_QUEUE = "document"
INDEX_QUEUE = "index"
CROSSWALK_QUEUE = "crosswalk"


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
class DocumentRef:
    """A fetched document kept in the object store under ``key``.

    ``via`` says how the resolver reached it (``self``, ``describedby``, ``meta``, ``linkset``
    ...). ``authority`` is the anti-spoofing verdict (1997 draft, "Metadata Spoofing"):
    ``None`` when the document claims nothing about another origin, else ``authoritative``,
    ``not-authoritative`` or ``unverified``.
    """

    key: str
    url: str
    media_type: str
    via: str | None = None
    authority: str | None = None


@dataclass(frozen=True)
class DocumentJob:
    """Extract, normalise and validate the metadata documents found for one URL."""

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


@dataclass(frozen=True)
class IndexJob:
    """Store and index the records extracted from one URL; they wait under ``staged_key``."""

    KIND: ClassVar[str] = "index-job"
    run_id: str
    source: str
    url: str
    pattern: str
    staged_key: str


@dataclass(frozen=True)
class RecordStored:
    """A normalised record landed in the object store (S3 notification, or its local twin)."""

    KIND: ClassVar[str] = "record-stored"
    key: str
    extra: dict[str, str] = field(default_factory=dict)


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
    if len(text.encode("utf-8")) > MAX_MESSAGE_BYTES:
        raise ContractError(
            f"{message.KIND} message is {len(text)} bytes, over {MAX_MESSAGE_BYTES}: "
            "put the payload in the object store and send its key",
            reason="message-too-large",
        )
    return text


def decode(raw: str | bytes | dict[str, Any], expected: type[_T] | None = None) -> _T:
    """Parse and validate a message; with ``expected``, also check it is of that kind.

    Raises ContractError on malformed JSON, an unknown version or kind, a missing required field,
    an unknown field, or a field of the wrong type.
    """
    if isinstance(raw, dict):
        data = raw
    else:
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ContractError(f"message is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ContractError("message is not a JSON object")
    version = data.get("v")
    if (
        isinstance(version, bool)
        or not isinstance(version, int)
        or version not in READABLE_VERSIONS
    ):
        raise ContractError(
            f"message version {version!r} not supported (expected {CONTRACT_VERSION})",
            reason="bad-version",
        )
    kind = data.get("kind")
    cls = _KINDS.get(str(kind))
    if cls is None:
        raise ContractError(f"unknown message kind {kind!r}")
    if expected is not None and cls is not expected:
        raise ContractError(f"expected a {getattr(expected, 'KIND', expected)} message, got {kind}")
    payload = {k: v for k, v in data.items() if k not in ("v", "kind")}
    result: _T = _build(cls, payload, str(kind))
    return result


def _build(cls: type[Any], data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise ContractError(f"{where}: expected an object")
    hints = typing.get_type_hints(cls)
    known = {f.name for f in fields(cls)}
    unknown = set(data) - known
    if unknown:
        raise ContractError(f"{where}: unknown field(s) {sorted(unknown)}")
    values: dict[str, Any] = {}
    for f in fields(cls):
        if f.name in data:
            values[f.name] = _coerce(hints[f.name], data[f.name], f"{where}.{f.name}")
        elif f.default is MISSING and f.default_factory is MISSING:
            raise ContractError(f"{where}: missing required field {f.name!r}")
    return cls(**values)


def _coerce(hint: Any, value: Any, where: str) -> Any:  # noqa: PLR0911 - one branch per shape
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        for option in typing.get_args(hint):
            try:
                return _coerce(option, value, where)
            except ContractError:
                continue
        raise ContractError(f"{where}: {value!r} matches none of {hint}")
    if hint is type(None):
        if value is None:
            return None
        raise ContractError(f"{where}: expected null")
    if origin is tuple:
        (item_hint, _ellipsis) = typing.get_args(hint)
        if not isinstance(value, list | tuple):
            raise ContractError(f"{where}: expected an array")
        return tuple(_coerce(item_hint, item, f"{where}[{i}]") for i, item in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise ContractError(f"{where}: expected an object of strings")
        return dict(value)
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise ContractError(f"{where}: expected a boolean")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ContractError(f"{where}: expected an integer")
    if hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        raise ContractError(f"{where}: expected a number")
    if hint is str:
        if isinstance(value, str):
            return value
        raise ContractError(f"{where}: expected a string")
    if isinstance(hint, type) and hasattr(hint, "__dataclass_fields__"):
        return _build(hint, value, where)
    raise ContractError(f"{where}: unsupported field type {hint}")  # pragma: no cover
