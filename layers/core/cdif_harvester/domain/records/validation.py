"""Validate a normalised record against the CDIF rules it declares.

:func:`validate_record` judges a record by the rule set of the CDIF profile it declares
(:func:`rules_for`: core or discovery, 1.0 or 1.1; our own JSON Schemas in
``cdif_harvester/schemas``), with a fast engine for the verdict and the reference engine for the
messages, and returns a :class:`ValidationReport`: errors and warnings with JSON Pointers, the
rules used and the recorded conformance.

See docs/decisions/0029-validation-rule-sets.md, docs/decisions/0030-nil-values.md,
docs/decisions/0031-two-validation-engines.md and docs/decisions/0032-validation-report.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache, cached_property
from importlib import resources
from typing import TYPE_CHECKING, Any, NamedTuple

import jsonschema_rs

from cdif_harvester.model import VERDICTS, ProfileQuery

if TYPE_CHECKING:  # (the reference engine is imported when a record first needs it)
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

__all__ = [
    "DEFAULT_RULES",
    "KNOWN_CONFORMANCE",
    "NIL_VALUES",
    "PROFILES",
    "RULE_SETS",
    "VERSIONS",
    "DeclaredProfile",
    "ProfileVerdict",
    "RuleSet",
    "ValidationIssue",
    "ValidationReport",
    "declared_conformance",
    "declared_profiles",
    "engine_verdicts",
    "profile_query",
    "profile_summary",
    "rules_for",
    "rules_of_profile",
    "validate_record",
]

NIL_VALUES = ("nil:missing", "nil:unknown", "nil:notapplicable")
_REQUIRED_MESSAGE = re.compile(r"^'(.+)' is a required property$")
_PROFILE_IRI = re.compile(r"^https?://w3id\.org/cdif/([A-Za-z_]+)/(\d+\.\d+)/?$", re.ASCII)
# Spellings of a profile's path segment seen in declarations and in CDIF's own tools.
_PROFILE_ALIASES = {
    "datadescription": "data_description",
    "datastructure": "data_structure",
    "concept_scheme": "conceptscheme",
}
PROFILES = (
    "core",
    "discovery",
    "data_description",
    "data_structure",
    "manifest",
    "provenance",
    "codelist",
    "conceptscheme",
)
VERSIONS = ("1.0", "1.1")


@dataclass(frozen=True)
class RuleSet:
    """One set of validation rules: a CDIF profile and version, and the schema that checks it."""

    name: str
    conformance: str
    schema: str


def _row(profile: str, version: str, schema: str) -> RuleSet:
    """The rule set ``cdif-<profile>-<version>`` for ``https://w3id.org/cdif/<profile>/<version>``."""
    return RuleSet(
        f"cdif-{profile}-{version}", f"https://w3id.org/cdif/{profile}/{version}", schema
    )


# One row per CDIF profile and version we hold rules for; each schema is one of ours, in
# cdif_harvester/schemas (see docs/decisions/0029-validation-rule-sets.md).
RULE_SETS: Mapping[str, RuleSet] = {
    rule_set.name: rule_set
    for rule_set in (
        _row("core", "1.0", "cdif-core-1.0.schema.json"),
        _row("core", "1.1", "cdif-core-1.1.schema.json"),
        _row("discovery", "1.0", "cdif-discovery-1.0.schema.json"),
        _row("discovery", "1.1", "cdif-discovery-1.1.schema.json"),
        _row("manifest", "1.1", "cdif-manifest-1.1.schema.json"),
        _row("provenance", "1.1", "cdif-provenance-1.1.schema.json"),
        _row("codelist", "1.1", "cdif-codelist-1.1.schema.json"),
        _row("conceptscheme", "1.1", "cdif-conceptscheme-1.1.schema.json"),
        _row("data_description", "1.1", "cdif-data_description-1.1.schema.json"),
        _row("data_structure", "1.1", "cdif-data_structure-1.1.schema.json"),
    )
}
_SCHEMA_FILES = tuple(sorted({rule_set.schema for rule_set in RULE_SETS.values()}))
KNOWN_CONFORMANCE = (
    "https://w3id.org/cdif/discovery/1.1",
    "https://w3id.org/cdif/discovery/1.0",
    "https://w3id.org/cdif/core/1.1",
    "https://w3id.org/cdif/core/1.0",
)
DEFAULT_RULES = "cdif-core-1.0"
_RULES_BY_CONFORMANCE = {rule_set.conformance: rule_set for rule_set in RULE_SETS.values()}

