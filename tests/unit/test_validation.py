"""Validation against our CDIF schemas: rule sets, messages, nil values, and agreement of our
core schema with the official core 1.0 schema (the discovery schema has its own test module)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.domain.records.validation import (
    RULE_SETS,
    ValidationReport,
    declared_conformance,
    profile_query,
    rules_for,
    validate_record,
)

GOLDEN = Path(__file__).parent / "golden" / "validation"
CORE_10 = "https://w3id.org/cdif/core/1.0"
CORE_11 = "https://w3id.org/cdif/core/1.1"
DISCOVERY_10 = "https://w3id.org/cdif/discovery/1.0"
DISCOVERY_11 = "https://w3id.org/cdif/discovery/1.1"


def _load(name: str) -> Any:
    return json.loads((GOLDEN / name).read_text(encoding="utf-8"))


def _minimal() -> dict[str, Any]:
    return json.loads(
        (Path(__file__).parent / "golden/normalisation/cdif_shaped.input.json").read_text()
    )


def test_golden_report_messages_and_pointers() -> None:
    report = validate_record(_load("missing_items.input.json"))
    assert report.to_dict() == _load("missing_items.expected.json")


def test_valid_record_has_no_errors_and_records_conformance() -> None:
    report = validate_record(_minimal())
    assert report.valid is True
    assert report.errors == ()
    # discovery outranks core as the declared conformance; core decides validity
    assert report.conformance == "https://w3id.org/cdif/discovery/1.0"
    assert report.rules == "cdif-core-1.0"
    assert [(v.key, v.status, v.rules) for v in report.profiles] == [
        ("core/1.0", "valid", "cdif-core-1.0"),
        ("discovery/1.0", "valid", "cdif-discovery-1.0"),
    ]
    assert [w.pointer for w in report.warnings] == [
        "/schema:description",
        "/schema:provider",
        "/schema:keywords",
        "/schema:spatialCoverage",
        "/schema:temporalCoverage",
        "/schema:variableMeasured",
        "/schema:subjectOf/schema:maintainer",
    ]


def _shaped_for(record: dict[str, Any], rules: str) -> dict[str, Any]:
    """The record with its catalogue record type in the shape of the rule set's CDIF version."""
    if rules.endswith("-1.1"):
        record["schema:subjectOf"]["schema:additionalType"] = [{"@id": "dcat:CatalogRecord"}]
    return record


@pytest.mark.parametrize(
    ("declared", "valid", "conformance", "rules", "profiles"),
    [
        ([CORE_10], True, CORE_10, "cdif-core-1.0", ["core/1.0 valid"]),
        ([CORE_10 + "/"], True, CORE_10, "cdif-core-1.0", ["core/1.0 valid"]),
        # read as a claim of core 1.0, but the rules want the https URI
        (
            ["http://w3id.org/cdif/core/1.0"],
            False,
            CORE_10,
            "cdif-core-1.0",
            ["core/1.0 invalid"],
        ),
        ([CORE_11], True, CORE_11, "cdif-core-1.1", ["core/1.1 valid"]),
        ([CORE_11 + "/"], True, CORE_11, "cdif-core-1.1", ["core/1.1 valid"]),
        # the newest version claimed decides which core judges the record
        # (the record has the 1.1 shapes, which the 1.0 rules refuse)
        (
            [CORE_10, CORE_11],
            True,
            CORE_11,
            "cdif-core-1.1",
            ["core/1.1 valid", "core/1.0 invalid"],
        ),
        (
            [CORE_11, DISCOVERY_11],
            True,
            DISCOVERY_11,
            "cdif-core-1.1",
            ["core/1.1 valid", "discovery/1.1 valid"],
        ),
        # a 1.1 claim makes a 1.1 record, judged by core 1.1, which wants its own URI declared
        (
            [CORE_10, DISCOVERY_10, DISCOVERY_11],
            False,
            DISCOVERY_11,
            "cdif-core-1.1",
            [
                "core/1.1 undeclared invalid",
                "core/1.0 invalid",
                "discovery/1.0 invalid",
                "discovery/1.1 valid",
            ],
        ),
        # core is always judged; a discovery record declares core too (profiles add their URIs)
        (
            [DISCOVERY_10],
            False,
            DISCOVERY_10,
            "cdif-core-1.0",
            ["core/1.0 undeclared invalid", "discovery/1.0 invalid"],
        ),
        # a profile we hold no rules for is "unknown", not a failure
        (
            [CORE_10, "https://w3id.org/cdif/somethingnew/1.0"],
            True,
            CORE_10,
            "cdif-core-1.0",
            ["core/1.0 valid", "somethingnew/1.0 unknown"],
        ),
        (
            [CORE_10, "https://w3id.org/cdif/core/2.0"],
            True,
            CORE_10,
            "cdif-core-1.0",
            ["core/1.0 valid", "core/2.0 unknown"],
        ),
        (
            ["https://example.org/other-profile"],
            False,
            None,
            "cdif-core-1.0",
            ["core/1.0 undeclared invalid"],
        ),
    ],
)
def test_conformance_declarations_pick_the_rules(
    declared: list[str], valid: bool, conformance: str | None, rules: str, profiles: list[str]
) -> None:
    record = _shaped_for(_minimal(), rules)
    record["schema:subjectOf"]["dcterms:conformsTo"] = [{"@id": iri} for iri in declared]
    report = validate_record(record)
    assert (report.valid, report.conformance, report.rules) == (valid, conformance, rules)
    assert declared_conformance(record) == conformance
    assert rules_for(record) == RULE_SETS[rules]
    assert report.to_dict()["rules"] == rules
    assert [
        f"{v.key}{'' if v.declared else ' undeclared'} {v.status}" for v in report.profiles
    ] == profiles
    assert [v["status"] for v in report.to_dict()["profiles"]] == [
        v.status for v in report.profiles
    ]


