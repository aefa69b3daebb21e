"""Normalise any published JSON-LD Dataset description to the CDIF JSON shape.

:func:`normalise` prepares the JSON, expands it offline with the contexts given (a
:class:`~cdif_harvester.domain.records.contexts.JsonLdContexts`; the shipped ones alone by
default), finds the Datasets, pairs each with its metadata record and compacts and shapes it: the
resource at the root, the metadata record under ``schema:subjectOf``, every key prefixed. Nothing
is invented; a missing id gets a marked fallback. A record declaring a CDIF 1.1 profile gets the
1.1 shapes (1.1 context and arrays, IRI references kept), any other the core 1.0 shapes; each
change to a 1.1 shape is a note. Raises :class:`NormalisationError` (``no-dataset``,
``normalisation-failed``).

See docs/decisions/0027-normalising-to-cdif-shape.md, docs/decisions/0028-record-identity.md,
docs/decisions/0060-normalising-cdif-11.md and
docs/decisions/0064-conformance-after-normalisation.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urldefrag

from pyld import jsonld

from cdif_harvester.domain.records import jsonld_fast, jsonld_loader
from cdif_harvester.domain.records.context_repair import (
    drop_confused_iris,
    drop_refused_terms,
    trim_context,
)
from cdif_harvester.domain.records.contexts import JsonLdContexts, shipped_contexts
from cdif_harvester.errors import PermanentError

__all__ = ["NormalisationError", "NormalisedRecord", "normalise"]

SCHEMA = "http://schema.org/"
_SCHEMA_HTTPS = "https://schema.org/"
_DCAT = "http://www.w3.org/ns/dcat#"
_DCT_CONFORMS_TO = "http://purl.org/dc/terms/conformsTo"
_DATASET = SCHEMA + "Dataset"
_ABOUT = SCHEMA + "about"
_SUBJECT_OF = SCHEMA + "subjectOf"
_ADDITIONAL_TYPE = SCHEMA + "additionalType"
_IDENTIFIER = SCHEMA + "identifier"
_ENCODING = SCHEMA + "encoding"
_SCHEMA_VERSION = SCHEMA + "schemaVersion"
_ITEM_LIST_ELEMENT = SCHEMA + "itemListElement"
_ITEM = SCHEMA + "item"
_NAME = SCHEMA + "name"
_POSITION = SCHEMA + "position"
_URL = SCHEMA + "url"
_VALUE = SCHEMA + "value"
_CATALOG_RECORD_LITERAL = "dcat:CatalogRecord"
_CATALOG_RECORD_IRI = _DCAT + "CatalogRecord"

# CDIF conformance classes (core 1.0 implementation, "Metadata profile identifier").
_CDIF_PROFILE = re.compile(
    r"^https?://w3id\.org/cdif/(?P<profile>core|discovery)/(?P<version>1\.[01])/?$"
)

# Any CDIF 1.1 profile (core, discovery, data_description, data_structure, manifest,
# provenance...): a record declaring one is shaped to CDIF 1.1 (see decision 0060).
_CDIF_11_PROFILE = re.compile(r"^https?://w3id\.org/cdif/(?P<profile>[a-z_]+)/1\.1/?$")

_JUNK_IDS = frozenset({"", "null", "none", "undefined", "nil", "n/a", "na", "unknown", "tbd"})
_JUNK_LAST_SEGMENT = re.compile(r"(?:^|[:/#])(?:null|none|undefined|nil|n/a)$", re.IGNORECASE)
_IRI_LIKE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:\S+$")

# Where the CDIF core 1.0 schema wants arrays (see schemas/cdif-core-1.0.schema.json).
_ARRAY_KEYS_EVERYWHERE = frozenset(
    {"schema:additionalType", "schema:sameAs", "dcterms:conformsTo", "prov:used"}
)
_ARRAY_KEYS_ROOT = frozenset(
    {
        "schema:license",
        "schema:conditionsOfAccess",
        "schema:distribution",
        "schema:keywords",
        "schema:provider",
        "schema:contributor",
        "schema:funding",
        "schema:publishingPrinciples",
        "schema:relatedLink",
        "schema:variableMeasured",
        "prov:wasGeneratedBy",
        "prov:wasDerivedFrom",
    }
)
_ARRAY_KEYS_DISTRIBUTION = frozenset(
    {"schema:encodingFormat", "schema:provider", "schema:potentialAction"}
)
_ARRAY_KEYS_ENTRY_POINT = frozenset({"schema:httpMethod", "schema:contentType"})
# Where the CDIF discovery profile wants arrays besides (discoverability, Appendix 1; see
# schemas/cdif-discovery-1.0.schema.json): only for a record that declares that profile.
_ARRAY_KEYS_DISCOVERY: dict[str, frozenset[str]] = {
    "root": frozenset(
        {"schema:spatialCoverage", "schema:temporalCoverage", "schema:measurementTechnique"}
    ),
    "variable": frozenset({"schema:propertyID", "schema:alternateName"}),
    "place": frozenset({"schema:alternateName"}),
}
# Where the CDIF 1.1 profiles want arrays besides (their schema.yaml), for a record that
# declares a 1.1 profile: keys that are arrays wherever they occur, and keys that are arrays at
# one place only ("part" is an element of schema:hasPart, a manifest's file).
_ARRAY_KEYS_11_EVERYWHERE = frozenset(
    {
        "schema:hasPart",
        "schema:instrument",
        "schema:participant",
        "schema:step",
        "schema:category",
        "schema:additionalProperty",
        "dqv:hasQualityMeasurement",
        "skos:broader",
        "skos:narrower",
        "skos:hasTopConcept",
        "cdi:function",
        "cdi:has_DataStructureComponent",
        "cdi:has_ForeignKey",
        "cdi:isComposedOf",
        "cdi:lineTerminator",
        "cdi:semantic",
        "cdi:statistic",
        "cdi:takesSentinelValuesFrom",
        "cdif:appliesTo",
        "cdif:displayLabel",
        "cdif:hasPhysicalMapping",
        "cdif:has_CategoryStatistics",
        "cdif:has_Statistics",
        "cdif:indexedBy",
        "cdif:isComposedOf",
        "cdif:name",
        "cdif:recommendedDataType",
        "cdif:statistics",
        "cdif:uses",
        "cdif:uses_Concept",
    }
)
_ARRAY_KEYS_11: dict[str, frozenset[str]] = {
    "part": frozenset({"schema:about", "schema:encodingFormat", "schema:alternateName"}),
    "result": frozenset({"schema:encodingFormat"}),
    "instrument": frozenset({"schema:alternateName"}),
    "activity": frozenset({"schema:result"}),
    # an attribute component qualifies a list of components (a variable qualifies one)
    "component": frozenset({"cdi:qualifies"}),
    # a descriptor variable's value domain (cdif:hasValuesFrom) lists its entries
    "descriptor_domain": frozenset({"cdif:takesValuesFrom"}),
}
# Keys of the table above that one place wants as a single value: an enumeration value domain
# (cdi:takesSentinelValuesFrom, cdi:takesSubstantiveValuesFrom) has one display label, a string.
_NOT_ARRAY_KEYS_11: dict[str, frozenset[str]] = {"domain": frozenset({"cdif:displayLabel"})}
# The data description profile (1.1) wants a variable's propertyID as an array.
_ARRAY_KEYS_DATA_DESCRIPTION = {"variable": frozenset({"schema:propertyID"})}
_CHILD_WHERE_11 = {
    "schema:hasPart": "part",
    "schema:result": "result",
    "schema:instrument": "instrument",
    "schema:additionalProperty": "variable",
    "prov:wasGeneratedBy": "activity",
    "cdi:has_DataStructureComponent": "component",
    "cdi:takesSentinelValuesFrom": "domain",
    "cdi:takesSubstantiveValuesFrom": "domain",
    "cdif:hasValuesFrom": "descriptor_domain",
}
_STRING_VALUED_KEYS = frozenset(
    {"schema:url", "schema:contentUrl", "schema:urlTemplate", "schema:additionalType"}
)


class NormalisationError(PermanentError):
    """Nothing usable could be made of a document (no Dataset, or JSON-LD processing failed)."""

    reason = "normalisation-failed"


@dataclass(frozen=True)
class NormalisedRecord:
    """One Dataset of a document in the CDIF 1.0 shape, with its identities and notes.

    ``item_list`` is set for a Dataset that is an element of a CDIF-list-1.0 ``ItemList``
    (each element becomes its own record; the list is kept as provenance): the list's ``id``
    (its ``@id``, when usable), ``name`` and ``url`` where the list declares them, and the
    element's ``position``: the ``ListItem``'s ``schema:position`` when it is an integer, else
    the element's place in ``itemListElement`` (1-based). None for any other Dataset.
    """

    record: dict[str, Any]
    record_id: str
    resource_id: str
    identity_fallback: bool
    notes: tuple[str, ...]
    item_list: dict[str, Any] | None = None
    resource_fallback: bool = False


# --- small helpers on expanded JSON-LD ---------------------------------------------------


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _is_node(value: Any) -> bool:
    return isinstance(value, dict) and "@value" not in value and "@list" not in value


def _is_reference(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"@id"}


def _types(node: dict[str, Any]) -> list[str]:
    return [t for t in _as_list(node.get("@type")) if isinstance(t, str)]


def _is_dataset(node: dict[str, Any]) -> bool:
    return _DATASET in _types(node)


def _is_catalog_record(node: dict[str, Any]) -> bool:
    if _CATALOG_RECORD_IRI in _types(node):
        return True
    for value in _as_list(node.get(_ADDITIONAL_TYPE)):
        if isinstance(value, dict) and (
            value.get("@value") == _CATALOG_RECORD_LITERAL
            or value.get("@id") == _CATALOG_RECORD_IRI
        ):
            return True
    return False


def is_junk_id(value: Any) -> bool:
    """Whether an ``@id`` cannot serve as an identity (empty, blank node, ``doi:null``, a CDIF
    nil value such as ``nil:unknown``...)."""
    if not isinstance(value, str):
        return True
    text = value.strip()
    return (
        text.lower() in _JUNK_IDS
        or text.startswith(("_:", "nil:"))
        or bool(_JUNK_LAST_SEGMENT.search(text))
        or len(text.split()) != 1  # whitespace inside (str.split splits on str.isspace)
    )


def _walk_nodes(value: Any) -> Iterator[dict[str, Any]]:
    """Every node object in an expanded tree (depth first, document order)."""
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(reversed(item))
            continue
        if not isinstance(item, dict) or "@value" in item:
            continue
        if "@list" in item:
            stack.append(item["@list"])
            continue
        yield item
        # The children to visit next, in order; values and scalars hold no nodes, and lists
        # of them are the common case: they are looked into here rather than stacked.
        children: list[Any] = []
        for key, child in item.items():
            if key in ("@id", "@type", "@context"):
                continue
            if isinstance(child, list):
                children.extend(
                    c
                    for c in child
                    if isinstance(c, list) or (isinstance(c, dict) and "@value" not in c)
                )
            elif isinstance(child, dict) and "@value" not in child:
                children.append(child)
        stack.extend(reversed(children))


def _merge_into(target: dict[str, Any], other: dict[str, Any]) -> None:
    """Add what ``other`` says about a node to ``target`` (a private copy, see _build_index).

    Values taken from ``other`` are shared, not copied: nothing downstream alters a node in
    place. Lists are copied before they are appended to, so ``other`` keeps its own.
    """
    for key, value in other.items():
        if key == "@id":
            continue
        if key not in target:
            target[key] = list(value) if isinstance(value, list) else value
            continue
        if not isinstance(target[key], list) or not isinstance(value, list):
            continue
        if repr(value) == repr(target[key]):
            # The same values written again (a node repeated in full): nothing to add. Equal
            # reprs mean equal types and key orders too, so each item has its twin in target.
            continue
        seen = {json.dumps(item, sort_keys=True) for item in target[key]}
        for item in value:
            marker = json.dumps(item, sort_keys=True)
            if marker not in seen:
                target[key].append(item)
                seen.add(marker)


def _build_index(
    top_nodes: list[dict[str, Any]], identified: list[dict[str, Any]] | None = None
) -> dict[str, dict[str, Any]]:
    """Merge every node object that carries an ``@id`` into one node per id.

    The index holds the node object itself while its id is met once; the first time a second
    node with the same id turns up, the entry becomes a copy (its lists copied too) and the
    others are merged into that copy. So the tree the index was built from is never altered:
    a node written inside another one stays exactly as it was written there. ``identified``,
    when given, lists those nodes in walk order already (the fast expansion records them).
    """
    index: dict[str, dict[str, Any]] = {}
    private: set[str] = set()
    for node in _walk_nodes(top_nodes) if identified is None else identified:
        node_id = node.get("@id")
        if not isinstance(node_id, str) or _is_reference(node):
            continue
        if node_id not in index:
            index[node_id] = node
            continue
        if node_id not in private:
            index[node_id] = {
                key: list(value) if isinstance(value, list) else value
                for key, value in index[node_id].items()
            }
            private.add(node_id)
        _merge_into(index[node_id], node)
    return index


def _https_to_http(value: Any) -> tuple[Any, bool]:
    """Map ``https://schema.org/`` keys, types and ids to ``http://schema.org/``."""
    changed = False

    def fix(iri: Any) -> Any:
        nonlocal changed
        if isinstance(iri, str) and iri.startswith(_SCHEMA_HTTPS):
            changed = True
            return SCHEMA + iri[len(_SCHEMA_HTTPS) :]
        return iri

    def walk(item: Any) -> Any:
        if isinstance(item, list):
            return [walk(child) for child in item]
        if not isinstance(item, dict):
            return item
        if "@value" in item:
            return {k: (fix(v) if k == "@type" else v) for k, v in item.items()}
        out: dict[str, Any] = {}
        for key, child in item.items():
            if key == "@id":
                out[key] = fix(child)
            elif key == "@type":
                out[key] = [fix(t) for t in _as_list(child)]
            else:
                new_key = fix(key)
                new_child = walk(child)
                if new_key in out and isinstance(out[new_key], list):
                    out[new_key].extend(_as_list(new_child))
                else:
                    out[new_key] = new_child
        return out

    return walk(value), changed


