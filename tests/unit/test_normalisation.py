"""Normalisation to the CDIF 1.0 shape (golden inputs in, expected records out)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from pyld import jsonld

from cdif_harvester.domain.records import jsonld_loader
from cdif_harvester.domain.records.normalisation import (
    NormalisationError,
    NormalisedRecord,
    is_junk_id,
    normalise,
)
from cdif_harvester.domain.records.validation import validate_record
from cdif_harvester.errors import PermanentError

GOLDEN = Path(__file__).parent / "golden" / "normalisation"
DOCUMENT_URL = "https://pub.example/page.html#frag"
CASES = sorted(p.name.removesuffix(".input.json") for p in GOLDEN.glob("*.input.json"))


def _as_dict(result: NormalisedRecord) -> dict[str, Any]:
    found = {
        "record_id": result.record_id,
        "resource_id": result.resource_id,
        "identity_fallback": result.identity_fallback,
        "notes": list(result.notes),
        "record": result.record,
    }
    if result.item_list is not None:  # only records that came from an ItemList have one
        found["item_list"] = result.item_list
    return found


def _load(name: str) -> Any:
    return json.loads((GOLDEN / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", CASES)
def test_golden(case: str) -> None:
    # Given a published document, when it is normalised, then we get the expected records
    results = normalise(_load(f"{case}.input.json"), document_url=DOCUMENT_URL)
    assert [_as_dict(r) for r in results] == _load(f"{case}.expected.json")


@pytest.mark.parametrize("case", CASES)
def test_normalised_records_round_trip(case: str) -> None:
    # A normalised record is already CDIF-shaped: normalising it again changes nothing
    for result in normalise(_load(f"{case}.input.json"), document_url=DOCUMENT_URL):
        again = normalise(copy.deepcopy(result.record), document_url=DOCUMENT_URL)
        assert len(again) == 1
        assert again[0].record == result.record
        assert (again[0].record_id, again[0].resource_id) == (
            result.record_id,
            result.resource_id,
        )


@pytest.mark.parametrize(
    ("case", "valid"),
    [
        ("cdif_shaped", True),
        ("old_about_shape", True),
        ("array_of_nodes", True),
        ("graph_joined", True),  # declares core 1.1, accepted (see validation.py)
        ("plain_schemaorg", False),  # no conformsTo declared, and none is invented
        ("identity_fallback", False),
    ],
)
def test_normalised_records_validate_as_expected(case: str, valid: bool) -> None:
    (result,) = normalise(_load(f"{case}.input.json"), document_url=DOCUMENT_URL)
    report = validate_record(result.record)
    assert report.valid is valid, report.errors


def test_plain_schema_org_context_spellings_give_the_same_record() -> None:
    base = _load("plain_schemaorg.input.json")
    records = []
    for context in (
        "https://schema.org",
        "http://schema.org/",
        "https://schema.org/docs/jsonldcontext.jsonld",
        {"@vocab": "https://schema.org/"},
        {"@vocab": "http://schema.org/"},
    ):
        document = {**base, "@context": context}
        (result,) = normalise(document, document_url=DOCUMENT_URL)
        records.append(result.record)
    assert all(record == records[0] for record in records)
    assert records[0]["@type"] == ["schema:Dataset"]
    assert "schema:name" in records[0]


def test_no_conformance_is_invented() -> None:
    (result,) = normalise(_load("plain_schemaorg.input.json"), document_url=DOCUMENT_URL)
    assert "dcterms:conformsTo" not in result.record["schema:subjectOf"]
    assert result.identity_fallback is True
    assert result.record_id == "https://pub.example/page.html#record"


def test_several_datasets_get_numbered_fallbacks() -> None:
    document = {
        "@context": "https://schema.org",
        "@graph": [
            {"@type": "Dataset", "name": "one"},
            {"@type": "Person", "name": "not a dataset"},
            {"@type": "Dataset", "@id": "_:b7", "name": "two"},
        ],
    }
    results = normalise(document, document_url="https://pub.example/list")
    assert [(r.resource_id, r.record_id, r.identity_fallback) for r in results] == [
        ("https://pub.example/list#resource-1", "https://pub.example/list#record-1", True),
        ("https://pub.example/list#resource-2", "https://pub.example/list#record-2", True),
    ]
    assert [r.record["schema:name"] for r in results] == ["one", "two"]


def test_relative_ids_resolve_against_the_document_url() -> None:
    document = {
        "@context": "https://schema.org",
        "@type": "Dataset",
        "@id": "#dataset",
        "name": "x",
        "subjectOf": {"@id": "#metadata", "about": {"@id": "#dataset"}},
    }
    (result,) = normalise(document, document_url="https://pub.example/a/page.html")
    assert result.resource_id == "https://pub.example/a/page.html#dataset"
    assert result.record_id == "https://pub.example/a/page.html#metadata"
    assert result.identity_fallback is False


def test_resource_id_falls_back_to_identifier() -> None:
    document = {
        "@context": "https://schema.org",
        "@type": "Dataset",
        "@id": "",
        "name": "x",
        "identifier": {
            "@type": "PropertyValue",
            "value": "10.1/x",
            "url": "https://doi.org/10.1/x",
        },
    }
    (result,) = normalise(document, document_url="https://pub.example/p")
    assert result.resource_id == "https://doi.org/10.1/x"
    assert result.record["@id"] == "https://doi.org/10.1/x"
    assert result.record["schema:subjectOf"]["schema:about"] == {"@id": "https://doi.org/10.1/x"}
    assert any("schema:identifier" in note for note in result.notes)


def test_remote_context_is_refused_without_network() -> None:
    # The loader refuses any URL that is not one of our shipped contexts...
    with pytest.raises(jsonld.JsonLdError):
        jsonld_loader.document_loader("https://vocab.example.org/custom-context.jsonld")
    assert jsonld_loader.is_served("https://schema.org/")
    assert not jsonld_loader.is_served("https://vocab.example.org/custom-context.jsonld")
    # ...so a document that relies on it alone yields no Dataset, and says why
    document = {
        "@context": "https://vocab.example.org/custom-context.jsonld",
        "@type": "Dataset",
        "name": "x",
    }
    with pytest.raises(NormalisationError) as caught:
        normalise(document, document_url=DOCUMENT_URL)
    assert caught.value.reason == "no-dataset"
    assert "remote context https://vocab.example.org/custom-context.jsonld not loaded" in str(
        caught.value
    )


@pytest.mark.parametrize(
    "url",
    sorted(jsonld_loader.SCHEMA_ORG_CONTEXT_URLS) + [jsonld_loader.CDIF_CONTEXT_URL],
)
def test_loader_serves_our_contexts(url: str) -> None:
    remote = jsonld_loader.document_loader(url)
    assert remote["documentUrl"] == url
    assert isinstance(remote["document"]["@context"], dict)
    remote["document"]["@context"]["schema"] = "changed"  # callers get copies
    assert jsonld_loader.document_loader(url)["document"]["@context"]["schema"] != "changed"


def test_document_without_context_is_read_as_schema_org() -> None:
    (result,) = normalise(
        {"@type": "Dataset", "@id": "https://x.example/d", "name": "n"}, document_url=DOCUMENT_URL
    )
    assert result.record["schema:name"] == "n"
    assert "no @context: read with the schema.org context" in result.notes


@pytest.mark.parametrize(
    "document",
    [
        {"@context": "https://schema.org", "@type": "Organization", "name": "x"},
        [],
        "just a string",
        {"@context": "https://schema.org", "@type": "Dataset", "@id": "x", "about": "y"}
        | {"@type": "schema:CreativeWork"},
    ],
)
def test_documents_without_dataset_raise_no_dataset(document: Any) -> None:
    with pytest.raises(NormalisationError) as caught:
        normalise(document, document_url=DOCUMENT_URL)
    assert isinstance(caught.value, PermanentError)
    assert caught.value.reason == "no-dataset"


def test_invalid_json_ld_raises_normalisation_failed() -> None:
    with pytest.raises(NormalisationError) as caught:
        normalise({"@context": 5, "@type": "Dataset"}, document_url=DOCUMENT_URL)
    assert caught.value.reason == "normalisation-failed"
    assert "expansion failed" in str(caught.value)


def _corpus_documents(corpus: Path) -> list[Path]:
    core = corpus / "cdif-core-1.0" / "cdifCore"
    return sorted(core.glob("example*.json")) + sorted(
        (corpus / "cdif-discovery-1.0" / "examples").glob("*.json*")
    )


def test_corpus_examples_normalise_round_trip_and_stay_valid(corpus: Path) -> None:
    from jsonschema import Draft202012Validator

    official = Draft202012Validator(
        json.loads((corpus / "cdif-core-1.0/cdifCore/resolvedSchema.json").read_text())
    )
    documents = _corpus_documents(corpus)
    assert documents
    for path in documents:
        source = json.loads(path.read_text(encoding="utf-8"))
        (result,) = normalise(source, document_url=f"https://corpus.example/{path.name}")
        assert official.is_valid(result.record), (
            path.name,
            list(official.iter_errors(result.record))[:3],
        )
        assert validate_record(result.record).valid, path.name
        assert result.identity_fallback is False, path.name
        again = normalise(result.record, document_url=f"https://corpus.example/{path.name}")
        assert again[0].record == result.record, path.name


def test_corpus_catalog_records_alone_are_not_datasets(corpus: Path) -> None:
    for path in sorted((corpus / "cdif-core-1.0" / "cdifCatalogRecord").glob("example*.json")):
        with pytest.raises(NormalisationError):
            normalise(json.loads(path.read_text()), document_url="https://corpus.example/r")


# --- shared and merged nodes: normalisation never alters what it was given or what it returned


def _node_sharing_document() -> dict[str, Any]:
    """One @id (a Person) written three times: nested in Dataset A, nested in Dataset B, and
    at the top. The index merges the three; neither Dataset may see the other's version."""
    person = "https://orcid.org/0000-0002-0000-0007"
    return {
        "@context": "https://schema.org",
        "@graph": [
            {
                "@id": "https://pub.example/ds/a",
                "@type": "Dataset",
                "name": "A",
                "creator": {"@id": person, "@type": "Person", "name": "Written in A"},
                "subjectOf": {"@id": "https://pub.example/record/shared"},
            },
            {
                "@id": "https://pub.example/ds/b",
                "@type": "Dataset",
                "name": "B",
                "creator": {"@id": person, "knowsAbout": ["written in B"]},
                "subjectOf": {"@id": "https://pub.example/record/shared"},
            },
            {"@id": person, "knowsAbout": ["written at the top"], "email": "p@pub.example"},
            {
                "@id": "https://pub.example/record/shared",
                "@type": "DigitalDocument",
                "dcterms:conformsTo": {"@id": "https://w3id.org/cdif/core/1.0"},
                "keywords": ["record keyword"],
            },
        ],
    }


