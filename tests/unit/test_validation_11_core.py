"""The CDIF 1.1 rule sets (core 1.1, the discovery 1.1 module) against the official blocks.

Every 1.1 example and test document, every core 1.0 example and test and every discovery 1.0
example, and mutated variants of the valid 1.1 examples, get the same verdict from our rule set
as from the official resolvedSchema.json (cdifProfile/cdifCore, cdifProfile/cdifDiscovery),
except for the named differences (docs/decisions/0057-cdif-11-core-and-discovery-rules.md); the
Rust and Python engines agree on all of them. Messages for typical 1.1 errors are readable.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.domain.records.validation import engine_verdicts, validate_record

CORE_11 = "https://w3id.org/cdif/core/1.1"
DISCOVERY_11 = "https://w3id.org/cdif/discovery/1.1"
# rule set -> the official single profile whose verdicts it matches
OFFICIAL = {
    "cdif-core-1.1": "cdifProfile/cdifCore/resolvedSchema.json",
    "cdif-discovery-1.1": "cdifProfile/cdifDiscovery/resolvedSchema.json",
}
Mutation = Callable[[dict[str, Any]], None]


@cache
def _validator(path: Path) -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(json.loads(path.read_text(encoding="utf-8")))


def _official(cdif_11: Path, rules: str) -> Any:
    return _validator(cdif_11 / OFFICIAL[rules])


def _documents(cdif_11: Path, corpus: Path) -> Iterator[tuple[str, Any]]:
    paths = [
        *sorted(cdif_11.glob("*/*/example*.json")),
        *sorted(cdif_11.glob("*/*/tests/*.json")),
        *sorted((corpus / "cdif-core-1.0").glob("*/example*.json")),
        *sorted((corpus / "cdif-core-1.0").glob("*/tests/*.json")),
        *sorted((corpus / "cdif-discovery-1.0" / "examples").glob("*.json*")),
    ]
    for path in paths:
        yield str(path.relative_to(path.parents[2])), json.loads(path.read_text(encoding="utf-8"))


# --- mutations ------------------------------------------------------------------------------


def _drop(*keys: str) -> Mutation:
    def apply(record: dict[str, Any]) -> None:
        for key in keys:
            record.pop(key, None)

    return apply


def _set(key: str, value: Any) -> Mutation:
    def apply(record: dict[str, Any]) -> None:
        record[key] = copy.deepcopy(value)

    return apply


def _record(key: str, value: Any = None, *, drop: bool = False) -> Mutation:
    """Set (or drop) one member of the catalogue record (schema:subjectOf)."""

    def apply(record: dict[str, Any]) -> None:
        subject = record.get("schema:subjectOf")
        if isinstance(subject, dict):
            if drop:
                subject.pop(key, None)
            else:
                subject[key] = copy.deepcopy(value)

    return apply


def _identifier(property_id: Any, **members: Any) -> dict[str, Any]:
    return {
        "@type": ["schema:PropertyValue"],
        "schema:propertyID": property_id,
        "schema:value": "10.5555/x1",
        **members,
    }


def _activity(*used: Any) -> list[dict[str, Any]]:
    return [{"@type": ["prov:Activity"], "prov:used": list(used)}]


DOI = {"@id": "https://registry.identifiers.org/registry/doi"}
CONCEPT = {
    "@type": ["skos:Concept"],
    "skos:prefLabel": {"@value": "bathymetry", "@language": "en"},
    "skos:inScheme": {"@id": "https://example.org/scheme"},
}
PLACE = {"@type": ["schema:Place"], "schema:name": "Bay of Biscay"}


def _wkt(datatype: Any) -> dict[str, Any]:
    """A place with a GeoSPARQL geometry whose WKT literal has the datatype ``datatype``."""
    wkt = {"@type": datatype, "@value": "POINT(-3 45)"}
    return {**PLACE, "geosparql:hasGeometry": {"@type": ["sf:Point"], "geosparql:asWKT": wkt}}


VARIABLE = {"@type": ["schema:PropertyValue"], "schema:name": "depth"}

MUTATIONS: dict[str, Mutation] = {
    # required members of core 1.1
    "drop-name": _drop("schema:name"),
    "drop-identifier": _drop("schema:identifier"),
    "drop-dateModified": _drop("schema:dateModified"),
    "drop-context": _drop("@context"),
    "drop-id": _drop("@id"),
    "drop-type": _drop("@type"),
    "drop-subjectOf": _drop("schema:subjectOf"),
    "drop-rights": _drop("schema:license", "schema:conditionsOfAccess"),
    "drop-url-and-distribution": _drop("schema:url", "schema:distribution"),
    # wrong types
    "name-not-string": _set("schema:name", 5),
    "license-not-array": _set("schema:license", "https://spdx.org/licenses/CC0-1.0"),
    "creator-not-list": _set("schema:creator", [{"@id": "https://orcid.org/0"}]),
    "context-as-string": _set("@context", "https://schema.org/"),
    "type-without-dataset": _set("@type", ["schema:CreativeWork"]),
    # the catalogue record
    "record-additionalType-string": _record("schema:additionalType", "dcat:CatalogRecord"),
    "record-additionalType-1.0-shape": _record("schema:additionalType", ["dcat:CatalogRecord"]),
    "record-additionalType-other": _record("schema:additionalType", [{"@id": "dcat:Dataset"}]),
    "record-additionalType-extra-member": _record(
        "schema:additionalType", [{"@id": "dcat:CatalogRecord", "schema:name": "record"}]
    ),
    "record-drop-additionalType": _record("schema:additionalType", drop=True),
    "record-drop-about": _record("schema:about", drop=True),
    "record-about-extra-member": _record("schema:about", {"@id": "ex:x", "schema:name": "x"}),
    "record-drop-id": _record("@id", drop=True),
    "record-drop-conformsTo": _record("dcterms:conformsTo", drop=True),
    "conformsTo-core-1.0": _record(
        "dcterms:conformsTo", [{"@id": "https://w3id.org/cdif/core/1.0"}]
    ),
    "conformsTo-core-1.1-only": _record("dcterms:conformsTo", [{"@id": CORE_11}]),
    "conformsTo-discovery-1.1-only": _record("dcterms:conformsTo", [{"@id": DISCOVERY_11}]),
    "conformsTo-both-1.1": _record("dcterms:conformsTo", [{"@id": CORE_11}, {"@id": DISCOVERY_11}]),
    "conformsTo-strings": _record("dcterms:conformsTo", [CORE_11, DISCOVERY_11]),
    "conformsTo-extra-member": _record(
        "dcterms:conformsTo",
        [{"@id": CORE_11, "schema:name": "core"}, {"@id": DISCOVERY_11, "schema:name": "d"}],
    ),
    "maintainer-reference-only": _record("schema:maintainer", {"@id": "https://orcid.org/0"}),
    # identifiers
    "identifier-propertyID-object": _set("schema:identifier", _identifier(DOI)),
    "identifier-propertyID-string": _set("schema:identifier", _identifier("DOI")),
    "identifier-propertyID-object-extra": _set(
        "schema:identifier", _identifier({**DOI, "schema:name": "DOI"})
    ),
    "identifier-propertyID-number": _set("schema:identifier", _identifier(5)),
    "identifier-without-value-or-url": _set(
        "schema:identifier", {"@type": ["schema:PropertyValue"], "schema:propertyID": DOI}
    ),
    "identifier-untyped": _set("schema:identifier", {"schema:value": "10.5555/x1"}),
    "sameAs-reference-extra-member": _set("schema:sameAs", [{"@id": "ex:x", "schema:name": "x"}]),
    # provenance
    "prov-used-allowed-items": _set(
        "prov:wasGeneratedBy",
        _activity(
            "a sieve",
            {"@id": "https://example.org/instrument/1"},
            {"@type": ["prov:Entity"], "schema:name": "sample"},
            {"schema:instrument": {"schema:name": "microprobe"}},
            {"prov:reagent": "HCl"},
        ),
    ),
    "prov-used-bad-item": _set("prov:wasGeneratedBy", _activity({"schema:name": "a sieve"})),
    "prov-used-entity-wrong-type": _set(
        "prov:wasGeneratedBy", _activity({"@type": ["prov:Agent"]})
    ),
    "prov-used-not-array": _set(
        "prov:wasGeneratedBy", [{"@type": ["prov:Activity"], "prov:used": "a sieve"}]
    ),
    "prov-activity-untyped": _set("prov:wasGeneratedBy", [{"prov:used": ["a sieve"]}]),
    "prov-derived-reference-extra": _set("prov:wasDerivedFrom", [{"@id": "ex:x", "x": 1}]),
    # terms, agents, links
    "keyword-concept": _set("schema:keywords", ["depth", CONCEPT]),
    "keyword-concept-without-label": _set(
        "schema:keywords", [{"@type": ["skos:Concept"], "skos:notation": "B"}]
    ),
    "keyword-term-without-name": _set("schema:keywords", [{"@type": ["schema:DefinedTerm"]}]),
    "additionalType-reference": _set("schema:additionalType", [{"@id": "ex:type"}]),
    "additionalType-number": _set("schema:additionalType", [5]),
    "license-creativework-only": _set(
        "schema:license",
        [{"@type": ["schema:CreativeWork"], "schema:url": "https://spdx.org/licenses/CC0-1.0"}],
    ),
    "contributor-role-without-roleName": _set(
        "schema:contributor",
        [{"@type": ["schema:Role"], "schema:contributor": {"@id": "https://orcid.org/0"}}],
    ),
    "publisher-contact-untyped": _set(
        "schema:publisher",
        {
            "@type": ["schema:Organization"],
            "schema:name": "Org",
            "schema:contactPoint": {"schema:email": "a@example.org"},
        },
    ),
    "person-contact-untyped": _set(
        "schema:creator",
        {
            "@list": [
                {
                    "@type": ["schema:Person"],
                    "schema:name": "Roe",
                    "schema:contactPoint": {"schema:email": "a@example.org"},
                }
            ]
        },
    ),
    "webapi-without-termsOfService": _set(
        "schema:distribution",
        [
            {
                "@type": ["schema:WebAPI"],
                "schema:serviceType": "OGC WMS",
                "schema:potentialAction": [],
            }
        ],
    ),
    # discovery items
    "spatial-not-array": _set("schema:spatialCoverage", PLACE),
    "spatial-place": _set("schema:spatialCoverage", [PLACE]),
    "spatial-place-without-anything": _set("schema:spatialCoverage", [{"@type": ["schema:Place"]}]),
    "spatial-crs-extra": _set(
        "schema:spatialCoverage",
        [{"geosparql:hasGeometry": {"geosparql:crs": {"@id": "ex:crs", "x": 1}}}],
    ),
    "variable-without-name": _set("schema:variableMeasured", [{"@type": ["schema:PropertyValue"]}]),
    "variable-specification": _set(
        "schema:variableMeasured",
        [{"@type": ["schema:PropertyValueSpecification"], "schema:name": "depth"}],
    ),
    "variable-propertyID-not-array": _set(
        "schema:variableMeasured", [{**VARIABLE, "schema:propertyID": "ex:depth"}]
    ),
    "temporal-number": _set("schema:temporalCoverage", [1990]),
    "temporal-string": _set("schema:temporalCoverage", ["1990/2000"]),
    "measurementTechnique-concept": _set("schema:measurementTechnique", [CONCEPT]),
    "measurementTechnique-not-array": _set("schema:measurementTechnique", "sonar"),
    "quality-without-value": _set(
        "dqv:hasQualityMeasurement",
        [{"@type": ["dqv:QualityMeasurement"], "dqv:isMeasurementOf": "accuracy"}],
    ),
    "discovery-context-as-string": _set("@context", "https://schema.org/"),
}


def _valid_11_bases(cdif_11: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """The 1.1 examples the official core or discovery 1.1 schema finds valid."""
    for path in sorted(cdif_11.glob("*/*/example*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        if any(_official(cdif_11, rules).is_valid(document) for rules in OFFICIAL):
            yield path.name, document


def _mutated(cdif_11: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, document in _valid_11_bases(cdif_11):
        for label, mutate in MUTATIONS.items():
            variant = copy.deepcopy(document)
            mutate(variant)
            yield f"{name}+{label}", variant


# --- agreement with the official building blocks ---------------------------------------------


def _disagreements(
    cdif_11: Path, rules: str, cases: list[tuple[str, Any]]
) -> list[tuple[str, bool, bool]]:
    official = _official(cdif_11, rules)
    found = []
    for name, document in cases:
        ours = validate_record(document, rules=rules).valid
        if ours != official.is_valid(document):
            found.append((name, official.is_valid(document), ours))
    return found


@pytest.mark.parametrize("rules", sorted(OFFICIAL))
def test_every_document_gets_the_official_verdict(cdif_11: Path, corpus: Path, rules: str) -> None:
    cases = list(_documents(cdif_11, corpus))
    assert len(cases) >= 50
    assert _disagreements(cdif_11, rules, cases) == []
    # both verdicts occur, so agreement means something
    official = _official(cdif_11, rules)
    assert {official.is_valid(document) for _, document in cases} == {True, False}


@pytest.mark.parametrize("rules", sorted(OFFICIAL))
def test_mutations_of_the_valid_11_examples_get_the_official_verdict(
    cdif_11: Path, rules: str
) -> None:
    official = _official(cdif_11, rules)
    bases = dict(_valid_11_bases(cdif_11))
    cases = list(_mutated(cdif_11))
    assert len(MUTATIONS) >= 15
    assert len(cases) == len(bases) * len(MUTATIONS)
    assert _disagreements(cdif_11, rules, cases) == []
    # the mutations really break documents the official schema found valid (the test can fail)
    broken = {
        name.split("+")[1]
        for name, document in cases
        if official.is_valid(bases[name.split("+")[0]]) and not official.is_valid(document)
    }
    assert len(broken) >= 10 if rules == "cdif-core-1.1" else len(broken) >= 5
    assert any(official.is_valid(document) for _, document in cases)


def test_the_engines_agree_on_every_case(cdif_11: Path, corpus: Path) -> None:
    cases = [*_documents(cdif_11, corpus), *_mutated(cdif_11)]
    split = [
        (rules, name)
        for name, document in cases
        for rules in OFFICIAL
        if len(set(engine_verdicts(document, rules=rules))) != 1
    ]
    assert split == []


# --- named differences --------------------------------------------------------------------------

BROADER_DEEP = {
    **CONCEPT,
    "skos:broader": [
        {**CONCEPT, "skos:broader": [{"@type": ["skos:Concept"], "skos:notation": "no label"}]}
    ],
}


@pytest.mark.parametrize(
    ("rules", "mutation", "official_valid", "our_valid"),
    [
        # (1) the profile identifier may be written with a trailing slash
        (
            "cdif-core-1.1",
            _record("dcterms:conformsTo", [{"@id": CORE_11 + "/"}]),
            False,
            True,
        ),
        (
            "cdif-discovery-1.1",
            _record("dcterms:conformsTo", [{"@id": CORE_11}, {"@id": DISCOVERY_11 + "/"}]),
            False,
            True,
        ),
        # (2) nil values where the spec allows them (the official schema wants an object) ...
        ("cdif-core-1.1", _set("schema:creator", {"@list": ["nil:unknown"]}), False, True),
        ("cdif-core-1.1", _set("schema:provider", ["nil:missing"]), False, True),
        ("cdif-core-1.1", _record("schema:maintainer", "nil:unknown"), False, True),
        ("cdif-discovery-1.1", _set("schema:spatialCoverage", "nil:notapplicable"), False, True),
        ("cdif-discovery-1.1", _set("schema:variableMeasured", ["nil:missing"]), False, True),
        # ... and refused where it does not (the official schema takes any string)
        ("cdif-core-1.1", _set("schema:name", "nil:missing"), True, False),
        ("cdif-core-1.1", _set("schema:identifier", "nil:unknown"), True, False),
        ("cdif-core-1.1", _set("schema:keywords", ["nil:missing"]), True, False),
        ("cdif-core-1.1", _set("schema:description", "nil:notapplicable"), True, False),
        ("cdif-discovery-1.1", _set("schema:measurementTechnique", ["nil:unknown"]), True, False),
        # (3) a concept two levels down is not checked as a concept (our rules have no cycles)
        ("cdif-core-1.1", _set("schema:keywords", [BROADER_DEEP]), False, True),
        # (4) a WKT literal's datatype as one string, as JSON-LD wants (the official: an array)
        (
            "cdif-discovery-1.1",
            _set("schema:spatialCoverage", [_wkt("geosparql:wktLiteral")]),
            False,
            True,
        ),
        (
            "cdif-discovery-1.1",
            _set("schema:spatialCoverage", [_wkt(["geosparql:wktLiteral"])]),
            True,
            True,
        ),
        ("cdif-discovery-1.1", _set("schema:spatialCoverage", [_wkt("xsd:string")]), False, False),
    ],
)
def test_named_differences_from_the_official_11_schemas(
    cdif_11: Path, rules: str, mutation: Mutation, official_valid: bool, our_valid: bool
) -> None:
    base = {
        "cdif-core-1.1": "cdifProfile/cdifCore/exampleCdifCoreMinimal.json",
        "cdif-discovery-1.1": "cdifProfile/cdifDiscovery/exampleCdifDiscovery.json",
    }[rules]
    record = json.loads((cdif_11 / base).read_text(encoding="utf-8"))
    official = _official(cdif_11, rules)
    assert official.is_valid(record) and validate_record(record, rules=rules).valid
    mutation(record)
    assert official.is_valid(record) is official_valid
    assert validate_record(record, rules=rules).valid is our_valid
    assert len(set(engine_verdicts(record, rules=rules))) == 1


def test_the_schemas_name_their_differences() -> None:
    from importlib import resources

    for name in ("cdif-core-1.1", "cdif-discovery-1.1"):
        text = resources.files("cdif_harvester").joinpath(f"schemas/{name}.schema.json")
        description = json.loads(text.read_text(encoding="utf-8"))["description"]
        assert "Deliberate differences from the official 1.1" in description
        assert "trailing slash" in description
        assert "nil:" in description
    text = resources.files("cdif_harvester").joinpath("schemas/cdif-discovery-1.1.schema.json")
    assert "geosparql:wktLiteral" in json.loads(text.read_text(encoding="utf-8"))["description"]


def test_our_11_schemas_are_not_the_official_files(cdif_11: Path) -> None:
    from importlib import resources

    for name, official in (
        ("cdif-core-1.1", "cdifProfile/cdifCore"),
        ("cdif-discovery-1.1", "cdifProfile/cdifDiscovery"),
    ):
        ours = json.loads(
            resources.files("cdif_harvester")
            .joinpath(f"schemas/{name}.schema.json")
            .read_text(encoding="utf-8")
        )
        assert ours["$id"] == f"urn:cdif-harvester:schema:{name}"
        for each in (cdif_11 / official).glob("*.json"):
            assert ours != json.loads(each.read_text(encoding="utf-8"))


# --- messages ---------------------------------------------------------------------------------


def _core_minimal(cdif_11: Path) -> dict[str, Any]:
    path = cdif_11 / "cdifProfile/cdifCore/exampleCdifCoreMinimal.json"
    record: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return record


@pytest.mark.parametrize(
    ("mutation", "pointer", "message"),
    [
        (
            _drop("schema:name"),
            "/schema:name",
            "schema:name is required (Title, 1)",
        ),
        (
            _record("schema:additionalType", "dcat:CatalogRecord"),
            "/schema:subjectOf/schema:additionalType",
            "schema:subjectOf/schema:additionalType: 'dcat:CatalogRecord' is not of type 'array' "
            "(Metadata record type, must include dcat:CatalogRecord, 1)",
        ),
        (
            _record("schema:additionalType", ["dcat:CatalogRecord"]),
            "/schema:subjectOf/schema:additionalType",
            'schema:subjectOf/schema:additionalType must include {"@id": "dcat:CatalogRecord"} '
            "(Metadata record type, must include dcat:CatalogRecord, 1)",
        ),
        (
            _set("schema:identifier", _identifier(5)),
            "/schema:identifier",
            "schema:identifier does not match any allowed form; closest: "
            'schema:identifier/schema:propertyID must be a string or an {"@id"} reference '
            "(identifier scheme) (Resource identifier, 1)",
        ),
        (
            _set("schema:identifier", _identifier({**DOI, "schema:name": "DOI"})),
            "/schema:identifier",
            "schema:identifier does not match any allowed form; closest: "
            "schema:identifier/schema:propertyID: Additional properties are not allowed "
            "('schema:name' was unexpected) (Resource identifier, 1)",
        ),
        (
            _set("prov:wasGeneratedBy", _activity({"schema:name": "a sieve"})),
            "/prov:wasGeneratedBy/0/prov:used/0",
            'prov:wasGeneratedBy/0/prov:used/0 must be a string, an {"@id"} reference, a '
            "prov:Entity, or an object with schema:instrument, bios:computationalTool or "
            "prov:reagent (thing used) (Provenance (instruments, software), 0..*)",
        ),
        (
            _record("dcterms:conformsTo", [{"@id": "https://w3id.org/cdif/core/1.0"}]),
            "/schema:subjectOf/dcterms:conformsTo",
            "schema:subjectOf/dcterms:conformsTo must include https://w3id.org/cdif/core/1.1 "
            "(Metadata profile identifier, 1..*)",
        ),
    ],
)
def test_typical_11_errors_have_readable_messages(
    cdif_11: Path, mutation: Mutation, pointer: str, message: str
) -> None:
    record = _core_minimal(cdif_11)
    mutation(record)
    report = validate_record(record, rules="cdif-core-1.1")
    assert report.valid is False
    assert [(e.pointer, e.message) for e in report.errors] == [(pointer, message)]