# CDIF content items (core 1.0 implementation, discoverability for the discovery items):
# property -> (content item, cardinality).
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
    "schema:spatialCoverage": ("Geographic extent", "0..*"),
    "schema:temporalCoverage": ("Temporal coverage", "0..1"),
    "schema:variableMeasured": ("Variable measured", "0..*"),
    "schema:measurementTechnique": ("Measurement technique", "0..*"),
    "dqv:hasQualityMeasurement": ("Quality measurement", "0..*"),
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
        ("schema:spatialCoverage",),
        "schema:spatialCoverage is recommended (Geographic extent, required but nilable: "
        "nil:notapplicable where it does not apply)",
    ),
    (
        ("schema:temporalCoverage",),
        "schema:temporalCoverage is recommended (Temporal coverage, required but nilable: "
        "nil:notapplicable where it does not apply)",
    ),
    (
        ("schema:variableMeasured",),
        "schema:variableMeasured is recommended (Variable measured, required but nilable: "
        "nil:notapplicable where it does not apply)",
    ),
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


VALID = "valid"
INVALID = "invalid"
UNKNOWN = "unknown"


def profile_summary(profile: str, version: str, status: str, errors: int) -> str:
    """One line for people: "core 1.1 valid", "discovery 1.1: 3 errors", "x 1.1: profile
    unknown"."""
    name = f"{profile} {version}"
    if status == INVALID:
        return f"{name}: {errors} error{'s' if errors != 1 else ''}"
    return f"{name}: profile unknown" if status == UNKNOWN else f"{name} valid"


class DeclaredProfile(NamedTuple):
    """A CDIF profile a record claims: its path segment (canonical spelling) and version."""

    profile: str
    version: str


@dataclass(frozen=True)
class ProfileVerdict:
    """The verdict of one CDIF profile, at one version, on a record.

    ``status`` is ``valid``, ``invalid`` (``errors`` say why) or ``unknown`` (we hold no rules
    for that profile and version; ``rules`` is then None). ``declared`` is false for the core
    verdict of a record that does not claim core at its version (core is always judged).
    """

    profile: str
    version: str
    status: str
    rules: str | None
    declared: bool
    errors: tuple[ValidationIssue, ...] = ()

    @property
    def key(self) -> str:
        """``<profile>/<version>``, as the catalogue stores and queries it."""
        return f"{self.profile}/{self.version}"

    @property
    def conformance(self) -> str:
        """The profile's conformance URI."""
        return f"https://w3id.org/cdif/{self.profile}/{self.version}"

    def summary(self) -> str:
        """One line for people: "core 1.1 valid", "discovery 1.1: 3 errors"."""
        return profile_summary(self.profile, self.version, self.status, len(self.errors))

    def to_dict(self) -> dict[str, Any]:
        """The verdict as a JSON-ready dict."""
        return {
            "profile": self.profile,
            "version": self.version,
            "conformance": self.conformance,
            "status": self.status,
            "rules": self.rules,
            "declared": self.declared,
            "errors": [issue.to_dict() for issue in self.errors],
        }


