"""The PID Kernel view of a CDIF record (CDIF discoverability, Appendix 2).

:func:`pid_kernel_view` follows Appendix 2 ("Mapping from CDIF metadata to RDA PID Kernel
attributes") row by row: one JSON attribute per row that has a CDIF source, named as in the RDA
Recommendation on PID Kernel Information where the row is an RDA attribute, else after the row's
FDO field, and ``pid``, the resource's ``@id``. Nothing is invented: a missing source gives no
attribute, and an identifier the harvester made up gives no ``pid``.

See docs/decisions/0036-pid-kernel-view.md for the rows and how each is read.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from cdif_harvester.domain.records.record_values import (
    absolute_iri,
    as_list,
    first_iri,
    first_text,
    iri_of,
    metadata_record,
    node_index,
    prefixes,
    resolve_node,
    text,
)

__all__ = ["KERNEL_ATTRIBUTES", "pid_kernel_view"]

SCHEMA_ORG = "http://schema.org/"

# The attributes in the order they are written (the order of Appendix 2, pid first).
KERNEL_ATTRIBUTES: tuple[str, ...] = (
    "pid",
    "creator",
    "responsibleOrganisation",
    "etag",
    "digitalObjectMutability",
    "persistencyPolicy",
    "digitalObjectPolicy",
    "technicalManagement",
    "rightsRecord",
    "scientificDomain",
    "kernelInformationProfile",
    "digitalObjectType",
    "dateCreated",
    "dateModified",
    "version",
    "digitalObjectLocation",
)


class _Reader:
    """The record with its prefixes and node index, read once per view."""

    def __init__(self, record: Mapping[str, Any]) -> None:
        self.record = record
        self.bindings = prefixes(record)
        self.index = node_index(record)

    def iri(self, value: Any) -> str | None:
        return absolute_iri(text(value), self.bindings)

    def first_iri(self, value: Any) -> str | None:
        return first_iri(value, self.bindings)

    def compact_iri_expanded(self, value: str) -> str | None:
        """A string as given, except a compact IRI with a prefix the record binds
        (``dcat:Dataset``), which is written as the IRI it abbreviates."""
        value = value.strip()
        prefix, colon, rest = value.partition(":")
        if colon and prefix in self.bindings and not rest.startswith("//"):
            return self.iri(value) or value
        return value or None

    def identifier(self, value: Any) -> str | None:
        """A ``schema:identifier``: a string, or a PropertyValue's url, else its value."""
        for raw in as_list(value):
            item = text(raw)
            if isinstance(item, str) and item.strip():
                return item.strip()
            if isinstance(item, Mapping):
                found = first_text(item.get("schema:url")) or first_text(item.get("schema:value"))
                if found:
                    return found
        return None

    def types(self, node: Mapping[str, Any]) -> list[str]:
        iris: list[str] = []
        for value in as_list(node.get("@type")):
            if isinstance(value, str) and value.startswith("schema:"):
                iris.append(SCHEMA_ORG + value.removeprefix("schema:"))
            else:
                iri = self.iri(value)
                if iri:
                    iris.append(iri)
        return iris

    def contact(self, value: Any) -> dict[str, str] | None:
        if not isinstance(value, Mapping):
            return None
        out = {
            name: found
            for name, key in (
                ("name", "schema:name"),
                ("contactType", "schema:contactType"),
                ("email", "schema:email"),
                ("telephone", "schema:telephone"),
                ("url", "schema:url"),
            )
            if (found := first_text(value.get(key)))
        }
        return out or None

    def agent(self, value: Any) -> dict[str, Any] | str | None:
        value = resolve_node(value, self.index, self.bindings)
        if isinstance(value, str):
            return value.strip() or None
        if not isinstance(value, Mapping):
            return None
        out: dict[str, Any] = {}
        iri = self.iri(value.get("@id"))
        if iri:
            out["id"] = iri
        name = first_text(value.get("schema:name"))
        if name:
            out["name"] = name
        types = self.types(value)
        if types:
            out["type"] = types
        identifier = self.identifier(value.get("schema:identifier"))
        if identifier:
            out["identifier"] = identifier
        url = self.first_iri(value.get("schema:url"))
        if url:
            out["url"] = url
        contacts = _unique(self.contact(v) for v in as_list(value.get("schema:contactPoint")))
        if contacts:
            out["contactInformation"] = contacts
        return out or None

    def term(self, value: Any) -> Any:
        value = resolve_node(value, self.index, self.bindings)
        value = text(value)
        if isinstance(value, str):
            return self.compact_iri_expanded(value)
        if not isinstance(value, Mapping):
            return None
        out: dict[str, Any] = {}
        iri = self.iri(value.get("@id"))
        if iri:
            out["id"] = iri
        for name, key in (
            ("name", "schema:name"),
            ("inDefinedTermSet", "schema:inDefinedTermSet"),
            ("termCode", "schema:termCode"),
        ):
            found = first_text(value.get(key))
            if found:
                out[name] = found
        identifier = self.identifier(value.get("schema:identifier"))
        if identifier:
            out["identifier"] = identifier
        url = self.first_iri(value.get("schema:url"))
        if url:
            out["url"] = url
        return out or None

    def pointer(self, value: Any) -> str | None:
        """A rights or policy value: its IRI, else its text, else the CreativeWork's name."""
        value = resolve_node(value, self.index, self.bindings)
        iri = iri_of(text(value), self.bindings)
        if iri:
            return iri
        value = text(value)
        if isinstance(value, str):
            return value.strip() or None
        if isinstance(value, Mapping):
            return first_text(value.get("schema:name"))
        return None

    def checksum(self, value: Any, location: str | None) -> dict[str, str] | None:
        if not isinstance(value, Mapping):
            return None
        out = {
            name: found
            for name, key in (
                ("algorithm", "spdx:algorithm"),
                ("checksumValue", "spdx:checksumValue"),
            )
            if (found := first_text(value.get(key)))
        }
        if "checksumValue" not in out:
            return None  # an algorithm alone checks nothing
        if location:
            out["contentUrl"] = location
        return out

    def literal(self, key: str) -> str | int | float | None:
        for raw in as_list(self.record.get(key)):
            item = text(raw)
            if isinstance(item, str) and item.strip():
                return item.strip()
            if isinstance(item, int | float) and not isinstance(item, bool):
                return item
        return None


