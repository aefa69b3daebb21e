"""The Signposting views of a CDIF record (CDIF discoverability, Appendix 3).

:func:`record_links` follows Appendix 3 row by row, :func:`signposting_links` merges those links
with the ones the resolver saw on the publisher's site, and four serialisers write them:
:func:`link_header` (RFC 8288), :func:`linkset_text` and :func:`linkset_json` (RFC 9264) and
:func:`html_link_elements`. :mod:`cdif_harvester.domain.resolution.weblinks` reads each text form
back into the same links.

See docs/decisions/0037-signposting-views.md.
"""

from __future__ import annotations

import html
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from cdif_harvester.domain.records.record_values import (
    absolute_iri,
    as_list,
    first_iri,
    first_text,
    iri_of,
    is_web_iri,
    metadata_record,
    node_index,
    prefixes,
    resolve_node,
    text,
)
from cdif_harvester.domain.resolution.rules import link_attributes
from cdif_harvester.model import TypedLink

__all__ = [
    "REPUBLISHED_RELATIONS",
    "SIGNPOSTING_RELATIONS",
    "html_link_elements",
    "landing_page",
    "link_header",
    "linkset_json",
    "linkset_text",
    "record_links",
    "signposting_links",
]

# Appendix 3, in its order.
SIGNPOSTING_RELATIONS: tuple[str, ...] = (
    "author",
    "cite-as",
    "describedby",
    "describes",
    "type",
    "license",
    "item",
    "collection",
)
REPUBLISHED_RELATIONS = frozenset({*SIGNPOSTING_RELATIONS, "linkset"})

_SIGNPOSTING_SCHEMA = "https://schema.org/"
_CDIF_PROFILE_PREFIX = ("https://w3id.org/cdif/core/", "https://w3id.org/cdif/discovery/")
_RELATED = {"haspart": "item", "ispartof": "collection"}
_DEFAULT_PORTS = {"http": 80, "https": 443}
# A link's ``type`` and ``profile`` as compared (:func:`link_attributes`).
_Attributes = tuple[Any, ...]
# What a URI reference may not hold as is: white space, controls, non-ASCII, < > ".
_NOT_URI = re.compile(r'[^\x21-\x7e]|[<>"]')
_MEDIA_TYPE = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*(\s*;.*)?$"
)


def landing_page(
    record: Mapping[str, Any],
    harvested_url: str | None = None,
    *,
    harvested_is_page: bool = True,
) -> str | None:
    """The landing page of the record's resource: the context of its Signposting links.

    The record's ``schema:url`` when it is a web IRI; else ``harvested_url`` when that is the
    resource's page (``harvested_is_page``: not a metadata document); else the resource
    ``@id`` when it is a web IRI; else ``harvested_url``. None when there is nothing.
    """
    bindings = prefixes(record)
    for value in as_list(record.get("schema:url")):
        url = iri_of(text(value), bindings)
        if url and is_web_iri(url):
            return url
    if harvested_url and harvested_is_page:
        return harvested_url
    resource = absolute_iri(record.get("@id"), bindings)
    if resource and is_web_iri(resource):
        return resource
    return harvested_url


def _link_relationship(value: Any) -> str:
    for raw in as_list(value):
        item = text(raw)
        if isinstance(item, str):
            return item.strip()
        if isinstance(item, Mapping):
            for key in ("schema:name", "schema:termCode", "schema:identifier"):
                found = first_text(item.get(key))
                if found:
                    return found
    return ""


def _media_type(value: Any) -> str | None:
    """The first value that is a media type (``text/csv``): the only thing a link's ``type``
    may hold. CDIF also writes resource kinds there (``"contentType": "Collection"``)."""
    for raw in as_list(value):
        item = text(raw)
        if isinstance(item, str) and _MEDIA_TYPE.match(item.strip()):
            return item.strip()
    return None


