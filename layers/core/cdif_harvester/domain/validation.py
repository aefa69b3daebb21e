"""Validate a normalised record against our CDIF core 1.0 JSON Schema.

The schema (``cdif_harvester/schemas/cdif-core-1.0.schema.json``, JSON Schema 2020-12) is our
own, written from "CDIF core 1.0 schema.org implementation" and discoverability Appendix 1; the
unit tests check that its verdict equals the official ``resolvedSchema.json`` verdict on the
reference corpus and on mutated variants. It is loaded and compiled once per process (a lazily
built :class:`jsonschema.Draft202012Validator`).

Decisions:

* **CDIF 1.1.** The official 1.0 schema requires ``https://w3id.org/cdif/core/1.0`` in
  ``schema:subjectOf/dcterms:conformsTo``. The specification is moving to 1.1 and a harvester
  must accept both, so our schema accepts core ``1.0`` *or* ``1.1`` (with or without trailing
  slash) and the report records which was declared. This is the one intended difference from
  the official verdict (the agreement test asserts it explicitly). A record declaring only a
  discovery profile (no core URI) is invalid, as in the official schema.
* **Recorded conformance** (:attr:`ValidationReport.conformance`): the most specific known CDIF
  profile the record declares, canonical form without trailing slash: discovery before core,
  1.1 before 1.0; ``None`` when none is declared. It is recorded whether or not the record is
  valid.
* **Formats** are not asserted (``format: uri``/``date`` are annotations, as for the official
  schema without a format checker), so verdicts agree.
* **Pointers** are RFC 6901 JSON Pointers into the record. For a missing member the pointer
  names where the member belongs (e.g. ``/schema:subjectOf/dcterms:conformsTo``).
* **Messages** name the CDIF property and content item with its cardinality, e.g.
  "schema:license or schema:conditionsOfAccess is required (Rights, 1..*)".
* **Warnings** list recommended (or "required, but nilable") items that are missing:
  description, creator, provider, keywords, and the record's sdDatePublished and maintainer.
  They never make a record invalid.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

__all__ = [
    "KNOWN_CONFORMANCE",
    "ValidationIssue",
    "ValidationReport",
    "declared_conformance",
    "validate_record",
]

KNOWN_CONFORMANCE = (
    "https://w3id.org/cdif/discovery/1.1",
    "https://w3id.org/cdif/discovery/1.0",
    "https://w3id.org/cdif/core/1.1",
    "https://w3id.org/cdif/core/1.0",
)
_REQUIRED_MESSAGE = re.compile(r"^'(.+)' is a required property$")
_PROFILE_IRI = re.compile(r"^https?://w3id\.org/cdif/(core|discovery)/(1\.[01])/?$")

# CDIF content items (core 1.0 implementation): property -> (content item, cardinality).
_ITEMS: dict[str, tuple[str, str]] = {
    "@context": ("JSON-LD context binding schema, dcterms, dcat, prov", "1"),
    "@id": ("Resource identifier", "1"),
    "@type": ("Resource type", "1"),
    "schema:identifier": ("Resource identifier", "1"),
    "schema:name": ("Title", "1"),
    "schema:url": ("Distribution", "1"),
    "schema:distribution": ("Distribution", "1"),
    "schema:license": ("Rights", "1..*"),
    "schema:conditionsOfAccess": ("Rights", "1..*"),
    "schema:additionalType": ("Additional type", "0..*"),
    "schema:description": ("Description", "0..1"),
    "schema:creator": ("Originators", "0..*"),
    "schema:datePublished": ("Publication Date", "0..1"),
    "schema:dateModified": ("Modification Date", "1"),
    "schema:sameAs": ("Other identifiers", "0..*"),
    "schema:version": ("Version", "0..1"),
    "schema:inLanguage": ("Language", "0..1"),
    "schema:keywords": ("Keyword", "0..*"),
    "schema:provider": ("Distribution Agent", "0..*"),
    "schema:publisher": ("Publisher", "0..1"),
    "schema:contributor": ("Related agents", "0..*"),
    "schema:relatedLink": ("Related resources", "0..*"),
    "schema:funding": ("Funding", "0..*"),
    "schema:publishingPrinciples": ("Policies", "0..*"),
    "prov:wasGeneratedBy": ("Provenance (instruments, software)", "0..*"),
    "prov:wasDerivedFrom": ("Provenance (input datasets)", "0..*"),
    "schema:subjectOf": ("Metadata identifier: the metadata record node", "1"),
}
_RECORD_ITEMS: dict[str, tuple[str, str]] = {
    "@id": ("Metadata identifier", "1"),
    "@type": ("Metadata record type, must include schema:Dataset", "1"),
    "schema:additionalType": ("Metadata record type, must include dcat:CatalogRecord", "1"),
    "schema:about": ("Metadata record subject, the resource @id", "1"),
    "dcterms:conformsTo": ("Metadata profile identifier", "1..*"),
    "schema:sdDatePublished": ("Metadata date", "0..1"),
    "schema:maintainer": ("Metadata contact", "0..1"),
    "schema:includedInDataCatalog": ("Metadata catalog", "0..1"),
}
_RECOMMENDED: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("schema:description",),
        "schema:description is recommended (Description, required but nilable)",
    ),
    (("schema:creator",), "schema:creator is recommended (Originators, required but nilable)"),
    (
        ("schema:provider",),
        "schema:provider is recommended (Distribution Agent, required but nilable)",
    ),
    (("schema:keywords",), "schema:keywords is recommended (Keyword, 0..*)"),
    (
        ("schema:subjectOf", "schema:sdDatePublished"),
        "schema:subjectOf/schema:sdDatePublished is recommended (Metadata date, 0..1)",
    ),
    (
        ("schema:subjectOf", "schema:maintainer"),
        "schema:subjectOf/schema:maintainer is recommended (Metadata contact, 0..1)",
    ),
)


@dataclass(frozen=True)
class ValidationIssue:
    """One problem found in a record: where (JSON Pointer), what, and the schema keyword."""

    pointer: str
    message: str
    keyword: str

    def to_dict(self) -> dict[str, str]:
        """The issue as a JSON-ready dict."""
        return {"pointer": self.pointer, "message": self.message, "keyword": self.keyword}


@dataclass(frozen=True)
class ValidationReport:
    """The verdict on one record: valid or not, declared conformance, errors and warnings."""

    valid: bool
    conformance: str | None
    errors: tuple[ValidationIssue, ...]
    warnings: tuple[ValidationIssue, ...]

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready dict: valid, conformance, errors, warnings."""
        return {
            "valid": self.valid,
            "conformance": self.conformance,
            "errors": [issue.to_dict() for issue in self.errors],
            "warnings": [issue.to_dict() for issue in self.warnings],
        }