def test_a_10_shaped_record_declaring_core_11_is_judged_by_the_11_rules() -> None:
    record = _minimal()
    record["schema:subjectOf"]["dcterms:conformsTo"] = [{"@id": CORE_11}]
    report = validate_record(record)
    assert (report.valid, report.rules) == (False, "cdif-core-1.1")
    assert [e.pointer for e in report.errors] == ["/schema:subjectOf/schema:additionalType"]


def test_missing_profile_message_names_what_the_rules_want() -> None:
    record = _minimal()
    record["schema:subjectOf"]["dcterms:conformsTo"] = [{"@id": CORE_11}]
    report = validate_record(record, rules="cdif-discovery-1.0")
    assert [(e.pointer, e.message) for e in report.errors] == [
        (
            "/schema:subjectOf/dcterms:conformsTo",
            "schema:subjectOf/dcterms:conformsTo must include "
            "https://w3id.org/cdif/discovery/1.0 (or discovery/1.1) "
            "(Metadata profile identifier, 1..*)",
        )
    ]
    report = validate_record(record, rules="cdif-discovery-1.1")
    assert [(e.pointer, e.message) for e in report.errors] == [
        (
            "/schema:subjectOf/dcterms:conformsTo",
            "schema:subjectOf/dcterms:conformsTo must include "
            "https://w3id.org/cdif/discovery/1.1 (Metadata profile identifier, 1..*)",
        )
    ]


def test_rules_can_be_chosen_by_name() -> None:
    # Given a core-only record with a discovery item of the wrong shape
    record = _minimal()
    record["schema:subjectOf"]["dcterms:conformsTo"] = [{"@id": CORE_10}]
    record["schema:spatialCoverage"] = {"@type": ["schema:Place"], "schema:name": "Biscay"}
    # When judged by the rules it declares, the discovery item is not checked
    assert validate_record(record).valid is True
    # Then judged by discovery rules, the shape and the missing profile URI are both reported
    report = validate_record(record, rules="cdif-discovery-1.0")
    assert (report.valid, report.rules, report.conformance) == (
        False,
        "cdif-discovery-1.0",
        CORE_10,
    )
    assert [e.pointer for e in report.errors] == [
        "/schema:spatialCoverage",
        "/schema:subjectOf/dcterms:conformsTo",
    ]


