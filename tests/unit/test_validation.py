"""Validation against our CDIF core 1.0 schema, and agreement with the official schema."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.domain.validation import (
    ValidationReport,
    declared_conformance,
    validate_record,
)

GOLDEN = Path(__file__).parent / "golden" / "validation"
CORE_10 = "https://w3id.org/cdif/core/1.0"


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
    # discovery outranks core when both are declared
    assert report.conformance == "https://w3id.org/cdif/discovery/1.0"
    assert [w.pointer for w in report.warnings] == [
        "/schema:description",
        "/schema:provider",
        "/schema:keywords",
        "/schema:subjectOf/schema:maintainer",
    ]


@pytest.mark.parametrize(
    ("declared", "valid", "conformance"),
    [
        (["https://w3id.org/cdif/core/1.0"], True, CORE_10),
        (["https://w3id.org/cdif/core/1.0/"], True, CORE_10),
        (["https://w3id.org/cdif/core/1.1"], True, "https://w3id.org/cdif/core/1.1"),
        (["https://w3id.org/cdif/core/1.1/"], True, "https://w3id.org/cdif/core/1.1"),
        (
            ["https://w3id.org/cdif/core/1.1", "https://w3id.org/cdif/discovery/1.1"],
            True,
            "https://w3id.org/cdif/discovery/1.1",
        ),
        (["https://w3id.org/cdif/discovery/1.0"], False, "https://w3id.org/cdif/discovery/1.0"),
        (["https://example.org/other-profile"], False, None),
    ],
)
def test_conformance_declarations(
    declared: list[str], valid: bool, conformance: str | None
) -> None:
    record = _minimal()
    record["schema:subjectOf"]["dcterms:conformsTo"] = [{"@id": iri} for iri in declared]
    report = validate_record(record)
    assert (report.valid, report.conformance) == (valid, conformance)
    assert declared_conformance(record) == conformance


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


MUTATIONS: dict[str, Callable[[dict[str, Any]], None]] = {
    "drop-name": _drop("schema:name"),
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
    disagreements = [
        (name, official.is_valid(doc), validate_record(doc).valid)
        for name, doc in cases
        if official.is_valid(doc) != validate_record(doc).valid
    ]
    assert disagreements == []
    # the mutations really do break valid documents (the test can fail)
    assert any(not official.is_valid(doc) for name, doc in cases if "+" in name)
    assert any(official.is_valid(doc) for name, doc in cases if "+" not in name)


def test_core_11_is_the_documented_difference(corpus: Path) -> None:
    from jsonschema import Draft202012Validator

    official = Draft202012Validator(
        json.loads((corpus / "cdif-core-1.0/cdifCore/resolvedSchema.json").read_text())
    )
    record = json.loads((corpus / "cdif-core-1.0/cdifCore/exampleCdifCoreMinimal.json").read_text())
    record["schema:subjectOf"]["dcterms:conformsTo"] = [{"@id": "https://w3id.org/cdif/core/1.1"}]
    report = validate_record(record)
    assert official.is_valid(record) is False
    assert (report.valid, report.conformance) == (True, "https://w3id.org/cdif/core/1.1")


def test_our_schema_is_not_the_official_file(corpus: Path) -> None:
    from importlib import resources

    ours = resources.files("cdif_harvester").joinpath("schemas/cdif-core-1.0.schema.json")
    official = corpus / "cdif-core-1.0/cdifCore/resolvedSchema.json"
    assert json.loads(ours.read_text()) != json.loads(official.read_text())
