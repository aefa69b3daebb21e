"""Optional SHACL validation of a normalised record, per CDIF profile and version.

:func:`shacl_issues` runs, offline, our shapes for one profile and version (core 1.0 unless
told otherwise; :func:`shapes_file` names the shapes we hold: core 1.0, and core, discovery,
data_description, data_structure, manifest, provenance and codelist 1.1) and returns
:class:`~cdif_harvester.domain.records.validation.ValidationIssue` values pointing into the
record. Core 1.0's shapes check what JSON Schema cannot (identifiers are IRIs and distinct,
``about`` points back, agents given by ``@id`` are described, temporal coverage in order); the
1.1 shapes hold the violations of the CDIF 1.1 building blocks' rules, in our words. Remote
contexts are served by the contexts given (the shipped ones by default). Needs the ``shacl``
extra (pyshacl); without it raises :class:`ShaclUnavailable`.

See docs/decisions/0033-shacl-for-what-json-schema-cannot-say.md,
docs/decisions/0034-running-shacl-offline.md and docs/decisions/0062-shacl-per-profile.md.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from functools import cache, lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from pyld import jsonld

from cdif_harvester.domain.records import jsonld_loader
from cdif_harvester.domain.records.contexts import JsonLdContexts, shipped_contexts
from cdif_harvester.domain.records.validation import PROFILES, ValidationIssue
from cdif_harvester.errors import PermanentError

if TYPE_CHECKING:
    from rdflib import Graph
    from rdflib.term import Node

__all__ = [
    "SHAPES_FILE",
    "ShaclUnavailable",
    "check_shacl_available",
    "shacl_issues",
    "shapes_file",
]

SHAPES_FILE = "cdif-core-1.0.shapes.ttl"
# The profiles and versions we hold shapes for (package data under shapes/): every 1.1
# profile but the concept scheme, for which the building blocks publish no rules.
_SHAPES_FILES = {
    ("core", "1.0"): SHAPES_FILE,
    **{
        (profile, "1.1"): f"cdif-{profile}-1.1.shapes.ttl"
        for profile in PROFILES
        if profile != "conceptscheme"
    },
}

_CDIFH = "urn:cdif-harvester:shapes:"
_RECORD_ROOT = _CDIFH + "RecordRoot"
_METADATA_RECORD = _CDIFH + "MetadataRecord"
_POINTER = _CDIFH + "pointer"
_RELATIVE_BASE = "cdif-harvester-relative:/"
_SH = "http://www.w3.org/ns/shacl#"
# The harvester is installed from a checkout or a wheel, not from a registry: name pyshacl itself.
_INSTALL_HINT = (
    "install pyshacl, the 'shacl' extra, into the harvester's environment: "
    "pip install 'pyshacl>=0.26' (or pip install '.[shacl]' in a checkout)"
)


class ShaclUnavailable(PermanentError):
    """SHACL validation was asked for but pyshacl is not installed (the ``shacl`` extra)."""

    reason = "shacl-unavailable"


def _pyshacl_validate() -> Callable[..., Any]:
    """pyshacl's ``validate``, imported on first use; raises :class:`ShaclUnavailable`."""
    try:
        from pyshacl import validate  # noqa: PLC0415 - optional dependency, imported lazily
    except ImportError as exc:
        raise ShaclUnavailable(
            f"SHACL validation needs pyshacl, which is not installed: {_INSTALL_HINT}"
        ) from exc
    return validate


def check_shacl_available() -> None:
    """Raise :class:`ShaclUnavailable` unless pyshacl can be imported.

    For callers that enable SHACL validation and want to fail at start-up rather than on the
    first record.
    """
    _pyshacl_validate()


def shapes_file(profile: str, version: str) -> str | None:
    """The name of our shapes file for a CDIF profile at a version, or None when we hold none."""
    return _SHAPES_FILES.get((profile, version))


@cache
def _shapes_graph(name: str = SHAPES_FILE) -> Graph:
    """One of our shapes files (package data), parsed once per process."""
    from rdflib import Graph  # noqa: PLC0415 - rdflib comes with the optional pyshacl

    text = resources.files("cdif_harvester").joinpath("shapes").joinpath(name)
    return Graph().parse(data=text.read_text(encoding="utf-8"), format="turtle")