def test_merged_nodes_do_not_leak_into_nested_occurrences() -> None:
    # Given one person written differently in two Datasets and at the top of the graph
    results = normalise(_node_sharing_document(), document_url=DOCUMENT_URL)
    by_id = {r.resource_id: r.record for r in results}
    # Then each Dataset keeps the person exactly as it was written inside it
    (creator_a,) = by_id["https://pub.example/ds/a"]["schema:creator"]["@list"]
    (creator_b,) = by_id["https://pub.example/ds/b"]["schema:creator"]["@list"]
    assert set(creator_a) == {"@id", "@type", "schema:name"}
    assert creator_b["schema:knowsAbout"] == "written in B"
    assert "schema:email" not in creator_b


def test_a_record_shared_by_two_datasets_is_fixed_for_each_separately() -> None:
    results = normalise(_node_sharing_document(), document_url=DOCUMENT_URL)
    abouts = [r.record["schema:subjectOf"]["schema:about"]["@id"] for r in results]
    assert abouts == ["https://pub.example/ds/a", "https://pub.example/ds/b"]
    for result in results:
        record = result.record["schema:subjectOf"]
        assert record["@type"] == ["schema:Dataset", "schema:DigitalDocument"]
        assert record["schema:additionalType"] == ["dcat:CatalogRecord"]
        assert record["schema:keywords"] == "record keyword"
        assert any("typed schema:DigitalDocument also typed" in note for note in result.notes)


