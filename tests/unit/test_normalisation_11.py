"""Normalising records that declare a CDIF 1.1 profile: the 1.1 shapes are kept, repairs named.

The official 1.1 building blocks (../shared/cdif-1.1) are the oracle where present: an example
valid under a profile's official schema stays valid after normalisation. See
docs/decisions/0060-normalising-cdif-11.md.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from cdif_harvester.domain.records.normalisation import normalise

DOCUMENT_URL = "https://pub.example/page.html"
CORE_11 = "https://w3id.org/cdif/core/1.1"
PROFILES = {
    "core": "cdifCore",
    "discovery": "cdifDiscovery",
    "data_description": "cdifDataDescription",
    "data_structure": "cdifDataStructure",
    "manifest": "cdifManifest",
    "provenance": "cdifProvenance",
}
# (example, profile) pairs that cannot stay valid, and why (docs/decisions/0060):
KNOWN_LOSSES = {
    # the discovery schema wants geosparql:asWKT's @type as an array, which JSON-LD forbids
    # in a value object; we write the one datatype (and name the repair)
    ("exampleCDIFDiscoveryComplete.json", "discovery"),
    ("exampleCDIFDataDescription.json", "discovery"),
    ("exampleCDIFcomplete.json", "discovery"),
}


def _examples(root: Path) -> list[Path]:
    return sorted(root.glob("*/*/example*.json"))


def _claims(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    found = set(re.findall(r"https?://w3id\.org/cdif/([a-z_]+)/1\.1", text))
    return sorted(found & set(PROFILES))


def _validator(root: Path, profile: str) -> jsonschema.Draft202012Validator:
    schema_path = root / "cdifProfile" / PROFILES[profile] / "resolvedSchema.json"
    return jsonschema.Draft202012Validator(json.loads(schema_path.read_text(encoding="utf-8")))


def _record(document: Any, fast_path: bool = True) -> tuple[dict[str, Any], tuple[str, ...]]:
    (result,) = normalise(document, document_url=DOCUMENT_URL, fast_path=fast_path)
    return result.record, result.notes


# --- the official examples as oracle ------------------------------------------------------


@pytest.mark.parametrize("fast_path", [True, False])
def test_official_examples_stay_valid_under_the_profiles_they_claim(
    cdif_11: Path, fast_path: bool
) -> None:
    validators = {profile: _validator(cdif_11, profile) for profile in PROFILES}
    kept, lost = 0, []
    for path in _examples(cdif_11):
        claims = _claims(path)
        document = json.loads(path.read_text(encoding="utf-8"))
        valid_before = [p for p in claims if validators[p].is_valid(document)]
        if not valid_before:
            continue
        record, _ = _record(document, fast_path)
        for profile in valid_before:
            if validators[profile].is_valid(record):
                kept += 1
            else:
                lost.append((path.name, profile))
    assert set(lost) <= KNOWN_LOSSES, sorted(set(lost) - KNOWN_LOSSES)
    assert kept >= 30


def test_every_official_example_claiming_core_stays_valid_under_core(cdif_11: Path) -> None:
    core = _validator(cdif_11, "core")
    checked = 0
    for path in _examples(cdif_11):
        document = json.loads(path.read_text(encoding="utf-8"))
        if "core" not in _claims(path) or not core.is_valid(document):
            continue
        record, _ = _record(document)
        assert core.is_valid(record), (path.name, core.iter_errors(record).__next__().message)
        checked += 1
    assert checked >= 10


def test_examples_with_array_typed_values_give_records(cdif_11: Path) -> None:
    # These failed JSON-LD expansion ("invalid typed value") and their records were lost
    for name in (
        "cdifCompositeProfile/CoreDiscovery/exampleCDIFDiscoveryComplete.json",
        "cdifCompositeProfile/DiscoveryDataDescription/exampleCDIFDataDescription.json",
        "cdifCompositeProfile/cdifComplete/exampleCDIFcomplete.json",
    ):
        document = json.loads((cdif_11 / name).read_text(encoding="utf-8"))
        record, notes = _record(document)
        assert record["schema:name"]
        assert any("geosparql:wktLiteral" in note for note in notes), notes


# --- self-contained: shapes kept and repairs named ----------------------------------------


def _document(conforms_to: str, **record: Any) -> dict[str, Any]:
    return {
        "@context": {
            "schema": "http://schema.org/",
            "dcterms": "http://purl.org/dc/terms/",
            "dcat": "http://www.w3.org/ns/dcat#",
            "prov": "http://www.w3.org/ns/prov#",
            "cdi": "http://ddialliance.org/Specification/DDI-CDI/1.0/RDF/",
            "geosparql": "http://www.opengis.net/ont/geosparql#",
            "sf": "http://www.opengis.net/ont/sf#",
        },
        "@id": "https://pub.example/dataset/1",
        "@type": ["schema:Dataset"],
        "schema:name": "Borehole logs",
        "schema:identifier": {
            "@type": ["schema:PropertyValue"],
            "schema:propertyID": "https://registry.identifiers.org/registry/doi",
            "schema:value": "10.1234/abc",
        },
        "schema:variableMeasured": [
            {
                "@type": ["schema:PropertyValue", "cdi:InstanceVariable"],
                "schema:name": "temperature",
                "schema:propertyID": "https://vocab.example/temp",
            }
        ],
        "prov:wasGeneratedBy": [
            {"@type": ["prov:Activity"], "prov:used": [{"@id": "https://pub.example/sample/1"}]}
        ],
        "schema:spatialCoverage": {
            "@type": "schema:Place",
            "geosparql:hasGeometry": {
                "@type": "sf:Polygon",
                "geosparql:asWKT": {
                    "@type": ["geosparql:wktLiteral"],
                    "@value": "POINT(1 2)",
                },
            },
        },
        "schema:subjectOf": {
            "@id": "https://pub.example/record/1",
            "@type": ["schema:Dataset"],
            "dcterms:conformsTo": [{"@id": conforms_to}],
            **record,
        },
    }


@pytest.mark.parametrize("fast_path", [True, False])
def test_a_11_record_keeps_additional_type_as_an_iri_reference(fast_path: bool) -> None:
    document = _document(CORE_11, **{"schema:additionalType": [{"@id": "dcat:CatalogRecord"}]})
    record, notes = _record(document, fast_path)
    assert record["schema:subjectOf"]["schema:additionalType"] == [{"@id": "dcat:CatalogRecord"}]
    assert not any("additionalType" in note for note in notes)


@pytest.mark.parametrize("fast_path", [True, False])
def test_a_11_record_with_the_string_form_gets_the_iri_and_a_note(fast_path: bool) -> None:
    document = _document(CORE_11, **{"schema:additionalType": ["dcat:CatalogRecord"]})
    record, notes = _record(document, fast_path)
    assert record["schema:subjectOf"]["schema:additionalType"] == [{"@id": "dcat:CatalogRecord"}]
    assert (
        "schema:additionalType 'dcat:CatalogRecord' written as an IRI reference (CDIF 1.1)" in notes
    )


def test_a_11_record_without_catalog_record_gets_it_added_and_named() -> None:
    record, notes = _record(_document(CORE_11))
    assert record["schema:subjectOf"]["schema:additionalType"] == [{"@id": "dcat:CatalogRecord"}]
    assert any("added as an IRI reference" in note for note in notes)


@pytest.mark.parametrize("fast_path", [True, False])
def test_a_11_record_keeps_its_shapes(fast_path: bool) -> None:
    record, _ = _record(_document(CORE_11), fast_path)
    identifier = record["schema:identifier"]
    assert identifier["@type"] == ["schema:PropertyValue"]
    assert identifier["schema:value"] == "10.1234/abc"
    (activity,) = record["prov:wasGeneratedBy"]
    assert activity["prov:used"] == [{"@id": "https://pub.example/sample/1"}]
    # the 1.1 prefixes: cdi types compact; profile IRIs stay in full (not "cdif:core/1.1")
    assert record["schema:variableMeasured"][0]["@type"] == [
        "schema:PropertyValue",
        "cdi:InstanceVariable",
    ]
    assert record["schema:subjectOf"]["dcterms:conformsTo"] == [{"@id": CORE_11}]
    assert record["@context"]["cdi"] == "http://ddialliance.org/Specification/DDI-CDI/1.0/RDF/"


def test_a_data_description_record_gets_property_ids_as_arrays() -> None:
    document = _document("https://w3id.org/cdif/data_description/1.1")
    record, _ = _record(document)
    assert record["schema:variableMeasured"][0]["schema:propertyID"] == [
        "https://vocab.example/temp"
    ]


@pytest.mark.parametrize("fast_path", [True, False])
def test_an_array_typed_value_is_repaired_and_named(fast_path: bool) -> None:
    record, notes = _record(_document(CORE_11), fast_path)
    geometry = record["schema:spatialCoverage"]["geosparql:hasGeometry"]
    assert geometry["geosparql:asWKT"] == {"@type": "geosparql:wktLiteral", "@value": "POINT(1 2)"}
    assert any(
        note.startswith('value object @type ["geosparql:wktLiteral"] written as') for note in notes
    )


@pytest.mark.parametrize("fast_path", [True, False])
def test_an_undeclared_11_prefix_is_read_as_its_iri_and_the_11_shapes_kept(
    fast_path: bool,
) -> None:
    document = _document(CORE_11)
    document["csvw:delimiter"] = ","  # csvw never declared: an IRI with the scheme "csvw"
    record, notes = _record(document, fast_path)
    assert record["csvw:delimiter"] == ","
    assert record["schema:subjectOf"]["schema:additionalType"] == [{"@id": "dcat:CatalogRecord"}]
    assert record["@context"]["csvw"] == "http://www.w3.org/ns/csvw#"
    assert (
        "prefix 'csvw:' used without being declared: read as http://www.w3.org/ns/csvw# (1 IRI)"
        in notes
    )


def test_an_undeclared_10_prefix_is_read_as_its_iri_too() -> None:
    # A 1.0 record: "prov" is one of the CDIF 1.0 context's prefixes; the record was lost
    document = _document("https://w3id.org/cdif/core/1.0")
    del document["@context"]["prov"]
    record, notes = _record(document)
    assert record["prov:wasGeneratedBy"][0]["prov:used"] == [
        {"@id": "https://pub.example/sample/1"}
    ]
    assert any(note.startswith("prefix 'prov:' used without being declared") for note in notes)


def test_a_11_record_names_the_core_prefixes_its_context_left_out() -> None:
    document = _document(CORE_11)
    del document["@context"]["prov"], document["@context"]["dcat"]
    document["@context"]["prov"] = "http://www.w3.org/ns/prov#"  # bound again: only dcat left
    record, notes = _record(document)
    assert record["@context"]["dcat"] == "http://www.w3.org/ns/dcat#"
    assert [note for note in notes if note.startswith("@context:")] == [
        "@context: dcat bound by the CDIF 1.1 context (the document's context did not bind it;"
        " CDIF core wants schema, dcterms, dcat and prov)"
    ]
    _, notes_bound = _record(_document(CORE_11))
    assert not any(note.startswith("@context:") for note in notes_bound)


@pytest.mark.parametrize("conforms_to", ["https://w3id.org/cdif/core/1.0", None])
def test_a_10_record_or_none_keeps_the_10_shapes(conforms_to: str | None) -> None:
    document = _document(conforms_to or "https://pub.example/profile")
    document["schema:subjectOf"]["schema:additionalType"] = [{"@id": "dcat:CatalogRecord"}]
    record, notes = _record(document)
    assert record["schema:subjectOf"]["schema:additionalType"] == ["dcat:CatalogRecord"]
    assert "cdi" not in record["@context"]
    assert record["schema:variableMeasured"][0]["@type"] == [
        "schema:PropertyValue",
        "http://ddialliance.org/Specification/DDI-CDI/1.0/RDF/InstanceVariable",
    ]
    assert not any("CDIF 1.1" in note for note in notes)
    # while the same document claiming 1.1 gets the 1.1 shape
    document["schema:subjectOf"]["dcterms:conformsTo"] = [{"@id": CORE_11}]
    record_11, _ = _record(document)
    assert record_11["schema:subjectOf"]["schema:additionalType"] == [{"@id": "dcat:CatalogRecord"}]


@pytest.mark.parametrize("fast_path", [True, False])
def test_a_data_structure_gets_its_arrays_where_the_profile_wants_them(fast_path: bool) -> None:
    document = _document("https://w3id.org/cdif/data_structure/1.1")
    document["@context"]["cdif"] = "https://w3id.org/cdif/"
    variable = {
        "@type": ["cdi:RepresentedVariable"],
        "cdif:displayLabel": ["Observed at"],
        "cdi:takesSubstantiveValuesFrom": {
            "@type": ["cdif:EnumerationDomain"],
            "cdif:displayLabel": "Flags",
        },
        "cdif:hasValuesFrom": {
            "@type": ["cdi:DescriptorValueDomain"],
            "cdif:takesValuesFrom": [{"cdif:value": "T"}],
        },
    }
    document["schema:distribution"] = {
        "@type": ["schema:DataDownload"],
        "cdi:isStructuredBy": {
            "@type": ["cdi:LongDataStructure"],
            "cdi:has_DataStructureComponent": [
                {
                    "@type": ["cdi:AttributeComponent"],
                    "cdi:qualifies": [{"@id": "https://pub.example/comp/value"}],
                    "cdif:isDefinedBy_RepresentedVariable": variable,
                }
            ],
        },
    }
    # a variable qualifies one component: an object, as the data description profile wants
    document["schema:variableMeasured"][0]["cdi:qualifies"] = [{"@id": "https://pub.example/v"}]
    record, _ = _record(document, fast_path)
    structure = record["schema:distribution"][0]["cdi:isStructuredBy"]
    (component,) = structure["cdi:has_DataStructureComponent"]
    assert component["cdi:qualifies"] == [{"@id": "https://pub.example/comp/value"}]
    shaped = component["cdif:isDefinedBy_RepresentedVariable"]
    assert shaped["cdif:displayLabel"] == ["Observed at"]
    assert shaped["cdi:takesSubstantiveValuesFrom"]["cdif:displayLabel"] == "Flags"
    assert shaped["cdif:hasValuesFrom"]["cdif:takesValuesFrom"] == [{"cdif:value": "T"}]
    assert record["schema:variableMeasured"][0]["cdi:qualifies"] == {"@id": "https://pub.example/v"}
