"""Pure decisions of the URL resolver: profiles, link ranking, anchors, claims and verdicts.

The resolver stage (:mod:`cdif_harvester.stages.resolve`) fetches; this module decides, from what
was fetched, where the metadata is: which profiles are CDIF, how ``describedby`` targets rank,
when two URLs are the same, which resources a document claims. Specs: CDIF metadata publication,
CDIF discoverability (Appendix 3), the 1997 HTTP/HTML metadata-linking draft, FAIR Signposting
(RFC 8288, RFC 9264).

See docs/decisions/0019-where-the-resolver-looks.md and docs/decisions/0020-anti-spoofing.md.
"""

from __future__ import annotations

import email.utils
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from cdif_harvester.model import TypedLink

__all__ = [
    "KEPT_RELATIONS",
    "MediaType",
    "anchored_to",
    "cite_as_warning",
    "claimed_resources",
    "describedby_tiers",
    "forward_meta_links",
    "is_cdif_profile",
    "is_list_profile",
    "is_jsonld_type",
    "merge_links",
    "normalise_url",
    "parse_retry_after",
    "parse_media_type",
    "reverse_claims",
    "same_origin",
]

# The Signposting relations the crosswalk and the catalogue use (discoverability Appendix 3),
# plus the 1997 draft's ``meta``: every link with one of these is kept with its attributes.
KEPT_RELATIONS = frozenset(
    {
        "author",
        "cite-as",
        "collection",
        "describedby",
        "describes",
        "item",
        "license",
        "linkset",
        "meta",
        "type",
    }
)