def test_a_dataset_nested_in_another_is_normalised_without_altering_its_parent() -> None:
    # Given Dataset B written inside Dataset A (hasPart) and found first, through its record
    document = {
        "@context": "https://schema.org",
        "@graph": [
            {
                "@id": "https://pub.example/record/b",
                "@type": "DigitalDocument",
                "about": {"@id": "https://pub.example/ds/b"},
            },
            {
                "@id": "https://pub.example/ds/a",
                "@type": "Dataset",
                "name": "A",
                "hasPart": {"@id": "https://pub.example/ds/b", "@type": "Dataset", "name": "B"},
            },
        ],
    }
    first, second = normalise(document, document_url=DOCUMENT_URL)
    assert (first.resource_id, second.resource_id) == (
        "https://pub.example/ds/b",
        "https://pub.example/ds/a",
    )
    # Then B, as written inside A, has not gained the record B was given
    assert second.record["schema:hasPart"] == {
        "@id": "https://pub.example/ds/b",
        "@type": ["schema:Dataset"],
        "schema:name": "B",
    }


@pytest.mark.parametrize("case", CASES)
def test_the_input_document_is_left_unchanged(case: str) -> None:
    document = _load(f"{case}.input.json")
    before = copy.deepcopy(document)
    normalise(document, document_url=DOCUMENT_URL)
    assert document == before


def test_the_input_document_is_left_unchanged_when_nodes_merge() -> None:
    document = _node_sharing_document()
    before = copy.deepcopy(document)
    first = [r.record for r in normalise(document, document_url=DOCUMENT_URL)]
    assert document == before
    assert [r.record for r in normalise(document, document_url=DOCUMENT_URL)] == first


