"""Reading values out of a record in the CDIF 1.0 JSON-LD shape, for the crosswalk views.

The views (PID Kernel, Signposting, Signmap) read the record as JSON, not as RDF: the record
is already normalised (:mod:`cdif_harvester.domain.records.normalisation`), so every key is a
compact IRI (``schema:name``) and values have a known shape. What is left to smooth over:

* a value may be one item, an array, or an ``{"@list": [...]}`` (``schema:creator``);
* a literal may be a plain string or a value object ``{"@value": ...}``;
* an IRI may be compact (``ex:thing``), to be expanded with the record's own ``@context``
  prefixes, and only absolute IRIs count as identifiers (no blank nodes, no relative refs);
* a node may be given in full once and referred to elsewhere by ``{"@id": ...}`` alone (the
  same node in JSON-LD): :func:`node_index` finds the full description.

Everything here is pure and never raises.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = [
    "absolute_iri",
    "as_list",
    "first_iri",
    "first_text",
    "iri_of",
    "is_web_iri",
    "metadata_record",
    "node_index",
    "prefixes",
    "resolve_node",
    "text",
]

_ABSOLUTE_IRI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s]+$")
_WEB_IRI = re.compile(r"^https?://[^/?#\s]", re.IGNORECASE)


def as_list(value: Any) -> list[Any]:
    """The items of a JSON-LD value: ``None`` is none, an ``@list`` its items, an array itself."""
    if value is None:
        return []
    if isinstance(value, Mapping) and "@list" in value:
        return as_list(value["@list"])
    return list(value) if isinstance(value, list) else [value]


def prefixes(record: Mapping[str, Any]) -> dict[str, str]:
    """The prefix bindings of the record's ``@context`` object(s) (term -> IRI string)."""
    bindings: dict[str, str] = {}
    for context in as_list(record.get("@context")):
        if isinstance(context, Mapping):
            for key, value in context.items():
                if isinstance(value, str) and not key.startswith("@"):
                    bindings[key] = value
    return bindings


def absolute_iri(value: Any, bindings: Mapping[str, str]) -> str | None:
    """Expand a compact IRI with ``bindings``; None unless the result is an absolute IRI.

    Blank node labels (``_:b0``) and text with white space are not IRIs.
    """
    if not isinstance(value, str) or not value.strip():
        return None
    candidate = value.strip()
    prefix, colon, rest = candidate.partition(":")
    if colon and not rest.startswith("//") and prefix in bindings:
        candidate = bindings[prefix] + rest
    if candidate.startswith("_:") or not _ABSOLUTE_IRI.match(candidate):
        return None
    return candidate


def is_web_iri(value: str | None) -> bool:
    """Whether ``value`` is an absolute ``http``/``https`` IRI."""
    return bool(value) and bool(_WEB_IRI.match(value or ""))


def text(value: Any) -> Any:
    """A literal's value: the ``@value`` of a value object, else the value itself."""
    if isinstance(value, Mapping) and "@value" in value:
        return value["@value"]
    return value


def first_text(value: Any) -> str | None:
    """The first non-empty string among the items of ``value`` (value objects unwrapped)."""
    for raw in as_list(value):
        item = text(raw)
        if isinstance(item, str) and item.strip():
            return item.strip()
    return None


def iri_of(value: Any, bindings: Mapping[str, str]) -> str | None:
    """The IRI a value stands for: a string IRI, a node's ``@id``, else its ``schema:url``."""
    if isinstance(value, str):
        return absolute_iri(value, bindings)
    if isinstance(value, Mapping):
        for key in ("@id", "schema:url"):
            iri = absolute_iri(text(value.get(key)), bindings)
            if iri:
                return iri
    return None


def first_iri(value: Any, bindings: Mapping[str, str]) -> str | None:
    """The first IRI among the items of ``value`` (see :func:`iri_of`)."""
    for item in as_list(value):
        iri = iri_of(text(item), bindings)
        if iri:
            return iri
    return None


def _walk(value: Any) -> Iterator[Mapping[str, Any]]:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            yield item
            stack.extend(v for k, v in item.items() if k != "@context")
        elif isinstance(item, list):
            stack.extend(item)


def node_index(record: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Every node of the record that says more than its ``@id``, by its expanded ``@id``.

    When one id is described in several places, the description with the most properties
    wins (ties: the first met), so a reference finds the fullest description.
    """
    bindings = prefixes(record)
    index: dict[str, Mapping[str, Any]] = {}
    for node in _walk(record):
        iri = absolute_iri(node.get("@id"), bindings)
        if iri is None or len(node) < 2:
            continue
        known = index.get(iri)
        if known is None or len(node) > len(known):
            index[iri] = node
    return index


def resolve_node(
    value: Any, index: Mapping[str, Mapping[str, Any]], bindings: Mapping[str, str]
) -> Any:
    """A bare ``{"@id": ...}`` reference replaced by that node's description in the record.

    Anything else (a full node, a string) is returned as it is.
    """
    if isinstance(value, Mapping) and set(value) == {"@id"}:
        iri = absolute_iri(value.get("@id"), bindings)
        if iri is not None and iri in index:
            return index[iri]
    return value


def metadata_record(record: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The metadata record node (``schema:subjectOf``; the first object when an array)."""
    for item in as_list(record.get("schema:subjectOf")):
        if isinstance(item, Mapping):
            return item
    return None