# --- step 1: prepare the raw JSON --------------------------------------------------------


def _prepare(
    document: Any, notes: list[str], contexts: JsonLdContexts | None = None
) -> tuple[Any, bool]:
    """Drop remote contexts not served (by ``contexts``, the shipped ones alone when None) and
    unusable ``@id`` values, trim the white space around a context's IRIs; tell whether a
    context exists."""
    served = contexts if contexts is not None else shipped_contexts()
    found_context = False

    def clean_context(ctx: Any) -> Any:
        entries = _as_list(ctx)
        kept: list[Any] = []
        for entry in entries:
            if isinstance(entry, str) and not served.is_served(entry):
                notes.append(f"remote context {entry} not loaded")
                continue
            kept.append(trim_context(entry, notes) if isinstance(entry, dict) else entry)
        if not kept:
            return None
        return kept if isinstance(ctx, list) else kept[0]

    def walk(item: Any, depth: int) -> Any:
        nonlocal found_context
        if isinstance(item, list):
            return [
                walk(child, depth + 1) if isinstance(child, dict | list) else child
                for child in item
            ]
        if not isinstance(item, dict):
            return item
        if "@value" in item and isinstance(item.get("@type"), list):
            item = _value_type_unwrapped(item, notes)
        out: dict[str, Any] = {}
        for key, child in item.items():
            if key == "@context":
                if depth <= 1:
                    found_context = True
                cleaned = clean_context(child)
                if cleaned is not None:
                    out[key] = cleaned
            elif key == "@id" and (not isinstance(child, str) or not child.strip()):
                notes.append(f"unusable @id {json.dumps(child)} ignored")
            elif key == "@value" or not isinstance(child, dict | list):
                out[key] = child
            else:
                out[key] = walk(child, depth + 1)
        return out

    return walk(document, 0), found_context