@cache
def _data_graph_class() -> type[Graph]:
    """An rdflib ``Graph`` whose SPARQL query texts are parsed once per process.

    pyshacl passes the text of a SHACL-SPARQL constraint to ``Graph.query`` for every focus
    node of every record, and rdflib parses it each time (tens of milliseconds, more than the
    whole rest of a validation). The parsed query does not depend on the graph, so it is kept.
    """
    from rdflib import Graph  # noqa: PLC0415 - rdflib comes with the optional pyshacl
    from rdflib.plugins.sparql import prepareQuery  # noqa: PLC0415

    prepared = lru_cache(maxsize=64)(prepareQuery)

    class _DataGraph(Graph):
        def query(self, query_object: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(query_object, str):
                query_object = prepared(query_object)
            return super().query(query_object, *args, **kwargs)

    return _DataGraph


# --- the record, prepared for RDF ---------------------------------------------------------


def _pointer_step(key: str | int) -> str:
    return "/" + str(key).replace("~", "~0").replace("/", "~1")


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _is_node_object(value: Mapping[str, Any]) -> bool:
    """A JSON-LD node object that describes something (not a value, list or bare reference)."""
    keywords = {"@value", "@list", "@set", "@graph"}
    return not keywords & value.keys() and bool(value.keys() - {"@id", "@context"})


def _tagged(value: Any, pointer: str) -> Any:
    """A copy of ``value`` whose node objects carry their JSON Pointer (``cdifh:pointer``)."""
    if isinstance(value, list):
        return [_tagged(item, pointer + _pointer_step(i)) for i, item in enumerate(value)]
    if not isinstance(value, Mapping):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key == "@list" and isinstance(item, list):
            out[key] = [
                _tagged(element, pointer + "/@list" + _pointer_step(i))
                for i, element in enumerate(item)
            ]
        elif key.startswith("@"):
            out[key] = copy.deepcopy(item)
        else:
            out[key] = _tagged(item, pointer + _pointer_step(key))
    if _is_node_object(value):
        out[_POINTER] = pointer
    return out


def _mark(node: dict[str, Any], marker: str) -> None:
    node["@type"] = [*_as_list(node.get("@type")), marker]


def _prepared(record: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The record made ready for RDF, and the JSON Pointer of each node given a marker class."""
    prepared = _tagged(record, "")
    marked = {"": _RECORD_ROOT}
    _mark(prepared, _RECORD_ROOT)
    prepared.setdefault(_POINTER, "")
    subject = prepared.get("schema:subjectOf")
    for i, node in enumerate(subject if isinstance(subject, list) else [subject]):
        if isinstance(node, dict):
            _mark(node, _METADATA_RECORD)
            where = "/schema:subjectOf" + (_pointer_step(i) if isinstance(subject, list) else "")
            node.setdefault(_POINTER, where)
            marked[where] = _METADATA_RECORD
    return prepared, marked


# --- reading the results ------------------------------------------------------------------


class _Locator:
    """Finds where, in the record's JSON, an RDF node or value of a SHACL result was written."""

    def __init__(self, record: Mapping[str, Any], data: Graph, marked: dict[str, str]) -> None:
        from rdflib import URIRef  # noqa: PLC0415 - rdflib comes with the optional pyshacl

        self._record = record
        self._data = data
        self._marked = marked
        self._pointer_predicate = URIRef(_POINTER)
        context = record.get("@context")
        source = context if isinstance(context, Mapping) else jsonld_loader.cdif_context()
        self._prefixes = {
            prefix: iri
            for prefix, iri in source.items()
            if isinstance(iri, str) and not prefix.startswith("@")
        }

    def json_at(self, pointer: str) -> Any:
        """The JSON value at an RFC 6901 pointer, or None."""
        value: Any = self._record
        for raw in pointer.split("/")[1:]:
            step = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(value, Mapping):
                value = value.get(step)
            elif isinstance(value, list) and step.isdigit() and int(step) < len(value):
                value = value[int(step)]
            else:
                return None
        return value

    def pointers_of(self, node: Node | None) -> list[str]:
        """The JSON Pointers of the places that describe ``node``, shallowest first."""
        if node is None:
            return []
        found = [str(p) for p in self._data.objects(node, self._pointer_predicate)]
        return sorted(found, key=lambda p: (p.count("/"), p))

    def node_pointer(self, node: Node | None, target_class: str | None) -> str:
        """Where the focus node is written; a node given a marker class is found by it."""
        pointers = self.pointers_of(node)
        preferred = [p for p in pointers if target_class and self._marked.get(p) == target_class]
        return (preferred or pointers or [""])[0]

    def key_of(self, predicate: str) -> str:
        """The record's JSON key for a property IRI (``http://schema.org/about`` ->
        ``schema:about``)."""
        best = ""
        for prefix, iri in self._prefixes.items():
            if predicate.startswith(iri) and len(iri) > len(self._prefixes.get(best, "")):
                best = prefix
        return f"{best}:{predicate[len(self._prefixes[best]) :]}" if best else predicate

    def expand(self, iri: str) -> str:
        """A JSON ``@id`` as the IRI it stands for when it is a CURIE of the record's context."""
        prefix, colon, rest = iri.partition(":")
        if colon and prefix in self._prefixes and not rest.startswith("//"):
            return self._prefixes[prefix] + rest
        return iri

    def value_pointer(self, focus_pointer: str, key: str, value: Node | None) -> str:
        """Where ``value`` is written under ``key`` of the node at ``focus_pointer``."""
        from rdflib import Literal  # noqa: PLC0415 - rdflib comes with the optional pyshacl

        where = focus_pointer + _pointer_step(key)
        container = self.json_at(where)
        if isinstance(container, Mapping) and isinstance(container.get("@list"), list):
            items, where = container["@list"], where + "/@list"
        elif isinstance(container, list):
            items = container
        else:
            return where
        described_at = set(self.pointers_of(value))
        for i, item in enumerate(items):
            here = where + _pointer_step(i)
            if here in described_at:
                return here
            if isinstance(value, Literal):
                written = item.get("@value") if isinstance(item, Mapping) else item
                if written is not None and str(written) == str(value):
                    return here
            elif (
                isinstance(item, Mapping)
                and isinstance(item.get("@id"), str)
                and str(value) in (item["@id"], self.expand(item["@id"]))
            ):
                return here
        return where

    def show(self, value: Node | None, pointer: str) -> str:
        """A value as the publisher wrote it: the ``@id`` at ``pointer`` if there is one."""
        from rdflib import BNode  # noqa: PLC0415 - rdflib comes with the optional pyshacl

        written = self.json_at(pointer)
        if isinstance(written, Mapping) and isinstance(written.get("@id"), str):
            return str(written["@id"])
        if isinstance(value, BNode) or value is None:
            return "an unnamed node"
        return str(value).removeprefix(_RELATIVE_BASE)


def _first_predicate(report: Graph, path: Node | None) -> str | None:
    """The first property of a result path (a property, or the first step of a sequence)."""
    from rdflib import RDF, URIRef  # noqa: PLC0415

    if isinstance(path, URIRef):
        return str(path)
    first = report.value(path, RDF.first) if path is not None else None
    return str(first) if isinstance(first, URIRef) else None


def _target_class(shapes: Graph, shape: Node | None) -> str | None:
    """The ``sh:targetClass`` of a shape, or of the node shape a property shape belongs to."""
    from rdflib import URIRef  # noqa: PLC0415 - rdflib comes with the optional pyshacl

    target_class, has_property = URIRef(_SH + "targetClass"), URIRef(_SH + "property")
    for owner in (shape, *(shapes.subjects(has_property, shape) if shape is not None else ())):
        target = shapes.value(owner, target_class) if owner is not None else None
        if target is not None:
            return str(target)
    return None


def _constraint_name(component: Node | None) -> str:
    name = str(component or "").removeprefix(_SH).removesuffix("ConstraintComponent")
    if name.isupper():  # SPARQL
        return name.lower()
    return name[:1].lower() + name[1:] if name else "constraint"


def _issues(
    report: Graph,
    data: Graph,
    record: Mapping[str, Any],
    marked: dict[str, str],
    shapes: Graph,
) -> list[ValidationIssue]:
    from rdflib import URIRef  # noqa: PLC0415 - rdflib comes with the optional pyshacl

    def sh(name: str) -> URIRef:
        return URIRef(_SH + name)

    locator = _Locator(record, data, marked)
    issues: set[ValidationIssue] = set()
    for result in report.objects(None, sh("result")):
        if report.value(result, sh("resultSeverity")) != sh("Violation"):
            continue
        focus = report.value(result, sh("focusNode"))
        value = report.value(result, sh("value"))
        shape = report.value(result, sh("sourceShape"))
        focus_pointer = locator.node_pointer(focus, _target_class(shapes, shape))
        predicate = _first_predicate(report, report.value(result, sh("resultPath")))
        if predicate is None:
            # a node-level shape judged the focus node itself: report its @id as written
            node = locator.json_at(focus_pointer)
            written_id = node.get("@id") if isinstance(node, Mapping) else None
            pointer = focus_pointer + "/@id"
            shown = json.dumps(written_id) if isinstance(written_id, str) else "missing"
        else:
            pointer = locator.value_pointer(focus_pointer, locator.key_of(predicate), value)
            shown = locator.show(value, pointer)
        message = str(report.value(result, sh("resultMessage")) or "")
        message = message.replace("{?value}", shown).replace("{$this}", shown)
        keyword = "shacl:" + _constraint_name(report.value(result, sh("sourceConstraintComponent")))
        issues.add(ValidationIssue(pointer, message, keyword))
    return sorted(issues, key=lambda issue: (issue.pointer, issue.keyword, issue.message))


# --- the entry point ----------------------------------------------------------------------


def shacl_issues(
    record: Mapping[str, Any],
    *,
    profile: str = "core",
    version: str = "1.0",
    contexts: JsonLdContexts | None = None,
) -> list[ValidationIssue]:
    """Check a normalised CDIF record against our SHACL shapes of one profile and version.

    ``profile`` and ``version`` name the shapes (core 1.0 unless told otherwise); a profile and
    version we hold no shapes for (:func:`shapes_file` is None) gives no issues.

    Returns one :class:`~cdif_harvester.domain.records.validation.ValidationIssue` per violation
    (JSON Pointer into the record, a message saying what to change, keyword
    ``shacl:<constraint>``), sorted by pointer; an empty list when the record conforms. A
    record that cannot be read as JSON-LD gives one issue with keyword ``shacl:jsonld`` (the
    shapes were not run). The module docstring lists the checks.

    Cost, CPU per record measured on the 19 normalised reference corpus examples: p50 16 ms,
    mean 18 ms (1-11 KB records; 85 ms for one of 46 KB), about a third each for pyld's
    ``to_rdf``, rdflib's parsing and pyshacl; plus about 0.2 s once per process (shapes parsed,
    SPARQL prepared).

    Raises :class:`ShaclUnavailable` when pyshacl (the ``shacl`` extra) is not installed.
    """
    validate = _pyshacl_validate()
    name = shapes_file(profile, version)
    if name is None:
        return []
    if not isinstance(record, Mapping):
        return [ValidationIssue("", "the record must be a JSON object", "shacl:jsonld")]
    prepared, marked = _prepared(record)
    served = contexts if contexts is not None else shipped_contexts()
    options = served.pyld_options(base=_RELATIVE_BASE)
    try:
        dataset = jsonld.to_rdf(prepared, options)
    except jsonld.JsonLdError as exc:
        reason = str(exc).splitlines()[0]
        return [
            ValidationIssue(
                "",
                f"the record cannot be read as JSON-LD, so the SHACL checks were not run: {reason}",
                "shacl:jsonld",
            )
        ]
    # The default graph only (a CDIF record has no named graphs): as N-Quads without graph
    # names, that is N-Triples, which rdflib parses without its deprecated dataset plumbing.
    triples = jsonld.JsonLdProcessor.to_nquads({"@default": dataset.get("@default", [])})
    data = _data_graph_class()().parse(data=triples, format="nt")
    shapes = _shapes_graph(name)
    # advanced (SHACL advanced features): the 1.1 shapes pick their targets with SPARQL;
    # core 1.0's need none, and keep the plain mode, where their queries are parsed once
    advanced = name != SHAPES_FILE
    conforms, report, _ = validate(data, shacl_graph=shapes, inference="none", advanced=advanced)
    if conforms:
        return []
    return _issues(report, data, record, marked, shapes)
