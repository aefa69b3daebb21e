"""Our CDIF discovery schema agrees with the official discovery schema, differences named.

The official ``CDIFDiscoveryProfileStructuredSchema.json`` judges the discovery examples (as
published and as normalised) and mutated variants of them; our verdict under the discovery
rules must be the same, except for the differences named and asserted here (see the module
docstring of ``cdif_harvester.domain.records.validation``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.domain.records.normalisation import normalise
from cdif_harvester.domain.records.validation import validate_record

DISCOVERY_RULES = "cdif-discovery-1.0"
OFFICIAL = "cdif-discovery-1.0/CDIFDiscoveryProfileStructuredSchema.json"
CORE_10 = "https://w3id.org/cdif/core/1.0"
DISCOVERY_10 = "https://w3id.org/cdif/discovery/1.0"
PLACE = {"@type": ["schema:Place"], "schema:name": "Bay of Biscay"}


def _official(corpus: Path) -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(json.loads((corpus / OFFICIAL).read_text(encoding="utf-8")))


def _ours(document: Any) -> bool:
    return validate_record(document, rules=DISCOVERY_RULES).valid


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(record: dict[str, Any]) -> None:
        record[key] = copy.deepcopy(value)

    return apply


def _drop(*keys: str) -> Callable[[dict[str, Any]], None]:
    def apply(record: dict[str, Any]) -> None:
        for key in keys:
            record.pop(key, None)

    return apply


def _declare(*profiles: str) -> Callable[[dict[str, Any]], None]:
    def apply(record: dict[str, Any]) -> None:
        subject = record.get("schema:subjectOf")
        if isinstance(subject, dict):
            subject["dcterms:conformsTo"] = [{"@id": iri} for iri in profiles]

    return apply


def _first_of(key: str) -> Callable[[dict[str, Any]], None]:
    """A one-element array written as its single value (what JSON-LD compaction does)."""

    def apply(record: dict[str, Any]) -> None:
        if isinstance(record.get(key), list) and record[key]:
            record[key] = record[key][0]

    return apply


MUTATIONS: dict[str, Callable[[dict[str, Any]], None]] = {
    # core rules apply under discovery rules too
    "drop-name": _drop("schema:name"),
    "drop-identifier": _drop("schema:identifier"),
    "drop-rights": _drop("schema:license", "schema:conditionsOfAccess"),
    "drop-url-and-distribution": _drop("schema:url", "schema:distribution"),
    "drop-subjectOf": _drop("schema:subjectOf"),
    "name-not-string": _set("schema:name", ["a", "b"]),
    "type-without-dataset": _set("@type", ["schema:CreativeWork"]),
    # the profile URIs: a discovery record declares core and discovery
    "declares-core-only": _declare(CORE_10),
    "declares-discovery-only": _declare(DISCOVERY_10),
    "declares-both": _declare(CORE_10, DISCOVERY_10),
    # the discovery items
    "spatial-single-value": _first_of("schema:spatialCoverage"),
    "temporal-single-value": _first_of("schema:temporalCoverage"),
    "technique-single-value": _first_of("schema:measurementTechnique"),
    "spatial-place": _set("schema:spatialCoverage", [PLACE]),
    "spatial-place-unnamed": _set(
        "schema:spatialCoverage", [{"@type": ["schema:Place"], "schema:description": "x"}]
    ),
    "spatial-place-untyped": _set("schema:spatialCoverage", [{"schema:name": "Biscay"}]),
    "spatial-point": _set(
        "schema:spatialCoverage",
        [
            {
                "@type": ["schema:Place"],
                "schema:geo": {
                    "@type": ["schema:GeoCoordinates"],
                    "schema:latitude": 45.5,
                    "schema:longitude": -4.25,
                },
            }
        ],
    ),
    "spatial-point-off-the-globe": _set(
        "schema:spatialCoverage",
        [
            {
                "@type": ["schema:Place"],
                "schema:geo": {
                    "@type": ["schema:GeoCoordinates"],
                    "schema:latitude": 95,
                    "schema:longitude": 0,
                },
            }
        ],
    ),
    "spatial-box-without-box": _set(
        "schema:spatialCoverage",
        [{"@type": ["schema:Place"], "schema:geo": {"@type": ["schema:GeoShape"]}}],
    ),
    "temporal-interval": _set("schema:temporalCoverage", ["2001-01-01/2002-12-31"]),
    "temporal-number": _set("schema:temporalCoverage", [2001]),
    "temporal-named-eras": _set(
        "schema:temporalCoverage",
        [{"@type": ["time:ProperInterval"], "time:intervalStartedBy": "isc:LowerDevonian"}],
    ),
    "temporal-unbounded-interval": _set(
        "schema:temporalCoverage", [{"@type": ["time:ProperInterval"]}]
    ),
    "variable-without-name": _set("schema:variableMeasured", [{"@type": ["schema:PropertyValue"]}]),
    "variable-with-name": _set(
        "schema:variableMeasured", [{"@type": ["schema:PropertyValue"], "schema:name": "depth"}]
    ),
    "variable-property-id-string": _set(
        "schema:variableMeasured",
        [{"@type": ["schema:PropertyValue"], "schema:name": "t", "schema:propertyID": "x"}],
    ),
    "technique-term-untyped": _set("schema:measurementTechnique", [{"schema:name": "CTD"}]),
    "technique-text": _set("schema:measurementTechnique", ["CTD cast"]),
    "quality-without-value": _set(
        "dqv:hasQualityMeasurement",
        [{"@type": ["dqv:QualityMeasurement"], "dqv:isMeasurementOf": "completeness"}],
    ),
    "quality": _set(
        "dqv:hasQualityMeasurement",
        [
            {
                "@type": ["dqv:QualityMeasurement"],
                "dqv:isMeasurementOf": "completeness",
                "dqv:value": "98%",
            }
        ],
    ),
}


def _bases(corpus: Path) -> Iterator[tuple[str, Any]]:
    """The discovery examples as published and as normalised, and the core examples."""
    for path in sorted((corpus / "cdif-discovery-1.0" / "examples").glob("*.json*")):
        document = json.loads(path.read_text(encoding="utf-8"))
        yield path.name, document
        for number, item in enumerate(normalise(document, document_url="https://example.org/")):
            yield f"{path.name}~normalised{number}", item.record
    core = corpus / "cdif-core-1.0"
    for path in [*sorted(core.glob("*/example*.json")), *sorted(core.glob("*/tests/*.json"))]:
        yield path.name, json.loads(path.read_text(encoding="utf-8"))


def _cases(corpus: Path) -> Iterator[tuple[str, Any]]:
    for name, document in _bases(corpus):
        yield name, document
        if isinstance(document, dict) and "schema:name" in document:
            for label, mutate in MUTATIONS.items():
                variant = copy.deepcopy(document)
                mutate(variant)
                yield f"{name}+{label}", variant


def test_verdicts_agree_with_the_official_discovery_schema(corpus: Path) -> None:
    official = _official(corpus)
    cases = list(_cases(corpus))
    assert len(cases) > 1000
    verdicts = {name: (official.is_valid(doc), _ours(doc)) for name, doc in cases}
    assert [(name, pair) for name, pair in verdicts.items() if pair[0] != pair[1]] == []
    # every published example is valid, and the mutations both break and mend documents
    published = [name for name in verdicts if name.endswith((".json", ".jsonld"))]
    examples = [name for name in published if not name.startswith(("example", "about"))]
    assert examples and all(verdicts[name][0] for name in examples if "-fail" not in name)
    mutated = [pair[0] for name, pair in verdicts.items() if "+" in name]
    assert True in mutated and False in mutated


def _aloha(corpus: Path) -> dict[str, Any]:
    path = corpus / "cdif-discovery-1.0/examples/CDIF-aloha-dataset.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


WEB_API = {
    "@type": ["schema:WebAPI"],
    "schema:serviceType": "OGC API - Features",
    "schema:termsOfService": {
        "@type": ["schema:CreativeWork"],
        "schema:url": "https://data.example.org/terms",
    },
    "schema:potentialAction": [
        {
            "@type": ["schema:SearchAction"],
            "schema:name": "items",
            "schema:target": {
                "@type": ["schema:EntryPoint"],
                "schema:urlTemplate": "https://data.example.org/items?bbox={bbox}",
            },
        }
    ],
}


def _distribution_with(extra: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    def apply(record: dict[str, Any]) -> None:
        record["schema:distribution"] = [{**record["schema:distribution"][0], **extra}]

    return apply


def _add_distribution(item: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    def apply(record: dict[str, Any]) -> None:
        record["schema:distribution"] = [*record["schema:distribution"], copy.deepcopy(item)]

    return apply


@pytest.mark.parametrize(
    ("label", "mutate", "official_valid", "our_valid"),
    [
        # (1) 1.1 conformance URIs are accepted
        (
            "1.1 URIs",
            _declare("https://w3id.org/cdif/core/1.1", "https://w3id.org/cdif/discovery/1.1"),
            False,
            True,
        ),
        (
            "discovery 1.1 URI",
            _declare(CORE_10, "https://w3id.org/cdif/discovery/1.1"),
            False,
            True,
        ),
        # (2) nil values stand for a whole discovery item
        ("nil extent", _set("schema:spatialCoverage", "nil:notapplicable"), False, True),
        ("nil variables", _set("schema:variableMeasured", ["nil:notapplicable"]), False, True),
        (
            "nil beside a period",
            _set("schema:temporalCoverage", ["2001/2002", "nil:unknown"]),
            True,
            False,
        ),
        ("nil technique", _set("schema:measurementTechnique", ["nil:missing"]), True, False),
        # (3) the core items follow the official core schema, not the older copy embedded in
        # the official discovery file
        ("numeric contentSize", _distribution_with({"schema:contentSize": 2048}), True, False),
        ("link typed CreativeWork only", _add_distribution(WEB_API), True, False),
    ],
)
def test_named_differences_from_the_official_discovery_schema(
    corpus: Path,
    label: str,
    mutate: Callable[[dict[str, Any]], None],
    official_valid: bool,
    our_valid: bool,
) -> None:
    official = _official(corpus)
    record = _aloha(corpus)
    assert (official.is_valid(record), _ours(record)) == (True, True)
    mutate(record)
    assert (official.is_valid(record), _ours(record)) == (official_valid, our_valid), label


def test_the_core_items_agree_with_the_official_core_schema(corpus: Path) -> None:
    # the third named difference is agreement with the official core 1.0 schema
    from jsonschema import Draft202012Validator

    core = Draft202012Validator(
        json.loads((corpus / "cdif-core-1.0/cdifCore/resolvedSchema.json").read_text())
    )
    for mutate in (_distribution_with({"schema:contentSize": 2048}), _add_distribution(WEB_API)):
        record = _aloha(corpus)
        mutate(record)
        assert core.is_valid(record) is False
        assert validate_record(record, rules="cdif-core-1.0").valid is False


def test_a_discovery_record_is_judged_by_discovery_rules(corpus: Path) -> None:
    record = _aloha(corpus)
    record["schema:spatialCoverage"] = [{"@type": ["schema:Place"], "schema:description": "x"}]
    report = validate_record(record)
    # core decides validity; the discovery verdict says what discovery wants
    assert (report.rules, report.valid) == ("cdif-core-1.0", True)
    discovery = report.profiles[-1]
    assert (discovery.rules, discovery.status) == ("cdif-discovery-1.0", "invalid")
    assert [e.pointer for e in discovery.errors] == ["/schema:spatialCoverage/0"]
    # the same record declaring core only is not checked for discovery items
    record["schema:subjectOf"]["dcterms:conformsTo"] = [{"@id": CORE_10}]
    assert [v.key for v in validate_record(record).profiles] == ["core/1.0"]


def test_normalised_discovery_examples_are_valid_under_discovery_rules(corpus: Path) -> None:
    invalid: list[tuple[str, Any]] = []
    judged = 0
    for path in sorted((corpus / "cdif-discovery-1.0" / "examples").glob("*.json*")):
        document = json.loads(path.read_text(encoding="utf-8"))
        for item in normalise(document, document_url="https://example.org/"):
            for verdict in validate_record(item.record).profiles:
                judged += verdict.rules == DISCOVERY_RULES
                if verdict.status != "valid":
                    invalid.append((path.name, [e.pointer for e in verdict.errors]))
    assert judged >= 16
    assert invalid == []


def test_our_discovery_schema_is_not_the_official_file(corpus: Path) -> None:
    from importlib import resources

    ours = resources.files("cdif_harvester").joinpath("schemas/cdif-discovery-1.0.schema.json")
    schema = json.loads(ours.read_text())
    assert schema != json.loads((corpus / OFFICIAL).read_text())
    # it extends our core schema by reference rather than by a copy of it
    assert schema["allOf"][0] == {"$ref": "urn:cdif-harvester:schema:cdif-core-1.0"}