def test_unknown_rules_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown rule set 'cdif-core-2.0'"):
        validate_record(_minimal(), rules="cdif-core-2.0")
    with pytest.raises(ValueError, match="unknown rule set"):
        validate_record([], rules="cdif-core-2.0")  # type: ignore[arg-type]
    assert validate_record([], rules="cdif-discovery-1.1").rules == "cdif-discovery-1.1"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("mutate", "pointer", "message"),
    [
        (
            lambda r: r.pop("schema:name"),
            "/schema:name",
            "schema:name is required (Title, 1)",
        ),
        (
            lambda r: r.pop("schema:license"),
            "/schema:license",
            "schema:license or schema:conditionsOfAccess is required (Rights, 1..*)",
        ),
        (
            lambda r: r.update({"@type": ["schema:CreativeWork"]}),
            "/@type",
            "@type must include schema:Dataset (Resource type, 1)",
        ),
        (
            lambda r: r["schema:subjectOf"].pop("@id"),
            "/schema:subjectOf/@id",
            "schema:subjectOf/@id is required (Metadata identifier, 1)",
        ),
        (
            lambda r: r.update({"schema:license": "https://spdx.org/licenses/CC0-1.0"}),
            "/schema:license",
            "schema:license: 'https://spdx.org/licenses/CC0-1.0' is not of type 'array' "
            "(Rights, 1..*)",
        ),
    ],
)
def test_messages_name_the_cdif_property(
    mutate: Callable[[dict[str, Any]], Any], pointer: str, message: str
) -> None:
    record = _minimal()
    mutate(record)
    report = validate_record(record)
    assert report.valid is False
    assert [(e.pointer, e.message) for e in report.errors] == [(pointer, message)]


def test_non_object_is_reported_not_raised() -> None:
    report = validate_record([])  # type: ignore[arg-type]
    assert report == ValidationReport(False, None, report.errors, ())
    assert report.errors[0].keyword == "type"


# --- agreement with the official resolvedSchema.json -------------------------------------


def _drop(*keys: str) -> Callable[[dict[str, Any]], None]:
    def apply(record: dict[str, Any]) -> None:
        for key in keys:
            record.pop(key, None)

    return apply


def _drop_core_conformance(record: dict[str, Any]) -> None:
    subject = record.get("schema:subjectOf")
    if isinstance(subject, dict) and isinstance(subject.get("dcterms:conformsTo"), list):
        subject["dcterms:conformsTo"] = [
            item for item in subject["dcterms:conformsTo"] if item.get("@id") != CORE_10
        ] or [{"@id": "https://example.org/some-other-profile"}]


def _type_without_dataset(record: dict[str, Any]) -> None:
    record["@type"] = ["schema:CreativeWork"]


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(record: dict[str, Any]) -> None:
        record[key] = copy.deepcopy(value)

    return apply


MUTATIONS: dict[str, Callable[[dict[str, Any]], None]] = {
    "drop-name": _drop("schema:name"),
    "drop-dateModified": _drop("schema:dateModified"),
    "drop-context": _drop("@context"),
    "name-not-string": _set("schema:name", 5),
    "license-not-array": _set("schema:license", "https://spdx.org/licenses/CC0-1.0"),
    "creator-not-list": _set("schema:creator", [{"@id": "https://orcid.org/0"}]),
    "context-as-string": _set("@context", "https://schema.org/"),
    "drop-rights": _drop("schema:license", "schema:conditionsOfAccess"),
    "drop-subjectOf": _drop("schema:subjectOf"),
    "type-without-dataset": _type_without_dataset,
    "conformsTo-without-core": _drop_core_conformance,
    "drop-identifier": _drop("schema:identifier"),
    "drop-url-and-distribution": _drop("schema:url", "schema:distribution"),
}


