"""Pure decisions of the URL resolver: profiles, link ranking, anchors, claims and verdicts.

The resolver stage (:mod:`cdif_harvester.stages.resolve`) fetches; this module decides, from what
was fetched, where the metadata is: which profiles are CDIF, how ``describedby`` targets rank,
when two URLs are the same, which resources a document claims. Specs: CDIF metadata publication,
CDIF discoverability (Appendix 3), the 1997 HTTP/HTML metadata-linking draft, FAIR Signposting
(RFC 8288, RFC 9264).

See docs/decisions/0019-where-the-resolver-looks.md, docs/decisions/0020-anti-spoofing.md and
docs/decisions/0065-link-identity-and-authority.md (which links are the same, which source wins).
"""

from __future__ import annotations

import email.utils
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from cdif_harvester.model import TypedLink

__all__ = [
    "KEPT_RELATIONS",
    "SETTLED_RELATIONS",
    "SOURCE_AUTHORITY",
    "MediaType",
    "anchored_to",
    "cite_as_warning",
    "claimed_resources",
    "describedby_tiers",
    "forward_meta_links",
    "is_cdif_profile",
    "is_list_profile",
    "is_jsonld_type",
    "link_attributes",
    "link_identity",
    "linkset_forms",
    "merge_links",
    "normalise_url",
    "parse_retry_after",
    "parse_media_type",
    "reverse_claims",
    "same_origin",
    "same_target",
    "settle_links",
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

# The sources of a page's links, most authoritative first: the server's own answer (HTTP
# ``Link``), then the page it serves (HTML ``<link>``), then a linkset it points to (FAIR
# Signposting; RFC 8288 and RFC 9264), then a sitemap's ``<rs:ln>`` written apart from the page.
SOURCE_AUTHORITY: tuple[str, ...] = ("http-header", "html", "linkset", "signmap")
_SOURCE_NAMES = {
    "http-header": "the HTTP Link header",
    "html": "HTML <link>",
    "linkset": "the linkset",
    "signmap": "the Signmap",
}
# Relations whose value a page gives from one source: where a less authoritative source names a
# target the most authoritative one does not, that link is overruled and a warning says so.
SETTLED_RELATIONS = frozenset({"cite-as", "type"})
# Relations of which a page has one target (RFC 8574: one cite-as).
_SINGLE_VALUED = frozenset({"cite-as"})
_JSON_LINKSET_TYPES = frozenset({"application/linkset+json", "application/json"})

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


def same_target(url: str) -> str:
    """A link target as compared: like :func:`normalise_url`, but the fragment is kept
    (``https://w3id.org/x/#different`` names another thing than ``https://w3id.org/x/``)."""
    try:
        fragment = urlsplit(url.strip()).fragment
    except ValueError:
        return url.strip()
    normal = normalise_url(url)
    return f"{normal}#{fragment}" if fragment else normal


def _type_key(media_type: str | None) -> tuple[str, tuple[tuple[str, str], ...]] | None:
    """A ``type`` attribute as compared: media type and parameter names lower-cased, values
    unquoted, parameters in any order (``text/csv;charset=UTF-8`` = ``text/csv; charset=UTF-8``)."""
    if not media_type:
        return None
    head, _, rest = media_type.partition(";")
    parameters = []
    for part in rest.split(";"):
        name, eq, value = part.partition("=")
        if name.strip():
            parameters.append((name.strip().lower(), value.strip().strip("\"'") if eq else ""))
    return head.strip().lower(), tuple(sorted(parameters))


def _profile_key(profile: str | None) -> tuple[str, ...]:
    """A ``profile`` attribute as compared: its URIs, in any order, each once."""
    return tuple(sorted(set(_tokens(profile))))


LinkIdentity = tuple[str, bool, str, Any, tuple[str, ...], str | None]


def link_attributes(link: TypedLink) -> tuple[Any, tuple[str, ...]]:
    """A link's ``type`` and ``profile`` as :func:`link_identity` compares them (its fourth and
    fifth), without the work on its URLs."""
    return _type_key(link.type), _profile_key(link.profile)


def link_identity(link: TypedLink) -> LinkIdentity:
    """What makes two links the same link: relation (and direction), target (fragment kept),
    ``type``, ``profile`` and anchor. The other attributes only describe it."""
    anchor = same_target(link.anchor) if link.anchor else None
    return (
        link.rel,
        link.reverse,
        same_target(link.href),
        _type_key(link.type),
        _profile_key(link.profile),
        anchor,
    )


def merge_links(links: Iterable[TypedLink]) -> tuple[TypedLink, ...]:
    """Keep the links of :data:`KEPT_RELATIONS` once each, in order, attributes merged.

    Two links are the same when :func:`link_identity` agrees (relation, direction, target with
    its fragment, type, profile, anchor): a Turtle and a JSON-LD ``describedby`` to one URL are
    two links. The first keeps its place and takes the title, hreflang and scheme it lacks
    from the later ones.
    """
    merged: dict[LinkIdentity, TypedLink] = {}
    for link in links:
        if link.rel not in KEPT_RELATIONS:
            continue
        key = link_identity(link)
        first = merged.get(key)
        merged[key] = link if first is None else _fill(first, link)
    return tuple(merged.values())


def _fill(first: TypedLink, later: TypedLink) -> TypedLink:
    return replace(
        first,
        title=first.title or later.title,
        hreflang=first.hreflang or later.hreflang,
        scheme=first.scheme or later.scheme,
        used=first.used or later.used,
    )


def linkset_forms(links: Iterable[TypedLink]) -> list[list[TypedLink]]:
    """The forward ``linkset`` links, merged, grouped by form, preferred first: JSON
    (``application/linkset+json``), untyped (asked for JSON first), then text
    (``application/linkset``). A page may announce one linkset in both forms: the first group
    that gives links is used, the others stay unread. Empty groups are dropped."""
    groups: list[list[TypedLink]] = [[], [], []]
    for link in merge_links(links):
        if link.rel != "linkset" or link.reverse:
            continue
        media = parse_media_type(link.type).type
        if media in _JSON_LINKSET_TYPES:
            groups[0].append(link)
        elif media == "application/linkset":
            groups[2].append(link)
        else:
            groups[1].append(link)
    return [group for group in groups if group]


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
    links: Iterable[TypedLink], resources: Sequence[str], *, unanchored: bool = False
) -> tuple[list[TypedLink], int]:
    """Split links into those whose anchor is one of ``resources`` and a count of the rest.

    RFC 8288 and RFC 9264: a link's ``anchor`` names its context; only the links whose context
    is the resource being resolved (its URL, or any URL of its redirect chain) apply to it.
    ``unanchored``: whether a link without anchor applies (in a Link header or HTML its
    context is the page; a linkset has no implied context).
    """
    wanted = {normalise_url(url) for url in resources}
    kept: list[TypedLink] = []
    foreign = 0
    for link in links:
        if (link.anchor is None and unanchored) or (
            link.anchor is not None and normalise_url(link.anchor) in wanted
        ):
            kept.append(link)
        else:
            foreign += 1
    return kept, foreign