def _type_iri(value: Any, bindings: Mapping[str, str]) -> str | None:
    """A web IRI for an ``additionalType`` value (string, or a DefinedTerm's IRI)."""
    value = text(value)
    candidates: list[Any] = []
    if isinstance(value, str):
        candidates.append(value)
    elif isinstance(value, Mapping):
        candidates.extend(
            [value.get("@id"), first_text(value.get("schema:identifier"))]
            + as_list(value.get("schema:url"))
        )
    for candidate in candidates:
        iri = absolute_iri(text(candidate), bindings)
        if iri and is_web_iri(iri):
            return iri
    return None


def record_links(record: Mapping[str, Any], *, invented: Collection[str] = ()) -> list[TypedLink]:
    """The Signposting links a CDIF 1.0 record gives, row by row of Appendix 3.

    Links have ``found_in="record"`` and no anchor (their context is the landing page), except
    ``describes`` (anchored at the metadata record). ``invented`` identifiers give no link.
    Never raises.
    """
    return _dedupe(_record_links(record, invented))


def _record_links(record: Mapping[str, Any], invented: Collection[str]) -> list[TypedLink]:
    """:func:`record_links` before duplicates merge (a caller that merges them with more
    links merges once)."""
    bindings = prefixes(record)
    links: list[TypedLink] = []
    # The record's nodes by id, indexed only when a bare reference asks for one: walking the
    # whole record was most of the cost of a record's links, and most records have none.
    index: dict[str, Mapping[str, Any]] | None = None

    def resolved(value: Any) -> Any:
        nonlocal index
        if isinstance(value, Mapping) and set(value) == {"@id"}:
            index = node_index(record) if index is None else index
            return resolve_node(value, index, bindings)
        return value

    def add(
        href: str | None,
        rel: str,
        *,
        media_type: str | None = None,
        profile: str | None = None,
        anchor: str | None = None,
    ) -> None:
        if not href or href in invented or (anchor is not None and anchor in invented):
            return
        links.append(
            TypedLink(
                href=href,
                rel=rel,
                type=media_type,
                profile=profile,
                anchor=anchor,
                found_in="record",
            )
        )

    resource = absolute_iri(record.get("@id"), bindings)
    subject = metadata_record(record)
    metadata = absolute_iri(subject.get("@id"), bindings) if subject is not None else None

    for creator in as_list(record.get("schema:creator")):
        if isinstance(creator, Mapping):
            add(absolute_iri(creator.get("@id"), bindings), "author")
    add(resource, "cite-as")
    if metadata and subject is not None:
        declared = (iri_of(text(v), bindings) for v in as_list(subject.get("dcterms:conformsTo")))
        profile = next((p for p in declared if p and p.startswith(_CDIF_PROFILE_PREFIX)), None)
        add(metadata, "describedby", profile=profile)
        add(resource, "describes", anchor=metadata)
    for value in as_list(record.get("@type")):
        if isinstance(value, str) and value.startswith("schema:"):
            add(_SIGNPOSTING_SCHEMA + value.removeprefix("schema:"), "type")
        elif (iri := absolute_iri(value, bindings)) and is_web_iri(iri):
            add(iri, "type")
    for value in as_list(record.get("schema:additionalType")):
        add(_type_iri(resolved(value), bindings), "type")
    for value in as_list(record.get("schema:license")):
        add(iri_of(text(resolved(value)), bindings), "license")
    for related in as_list(record.get("schema:relatedLink")):
        role = resolved(related)
        if not isinstance(role, Mapping):
            continue
        rel = _RELATED.get(_link_relationship(role.get("schema:linkRelationship")).lower())
        if rel is None:
            continue
        for given in as_list(role.get("schema:target")):
            target = resolved(given)
            if isinstance(target, Mapping):
                media = _media_type(target.get("schema:encodingFormat")) or _media_type(
                    target.get("schema:contentType")
                )
                add(first_iri(target.get("schema:url"), bindings), rel, media_type=media)
            elif isinstance(target, str):
                add(absolute_iri(target, bindings), rel)
    return links


