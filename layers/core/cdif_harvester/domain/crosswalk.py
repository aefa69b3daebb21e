"""Views derived from a CDIF record: RDA PID Kernel attributes and Signposting links.

* :func:`pid_kernel_view` follows CDIF discoverability Appendix 2 ("Mapping from CDIF metadata
  to RDA PID Kernel attributes"): one attribute per table row that has a CDIF source, named
  after the FDO/RDA field. Missing sources are left out, never invented.
* :func:`signposting_links` follows Appendix 3 ("Mapping from Signposting relations to CDIF
  metadata elements"): author, cite-as, describedby, describes, type, license, item,
  collection; merged with the links the resolver saw.
* :func:`link_header`, :func:`linkset_json`, :func:`linkset_text` and
  :func:`html_link_elements` serialise links as an HTTP ``Link`` value (RFC 8288),
  ``application/linkset+json`` and ``application/linkset`` (RFC 9264) and HTML ``<link>``.

The input is a record in the CDIF 1.0 shape (resource at the root, metadata record under
``schema:subjectOf``). Compact IRIs (``ex:thing``) are expanded with the record's own
``@context`` prefixes so links and PIDs are absolute.

Decisions:

* Appendix 2 paths start at ``/"about"`` (older shape); in the 1.0 shape that is the root, and
  the row "Profile ``/dcterms:conformsTo``" (metadata root) is ``schema:subjectOf``.
* The three policy rows (FDOF digitalObjectMutability, FDOF PersistencyPolicy, RDA
  digitalObjectPolicy) share one source (``schema:publishingPrinciples``); each is emitted.
* ``digitalObjectType`` combines ``@type`` (as schema.org IRIs) and ``schema:additionalType``
  (both rows of the table). ``digitalObjectLocation`` is ``schema:url``; only when that is
  absent the distributions' ``contentUrl`` values are used (Appendix 2 scope note).
* Signposting ``type`` targets use ``https://schema.org/`` IRIs (the Signposting convention,
  signposting.org), plus absolute-IRI ``schema:additionalType`` values. ``author`` needs an
  ``@id`` on the creator; ``license`` needs an IRI (string, ``@id`` or CreativeWork url).
* ``describes`` is anchored at the metadata record (its origin); all other record links have
  no anchor (their context is the resource / its landing page). HTML ``<link>`` has no anchor,
  so anchored links are left out of :func:`html_link_elements`.
* Merge: links the resolver saw come first, in their order; a record link is added unless a
  link with the same (rel, href, anchor) is already present.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cdif_harvester.model import TypedLink

__all__ = [
    "html_link_elements",
    "link_header",
    "linkset_json",
    "linkset_text",
    "pid_kernel_view",
    "signposting_links",
]

_SCHEMA_PREFIX = "schema:"
_SIGNPOSTING_SCHEMA = "https://schema.org/"
_ABSOLUTE_IRI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s]+$")
_CDIF_PROFILE = re.compile(r"^https?://w3id\.org/cdif/(core|discovery)/")


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, Mapping) and "@list" in value:
        return _as_list(value["@list"])
    return list(value) if isinstance(value, list) else [value]


def _prefixes(record: Mapping[str, Any]) -> dict[str, str]:
    prefixes: dict[str, str] = {}
    for context in _as_list(record.get("@context")):
        if isinstance(context, Mapping):
            for key, value in context.items():
                if isinstance(value, str) and not key.startswith("@"):
                    prefixes[key] = value
    return prefixes


def _expand(value: Any, prefixes: Mapping[str, str]) -> str | None:
    """Expand a compact IRI with the record's prefixes; None when not an absolute IRI."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    prefix, colon, rest = text.partition(":")
    if colon and not rest.startswith("//") and prefix in prefixes:
        text = prefixes[prefix] + rest
    if text.startswith("_:") or not _ABSOLUTE_IRI.match(text):
        return None
    return text


def _text(value: Any) -> Any:
    if isinstance(value, Mapping) and "@value" in value:
        return value["@value"]
    return value