@dataclass(frozen=True)
class ValidationReport:
    """The verdict on one record: valid or not, declared conformance, errors and warnings.

    ``valid``, ``errors`` and ``rules`` are those of the core profile at the version the record
    claims; ``profiles`` holds that verdict first, then one per other profile it claims.
    """

    valid: bool
    conformance: str | None
    errors: tuple[ValidationIssue, ...]
    warnings: tuple[ValidationIssue, ...]
    rules: str = DEFAULT_RULES
    profiles: tuple[ProfileVerdict, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready dict: valid, conformance, rules, errors, warnings and
        the verdict of each profile."""
        return {
            "valid": self.valid,
            "conformance": self.conformance,
            "rules": self.rules,
            "errors": [issue.to_dict() for issue in self.errors],
            "warnings": [issue.to_dict() for issue in self.warnings],
            "profiles": [verdict.to_dict() for verdict in self.profiles],
        }


# --- the compiled schemas ----------------------------------------------------------------


@cache
def _schema_document(name: str) -> dict[str, Any]:
    entry = resources.files("cdif_harvester").joinpath("schemas").joinpath(name)
    data = json.loads(entry.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("$id"), str):
        raise ValueError(f"{name} is not a JSON Schema object with an $id")
    return data


@dataclass(frozen=True)
class _CompiledSchema:
    fast: jsonschema_rs.Validator
    # The schema with every ``$ref`` inlined, for the reference engine (see :attr:`full`).
    inlined: Any
    # Members whose presence the root-level rules test; None: the record is never pruned.
    presence: frozenset[str] | None

    @cached_property
    def full(self) -> Draft202012Validator:
        """The reference engine for this schema, built when a record first needs messages.

        A valid record never needs it, and importing ``jsonschema`` is a large part of a
        handler's cold start (the intake API's, for one, validates nothing on most requests).
        (A frozen dataclass still has the instance dictionary the cache is kept in.)
        """
        from jsonschema import Draft202012Validator  # noqa: PLC0415 - imported when needed
        from referencing import Registry, Resource  # noqa: PLC0415
        from referencing.jsonschema import DRAFT202012  # noqa: PLC0415

        registry: Registry[Any] = Registry().with_resources(
            (doc["$id"], Resource.from_contents(doc, default_specification=DRAFT202012))
            for doc in (_schema_document(each) for each in _SCHEMA_FILES)
        )
        return Draft202012Validator(self.inlined, registry=registry)


# Root-level keywords that look at nothing but the root's type, its members one by one
# (properties) or their presence (required), possibly combined (allOf/anyOf/oneOf).
_ROOT_ANNOTATIONS = frozenset({"$schema", "$id", "$comment", "$defs", "title", "description"})
_ROOT_PER_MEMBER = frozenset({"type", "properties"})
_ROOT_COMBINATIONS = frozenset({"allOf", "anyOf", "oneOf"})


def _presence_names(schema: Any) -> frozenset[str] | None:
    """The member names the root-level rules of a schema require, or None if they do more.

    When the root's rules only check its type, each member against its own schema, and which
    members are present, the errors of a record are those of its members that have errors
    plus those of the presence rules: the other members can be left out of a second look.
    """
    names: set[str] = set()

    def walk(node: Any) -> bool:
        if not isinstance(node, dict):
            return node is True
        for keyword, value in node.items():
            if keyword == "required" and isinstance(value, list):
                names.update(str(name) for name in value)
            elif keyword in _ROOT_COMBINATIONS and isinstance(value, list):
                if not all(walk(branch) for branch in value):
                    return False
            elif keyword not in _ROOT_ANNOTATIONS | _ROOT_PER_MEMBER:
                return False
        return True

    return frozenset(names) if walk(schema) else None


@cache
def _compiled(name: str) -> _CompiledSchema:
    """The fast engine for one schema, built once per process (the reference engine is built
    from the same inlined schema when first needed: :attr:`_CompiledSchema.full`); all our
    schemas are resources.

    The Python engine gets the schema with every ``$ref`` inlined (our schemas have no
    cycles): resolving references at each use is most of its cost. The schemas are our own
    files, checked against the 2020-12 metaschema by the tests: checking them again here took
    a third of a document process's start.
    """
    schema = _schema_document(name)
    documents = [_schema_document(each) for each in _SCHEMA_FILES]
    fast_registry = jsonschema_rs.Registry([(doc["$id"], doc) for doc in documents])
    fast = jsonschema_rs.validator_for(
        schema, registry=fast_registry, validate_formats=False, offline=True
    )
    inlined = jsonschema_rs.dereference(schema, registry=fast_registry, offline=True)
    return _CompiledSchema(fast=fast, inlined=inlined, presence=_presence_names(inlined))


# --- messages ------------------------------------------------------------------------------


def _pointer(parts: Iterable[Any]) -> str:
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in parts)


def _item(where: tuple[Any, ...]) -> tuple[str, str] | None:
    if not where:
        return None
    if where[0] == "schema:subjectOf" and len(where) >= 2:
        return _RECORD_ITEMS.get(str(where[1]))
    return _ITEMS.get(str(where[0]))


def _item_for(where: tuple[Any, ...]) -> str:
    """The CDIF content item and cardinality for a location, as " (Title, 1)" or ""."""
    item = _item(where)
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

    from jsonschema.exceptions import best_match  # noqa: PLC0415 - see _CompiledSchema.full

    ranked = sorted(groups.values(), key=lambda errs: (type_failed(errs), len(errs)))
    closest: ValidationError | None = best_match(ranked[0])
    return closest


def _nil_message(error: ValidationError, where: tuple[Any, ...]) -> str | None:
    """The message for a nil value where it is not allowed, or None for other errors.

    The schemas refuse a nil value with ``not: {"enum": [the nil values]}`` or
    ``not: {"const": "nil:notapplicable"}``, and a nil value among others with a
    ``maxItems: 1`` titled "Nil value alone".
    """
    keyword = error.validator
    refused = error.validator_value if keyword == "not" else None
    item = _item(where)
    if isinstance(refused, dict) and refused.get("const") == "nil:notapplicable":
        return (
            f"{_label(where)}: nil:notapplicable is only for geographic extent, temporal "
            f"coverage and variable measured{_item_for(where)}"
        )
    if isinstance(refused, dict) and refused.get("enum") == list(NIL_VALUES):
        optional = item is not None and item[1].startswith("0")
        why = "leave an optional item out instead" if optional else "this item is not nilable"
        return (
            f"{_label(where)} must not be a nil value ({error.instance}); {why}{_item_for(where)}"
        )
    title = error.schema.get("title") if isinstance(error.schema, dict) else None
    if keyword == "maxItems" and title == "Nil value alone":
        return f"{_label(where)}: a nil value must be the only value{_item_for(where)}"
    if isinstance(error.instance, str) and error.instance in NIL_VALUES:
        return f"{_label(where)}: {error.instance} is not allowed here{_item_for(where)}"
    return None


def _form(schema: Any) -> str | None:
    """The title of a choice of forms written to complete "must be ..." ("a string or ..")."""
    title = schema.get("title") if isinstance(schema, dict) else None
    return title if isinstance(title, str) and title.startswith(("a ", "an ")) else None


def _describe(error: ValidationError, where: tuple[Any, ...]) -> str:
    nil = _nil_message(error, where)
    if nil is not None:
        return nil
    form = _form(error.schema)
    if error.validator in ("anyOf", "oneOf") and form:
        return f"{_label(where)} must be {form}{_item_for(where)}"
    alternatives = _required_alternatives(error.schema)
    if error.validator == "anyOf" and alternatives:
        return f"{_label(where)} needs one of {', '.join(alternatives)}{_item_for(where)}"
    return f"{_label(where)}: {error.message}{_item_for(where)}"


def _profiles_wanted(contains: Any) -> list[str]:
    """The conformance URIs a ``contains`` rule accepts, canonical (no trailing slash)."""
    props = contains.get("properties") if isinstance(contains, dict) else None
    iri = props.get("@id") if isinstance(props, dict) else None
    values = iri.get("enum", [iri.get("const")]) if isinstance(iri, dict) else []
    return list(dict.fromkeys(str(v).rstrip("/") for v in values if isinstance(v, str)))


def _issue(error: ValidationError) -> ValidationIssue:  # noqa: PLR0911 - one rule per keyword
    path = tuple(error.absolute_path)
    keyword = str(error.validator)
    title = error.schema.get("title") if isinstance(error.schema, dict) else None
    nil = _nil_message(error, path)
    if nil is not None:
        return ValidationIssue(_pointer(path), nil, keyword)
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
        profiles = _profiles_wanted(error.validator_value)
        if path[-2:] == ("schema:subjectOf", "dcterms:conformsTo") and profiles:
            others = ", ".join(uri.removeprefix("https://w3id.org/cdif/") for uri in profiles[1:])
            message = (
                f"schema:subjectOf/dcterms:conformsTo must include {profiles[0]}"
                f"{f' (or {others})' if others else ''} (Metadata profile identifier, 1..*)"
            )
        else:
            wanted = error.validator_value
            const = wanted.get("const") if isinstance(wanted, dict) else None
            if const is None and isinstance(wanted, dict):
                # a 1.1 shape: {"@id": "dcat:CatalogRecord"}
                iri = wanted.get("properties", {}).get("@id", {}).get("const")
                const = json.dumps({"@id": iri}) if isinstance(iri, str) else None
            enum = wanted.get("enum") if isinstance(wanted, dict) else None
            if const:
                what = f"include {const}"
            elif isinstance(enum, list):
                what = f"include one of {', '.join(map(str, enum))}"
            else:
                what = "include an allowed value"
            message = f"{_label(path)} must {what}{_item_for(path)}"
        return ValidationIssue(_pointer(path), message, keyword)
    if keyword in ("anyOf", "oneOf") and _required_alternatives(error.schema) is None:
        closest = _closest(error)
        form = _form(error.schema)
        if closest is not None and closest.validator == "type" and form:
            # no form fits even in type: name the forms rather than the first one
            message = f"{_label(path)} must be {form}{_item_for(path)}"
            return ValidationIssue(_pointer(path), message, keyword)
        if closest is not None:
            inner = tuple(closest.absolute_path)
            detail = _describe(closest, inner)
            if closest.validator == "required" and isinstance(closest.validator_value, list):
                detail = _issue(closest).message
            message = f"{_label(path)} does not match any allowed form; closest: {detail}"
            return ValidationIssue(_pointer(path), message, keyword)
    return ValidationIssue(_pointer(path), _describe(error, path), keyword)


# --- conformance and rule sets -------------------------------------------------------------


def _declared_iris(record: Mapping[str, Any]) -> list[str]:
    subject = record.get("schema:subjectOf")
    if not isinstance(subject, Mapping):
        return []
    values = subject.get("dcterms:conformsTo")
    iris = []
    for value in values if isinstance(values, list) else [values]:
        iri = value.get("@id") if isinstance(value, Mapping) else value
        if isinstance(iri, str):
            iris.append(iri.strip())
    return iris


def declared_profiles(record: Mapping[str, Any]) -> tuple[DeclaredProfile, ...]:
    """Every CDIF profile a record claims, in the order claimed, each once.

    Reads the ``https://w3id.org/cdif/<profile>/<version>`` URIs of
    ``schema:subjectOf/dcterms:conformsTo`` (``{"@id"}`` objects or strings; http or https, a
    trailing slash, and the spellings ``datadescription``/``datastructure``/``concept_scheme``
    accepted). Profiles and versions we hold no rules for are kept (their verdict is
    "unknown"); other URIs are ignored. Never raises.
    """
    found: dict[DeclaredProfile, None] = {}
    for iri in _declared_iris(record):
        match = _PROFILE_IRI.match(iri)
        if match:
            name = match[1].lower()
            found[DeclaredProfile(_PROFILE_ALIASES.get(name, name), match[2])] = None
    return tuple(found)


def declared_conformance(record: Mapping[str, Any]) -> str | None:
    """The most specific core or discovery profile URI a record declares, canonical, or None.

    Discovery outranks core, 1.1 outranks 1.0 (see :func:`declared_profiles`). Never raises.
    """
    declared = {
        f"https://w3id.org/cdif/{each.profile}/{each.version}" for each in declared_profiles(record)
    }
    return next((uri for uri in KNOWN_CONFORMANCE if uri in declared), None)


def _claimed_version(declared: Iterable[DeclaredProfile]) -> str:
    """The CDIF version a record claims: the newest known version among its profiles, else
    1.0 (the released version)."""
    known = [each.version for each in declared if each.version in VERSIONS]
    return max(known, key=VERSIONS.index) if known else VERSIONS[0]


_PROFILE_TEXT = re.compile(r"^([A-Za-z_]+)(?:[/ ](\d+\.\d+))?$", re.ASCII)


def profile_query(profile: str | None = None, verdict: str | None = None) -> ProfileQuery:
    """The catalogue query for records judged by ``profile`` with ``verdict``.

    ``profile`` is ``discovery/1.1``, ``discovery 1.1``, ``discovery`` (any version) or a
    conformance URI (``https://w3id.org/cdif/discovery/1.1``); ``verdict`` is ``valid``,
    ``invalid`` or ``unknown`` (alone: the record's own verdict, ``valid`` or ``invalid``).
    Raises ValueError, naming what is accepted, for anything else.
    """
    if verdict is not None and verdict not in VERDICTS:
        raise ValueError(f"unknown verdict {verdict!r}: use one of {', '.join(VERDICTS)}")
    if profile is None:
        if verdict == UNKNOWN:
            raise ValueError("verdict 'unknown' needs a profile (a record is valid or invalid)")
        return ProfileQuery(verdict=verdict)
    text = profile.strip()
    uri = _PROFILE_IRI.match(text)
    match = uri or _PROFILE_TEXT.match(text)
    if match is None:
        raise ValueError(
            f"unknown profile {profile!r}: use <profile>[/<version>] (e.g. discovery/1.1) "
            f"or a conformance URI; profiles: {', '.join(PROFILES)}"
        )
    name = match[1].lower()
    return ProfileQuery(_PROFILE_ALIASES.get(name, name), match[2], verdict)


def rules_of_profile(profile: str, version: str) -> RuleSet | None:
    """The rule set for a CDIF profile at a version, or None when we hold none.

    CDIF 1.0 published core and discovery only; a 1.0 claim of a profile that came with 1.1
    (data description, manifest, ...) is judged by that profile's 1.1 rules, as CDIF's own
    validator does (see docs/decisions/0063-per-profile-verdicts.md).
    """
    found = RULE_SETS.get(f"cdif-{profile}-{version}")
    if found is None and version == "1.0" and profile not in ("core", "discovery"):
        found = RULE_SETS.get(f"cdif-{profile}-1.1")
    return found


def rules_for(record: Mapping[str, Any]) -> RuleSet:
    """The rule set that decides a record's validity: core at the version it claims.

    Core 1.1 for a record claiming any 1.1 profile, core 1.0 for a 1.0 record or one that
    claims no known CDIF profile (which then fails core's profile identifier rule). Never
    raises.
    """
    return RULE_SETS[f"cdif-core-{_claimed_version(declared_profiles(record))}"]


def _rule_set(record: Mapping[str, Any], rules: str | None) -> RuleSet:
    if rules is None:
        return rules_for(record)
    try:
        return RULE_SETS[rules]
    except KeyError:
        raise ValueError(f"unknown rule set {rules!r}; known: {', '.join(RULE_SETS)}") from None


def engine_verdicts(record: Mapping[str, Any], rules: str | None = None) -> tuple[bool, bool]:
    """The verdicts of the Rust and of the Python engine on one record, in that order.

    ``rules`` names a rule set (default: the one the record declares). The product takes the
    first and asks the second only for the reasons; this is the check that they agree. Raises
    ValueError for an unknown rule set name.
    """
    compiled = _compiled(_rule_set(record, rules).schema)
    data = dict(record)
    return bool(compiled.fast.is_valid(data)), bool(compiled.full.is_valid(data))


def _explain(compiled: _CompiledSchema, data: dict[str, Any]) -> tuple[ValidationIssue, ...]:
    """The issues of a record the fast engine rejected, from the Python engine.

    The Python engine takes milliseconds on a large record, mostly walking members that are
    valid. So it looks only at the members the fast engine found errors in, and at those whose
    presence the root's rules test (see :func:`_presence_names`); the errors are the same. Should
    that find nothing, the whole record is looked at.
    """
    errors: list[ValidationError] = []
    if compiled.presence is not None:
        flagged = {
            str(error.instance_path[0])
            for error in compiled.fast.iter_errors(data)
            if error.instance_path
        }
        kept = {k: v for k, v in data.items() if k in flagged or k in compiled.presence}
        errors = list(compiled.full.iter_errors(kept))
    if not errors:
        errors = list(compiled.full.iter_errors(data))
    issues = sorted(
        (_issue(error) for error in errors),
        key=lambda issue: (issue.pointer, issue.keyword, issue.message),
    )
    return tuple(dict.fromkeys(issues))


def _warnings(record: Mapping[str, Any]) -> list[ValidationIssue]:
    found: list[ValidationIssue] = []
    for path, message in _RECOMMENDED:
        node: Any = record
        for step in path[:-1]:
            node = node.get(step) if isinstance(node, Mapping) else None
        if isinstance(node, Mapping) and path[-1] not in node:
            found.append(ValidationIssue(_pointer(path), message, "recommended"))
    return found


def _errors(rule_set: RuleSet, data: dict[str, Any]) -> tuple[ValidationIssue, ...]:
    compiled = _compiled(rule_set.schema)
    return () if compiled.fast.is_valid(data) else _explain(compiled, data)


def _verdict(
    profile: DeclaredProfile, rule_set: RuleSet | None, data: dict[str, Any], *, declared: bool
) -> ProfileVerdict:
    if rule_set is None:
        return ProfileVerdict(profile.profile, profile.version, UNKNOWN, None, declared)
    errors = _errors(rule_set, data)
    status = INVALID if errors else VALID
    return ProfileVerdict(profile.profile, profile.version, status, rule_set.name, declared, errors)


def validate_record(record: Mapping[str, Any], *, rules: str | None = None) -> ValidationReport:
    """Validate one CDIF-shaped record against core and against each profile it claims.

    The record's verdict (``valid``, ``errors``, ``rules``) is that of core at the version it
    claims (:func:`rules_for`); ``profiles`` adds one verdict per other CDIF profile it claims
    (:func:`declared_profiles`), "unknown" where we hold no rules. ``rules`` instead judges the
    record by that one rule set (a key of :data:`RULE_SETS`). Errors carry a JSON Pointer, a
    message naming the CDIF property and content item, and the schema keyword, sorted by
    pointer; warnings name missing recommended items. Never raises for bad records (a
    non-mapping input is reported as invalid); raises ValueError for an unknown ``rules``.
    """
    if not isinstance(record, Mapping):
        issue = ValidationIssue("", "the record must be a JSON object", "type")
        named = _rule_set({}, rules).name if rules is not None else DEFAULT_RULES
        return ValidationReport(False, None, (issue,), (), named)
    data = dict(record)
    declared = declared_profiles(data)
    if rules is not None:
        rule_set = _rule_set(data, rules)
        profile = DeclaredProfile(*rule_set.conformance.rsplit("/", 2)[-2:])
        verdicts = [_verdict(profile, rule_set, data, declared=profile in declared)]
    else:
        core = DeclaredProfile("core", _claimed_version(declared))
        rule_set = RULE_SETS[f"cdif-core-{core.version}"]
        verdicts = [_verdict(core, rule_set, data, declared=core in declared)]
        verdicts.extend(
            _verdict(each, rules_of_profile(*each), data, declared=True)
            for each in declared
            if each != core
        )
    errors = verdicts[0].errors
    return ValidationReport(
        valid=not errors,
        conformance=declared_conformance(data),
        errors=errors,
        warnings=tuple(_warnings(data)),
        rules=rule_set.name,
        profiles=tuple(verdicts),
    )