def cite_as_warning(links: Iterable[TypedLink]) -> str | None:
    """A warning when the links hold more than one distinct ``cite-as`` target, else None."""
    targets: list[str] = []
    for link in links:
        if link.rel == "cite-as" and not link.reverse:
            target = same_target(link.href)
            if target not in targets:
                targets.append(target)
    if len(targets) > 1:
        return f"conflicting cite-as links: {', '.join(targets)}"
    return None


def _rank(link: TypedLink) -> int:
    source = link.found_in or ""
    return SOURCE_AUTHORITY.index(source) if source in SOURCE_AUTHORITY else len(SOURCE_AUTHORITY)


def _source_name(link: TypedLink) -> str:
    return _SOURCE_NAMES.get(link.found_in or "", link.found_in or "an unnamed source")


def settle_links(
    links: Iterable[TypedLink],
    resources: Sequence[str],
    used: Collection[tuple[LinkIdentity, str | None]] = (),
) -> tuple[tuple[TypedLink, ...], list[str]]:
    """Every link read, once per identity and source, with what was done with it; and the
    conflicts found (``conflicting-links: <details>`` warnings).

    ``resources`` are the URLs of the resource resolved (a link anchored elsewhere is
    ``ignored="anchor"``); ``used`` the ``(link_identity, found_in)`` of the links the resolver
    followed. For :data:`SETTLED_RELATIONS` the most authoritative source that gives the
    relation is used (:data:`SOURCE_AUTHORITY`); a link of a less authoritative source naming
    another target is ``ignored="overruled"``, with a warning. A single-valued relation
    (``cite-as``) with several targets in that source keeps its first, with a warning.
    """
    wanted = {normalise_url(url) for url in resources}
    merged: dict[tuple[LinkIdentity, str | None], TypedLink] = {}
    for link in links:
        key = (link_identity(link), link.found_in)
        first = merged.get(key)
        merged[key] = link if first is None else _fill(first, link)
    settled: list[TypedLink] = []
    for key, link in merged.items():
        foreign = link.anchor is not None and normalise_url(link.anchor) not in wanted
        settled.append(
            replace(
                link,
                used=key in used,
                ignored="anchor" if foreign else None,
            )
        )
    warnings: list[str] = []
    for rel in sorted(SETTLED_RELATIONS):
        warnings.extend(_settle(settled, rel))
    return tuple(settled), warnings


def _settle(links: list[TypedLink], rel: str) -> list[str]:
    """Mark the links of ``rel`` used or overruled (in place); return the warnings."""
    places = [
        index
        for index, link in enumerate(links)
        if link.rel == rel and not link.reverse and link.ignored is None
    ]
    if not places:
        return []
    best = min(_rank(links[index]) for index in places)
    chosen: list[str] = []
    warnings: list[str] = []
    for index in places:
        link = links[index]
        target = same_target(link.href)
        if _rank(link) != best:
            continue
        if rel in _SINGLE_VALUED and chosen and target not in chosen:
            warnings.append(
                f"conflicting-links: conflicting {rel} links in {_source_name(link)}: "
                f"{chosen[0]} is used, {link.href} is not"
            )
            links[index] = replace(link, used=False, ignored="overruled")
            continue
        if target not in chosen:
            chosen.append(target)
        links[index] = replace(link, used=True)
    authority = _source_name(links[next(i for i in places if _rank(links[i]) == best)])
    for index in places:
        link = links[index]
        if _rank(link) == best or same_target(link.href) in chosen:
            continue
        warnings.append(
            f"conflicting-links: conflicting {rel} links: {', '.join(chosen)} in {authority}, "
            f"{link.href} in {_source_name(link)}: {authority} is more authoritative and is used"
        )
        links[index] = replace(link, used=False, ignored="overruled")
    return warnings


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