def _iri_of(value: Any, prefixes: Mapping[str, str]) -> str | None:
    """The IRI a value stands for: a string IRI, an ``@id``, or a CreativeWork's url."""
    if isinstance(value, str):
        return _expand(value, prefixes)
    if isinstance(value, Mapping):
        for key in ("@id", "schema:url"):
            iri = _expand(value.get(key), prefixes)
            if iri:
                return iri
    return None


def _agent(value: Any, prefixes: Mapping[str, str]) -> dict[str, Any] | str | None:
    if isinstance(value, str):
        return value
    if not isinstance(value, Mapping):
        return None
    out: dict[str, Any] = {}
    iri = _expand(value.get("@id"), prefixes)
    if iri:
        out["id"] = iri
    name = _text(value.get("schema:name"))
    if isinstance(name, str):
        out["name"] = name
    types = [t for t in _as_list(value.get("@type")) if isinstance(t, str)]
    if types:
        out["type"] = types
    identifier = value.get("schema:identifier")
    if isinstance(identifier, str):
        out["identifier"] = identifier
    elif isinstance(identifier, Mapping):
        ident = _text(identifier.get("schema:url")) or _text(identifier.get("schema:value"))
        if isinstance(ident, str):
            out["identifier"] = ident
    return out or None


def _term(value: Any, prefixes: Mapping[str, str]) -> Any:
    """A keyword or additional type: strings as given, DefinedTerms as name/identifier/set."""
    if isinstance(value, str):
        return value
    if not isinstance(value, Mapping):
        return None
    out: dict[str, Any] = {}
    for key, name in (
        ("schema:name", "name"),
        ("schema:identifier", "identifier"),
        ("schema:inDefinedTermSet", "inDefinedTermSet"),
        ("schema:termCode", "termCode"),
    ):
        item = _text(value.get(key))
        if isinstance(item, str):
            out[name] = item
    iri = _expand(value.get("@id"), prefixes)
    if iri:
        out["id"] = iri
    return out or None


def _rights(value: Any, prefixes: Mapping[str, str]) -> Any:
    iri = _iri_of(value, prefixes)
    if iri:
        return iri
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        name = _text(value.get("schema:name"))
        return name if isinstance(name, str) else None
    return None


def _checksum(value: Any) -> dict[str, str] | None:
    if not isinstance(value, Mapping):
        return None
    out = {
        name: item
        for name, key in (("algorithm", "spdx:algorithm"), ("checksumValue", "spdx:checksumValue"))
        if isinstance(item := _text(value.get(key)), str)
    }
    return out or None


def _types_as_iris(record: Mapping[str, Any], base: str) -> list[str]:
    iris: list[str] = []
    for value in _as_list(record.get("@type")):
        if isinstance(value, str) and value.startswith(_SCHEMA_PREFIX):
            iris.append(base + value[len(_SCHEMA_PREFIX) :])
        elif isinstance(value, str) and _ABSOLUTE_IRI.match(value):
            iris.append(value)
    return iris