@cache
def _schema() -> dict[str, Any]:
    entry = (
        resources.files("cdif_harvester").joinpath("schemas").joinpath("cdif-core-1.0.schema.json")
    )
    data = json.loads(entry.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError("cdif-core-1.0.schema.json is not a JSON object")
    return data


@cache
def _validator() -> Draft202012Validator:
    schema = _schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def _pointer(parts: Iterable[Any]) -> str:
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in parts)


def _item_for(where: tuple[Any, ...]) -> str:
    """The CDIF content item and cardinality for a location, as " (Title, 1)" or ""."""
    if not where:
        return ""
    if where[0] == "schema:subjectOf" and len(where) >= 2:
        item = _RECORD_ITEMS.get(str(where[1]))
    else:
        item = _ITEMS.get(str(where[0]))
    return f" ({item[0]}, {item[1]})" if item else ""


def _label(path: tuple[Any, ...]) -> str:
    return "/".join(str(p) for p in path) if path else "the record"


def _required_alternatives(schema: Any) -> list[str] | None:
    """For an ``anyOf`` of single ``required`` branches, the alternative member names."""
    branches = schema.get("anyOf") if isinstance(schema, dict) else None
    if not isinstance(branches, list):
        return None
    names: list[str] = []
    for branch in branches:
        required = branch.get("required") if isinstance(branch, dict) else None
        if not isinstance(required, list) or len(required) != 1 or len(branch) != 1:
            return None
        names.append(str(required[0]))
    return names


def _closest(error: ValidationError) -> ValidationError | None:
    """The most telling error of a failed ``anyOf``/``oneOf``.

    Prefers the branch whose ``@type`` matched (so a Person missing its name is reported as
    such, not as "not an @id reference"), then the branch with the fewest errors.
    """
    groups: dict[Any, list[ValidationError]] = {}
    for sub in error.context or ():
        groups.setdefault(sub.schema_path[0] if sub.schema_path else None, []).append(sub)
    if not groups:
        return None

    def type_failed(errors: list[ValidationError]) -> bool:
        for sub in errors:
            required = sub.validator_value if sub.validator == "required" else None
            if "@type" in sub.relative_path or (
                isinstance(required, list) and ("@type" in required or "@id" in required)
            ):
                return True
        return False

    ranked = sorted(groups.values(), key=lambda errs: (type_failed(errs), len(errs)))
    closest: ValidationError | None = best_match(ranked[0])
    return closest


def _describe(error: ValidationError, where: tuple[Any, ...]) -> str:
    alternatives = _required_alternatives(error.schema)
    if error.validator == "anyOf" and alternatives:
        return f"{_label(where)} needs one of {', '.join(alternatives)}{_item_for(where)}"
    return f"{_label(where)}: {error.message}{_item_for(where)}"