def _agreement_cases(corpus: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    core = corpus / "cdif-core-1.0"
    paths = [
        *sorted((core / "cdifCore").glob("example*.json")),
        *sorted((core / "cdifCatalogRecord").glob("example*.json")),
        *sorted(core.glob("*/tests/*-fail.json")),
        *sorted((corpus / "cdif-discovery-1.0" / "examples").glob("*.json*")),
    ]
    for path in paths:
        document = json.loads(path.read_text(encoding="utf-8"))
        yield path.name, document
        if isinstance(document, dict) and "schema:name" in document:
            for label, mutate in MUTATIONS.items():
                variant = copy.deepcopy(document)
                mutate(variant)
                yield f"{path.name}+{label}", variant


def test_verdicts_agree_with_the_official_schema(corpus: Path) -> None:
    from jsonschema import Draft202012Validator

    official = Draft202012Validator(
        json.loads((corpus / "cdif-core-1.0/cdifCore/resolvedSchema.json").read_text())
    )
    cases = list(_agreement_cases(corpus))
    assert len(cases) > 100
    ours = {name: validate_record(doc, rules="cdif-core-1.0").valid for name, doc in cases}
    disagreements = [
        (name, official.is_valid(doc), ours[name])
        for name, doc in cases
        if official.is_valid(doc) != ours[name]
    ]
    assert disagreements == []
    # the mutations really do break valid documents (the test can fail)
    assert any(not official.is_valid(doc) for name, doc in cases if "+" in name)
    assert any(official.is_valid(doc) for name, doc in cases if "+" not in name)


def test_a_record_declaring_core_11_is_judged_by_the_11_rules(corpus: Path, cdif_11: Path) -> None:
    from jsonschema import Draft202012Validator

    official_10 = Draft202012Validator(
        json.loads((corpus / "cdif-core-1.0/cdifCore/resolvedSchema.json").read_text())
    )
    official_11 = Draft202012Validator(
        json.loads((cdif_11 / "cdifProfile/cdifCore/resolvedSchema.json").read_text())
    )
    record = json.loads((corpus / "cdif-core-1.0/cdifCore/exampleCdifCoreMinimal.json").read_text())
    record["schema:subjectOf"]["dcterms:conformsTo"] = [{"@id": CORE_11}]
    # a 1.0-shaped record that merely declares core 1.1 fails both official schemas, and ours
    report = validate_record(record)
    assert (official_10.is_valid(record), official_11.is_valid(record)) == (False, False)
    assert (report.valid, report.conformance, report.rules) == (False, CORE_11, "cdif-core-1.1")
    # in the 1.1 shape of the catalogue record type it passes the 1.1 rules, ours and official
    record["schema:subjectOf"]["schema:additionalType"] = [{"@id": "dcat:CatalogRecord"}]
    assert official_11.is_valid(record) is True
    assert validate_record(record).valid is True


@pytest.mark.parametrize(
    ("path", "value", "official_valid", "our_valid"),
    [
        # the spec allows them; the official schema wants an object
        ("schema:creator", {"@list": ["nil:unknown"]}, False, True),
        ("schema:provider", ["nil:missing"], False, True),
        ("schema:subjectOf/schema:maintainer", "nil:unknown", False, True),
        # the official schema takes any string; the spec says these are not nilable,
        # optional items are left out, and "not applicable" is for coverage and variables
        ("schema:name", "nil:missing", True, False),
        ("schema:identifier", "nil:unknown", True, False),
        ("schema:keywords", ["nil:missing"], True, False),
        ("schema:description", "nil:notapplicable", True, False),
    ],
)
def test_nil_values_are_named_differences_from_the_official_schema(
    corpus: Path, path: str, value: Any, official_valid: bool, our_valid: bool
) -> None:
    from jsonschema import Draft202012Validator

    official = Draft202012Validator(
        json.loads((corpus / "cdif-core-1.0/cdifCore/resolvedSchema.json").read_text())
    )
    record = json.loads((corpus / "cdif-core-1.0/cdifCore/exampleCdifCoreMinimal.json").read_text())
    assert official.is_valid(record) and validate_record(record).valid
    *parents, last = path.split("/")
    node = record
    for step in parents:
        node = node[step]
    node[last] = value
    assert (official.is_valid(record), validate_record(record).valid) == (
        official_valid,
        our_valid,
    )


def test_our_schema_is_not_the_official_file(corpus: Path) -> None:
    from importlib import resources

    ours = resources.files("cdif_harvester").joinpath("schemas/cdif-core-1.0.schema.json")
    official = corpus / "cdif-core-1.0/cdifCore/resolvedSchema.json"
    assert json.loads(ours.read_text()) != json.loads(official.read_text())


# --- nil values (discoverability, "Required, but nilable") ---------------------------------


def _with(path: str, value: Any, *, profiles: tuple[str, ...] = (CORE_10,)) -> dict[str, Any]:
    """The minimal record declaring ``profiles``, with ``value`` at ``path`` (a/b for nesting)."""
    record = _minimal()
    record["schema:subjectOf"]["dcterms:conformsTo"] = [{"@id": iri} for iri in profiles]
    *parents, last = path.split("/")
    node = record
    for step in parents:
        node = node[step]
    node[last] = value
    return record


DISCOVERY = (CORE_10, DISCOVERY_10)
PERSON = {"@type": ["schema:Person"], "schema:name": "Roe, Rick"}
PLACE = {"@type": ["schema:Place"], "schema:name": "Bay of Biscay"}


@pytest.mark.parametrize(
    ("path", "value", "profiles"),
    [
        # required but nilable, core: missing or unknown, as the value or its only element
        ("schema:description", "nil:missing", (CORE_10,)),
        ("schema:dateModified", "nil:unknown", (CORE_10,)),
        ("schema:creator", {"@list": ["nil:unknown"]}, (CORE_10,)),
        ("schema:creator", "nil:unknown", (CORE_10,)),
        ("schema:provider", ["nil:missing"], (CORE_10,)),
        ("schema:provider", "nil:unknown", (CORE_10,)),
        # required for metadata management: nil values allowed
        ("schema:subjectOf/schema:maintainer", "nil:unknown", (CORE_10,)),
        ("schema:subjectOf/schema:sdDatePublished", "nil:missing", (CORE_10,)),
        # the same under discovery rules (core rules apply there too)
        ("schema:creator", {"@list": ["nil:missing"]}, DISCOVERY),
        ("schema:provider", ["nil:unknown"], DISCOVERY),
        # geographic extent, temporal coverage, variable measured: also "not applicable"
        ("schema:spatialCoverage", "nil:notapplicable", DISCOVERY),
        ("schema:spatialCoverage", ["nil:notapplicable"], DISCOVERY),
        ("schema:spatialCoverage", ["nil:unknown"], DISCOVERY),
        ("schema:temporalCoverage", "nil:notapplicable", DISCOVERY),
        ("schema:temporalCoverage", ["nil:missing"], DISCOVERY),
        ("schema:variableMeasured", ["nil:notapplicable"], DISCOVERY),
        ("schema:variableMeasured", "nil:unknown", DISCOVERY),
    ],
)
def test_nil_values_are_accepted_where_the_spec_allows_them(
    path: str, value: Any, profiles: tuple[str, ...]
) -> None:
    report = validate_record(_with(path, value, profiles=profiles))
    assert (report.valid, report.errors) == (True, ())


NOT_NILABLE = "this item is not nilable"
OPTIONAL = "leave an optional item out instead"
NOT_APPLICABLE = "nil:notapplicable is only for geographic extent, temporal coverage and variable"


@pytest.mark.parametrize(
    ("path", "value", "profiles", "pointer", "message"),
    [
        # required, not nilable
        (
            "schema:name",
            "nil:missing",
            (CORE_10,),
            "/schema:name",
            f"schema:name must not be a nil value (nil:missing); {NOT_NILABLE} (Title, 1)",
        ),
        (
            "schema:identifier",
            "nil:unknown",
            (CORE_10,),
            "/schema:identifier",
            "schema:identifier must not be a nil value (nil:unknown); "
            f"{NOT_NILABLE} (Resource identifier, 1)",
        ),
        (
            "@id",
            "nil:unknown",
            DISCOVERY,
            "/@id",
            f"@id must not be a nil value (nil:unknown); {NOT_NILABLE} (Resource identifier, 1)",
        ),
        (
            "schema:url",
            "nil:missing",
            (CORE_10,),
            "/schema:url",
            f"schema:url must not be a nil value (nil:missing); {NOT_NILABLE} (Distribution, 1)",
        ),
        (
            "schema:license",
            ["nil:unknown"],
            (CORE_10,),
            "/schema:license/0",
            f"schema:license/0 must not be a nil value (nil:unknown); {NOT_NILABLE} (Rights, 1..*)",
        ),
        (
            "schema:license",
            "nil:unknown",
            (CORE_10,),
            "/schema:license",
            "schema:license: nil:unknown is not allowed here (Rights, 1..*)",
        ),
        (
            "schema:subjectOf/@id",
            "nil:missing",
            (CORE_10,),
            "/schema:subjectOf/@id",
            "schema:subjectOf/@id must not be a nil value (nil:missing); "
            f"{NOT_NILABLE} (Metadata identifier, 1)",
        ),
        # optional items are left out, not nil
        (
            "schema:keywords",
            ["nil:missing"],
            (CORE_10,),
            "/schema:keywords/0",
            f"schema:keywords/0 must not be a nil value (nil:missing); {OPTIONAL} (Keyword, 0..*)",
        ),
        (
            "schema:datePublished",
            "nil:unknown",
            (CORE_10,),
            "/schema:datePublished",
            "schema:datePublished must not be a nil value (nil:unknown); "
            f"{OPTIONAL} (Publication Date, 0..1)",
        ),
        (
            "schema:measurementTechnique",
            ["nil:unknown"],
            DISCOVERY,
            "/schema:measurementTechnique/0",
            "schema:measurementTechnique/0 must not be a nil value (nil:unknown); "
            f"{OPTIONAL} (Measurement technique, 0..*)",
        ),
        # "not applicable" only where the spec names it
        (
            "schema:description",
            "nil:notapplicable",
            (CORE_10,),
            "/schema:description",
            f"schema:description: {NOT_APPLICABLE} measured (Description, 0..1)",
        ),
        (
            "schema:creator",
            {"@list": ["nil:notapplicable"]},
            (CORE_10,),
            "/schema:creator/@list/0",
            "schema:creator/@list/0: nil:notapplicable is not allowed here (Originators, 0..*)",
        ),
        (
            "schema:subjectOf/schema:maintainer",
            "nil:notapplicable",
            (CORE_10,),
            "/schema:subjectOf/schema:maintainer",
            "schema:subjectOf/schema:maintainer: nil:notapplicable is not allowed here "
            "(Metadata contact, 0..1)",
        ),
        # a nil value stands for the whole item, never beside real values
        (
            "schema:creator",
            {"@list": [PERSON, "nil:unknown"]},
            (CORE_10,),
            "/schema:creator/@list",
            "schema:creator/@list: a nil value must be the only value (Originators, 0..*)",
        ),
        (
            "schema:spatialCoverage",
            [PLACE, "nil:notapplicable"],
            DISCOVERY,
            "/schema:spatialCoverage",
            "schema:spatialCoverage: a nil value must be the only value (Geographic extent, 0..*)",
        ),
        (
            "schema:temporalCoverage",
            ["2020-01-01/2020-12-31", "nil:unknown"],
            DISCOVERY,
            "/schema:temporalCoverage",
            "schema:temporalCoverage: a nil value must be the only value (Temporal coverage, 0..1)",
        ),
    ],
)
def test_nil_values_are_refused_elsewhere(
    path: str, value: Any, profiles: tuple[str, ...], pointer: str, message: str
) -> None:
    # the verdict of the most specific profile declared (discovery items: discovery's)
    verdict = validate_record(_with(path, value, profiles=profiles)).profiles[-1]
    assert verdict.status == "invalid"
    assert [(e.pointer, e.message) for e in verdict.errors] == [(pointer, message)]


def test_a_nil_value_inside_a_distribution_is_explained() -> None:
    record = _minimal()
    record["schema:distribution"][0]["schema:contentUrl"] = "nil:missing"
    report = validate_record(record)
    assert [(e.pointer, e.message) for e in report.errors] == [
        (
            "/schema:distribution/0",
            "schema:distribution/0 does not match any allowed form; closest: "
            "schema:distribution/0/schema:contentUrl must not be a nil value (nil:missing); "
            f"{NOT_NILABLE} (Distribution, 1)",
        )
    ]


def test_discovery_nil_items_are_not_checked_under_core_rules() -> None:
    # core rules know nothing of geographic extent: any value passes there
    record = _with("schema:spatialCoverage", [PLACE, "nil:notapplicable"])
    assert validate_record(record).valid is True
    assert validate_record(record, rules="cdif-discovery-1.0").valid is False


@pytest.mark.parametrize(
    ("profile", "verdict", "expected"),
    [
        ("discovery/1.1", "invalid", ("discovery", "1.1", "invalid")),
        ("discovery 1.1", None, ("discovery", "1.1", None)),
        ("Discovery", "valid", ("discovery", None, "valid")),
        ("https://w3id.org/cdif/data_description/1.1/", None, ("data_description", "1.1", None)),
        ("datadescription/1.0", None, ("data_description", "1.0", None)),
        (None, "valid", (None, None, "valid")),
    ],
)
def test_profile_queries_are_read_in_every_spelling(
    profile: str | None, verdict: str | None, expected: tuple[str | None, ...]
) -> None:
    query = profile_query(profile, verdict)
    assert (query.profile, query.version, query.verdict) == expected


@pytest.mark.parametrize(
    ("profile", "verdict", "message"),
    [
        ("discovery/one", None, "unknown profile 'discovery/one'"),
        ("https://example.org/profile", None, "unknown profile"),
        ("discovery", "broken", "unknown verdict 'broken': use one of valid, invalid, unknown"),
        (None, "unknown", "verdict 'unknown' needs a profile"),
    ],
)
def test_bad_profile_queries_are_refused_with_what_is_accepted(
    profile: str | None, verdict: str | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        profile_query(profile, verdict)