def _unique(items: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if item is not None and item not in out:
            out.append(item)
    return out


def pid_kernel_view(record: Mapping[str, Any], *, invented: Collection[str] = ()) -> dict[str, Any]:
    """Map a CDIF 1.0 record to RDA PID Kernel attributes, row by row of Appendix 2.

    Returns a JSON-ready object whose keys are among :data:`KERNEL_ATTRIBUTES`, in that order,
    present only when the record has a source for them (see the module docstring for the
    table). ``invented`` are identifiers the harvester made up for the record; a ``pid`` among
    them is left out. Never raises.
    """
    reader = _Reader(record)
    view: dict[str, Any] = {}
    pid = reader.iri(record.get("@id"))
    if pid and pid not in invented:
        view["pid"] = pid

    for key, source in (
        ("creator", "schema:creator"),
        ("responsibleOrganisation", "schema:provider"),
    ):
        agents = _unique(reader.agent(v) for v in as_list(record.get(source)))
        if agents:
            view[key] = agents

    distributions = [
        d
        for d in (
            resolve_node(v, reader.index, reader.bindings)
            for v in as_list(record.get("schema:distribution"))
        )
        if isinstance(d, Mapping)
    ]
    checksums = _unique(reader.checksum(v, None) for v in as_list(record.get("spdx:checksum")))
    for distribution in distributions:
        location = reader.first_iri(distribution.get("schema:contentUrl"))
        checksums.extend(
            c
            for c in (
                reader.checksum(v, location) for v in as_list(distribution.get("spdx:checksum"))
            )
            if c is not None and c not in checksums
        )
    if checksums:
        view["etag"] = checksums

    policies = _unique(
        reader.pointer(v) for v in as_list(record.get("schema:publishingPrinciples"))
    )
    if policies:
        for key in ("digitalObjectMutability", "persistencyPolicy", "digitalObjectPolicy"):
            view[key] = list(policies)

    maintainers = _unique(reader.agent(v) for v in as_list(record.get("schema:maintainer")))
    if maintainers:
        view["technicalManagement"] = maintainers

    rights = _unique(
        reader.pointer(v)
        for key in ("schema:license", "schema:conditionsOfAccess")
        for v in as_list(record.get(key))
    )
    if rights:
        view["rightsRecord"] = rights

    domains = _unique(reader.term(v) for v in as_list(record.get("schema:keywords")))
    if domains:
        view["scientificDomain"] = domains

    subject = metadata_record(record)
    if subject is not None:
        profiles = _unique(
            iri_of(text(v), reader.bindings) for v in as_list(subject.get("dcterms:conformsTo"))
        )
        if profiles:
            view["kernelInformationProfile"] = profiles

    object_types = reader.types(record) + _unique(
        reader.term(v) for v in as_list(record.get("schema:additionalType"))
    )
    if object_types:
        view["digitalObjectType"] = _unique(object_types)

    for key, source in (
        ("dateCreated", "schema:datePublished"),
        ("dateModified", "schema:dateModified"),
        ("version", "schema:version"),
    ):
        value = reader.literal(source)
        if value is not None:
            view[key] = value

    locations = _unique(reader.first_iri(v) for v in as_list(record.get("schema:url")))
    if not locations:
        locations = _unique(reader.first_iri(d.get("schema:contentUrl")) for d in distributions)
    if locations:
        view["digitalObjectLocation"] = locations
    return view