def _issue(error: ValidationError) -> ValidationIssue:
    path = tuple(error.absolute_path)
    keyword = str(error.validator)
    title = error.schema.get("title") if isinstance(error.schema, dict) else None
    if keyword == "required" and isinstance(error.validator_value, list):
        # jsonschema reports each missing member as its own error: "'x' is a required property"
        named = _REQUIRED_MESSAGE.match(error.message)
        instance = error.instance if isinstance(error.instance, dict) else {}
        missing = (
            named.group(1)
            if named
            else next(
                (str(p) for p in error.validator_value if p not in instance),
                str(error.validator_value[0]),
            )
        )
        where = (*path, missing)
        return ValidationIssue(
            _pointer(where), f"{_label(where)} is required{_item_for(where)}", keyword
        )
    if keyword == "anyOf" and title == "Rights":
        return ValidationIssue(
            _pointer((*path, "schema:license")),
            "schema:license or schema:conditionsOfAccess is required (Rights, 1..*)",
            keyword,
        )
    if keyword == "anyOf" and title == "Distribution":
        return ValidationIssue(
            _pointer((*path, "schema:url")),
            "schema:url or schema:distribution is required (Distribution, 1)",
            keyword,
        )
    if keyword == "contains":
        if path[-2:] == ("schema:subjectOf", "dcterms:conformsTo"):
            message = (
                "schema:subjectOf/dcterms:conformsTo must include https://w3id.org/cdif/core/1.0 "
                "(or core/1.1) (Metadata profile identifier, 1..*)"
            )
        else:
            wanted = error.validator_value
            const = wanted.get("const") if isinstance(wanted, dict) else None
            what = f"include {const}" if const else "include an allowed value"
            message = f"{_label(path)} must {what}{_item_for(path)}"
        return ValidationIssue(_pointer(path), message, keyword)
    if keyword in ("anyOf", "oneOf") and _required_alternatives(error.schema) is None:
        closest = _closest(error)
        if closest is not None:
            inner = tuple(closest.absolute_path)
            detail = _describe(closest, inner)
            if closest.validator == "required" and isinstance(closest.validator_value, list):
                detail = _issue(closest).message
            message = f"{_label(path)} does not match any allowed form; closest: {detail}"
            return ValidationIssue(_pointer(path), message, keyword)
    return ValidationIssue(_pointer(path), _describe(error, path), keyword)


def declared_conformance(record: Mapping[str, Any]) -> str | None:
    """The most specific known CDIF profile URI a record declares, canonical form, or None.

    Reads ``schema:subjectOf/dcterms:conformsTo`` (``{"@id"}`` objects or strings); accepts
    http/https and a trailing slash. Discovery outranks core, 1.1 outranks 1.0. Never raises.
    """
    subject = record.get("schema:subjectOf")
    if not isinstance(subject, Mapping):
        return None
    values = subject.get("dcterms:conformsTo")
    declared: set[str] = set()
    for value in values if isinstance(values, list) else [values]:
        iri = value.get("@id") if isinstance(value, Mapping) else value
        if isinstance(iri, str):
            match = _PROFILE_IRI.match(iri.strip())
            if match:
                declared.add(f"https://w3id.org/cdif/{match[1]}/{match[2]}")
    return next((uri for uri in KNOWN_CONFORMANCE if uri in declared), None)


def _warnings(record: Mapping[str, Any]) -> list[ValidationIssue]:
    found: list[ValidationIssue] = []
    for path, message in _RECOMMENDED:
        node: Any = record
        for step in path[:-1]:
            node = node.get(step) if isinstance(node, Mapping) else None
        if isinstance(node, Mapping) and path[-1] not in node:
            found.append(ValidationIssue(_pointer(path), message, "recommended"))
    return found


def validate_record(record: Mapping[str, Any]) -> ValidationReport:
    """Validate one CDIF-shaped record against our CDIF core 1.0 schema.

    Returns a :class:`ValidationReport` with errors (JSON Pointer, message naming the CDIF
    property and content item, schema keyword) sorted by pointer, warnings for missing
    recommended items, and the declared conformance URI. Never raises for bad records; a
    non-mapping input is reported as invalid.
    """
    if not isinstance(record, Mapping):
        issue = ValidationIssue("", "the record must be a JSON object", "type")
        return ValidationReport(False, None, (issue,), ())
    data = dict(record)
    errors = sorted(
        (_issue(error) for error in _validator().iter_errors(data)),
        key=lambda issue: (issue.pointer, issue.keyword, issue.message),
    )
    unique = tuple(dict.fromkeys(errors))
    return ValidationReport(
        valid=not unique,
        conformance=declared_conformance(data),
        errors=unique,
        warnings=tuple(_warnings(data)),
    )