def _compact(items: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if item is not None and item not in out:
            out.append(item)
    return out


def pid_kernel_view(record: Mapping[str, Any]) -> dict[str, Any]:
    """Map a CDIF record to RDA PID Kernel / FDOF attributes (discoverability Appendix 2).

    Keys (present only when the record has a source for them): ``pid`` (the resource
    ``@id``), ``digitalObjectType``, ``digitalObjectLocation``, ``dateCreated``
    (datePublished), ``dateModified``, ``version``, ``checksum`` (spdx, a.k.a. etag),
    ``rightsRecord`` (license and conditionsOfAccess), ``scientificDomain`` (keywords),
    ``creator``, ``responsibleOrganisation`` (provider), ``technicalManagement`` (maintainer
    of the resource), ``digitalObjectMutability``, ``persistencyPolicy``,
    ``digitalObjectPolicy`` (publishingPrinciples) and ``profile`` (the metadata record's
    dcterms:conformsTo). FDOF operationInfo is not implemented by CDIF 1.0. Never raises.
    """
    prefixes = _prefixes(record)
    view: dict[str, Any] = {}
    pid = _expand(record.get("@id"), prefixes)
    if pid:
        view["pid"] = pid

    object_types = _types_as_iris(record, "http://schema.org/") + _compact(
        _term(v, prefixes) for v in _as_list(record.get("schema:additionalType"))
    )
    if object_types:
        view["digitalObjectType"] = object_types

    location = _expand(_text(record.get("schema:url")), prefixes)
    if location:
        view["digitalObjectLocation"] = [location]
    else:
        urls = _compact(
            _expand(_text(d.get("schema:contentUrl")), prefixes)
            for d in _as_list(record.get("schema:distribution"))
            if isinstance(d, Mapping)
        )
        if urls:
            view["digitalObjectLocation"] = urls

    for key, source in (
        ("dateCreated", "schema:datePublished"),
        ("dateModified", "schema:dateModified"),
        ("version", "schema:version"),
    ):
        value = _text(record.get(source))
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            view[key] = value

    checksums = _compact(_checksum(v) for v in _as_list(record.get("spdx:checksum")))
    for distribution in _as_list(record.get("schema:distribution")):
        if isinstance(distribution, Mapping):
            checksums.extend(
                c
                for c in (_checksum(v) for v in _as_list(distribution.get("spdx:checksum")))
                if c is not None and c not in checksums
            )
    if checksums:
        view["checksum"] = checksums

    rights = _compact(
        _rights(v, prefixes)
        for key in ("schema:license", "schema:conditionsOfAccess")
        for v in _as_list(record.get(key))
    )
    if rights:
        view["rightsRecord"] = rights

    domains = _compact(_term(v, prefixes) for v in _as_list(record.get("schema:keywords")))
    if domains:
        view["scientificDomain"] = domains

    for key, source in (
        ("creator", "schema:creator"),
        ("responsibleOrganisation", "schema:provider"),
        ("technicalManagement", "schema:maintainer"),
    ):
        agents = _compact(_agent(v, prefixes) for v in _as_list(record.get(source)))
        if agents:
            view[key] = agents

    policies = _compact(
        _rights(v, prefixes) for v in _as_list(record.get("schema:publishingPrinciples"))
    )
    if policies:
        for key in ("digitalObjectMutability", "persistencyPolicy", "digitalObjectPolicy"):
            view[key] = list(policies)

    subject = record.get("schema:subjectOf")
    if isinstance(subject, Mapping):
        profiles = _compact(
            _iri_of(v, prefixes) for v in _as_list(subject.get("dcterms:conformsTo"))
        )
        if profiles:
            view["profile"] = profiles
    return view


def _link_relationship(value: Any) -> str:
    if isinstance(value, Mapping):
        for key in ("schema:name", "schema:termCode", "schema:identifier"):
            text = _text(value.get(key))
            if isinstance(text, str):
                return text
        return ""
    return value if isinstance(value, str) else ""


def _record_links(record: Mapping[str, Any]) -> list[TypedLink]:
    prefixes = _prefixes(record)
    links: list[TypedLink] = []

    def add(
        href: str | None,
        rel: str,
        *,
        type: str | None = None,  # noqa: A002 - the link attribute's name
        profile: str | None = None,
        anchor: str | None = None,
    ) -> None:
        if href:
            links.append(
                TypedLink(
                    href=href,
                    rel=rel,
                    type=type,
                    profile=profile,
                    anchor=anchor,
                    found_in="record",
                )
            )

    resource_id = _expand(record.get("@id"), prefixes)
    subject = record.get("schema:subjectOf")
    record_id = _expand(subject.get("@id"), prefixes) if isinstance(subject, Mapping) else None

    for creator in _as_list(record.get("schema:creator")):
        if isinstance(creator, Mapping):
            add(_expand(creator.get("@id"), prefixes), "author")
    add(resource_id, "cite-as")
    if record_id:
        profile = None
        if isinstance(subject, Mapping):
            declared = [_iri_of(v, prefixes) for v in _as_list(subject.get("dcterms:conformsTo"))]
            profile = next((p for p in declared if p and _CDIF_PROFILE.match(p)), None)
        add(record_id, "describedby", profile=profile)
        add(resource_id, "describes", anchor=record_id)
    for iri in _types_as_iris(record, _SIGNPOSTING_SCHEMA):
        add(iri, "type")
    for value in _as_list(record.get("schema:additionalType")):
        if isinstance(value, str) and value.startswith(("http://", "https://")):
            add(value, "type")
    for value in _as_list(record.get("schema:license")):
        add(_iri_of(value, prefixes), "license")
    for value in _as_list(record.get("schema:relatedLink")):
        if not isinstance(value, Mapping):
            continue
        relationship = _link_relationship(value.get("schema:linkRelationship")).lower()
        rel = {"haspart": "item", "ispartof": "collection"}.get(relationship)
        target = value.get("schema:target")
        if rel is None or not isinstance(target, Mapping):
            continue
        media = _text(target.get("schema:encodingFormat")) or _text(
            target.get("schema:contentType")
        )
        add(
            _expand(_text(target.get("schema:url")), prefixes),
            rel,
            type=media if isinstance(media, str) else None,
        )
    return links


def _key(link: TypedLink) -> tuple[str, str, str | None]:
    return (link.rel.lower(), link.href, link.anchor)


def signposting_links(record: Mapping[str, Any], seen: Sequence[TypedLink] = ()) -> list[TypedLink]:
    """Signposting links for a CDIF record (Appendix 3), merged with the links already seen.

    ``seen`` are links the resolver found (HTTP ``Link``, HTML, linkset); they come first and
    win over a record link with the same (rel, href, anchor). Never raises.
    """
    merged: list[TypedLink] = []
    keys: set[tuple[str, str, str | None]] = set()
    for link in [*seen, *_record_links(record)]:
        key = _key(link)
        if key not in keys:
            keys.add(key)
            merged.append(link)
    return merged


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _target(href: str) -> str:
    # A URI reference between < > must not contain < > or whitespace (RFC 8288 section 3).
    return "".join(f"%{ord(c):02X}" if c in '<> "' or ord(c) < 0x21 else c for c in href)


def _link_value(link: TypedLink, anchor: str | None) -> str:
    parts = [f"<{_target(link.href)}>", f"rel={_quote(link.rel)}"]
    if link.type:
        parts.append(f"type={_quote(link.type)}")
    if link.profile:
        parts.append(f"profile={_quote(link.profile)}")
    if anchor:
        parts.append(f"anchor={_quote(anchor)}")
    return " ; ".join(parts)


def link_header(links: Iterable[TypedLink]) -> str:
    """Serialise links as one HTTP ``Link`` header field value (RFC 8288).

    Parameters ``rel``, ``type``, ``profile`` and ``anchor`` are quoted strings; characters not
    allowed inside ``<...>`` are percent-encoded. Never raises.
    """
    return ", ".join(_link_value(link, link.anchor) for link in links)


def linkset_text(anchor: str, links: Iterable[TypedLink]) -> str:
    """Serialise links as an ``application/linkset`` document (RFC 9264 section 4.1).

    Every link carries an explicit ``anchor`` (its own, else ``anchor``), one link per line.
    """
    return ",\n".join(_link_value(link, link.anchor or anchor) for link in links) + "\n"


def linkset_json(anchor: str, links: Iterable[TypedLink]) -> dict[str, Any]:
    """Serialise links as an ``application/linkset+json`` document (RFC 9264 section 4.2).

    Links are grouped by anchor (their own, else ``anchor``) in order of first appearance,
    then by relation type. ``type`` is a string; ``profile`` is an extension target attribute
    and therefore an array of strings (RFC 9264 section 4.2.4.3).
    """
    contexts: dict[str, dict[str, Any]] = {}
    for link in links:
        context = contexts.setdefault(link.anchor or anchor, {"anchor": link.anchor or anchor})
        target: dict[str, Any] = {"href": link.href}
        if link.type:
            target["type"] = link.type
        if link.profile:
            target["profile"] = [link.profile]
        context.setdefault(link.rel, []).append(target)
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
        if link.type:
            attributes.append(("type", link.type))
        if link.profile:
            attributes.append(("profile", link.profile))
        rendered = " ".join(
            f'{name}="{html.escape(value, quote=True)}"' for name, value in attributes
        )
        lines.append(f"<link {rendered}>")
    return "\n".join(lines)