def test_returned_records_share_nothing_mutable() -> None:
    # Given the records of one document, altering one (its context, a nested value)...
    first, second = normalise(_node_sharing_document(), document_url=DOCUMENT_URL)
    first.record["@context"]["schema"] = "changed"
    first.record["schema:subjectOf"]["schema:additionalType"].append("changed")
    first.record["schema:creator"]["@list"][0]["schema:name"] = "changed"
    # ...changes neither its sibling nor any later record
    assert second.record["@context"]["schema"] == "http://schema.org/"
    assert second.record["schema:subjectOf"]["schema:additionalType"] == ["dcat:CatalogRecord"]
    again = normalise(_node_sharing_document(), document_url=DOCUMENT_URL)
    assert again[0].record["@context"]["schema"] == "http://schema.org/"
    assert again[0].record["schema:creator"]["@list"][0]["schema:name"] == "Written in A"


# --- ItemLists: each element its own record, the list kept as provenance


def test_itemlist_elements_keep_the_list_as_provenance() -> None:
    results = normalise(_load("itemlist_positions.input.json"), document_url=DOCUMENT_URL)
    positions = {r.resource_id: (r.item_list or {}).get("position") for r in results}
    # Declared positions (a number, or a string of digits), else the element's place
    assert positions == {
        "https://doi.org/10.5072/snap-b": 2,
        "https://doi.org/10.5072/snap-a": 1,
        "https://doi.org/10.5072/snap-c": 4,
        "https://doi.org/10.5072/snap-d": 5,
        "https://doi.org/10.5072/unlisted": None,
    }
    listed = [r for r in results if r.item_list is not None]
    assert {r.item_list["id"] for r in listed if r.item_list} == {
        "https://catalogue.example.org/lists/2025-snapshots"
    }


def test_a_list_without_identity_gives_positions_only() -> None:
    document = {
        "@context": "https://schema.org",
        "@type": "ItemList",
        "@id": "_:list",
        "itemListElement": [
            {"@type": "ListItem", "position": "first", "item": {"@type": "Dataset", "name": "x"}},
            {"@type": "Dataset", "@id": "https://doi.org/10.5072/y", "name": "y"},
        ],
    }
    results = normalise(document, document_url=DOCUMENT_URL)
    assert [r.item_list for r in results] == [{"position": 1}, {"position": 2}]


# --- the discovery profile wants more arrays than core


def _discovery_document(profile: str) -> dict[str, Any]:
    return {
        "@context": {"@vocab": "https://schema.org/", "dcterms": "http://purl.org/dc/terms/"},
        "@type": "Dataset",
        "@id": "https://doi.org/10.5072/disc",
        "name": "Profiles",
        "spatialCoverage": {"@type": "Place", "name": "Gyre", "alternateName": "NPSG"},
        "temporalCoverage": "2001/2002",
        "measurementTechnique": "CTD casts",
        "variableMeasured": {
            "@type": "PropertyValue",
            "name": "temperature",
            "alternateName": "temp",
            "propertyID": "https://vocab.nerc.ac.uk/collection/P01/current/TEMPPR01/",
        },
        "subjectOf": {
            "@id": "https://pub.example/record/disc",
            "@type": "Dataset",
            "additionalType": "dcat:CatalogRecord",
            "dcterms:conformsTo": [{"@id": "https://w3id.org/cdif/core/1.0"}, {"@id": profile}],
        },
    }


@pytest.mark.parametrize("fast_path", [True, False])
def test_discovery_items_are_arrays_when_the_record_declares_discovery(fast_path: bool) -> None:
    document = _discovery_document("https://w3id.org/cdif/discovery/1.0/")
    (result,) = normalise(document, document_url=DOCUMENT_URL, fast_path=fast_path)
    record = result.record
    assert record["schema:temporalCoverage"] == ["2001/2002"]
    assert record["schema:measurementTechnique"] == ["CTD casts"]
    (place,) = record["schema:spatialCoverage"]
    assert place["schema:alternateName"] == ["NPSG"]
    (variable,) = record["schema:variableMeasured"]
    assert variable["schema:alternateName"] == ["temp"]
    assert variable["schema:propertyID"] == [
        "https://vocab.nerc.ac.uk/collection/P01/current/TEMPPR01/"
    ]


def test_discovery_items_stay_as_written_for_a_core_record() -> None:
    # Core says nothing of these items: a single value stays single
    document = _discovery_document("https://w3id.org/cdif/core/1.1")
    (result,) = normalise(document, document_url=DOCUMENT_URL)
    assert result.record["schema:temporalCoverage"] == "2001/2002"
    assert result.record["schema:spatialCoverage"]["schema:alternateName"] == "NPSG"
    assert result.record["schema:variableMeasured"][0]["schema:propertyID"].startswith("https")


@pytest.mark.parametrize("value", ["nil:unknown", "nil:missing", " nil:notapplicable "])
def test_cdif_nil_values_are_not_identities(value: str) -> None:
    assert is_junk_id(value)
    assert not is_junk_id("https://doi.org/10.5072/nil.unknown")