def _value_type_unwrapped(item: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """A value object whose ``@type`` is an array (JSON-LD takes one datatype there; the CDIF
    1.1 examples write ``["geosparql:wktLiteral"]``) with its first string type instead: the
    document would otherwise fail expansion and its records be lost."""
    types = [t for t in item["@type"] if isinstance(t, str)]
    fixed = {key: value for key, value in item.items() if key != "@type"}
    if types:
        fixed["@type"] = types[0]
    dropped = f"; {', '.join(types[1:])} dropped" if len(types) > 1 else ""
    notes.append(
        f"value object @type {json.dumps(item['@type'])} written as "
        f"{json.dumps(types[0]) if types else 'no datatype'} (JSON-LD value objects take one"
        f" datatype){dropped}"
    )
    return fixed


def _declares_context(document: Any) -> bool:
    """What :func:`_prepare` tells about ``@context``: one at depth 0 or 1 of its walk (the
    document's own, one of a top-level array's nodes', or one of the nodes the document's
    entries hold directly)."""
    if isinstance(document, list):
        return any(isinstance(item, dict) and "@context" in item for item in document)
    return "@context" in document or any(
        isinstance(child, dict) and "@context" in child
        for key, child in document.items()
        if key not in ("@id", "@value")
    )


# The prefixes CDIF core (1.0 and 1.1) wants a record's @context to bind.
_CORE_PREFIXES = ("schema", "dcterms", "dcat", "prov")


def _unbound_core_prefixes(document: Any) -> tuple[str, ...]:
    """The prefixes of :data:`_CORE_PREFIXES` that no top-level ``@context`` object of the
    document binds (the document's own, or its top-level nodes' for an array)."""
    nodes = document if isinstance(document, list) else [document]
    bound: set[str] = set()
    for node in nodes:
        if isinstance(node, dict):
            for context in _as_list(node.get("@context")):
                if isinstance(context, dict):
                    bound.update(key for key in context if isinstance(key, str))
    return tuple(prefix for prefix in _CORE_PREFIXES if prefix not in bound)


# --- step 3: find the datasets -----------------------------------------------------------


@dataclass
class _Candidate:
    node: dict[str, Any]
    record: dict[str, Any] | None
    how: str | None  # how the record was paired, for the notes
    item_list: dict[str, Any] | None = None  # the ItemList it is an element of, if any


def _first_text(node: dict[str, Any], prop: str) -> str | None:
    for value in _as_list(node.get(prop)):
        if isinstance(value, dict):
            text = value.get("@value", value.get("@id"))
            if isinstance(text, str) and text.strip():
                return text.strip()
    return None


def _list_provenance(item_list: dict[str, Any], element: Any, ordinal: int) -> dict[str, Any]:
    """The ItemList an element came from, for its record's provenance (see NormalisedRecord)."""
    provenance: dict[str, Any] = {}
    list_id = item_list.get("@id")
    if isinstance(list_id, str) and not is_junk_id(list_id):
        provenance["id"] = list_id
    for key, prop in (("name", _NAME), ("url", _URL)):
        text = _first_text(item_list, prop)
        if text is not None:
            provenance[key] = text
    position = ordinal
    if isinstance(element, dict):
        for value in _as_list(element.get(_POSITION)):
            declared = value.get("@value") if isinstance(value, dict) else None
            if isinstance(declared, str) and declared.strip().isdigit():
                declared = int(declared.strip())
            if isinstance(declared, int) and not isinstance(declared, bool):
                position = declared
                break
    provenance["position"] = position
    return provenance


def _top_nodes(expanded: list[Any]) -> list[dict[str, Any]]:
    tops: list[dict[str, Any]] = []
    for node in expanded:
        if not isinstance(node, dict):
            continue
        if "@graph" in node:
            tops.extend(n for n in _as_list(node["@graph"]) if isinstance(n, dict))
            if len(set(node) - {"@id", "@graph"}) == 0:
                continue
        tops.append(node)
    return tops


def _find_candidates(
    tops: list[dict[str, Any]], index: dict[str, dict[str, Any]]
) -> list[_Candidate]:
    order: list[str | int] = []
    found: dict[str | int, _Candidate] = {}

    def resolve(value: Any) -> Any:
        if isinstance(value, dict) and isinstance(value.get("@id"), str):
            return index.get(value["@id"], value)
        return value

    def key_of(node: dict[str, Any]) -> str | int:
        node_id = node.get("@id")
        return node_id if isinstance(node_id, str) else id(node)

    def add(
        node: dict[str, Any],
        record: dict[str, Any] | None,
        how: str | None,
        item_list: dict[str, Any] | None,
    ) -> None:
        key = key_of(node)
        if key not in found:
            order.append(key)
            found[key] = _Candidate(node=node, record=record, how=how, item_list=item_list)
            return
        if record is not None and found[key].record is None:
            found[key].record = record
            found[key].how = how
        if found[key].item_list is None:
            found[key].item_list = item_list

    def visit(raw: Any, depth: int, item_list: dict[str, Any] | None) -> None:
        node = resolve(raw)
        if not _is_node(node) or depth > 4:
            return
        if _is_dataset(node) and not _is_catalog_record(node):
            add(node, None, None, item_list)
        elif _ABOUT in node:
            for target in _as_list(node[_ABOUT]):
                resolved = resolve(target)
                if (
                    _is_node(resolved)
                    and _is_dataset(resolved)
                    and not _is_catalog_record(resolved)
                ):
                    how = (
                        "metadata record joined to the Dataset by @id"
                        if _is_reference(target)
                        else "metadata record at the root with the resource under 'about'"
                        " (older shape)"
                    )
                    add(resolved, node, how, item_list)
        for ordinal, element in enumerate(_as_list(node.get(_ITEM_LIST_ELEMENT)), start=1):
            element_node = resolve(element)
            provenance = _list_provenance(node, element_node, ordinal)
            if _is_node(element_node) and _ITEM in element_node and not _is_dataset(element_node):
                for item in _as_list(element_node[_ITEM]):
                    visit(item, depth + 1, provenance)
            else:
                visit(element, depth + 1, provenance)

    for top in tops:
        visit(top, 0, None)
    return [found[key] for key in order]


# --- step 4: pair with the record and fix identities -------------------------------------


def _choose_record(
    resource: dict[str, Any], index: dict[str, dict[str, Any]], notes: list[str]
) -> dict[str, Any] | None:
    resource_id = resource.get("@id")
    options: list[dict[str, Any]] = []
    for value in _as_list(resource.get(_SUBJECT_OF)):
        node = value
        if isinstance(value, dict) and isinstance(value.get("@id"), str):
            node = index.get(value["@id"], value)
        if isinstance(node, dict) and _is_node(node):
            options.append(node)

    def score(node: dict[str, Any]) -> int:
        if _is_catalog_record(node):
            return 3
        if any(
            isinstance(ref, dict) and ref.get("@id") == resource_id and resource_id is not None
            for ref in _as_list(node.get(_ABOUT))
        ):
            return 2
        if _DCT_CONFORMS_TO in node or any(
            _is_node(enc) and _DCT_CONFORMS_TO in enc for enc in _as_list(node.get(_ENCODING))
        ):
            return 1
        return 0

    ranked = sorted(options, key=score, reverse=True)
    if not ranked or score(ranked[0]) == 0:
        if options:
            notes.append("schema:subjectOf holds no metadata record; its values were dropped")
        return None
    if len(options) > 1:
        notes.append(f"schema:subjectOf had {len(options)} values; kept the metadata record")
    return ranked[0]


def _identifier_iri(resource: dict[str, Any]) -> str | None:
    for value in _as_list(resource.get(_IDENTIFIER)):
        if not isinstance(value, dict):
            continue
        candidates: list[Any] = []
        if "@value" in value:
            candidates.append(value["@value"])
        elif _is_reference(value):
            candidates.append(value["@id"])
        else:
            for key in (_URL, _VALUE):
                candidates.extend(
                    v.get("@value", v.get("@id"))
                    for v in _as_list(value.get(key))
                    if isinstance(v, dict)
                )
        for text in candidates:
            if isinstance(text, str) and _IRI_LIKE.match(text.strip()) and not is_junk_id(text):
                return text.strip()
    return None


def _canonical_profile(iri: str) -> str:
    match = _CDIF_PROFILE.match(iri.strip())
    if not match:
        return iri
    return f"https://w3id.org/cdif/{match['profile']}/{match['version']}"


def _fix_record(
    record: dict[str, Any], record_id: str, resource_id: str, notes: list[str]
) -> dict[str, Any]:
    # A shallow copy: the record node may be shared (by @id, or by two Datasets); only its
    # top-level entries are replaced here, never altered in place.
    record = dict(record)
    record["@id"] = record_id
    types = _types(record)
    if _DATASET not in types:
        if types:
            shown = ", ".join(t.replace(SCHEMA, "schema:") for t in types)
            notes.append(
                f"metadata record typed {shown} also typed schema:Dataset + dcat:CatalogRecord"
                " (CDIF core 1.0 shape)"
            )
        record["@type"] = [_DATASET, *types]
    record[_ABOUT] = [{"@id": resource_id}]
    record.pop(_SUBJECT_OF, None)
    if _DCT_CONFORMS_TO not in record:
        lifted: list[Any] = []
        for encoding in _as_list(record.get(_ENCODING)):
            if _is_node(encoding):
                lifted.extend(_as_list(encoding.get(_DCT_CONFORMS_TO)))
        lifted.extend(_as_list(record.get(_SCHEMA_VERSION)))
        if lifted:
            record[_DCT_CONFORMS_TO] = lifted
            notes.append("dcterms:conformsTo lifted from the record's encoding/schemaVersion")
    profiles: list[Any] = []
    for value in _as_list(record.get(_DCT_CONFORMS_TO)):
        iri = value.get("@id", value.get("@value")) if isinstance(value, dict) else None
        if isinstance(iri, str) and ("@value" in value or _is_reference(value)):
            canonical = _canonical_profile(iri)
            if canonical != iri.strip():
                notes.append(f"conformance URI {iri} written as {canonical}")
            profiles.append({"@id": canonical})
        else:
            profiles.append(value)
    if profiles:
        record[_DCT_CONFORMS_TO] = profiles
    if _declares_11(record):
        _catalog_record_as_iri(record, notes)
    elif not _is_catalog_record(record):
        record[_ADDITIONAL_TYPE] = [
            *_as_list(record.get(_ADDITIONAL_TYPE)),
            {"@value": _CATALOG_RECORD_LITERAL},
        ]
    return record


def _catalog_record_as_iri(record: dict[str, Any], notes: list[str]) -> None:
    """CDIF 1.1 wants ``{"@id": "dcat:CatalogRecord"}`` among the record's additionalType (1.0
    the string): the string form is written as the IRI reference, a missing one added."""
    kept: list[Any] = []
    found = False
    for value in _as_list(record.get(_ADDITIONAL_TYPE)):
        if isinstance(value, dict) and value.get("@value") == _CATALOG_RECORD_LITERAL:
            if not found:
                kept.append({"@id": _CATALOG_RECORD_IRI})
            notes.append(
                f"schema:additionalType {_CATALOG_RECORD_LITERAL!r} written as an IRI reference"
                " (CDIF 1.1)"
            )
            found = True
        elif isinstance(value, dict) and value.get("@id") == _CATALOG_RECORD_IRI:
            if not found:
                kept.append(value)
            found = True
        else:
            kept.append(value)
    if not found:
        kept.append({"@id": _CATALOG_RECORD_IRI})
        notes.append(
            f"schema:additionalType {_CATALOG_RECORD_LITERAL!r} added as an IRI reference"
            " (CDIF 1.1 metadata record)"
        )
    record[_ADDITIONAL_TYPE] = kept


def _declares_11(record: dict[str, Any], profile: str | None = None) -> bool:
    """Whether a metadata record declares a CDIF 1.1 profile (``profile``, or any), in its
    ``dcterms:conformsTo``."""
    for value in _as_list(record.get(_DCT_CONFORMS_TO)):
        iri = value.get("@id", value.get("@value")) if isinstance(value, dict) else None
        match = _CDIF_11_PROFILE.match(iri.strip()) if isinstance(iri, str) else None
        if match and (profile is None or match["profile"] == profile):
            return True
    return False


def _declares_discovery(record: dict[str, Any]) -> bool:
    """Whether a (fixed) metadata record declares the CDIF discovery profile."""
    for value in _as_list(record.get(_DCT_CONFORMS_TO)):
        iri = value.get("@id") if isinstance(value, dict) else None
        match = _CDIF_PROFILE.match(iri.strip()) if isinstance(iri, str) else None
        if match and match["profile"] == "discovery":
            return True
    return False


def _strip_fragment(url: str) -> str:
    return urldefrag(url)[0] if url else "urn:cdif-harvester:unknown-document"


# --- step 5: compact and shape -----------------------------------------------------------


_CHILD_WHERE = {
    "schema:distribution": "distribution",
    "schema:target": "entrypoint",
    "schema:variableMeasured": "variable",
    "schema:spatialCoverage": "place",
}


# Where shaping is: "root", "record", "distribution", "entrypoint", "variable", "place",
# "part", "agent" or "node"; with DISCOVERY appended for a record that declares the discovery
# profile, DATA_DESCRIPTION for one that declares the 1.1 data description profile, then V11
# for a record that declares any CDIF 1.1 profile (always last).
_DISCOVERY = "+discovery"
_DATA_DESCRIPTION = "+dd"
_V11 = "+v11"


def _wants_array(key: str, where: str) -> bool:
    place, _, flags = where.partition("+")
    discovery = "discovery" in flags
    data_description = _DATA_DESCRIPTION in where
    v11 = flags.endswith("v11")
    return (
        key in _ARRAY_KEYS_EVERYWHERE
        or (place == "root" and key in _ARRAY_KEYS_ROOT)
        or (place == "distribution" and key in _ARRAY_KEYS_DISTRIBUTION)
        or (place == "entrypoint" and key in _ARRAY_KEYS_ENTRY_POINT)
        or (discovery and key in _ARRAY_KEYS_DISCOVERY.get(place, ()))
        or (data_description and key in _ARRAY_KEYS_DATA_DESCRIPTION.get(place, ()))
        or (
            v11
            and (key in _ARRAY_KEYS_11_EVERYWHERE or key in _ARRAY_KEYS_11.get(place, ()))
            and key not in _NOT_ARRAY_KEYS_11.get(place, ())
        )
    )


def _child_where(key: str, where: str) -> str:
    place, plus, flags = where.partition("+")
    if key == "schema:subjectOf" and place == "root":
        return "record" + plus + flags
    child = _CHILD_WHERE.get(key)
    if child is None and flags.endswith("v11"):
        child = _CHILD_WHERE_11.get(key)
    return (child or "node") + plus + flags


def _context_url(where: str) -> str:
    """The compaction context of a place: the CDIF 1.1 one for a 1.1 record."""
    return (
        jsonld_loader.CDIF_11_CONTEXT_URL
        if where.endswith(_V11)
        else jsonld_loader.CDIF_CONTEXT_URL
    )


def _node_id(compacted: str, where: str) -> str:
    """An ``@id`` as written: in a 1.1 record, not with the ``cdif:`` prefix (the CDIF 1.1
    schemas want the profile IRIs, ``https://w3id.org/cdif/core/1.1``, in full)."""
    if compacted.startswith(_CDIF_PREFIX) and where.endswith(_V11):
        return _CDIF_NAMESPACE + compacted[len(_CDIF_PREFIX) :]
    return compacted


_CDIF_PREFIX = "cdif:"
_CDIF_NAMESPACE = "https://w3id.org/cdif/"


def _string_valued(key: str, where: str) -> bool:
    # CDIF 1.1 keeps additionalType IRI references as such ({"@id": "dcat:CatalogRecord"}).
    return key in _STRING_VALUED_KEYS and not (
        key == "schema:additionalType" and where.endswith(_V11)
    )


def _shape_value(key: str, value: Any, where: str) -> Any:
    if key == "schema:creator":
        agent = "agent" + where[len(where.partition("+")[0]) :]
        if isinstance(value, dict) and "@list" in value:
            value = {"@list": [_shape(v, agent) for v in _as_list(value["@list"])]}
            return value
        return {"@list": [_shape(v, agent) for v in _as_list(value)]}
    wants_array = _wants_array(key, where)
    child_where = _child_where(key, where)
    items = [_shape(v, child_where) for v in _as_list(value)]
    if _string_valued(key, where):
        items = [v["@id"] if _is_reference(v) else v for v in items]
    if key == "dcterms:conformsTo":
        items = [{"@id": v} if isinstance(v, str) else v for v in items]
    if wants_array or isinstance(value, list):
        return items
    return items[0] if items else value


def _shape(value: Any, where: str) -> Any:
    if isinstance(value, list):
        return [_shape(v, where) for v in value]
    if not isinstance(value, dict) or "@value" in value:
        return value
    if "@list" in value:
        return {"@list": [_shape(v, where) for v in _as_list(value["@list"])]}
    out: dict[str, Any] = {}
    for key in ("@context", "@id", "@type"):
        if key in value:
            out[key] = _as_list(value[key]) if key == "@type" else value[key]
    if isinstance(out.get("@id"), str):
        out["@id"] = _node_id(out["@id"], where)
    for key in sorted(k for k in value if k not in out):
        out[key] = value[key] if key.startswith("@") else _shape_value(key, value[key], where)
    return out


# The fast path compacts and shapes in one walk: _fast_shape_node(node, where) is
# _shape(<pyld's compaction of node with the CDIF context of where>, where), built with the
# compaction primitives of jsonld_fast (which raise jsonld_fast.Declined where they are not
# exact).


_PLAIN = frozenset({str, int, float, bool})


def _fast_shape_item(item: Any, where: str) -> Any:
    if not isinstance(item, dict):
        raise jsonld_fast.Declined("expanded value that is not an object")
    if "@value" in item:
        if len(item) == 1 and type(item["@value"]) in _PLAIN:
            return item["@value"]  # compact_value's common case, inlined
        return jsonld_fast.compact_value(item, _context_url(where))  # _shape keeps values
    if "@list" in item:
        members = item["@list"]
        if len(item) != 1 or not isinstance(members, list):
            raise jsonld_fast.Declined("@list with other entries")
        shaped = []
        for member in members:
            if not isinstance(member, dict) or "@list" in member:
                raise jsonld_fast.Declined("list of lists, or a bare list member")
            shaped.append(_fast_shape_item(member, where))
        return {"@list": shaped}
    if len(item) == 1 and "@id" in item:
        compacted = jsonld_fast.compact_iri(item["@id"], vocab=False, context=_context_url(where))
        return {"@id": _node_id(compacted, where)}
    return _fast_shape_node(item, where)


# (compacted name, kind, where its values go, array?) of an expanded property at a place
_Rule = tuple[str, str, str, bool]
_RULES: dict[str, dict[str, _Rule]] = {}  # where -> expanded property -> rule
_RULES_LIMIT = 4096


def _shape_rule(prop: str, where: str) -> _Rule:
    """How the fast path compacts and shapes the expanded property ``prop`` at ``where``
    (kept per place; a full memo is emptied and fills again)."""
    rules = _RULES.setdefault(where, {})
    rule = rules.get(prop)
    if rule is None:
        key = jsonld_fast.compact_iri(prop, vocab=True, context=_context_url(where))
        if key == "schema:creator":
            kind = "creator"
        elif key == "dcterms:conformsTo":
            kind = "conformsTo"
        elif _string_valued(key, where):
            kind = "string"
        else:
            kind = "plain"
        rule = (key, kind, _child_where(key, where), _wants_array(key, where))
        if len(rules) >= _RULES_LIMIT:
            rules.clear()
        rules[prop] = rule
    return rule


def _fast_shape_values(rule: _Rule, items: list[Any], where: str) -> Any:
    """_shape_value(key, <compacted items>, where); compaction gives one item bare."""
    _, kind, child_where, wants_array = rule
    if kind == "creator":
        agent = "agent" + where[len(where.partition("+")[0]) :]
        if len(items) == 1 and isinstance(items[0], dict) and "@list" in items[0]:
            return _fast_shape_item(items[0], agent)
        return {"@list": [_fast_shape_item(item, agent) for item in items]}
    if len(items) == 1 and kind == "plain":  # the common case: one literal
        item = items[0]
        if isinstance(item, dict) and len(item) == 1 and type(item.get("@value")) in _PLAIN:
            return [item["@value"]] if wants_array else item["@value"]
    shaped = [_fast_shape_item(item, child_where) for item in items]
    if kind == "string":
        shaped = [v["@id"] if _is_reference(v) else v for v in shaped]
    elif kind == "conformsTo":
        shaped = [{"@id": v} if isinstance(v, str) else v for v in shaped]
    if len(shaped) != 1 or wants_array:
        return shaped
    return shaped[0]


def _fast_shape_node(node: dict[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    context = _context_url(where)
    if "@id" in node:
        out["@id"] = _node_id(
            jsonld_fast.compact_iri(node["@id"], vocab=False, context=context), where
        )
    if "@type" in node:
        types = node["@type"]
        if not isinstance(types, list):
            raise jsonld_fast.Declined("@type that is not an array")
        out["@type"] = [jsonld_fast.compact_iri(t, vocab=True, context=context) for t in types]
    properties: list[tuple[_Rule, list[Any]]] = []
    for key, value in node.items():
        if key[:1] == "@":
            if key in ("@id", "@type"):
                continue
            raise jsonld_fast.Declined(f"{key} in a node")
        if not isinstance(value, list):
            raise jsonld_fast.Declined("property value that is not an array")
        properties.append((_shape_rule(key, where), value))
    properties.sort(key=_by_name)
    for rule, items in properties:
        if rule[1] == "plain" and len(items) == 1:  # the common case, one literal, inlined
            item = items[0]
            if type(item) is dict and len(item) == 1 and type(item.get("@value")) in _PLAIN:
                out[rule[0]] = [item["@value"]] if rule[3] else item["@value"]
                continue
        out[rule[0]] = _fast_shape_values(rule, items, where)
    return out


def _by_name(pair: tuple[_Rule, list[Any]]) -> str:
    return pair[0][0]


def _compact(
    node: dict[str, Any], fast_path: bool, discovery: bool, v11: bool, data_description: bool
) -> dict[str, Any]:
    where = (
        "root"
        + (_DISCOVERY if discovery else "")
        + (_DATA_DESCRIPTION if data_description and v11 else "")
        + (_V11 if v11 else "")
    )
    context_url = _context_url(where)
    if fast_path:
        try:
            shaped = _fast_shape_node(node, where)
        except jsonld_fast.Declined:
            pass
        else:
            return {"@context": jsonld_loader.cdif_context(context_url), **shaped}
    # Compacting with the context's URL (served by the offline loader, tagged static) lets
    # pyld reuse its processed form without hashing an inline context on every call; the
    # output's "@context" (the URL) is then replaced by the context itself.
    compacted = jsonld.compact(
        node,
        context_url,
        {"documentLoader": jsonld_loader.document_loader, "skipExpansion": True},
    )
    if not isinstance(compacted, dict):
        raise NormalisationError("JSON-LD compaction did not return an object")
    compacted["@context"] = jsonld_loader.cdif_context(context_url)
    shaped = _shape(compacted, where)
    if not isinstance(shaped, dict):  # pragma: no cover - _shape keeps dicts as dicts
        raise NormalisationError("shaping did not return an object")
    return shaped


_CONFUSED_WITH_PREFIX = "IRI confused with prefix"


def _undeclared_prefixes_read(
    resource: dict[str, Any], context_url: str, notes: list[str]
) -> dict[str, Any]:
    """The expanded ``resource`` with each IRI written with a prefix of our compaction context
    that the document never declared read as that prefix's IRI, and a note per prefix.

    ``"csvw:delimiter"`` with no ``csvw`` in the document's context expands to an absolute IRI
    of the scheme ``csvw``, which JSON-LD cannot compact with a context binding ``csvw`` (it
    would read back as another IRI); the publisher meant the CSVW term, which it now is.
    """
    bindings = jsonld_loader.cdif_context(context_url)
    used: dict[str, int] = {}

    def read(iri: Any) -> Any:
        if isinstance(iri, str):
            prefix, colon, rest = iri.partition(":")
            if colon and prefix in bindings:
                used[prefix] = used.get(prefix, 0) + 1
                return bindings[prefix] + rest
        return iri

    def walk(value: Any) -> Any:
        if isinstance(value, list):
            return [walk(item) for item in value]
        if not isinstance(value, dict):
            return value
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key == "@id":
                out[key] = read(item)
            elif key == "@type":
                out[key] = [read(t) for t in item] if isinstance(item, list) else read(item)
            elif key.startswith("@"):
                out[key] = walk(item)
            else:
                name = read(key)
                # the same property may also be written with its full IRI: one property
                out[name] = [*_as_list(out.get(name, [])), *_as_list(walk(item))]
        return out

    read_resource = walk(resource)
    for prefix in sorted(used):
        count = used[prefix]
        notes.append(
            f"prefix '{prefix}:' used without being declared: read as {bindings[prefix]}"
            f" ({count} IRI{'s' if count != 1 else ''})"
        )
    assert isinstance(read_resource, dict)
    return read_resource


# --- the entry point ---------------------------------------------------------------------


def _expand(
    prepared: Any, base: str, has_context: bool, fast_path: bool, contexts: JsonLdContexts
) -> jsonld_fast.Expansion:
    """Expanded JSON-LD with https schema.org IRIs as http, and whether any was mapped."""
    if fast_path:
        found = jsonld_fast.expand_schema_http(
            prepared, base=base, default_context=not has_context, contexts=contexts.processed
        )
        if found is not None:
            return found
    options = contexts.pyld_options(base=base)
    if not has_context:
        options["expandContext"] = {"@context": jsonld_loader.schema_org_context()}
    try:
        expanded = jsonld.expand(prepared, options)
    except jsonld.JsonLdError as exc:
        raise NormalisationError(
            f"JSON-LD expansion failed ({getattr(exc, 'code', None) or exc.type}): "
            f"{str(exc).splitlines()[0]}",
            reason="normalisation-failed",
        ) from exc
    mapped_nodes, mapped = _https_to_http(expanded)
    return jsonld_fast.Expansion(list(mapped_nodes), mapped, None)


def normalise(
    document: Any,
    *,
    document_url: str,
    fast_path: bool = True,
    contexts: JsonLdContexts | None = None,
    block: int | None = None,
) -> list[NormalisedRecord]:
    """Normalise a parsed JSON-LD document to CDIF 1.0 records, one per Dataset it holds.

    ``document`` is parsed JSON (object or array); ``document_url`` is where it was found
    (the base for relative ``@id`` and for fallback identities). See the module docstring for
    the accepted shapes, the target shape and the identity rules. ``fast_path=False`` makes
    pyld do all JSON-LD processing (the result is the same; see
    :mod:`cdif_harvester.domain.records.jsonld_fast`). ``contexts`` serves the remote contexts
    the document names (the shipped contexts alone when None); other remote contexts are
    dropped with a note.

    ``block`` is given when the document is one of several on a page that together describe
    several Datasets (its 1-based position there): each Dataset is then one of several, and the
    made-up ids that can only be positional name the block (``#record-<block>-<n>``). See
    docs/decisions/0061-json-ld-glitches-and-several-datasets.md.

    Raises :class:`NormalisationError` with reason ``no-dataset`` when no Dataset node is
    found, or ``normalisation-failed`` when the input is not JSON-LD that pyld can process.
    """
    if not isinstance(document, dict | list):
        raise NormalisationError(
            f"not a JSON-LD document: top-level JSON {type(document).__name__}",
            reason="no-dataset",
        )
    served = contexts if contexts is not None else shipped_contexts()
    try:
        return _normalise(document, document_url, fast_path, served, block, None)
    except NormalisationError as exc:
        if not isinstance(exc.__cause__, jsonld.JsonLdError):
            raise
        # A context term pyld refuses, or whose IRI compaction refuses: every such term is
        # dropped in one pass, and the document is read once more.
        return _normalise(document, document_url, fast_path, served, block, exc)


def _normalise(  # noqa: PLR0913, PLR0917 - private: normalise names each argument
    document: Any,
    document_url: str,
    fast_path: bool,
    served: JsonLdContexts,
    block: int | None,
    refused: NormalisationError | None,
) -> list[NormalisedRecord]:
    """normalise's work; with ``refused`` (what the first reading raised), the refused context
    terms are dropped first (``refused`` is raised again when there are none)."""
    doc_notes: list[str] = []
    base = _strip_fragment(document_url)
    expansion: jsonld_fast.Expansion | None = None
    if fast_path and refused is None:
        # The fast path reads the document as it is, and declines where preparing it would
        # change anything; the document is then prepared and expanded again.
        has_context = _declares_context(document)
        expansion = jsonld_fast.expand_schema_http(
            document,
            base=base,
            default_context=not has_context,
            raw=True,
            contexts=served.processed,
        )
    if expansion is None:
        prepared, has_context = _prepare(document, doc_notes, served)
        repaired = None
        if refused is not None:
            repaired = drop_refused_terms(
                prepared,
                base=base,
                default_context=not has_context,
                contexts=served,
                notes=doc_notes,
            )
        expansion = _expand(repaired or prepared, base, has_context, fast_path, served)
        if refused is not None:
            cleaned = drop_confused_iris(expansion.nodes, doc_notes)
            if repaired is None and cleaned is None:
                raise refused
            if cleaned is not None:
                expansion = jsonld_fast.Expansion(cleaned, expansion.mapped, None)
    if not has_context:
        doc_notes.append("no @context: read with the schema.org context")
    expanded = expansion.nodes
    if expansion.mapped:
        doc_notes.append("https://schema.org/ IRIs mapped to http://schema.org/")
    tops = _top_nodes(_as_list(expanded))
    index = _build_index(tops, expansion.identified)
    candidates = _find_candidates(tops, index)
    if not candidates:
        # What was left out of the reading may be why: contexts not loaded, terms dropped.
        left_out = [n for n in doc_notes if n.startswith("remote context")]
        if refused is not None:
            left_out = [*left_out, *(n for n in doc_notes if n not in left_out)]
        hint = f" ({'; '.join(left_out)})" if left_out else ""
        raise NormalisationError(
            f"no schema:Dataset node found in the document{hint}", reason="no-dataset"
        )
    several = len(candidates) > 1 or block is not None
    unbound = _unbound_core_prefixes(document)
    results: list[NormalisedRecord] = []
    for number, candidate in enumerate(candidates, start=1):
        notes = list(doc_notes)
        results.append(
            _normalise_one(
                candidate,
                index=index,
                base=base,
                position=f"{block}-{number}" if block is not None else str(number),
                several=several,
                notes=notes,
                fast_path=fast_path,
                unbound=unbound,
            )
        )
    return results


def _shape_record(
    resource: dict[str, Any],
    fixed: dict[str, Any],
    *,
    fast_path: bool,
    unbound: tuple[str, ...],
    notes: list[str],
) -> dict[str, Any]:
    """The resource compacted to the CDIF shapes of the version its record claims.

    Raises NormalisationError when JSON-LD compaction fails even after undeclared prefixes
    were read as the CDIF context's namespaces.
    """
    discovery, v11 = _declares_discovery(fixed), _declares_11(fixed)
    data_description = _declares_11(fixed, "data_description")
    if v11 and unbound:
        # The record is written with our context, which binds what core wants; name what the
        # document's own context left out (CDIF core 1.1 checks the record's @context).
        notes.append(
            f"@context: {', '.join(unbound)} bound by the CDIF 1.1 context"
            " (the document's context did not bind "
            f"{'it' if len(unbound) == 1 else 'them'}; CDIF core wants schema, dcterms, dcat"
            " and prov)"
        )
    try:
        try:
            return _compact(resource, fast_path, discovery, v11, data_description)
        except jsonld.JsonLdError as exc:
            if getattr(exc, "code", None) != _CONFUSED_WITH_PREFIX:
                raise
            context_url = (
                jsonld_loader.CDIF_11_CONTEXT_URL if v11 else jsonld_loader.CDIF_CONTEXT_URL
            )
            resource = _undeclared_prefixes_read(resource, context_url, notes)
            return _compact(resource, fast_path, discovery, v11, data_description)
    except jsonld.JsonLdError as exc:
        raise NormalisationError(
            f"JSON-LD compaction failed: {str(exc).splitlines()[0]}",
            reason="normalisation-failed",
        ) from exc


def _normalise_one(
    candidate: _Candidate,
    *,
    index: dict[str, dict[str, Any]],
    base: str,
    position: str,
    several: bool,
    notes: list[str],
    fast_path: bool,
    unbound: tuple[str, ...] = (),
) -> NormalisedRecord:
    # A shallow copy: the node may also be written inside another Dataset, which must keep it
    # as written; only @id and subjectOf are replaced.
    resource = dict(candidate.node)
    fallback = False
    resource_id = resource.get("@id")
    if is_junk_id(resource_id):
        if isinstance(resource_id, str):
            notes.append(f"resource @id {resource_id!r} is not a usable identifier")
        identifier = _identifier_iri(resource)
        if identifier is not None:
            resource_id = identifier
            notes.append(f"resource @id taken from schema:identifier: {identifier}")
        else:
            resource_id = f"{base}#resource-{position}"
            fallback = True
            notes.append(f"resource has no usable @id or identifier; fallback {resource_id}")
    assert isinstance(resource_id, str)
    resource["@id"] = resource_id
    resource_fallback = fallback

    if candidate.record is not None:
        record: dict[str, Any] | None = candidate.record
        if candidate.how:
            notes.append(candidate.how)
    else:
        record = _choose_record(candidate.node, index, notes)
    record_fallback_id = _record_fallback_id(
        base, resource_id, resource_fallback, position, several
    )
    if record is None:
        record = {}
        notes.append(f"no metadata record found; created an empty one, {record_fallback_id}")
    record_id = record.get("@id")
    if is_junk_id(record_id):
        if record:
            notes.append(f"metadata record has no usable @id; fallback {record_fallback_id}")
        record_id = record_fallback_id
        fallback = True
    assert isinstance(record_id, str)
    fixed = _fix_record(record, record_id, resource_id, notes)
    resource[_SUBJECT_OF] = [fixed]
    shaped = _shape_record(resource, fixed, fast_path=fast_path, unbound=unbound, notes=notes)
    return NormalisedRecord(
        record=shaped,
        record_id=record_id,
        resource_id=resource_id,
        identity_fallback=fallback,
        notes=tuple(notes),
        item_list=candidate.item_list,
        resource_fallback=resource_fallback,
    )


# What a fragment may hold as it is (RFC 3986 pchar, "/", "?"), and "%": a resource id already
# percent-encoded keeps its escapes. "#" and whatever else an IRI's fragment cannot hold is
# percent-encoded (UTF-8).
_FRAGMENT_SAFE = "!$&'()*+,;=:@/?-._~%"


def _record_fallback_id(
    base: str, resource_id: str, resource_fallback: bool, position: str, several: bool
) -> str:
    """The made-up id of a Dataset's metadata record (when the publisher gave none).

    One Dataset: ``<document>#record``. One of several: ``<document>#record:<resource id>``
    when the resource is identified (stable, whatever the order of the Datasets), else
    ``<document>#record-<position>``.
    """
    if not several:
        return f"{base}#record"
    if resource_fallback:
        return f"{base}#record-{position}"
    return f"{base}#record:{quote(resource_id, safe=_FRAGMENT_SAFE)}"