@lru_cache(maxsize=4096)
def _same(url: str | None) -> str | None:
    """A URL as compared when merging: scheme and host lower-cased, default port dropped,
    an empty path written ``/``; the fragment kept (``#metadata`` names another thing)."""
    if url is None:
        return None
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return url.strip()
    if parts.scheme.lower() not in _DEFAULT_PORTS:
        return url.strip()
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    netloc = host if port is None or port == _DEFAULT_PORTS[scheme] else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, parts.fragment))


def _fill(first: TypedLink, later: TypedLink) -> TypedLink:
    return replace(
        first,
        title=first.title or later.title,
        hreflang=first.hreflang or later.hreflang,
    )


def _says_less(mine: _Attributes, theirs: _Attributes) -> bool:
    """Whether a link with the attributes ``theirs`` says all one with ``mine`` says (its
    ``type``, if any, and each profile URI) and more: then the first adds nothing to a view
    that holds the second."""
    return (
        mine != theirs
        and (mine[0] is None or mine[0] == theirs[0])
        and set(mine[1]) <= set(theirs[1])
    )


def _dedupe(links: Iterable[TypedLink]) -> list[TypedLink]:
    """The links once each: the same relation, target (fragment kept), anchor, ``type`` and
    ``profile`` make one link (decision 0065). A link another one of the same relation, target
    and anchor says more than (its type and profiles, and more) gives way to it: the fuller
    link takes the earlier place."""
    # Each link's place and attributes worked out once: the comparisons below ask for them
    # again for every pair of links at one place (a URL's normal form is not cheap).
    merged: dict[tuple[Any, ...], TypedLink] = {}
    for link in links:
        place = (link.rel, _same(link.href), _same(link.anchor))
        key = (*place, link_attributes(link))
        first = merged.get(key)
        merged[key] = link if first is None else _fill(first, link)
    by_place: dict[tuple[Any, ...], list[tuple[TypedLink, _Attributes]]] = {}
    for key, link in merged.items():
        by_place.setdefault(key[:3], []).append((link, key[3]))
    kept: list[TypedLink] = []
    placed: set[int] = set()
    for key, link in merged.items():
        same_place = by_place[key[:3]]
        fuller, attributes = link, key[3]
        while (
            fuller_still := next((o for o in same_place if _says_less(attributes, o[1])), None)
        ) is not None:
            fuller, attributes = fuller_still
        if id(fuller) not in placed:
            placed.add(id(fuller))
            kept.append(fuller)
    return kept


def signposting_links(
    record: Mapping[str, Any],
    seen: Sequence[TypedLink] = (),
    *,
    context: str | None = None,
    aliases: Iterable[str] = (),
    invented: Collection[str] = (),
) -> list[TypedLink]:
    """The record's Signposting links merged with the links the resolver saw.

    ``context`` is the landing page (default: :func:`landing_page` of the record). A seen link
    without ``anchor`` counts as seen at the landing page; give seen links an explicit anchor
    when they were seen elsewhere (a metadata document). A seen link whose anchor is the
    landing page, the resource ``@id``, its ``schema:url`` or one of ``aliases`` loses its
    anchor; one the resolver set aside (``ignored``) is left out. Seen links come first;
    duplicates merge (see the module docstring). Never raises.
    """
    bindings = prefixes(record)
    context = context or landing_page(record)
    same_as_context = {
        _same(url)
        for url in [
            context,
            absolute_iri(record.get("@id"), bindings),
            *(iri_of(text(v), bindings) for v in as_list(record.get("schema:url"))),
            *aliases,
        ]
        if url and url not in invented
    }
    republished: list[TypedLink] = []
    for link in seen:
        if link.reverse or link.rel not in REPUBLISHED_RELATIONS or link.ignored:
            # A link the resolver set aside (about another resource, or overruled by a more
            # authoritative source of the page) is not the page's to republish.
            continue
        anchor = None if _same(link.anchor) in same_as_context else link.anchor
        republished.append(replace(link, anchor=anchor, scheme=None, used=None, ignored=None))
    return _dedupe([*republished, *_record_links(record, invented)])


# --- serialisers ---------------------------------------------------------------------------


def _clean(value: str) -> str:
    """Drop control characters: a Link value must never break a header line."""
    return "".join(c for c in value if c >= " " and c != "\x7f")