_CDIF_TOKENS = frozenset({"cdif1.0", "cdif1.1", "cdif-1.0", "cdif-1.1"})
_LIST_TOKENS = frozenset({"cdif-list-1.0", "cdif-list-1.1", "cdiflist1.0"})
_CDIF_URI = re.compile(r"^https?://w3id\.org/cdif/", re.IGNORECASE)
_JSONLD_TYPES = frozenset({"application/ld+json", "application/json"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class MediaType:
    """A parsed ``Content-Type``: the media type (lower-cased) and its ``profile`` parameter."""

    type: str
    profile: str | None = None


def parse_media_type(value: str | None) -> MediaType:
    """Parse a ``Content-Type`` value, tolerating single quotes (as the CDIF spec writes them)."""
    if not value:
        return MediaType("")
    head, _, rest = value.partition(";")
    profile = None
    for part in rest.split(";"):
        name, eq, raw = part.partition("=")
        if eq and name.strip().lower() == "profile":
            profile = raw.strip().strip("\"'").strip() or None
    return MediaType(head.strip().lower(), profile)


def _tokens(profile: str | None) -> list[str]:
    return (profile or "").replace(",", " ").split()


def is_cdif_profile(profile: str | None) -> bool:
    """Whether ``profile`` names a CDIF record profile (``CDIF1.0``, a w3id.org/cdif URI)."""
    return any(
        token.lower() in _CDIF_TOKENS or (_CDIF_URI.match(token) and "/list" not in token.lower())
        for token in _tokens(profile)
    )


def is_list_profile(profile: str | None) -> bool:
    """Whether ``profile`` names the CDIF list profile (``CDIF-list-1.0``)."""
    return any(
        token.lower() in _LIST_TOKENS or (_CDIF_URI.match(token) and "/list" in token.lower())
        for token in _tokens(profile)
    )


def is_jsonld_type(media_type: str | None) -> bool:
    """Whether a media type is JSON-LD (or plain JSON, which publishers often serve it as)."""
    return parse_media_type(media_type).type in _JSONLD_TYPES


def normalise_url(url: str) -> str:
    """A URL in the form used for comparisons (see the module decisions)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return url.strip()
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port is None or port == _DEFAULT_PORTS.get(scheme) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))


def same_origin(a: str, b: str) -> bool:
    """Whether two URLs share scheme, host and port."""
    return urlsplit(normalise_url(a))[:2] == urlsplit(normalise_url(b))[:2]


def merge_links(links: Iterable[TypedLink]) -> tuple[TypedLink, ...]:
    """Keep the links of :data:`KEPT_RELATIONS` once each, in order, attributes merged.

    Two links are the same when relation, direction, target and anchor agree; the first keeps
    its place and takes the attributes it lacks from the later ones.
    """
    merged: dict[tuple[str, bool, str, str | None], TypedLink] = {}
    for link in links:
        if link.rel not in KEPT_RELATIONS:
            continue
        anchor = normalise_url(link.anchor) if link.anchor else None
        key = (link.rel, link.reverse, normalise_url(link.href), anchor)
        first = merged.get(key)
        merged[key] = link if first is None else _fill(first, link)
    return tuple(merged.values())


def _fill(first: TypedLink, later: TypedLink) -> TypedLink:
    return replace(
        first,
        type=first.type or later.type,
        profile=first.profile or later.profile,
        title=first.title or later.title,
        hreflang=first.hreflang or later.hreflang,
        scheme=first.scheme or later.scheme,
    )


def _tier(link: TypedLink) -> int:
    if is_cdif_profile(link.profile) or is_list_profile(link.profile):
        return 0
    if not link.type:
        return 2
    media = parse_media_type(link.type)
    if is_cdif_profile(media.profile) or is_list_profile(media.profile):
        return 0
    return 1 if media.type in _JSONLD_TYPES else 3


def describedby_tiers(links: Iterable[TypedLink]) -> list[list[TypedLink]]:
    """The forward ``describedby`` targets, merged and grouped best tier first.

    Tiers: CDIF profile, JSON-LD, untyped. Targets of other media types are left out: the
    harvester cannot read them, so it never fetches them. Empty tiers are dropped.
    """
    tiers: list[list[TypedLink]] = [[], [], []]
    for link in merge_links(link for link in links if link.rel == "describedby"):
        if link.reverse:
            continue
        tier = _tier(link)
        if tier < len(tiers):
            tiers[tier].append(link)
    return [tier for tier in tiers if tier]


def forward_meta_links(links: Iterable[TypedLink]) -> list[TypedLink]:
    """``rel="meta"`` links of the 1997 draft (metadata *for* the context), merged, in order."""
    return [link for link in merge_links(links) if link.rel == "meta" and not link.reverse]


def reverse_claims(links: Iterable[TypedLink]) -> list[str]:
    """The resources a document says it describes: ``rev="meta"`` and ``rel="describes"``."""
    claims: list[str] = []
    for link in links:
        claim = (link.rel == "meta" and link.reverse) or (
            link.rel == "describes" and not link.reverse
        )
        if claim and link.href not in claims:
            claims.append(link.href)
    return claims


def anchored_to(
    links: Iterable[TypedLink], resources: Sequence[str]
) -> tuple[list[TypedLink], int]:
    """Split linkset links into those whose anchor is one of ``resources`` and a count of the rest.

    RFC 9264: a linkset may describe many resources; only the links whose context is the
    resource being resolved (its URL, or any URL of its redirect chain) apply to it.
    """
    wanted = {normalise_url(url) for url in resources}
    kept: list[TypedLink] = []
    foreign = 0
    for link in links:
        if link.anchor is not None and normalise_url(link.anchor) in wanted:
            kept.append(link)
        else:
            foreign += 1
    return kept, foreign


def cite_as_warning(links: Iterable[TypedLink]) -> str | None:
    """A warning when the links hold more than one distinct ``cite-as`` target, else None."""
    targets: list[str] = []
    for link in links:
        if link.rel == "cite-as" and not link.reverse:
            normal = normalise_url(link.href)
            if normal not in targets:
                targets.append(normal)
    if len(targets) > 1:
        return f"conflicting cite-as links: {', '.join(targets)}"
    return None


_ID_KEYS = ("url", "schema:url", "@id")
_ABOUT_KEYS = ("about", "schema:about")
_DATASET = re.compile(r"^(?:(?:https?://schema\.org/)|schema:)?Dataset/?$")


def _types(node: dict[str, Any]) -> list[str]:
    raw = node.get("@type", [])
    values = raw if isinstance(raw, list) else [raw]
    return [value for value in values if isinstance(value, str)]


def _dataset_nodes(data: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    pending: list[tuple[Any, int]] = [(data, 0)]
    while pending:
        item, depth = pending.pop(0)
        if depth > 4:
            continue
        if isinstance(item, list):
            pending.extend((child, depth + 1) for child in item)
        elif isinstance(item, dict):
            if any(_DATASET.match(kind) for kind in _types(item)):
                found.append(item)
            for key in ("@graph", *_ABOUT_KEYS):
                if key in item:
                    pending.append((item[key], depth + 1))
    return found


def claimed_resources(data: Any) -> list[str]:
    """The http(s) URLs a JSON-LD document's Dataset nodes claim to be (``url``, then ``@id``)."""
    claims: list[str] = []
    for node in _dataset_nodes(data):
        for key in _ID_KEYS:
            value = node.get(key)
            values = value if isinstance(value, list) else [value]
            for item in values:
                target = item.get("@id") if isinstance(item, dict) else item
                if (
                    isinstance(target, str)
                    and target.lower().startswith(("http://", "https://"))
                    and target not in claims
                ):
                    claims.append(target)
    return claims


def parse_retry_after(value: str, *, now: datetime) -> float | None:
    """Seconds asked by a ``Retry-After`` value: delta-seconds or an HTTP-date (RFC 9110 10.2.3).

    Returns None for a value that is neither; a date in the past asks for 0 seconds.
    """
    text = value.strip()
    if text.isdigit():
        return float(int(text))
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())