def _quote(value: str) -> str:
    return '"' + _clean(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _uri(reference: str) -> str:
    # A URI reference inside < > (or an anchor) must not hold < > " or white space
    # (RFC 8288 section 3); non-ASCII characters are written as UTF-8 percent-encodings
    # (RFC 3987 section 3.1, IRI to URI).
    if not _NOT_URI.search(reference):  # the common case: nothing to encode
        return reference
    return "".join(quote(c, safe="") if _NOT_URI.match(c) else c for c in reference)


def _ext_value(value: str) -> str:
    """An RFC 8187 ext-value: ``UTF-8''`` then the percent-encoded UTF-8 bytes."""
    return "UTF-8''" + quote(_clean(value), safe="!#$&+-.^_`|~")


def _link_value(link: TypedLink, anchor: str | None) -> str:
    parts = [f"<{_uri(link.href)}>", f"rel={_quote(link.rel)}"]
    if link.type:
        parts.append(f"type={_quote(link.type)}")
    if link.profile:
        parts.append(f"profile={_quote(link.profile)}")
    if link.title:
        if link.title.isascii():
            parts.append(f"title={_quote(link.title)}")
        else:
            parts.append(f"title*={_ext_value(link.title)}")
    if link.hreflang:
        parts.append(f"hreflang={_quote(link.hreflang)}")
    if anchor:
        parts.append(f"anchor={_quote(_uri(anchor))}")
    return " ; ".join(parts)


def link_header(links: Iterable[TypedLink]) -> str:
    """Serialise links as one HTTP ``Link`` header field value (RFC 8288 section 3).

    Links without ``anchor`` have the response's resource (the landing page) as context.
    Never raises.
    """
    return ", ".join(_link_value(link, link.anchor) for link in links)


def linkset_text(context: str, links: Iterable[TypedLink]) -> str:
    """Serialise links as an ``application/linkset`` document (RFC 9264 section 4.1).

    One link per line; every link carries an explicit ``anchor`` (its own, else ``context``),
    because a linkset has no implied context. Never raises.
    """
    return ",\n".join(_link_value(link, link.anchor or context) for link in links) + "\n"


def linkset_json(context: str, links: Iterable[TypedLink]) -> dict[str, Any]:
    """Serialise links as an ``application/linkset+json`` document (RFC 9264 section 4.2).

    One link context object per anchor (a link's own, else ``context``), in order of first
    appearance, each with its relation types in order of first appearance and an array of
    target objects per relation type. Target attributes: ``type`` and ``title`` (strings),
    ``hreflang`` and ``profile`` (arrays). Never raises.
    """
    contexts: dict[str, dict[str, Any]] = {}
    for link in links:
        anchor = link.anchor or context
        group = contexts.setdefault(anchor, {"anchor": anchor})
        target: dict[str, Any] = {"href": link.href}
        if link.type:
            target["type"] = link.type
        if link.title:
            target["title"] = link.title
        if link.hreflang:
            target["hreflang"] = [link.hreflang]
        if link.profile and link.profile.split():
            target["profile"] = link.profile.split()
        group.setdefault(link.rel, []).append(target)
    return {"linkset": list(contexts.values())}


def html_link_elements(links: Iterable[TypedLink]) -> str:
    """Serialise links as HTML ``<link>`` elements, one per line, attribute values escaped.

    Links with an explicit anchor are left out: an HTML ``<link>`` always has the page as its
    context. Never raises.
    """
    lines: list[str] = []
    for link in links:
        if link.anchor:
            continue
        attributes = [("rel", link.rel), ("href", link.href)]
        for name, value in (
            ("type", link.type),
            ("profile", link.profile),
            ("title", link.title),
            ("hreflang", link.hreflang),
        ):
            if value:
                attributes.append((name, value))
        rendered = " ".join(
            f'{name}="{html.escape(_clean(value), quote=True)}"' for name, value in attributes
        )
        lines.append(f"<link {rendered}>")
    return "\n".join(lines)
