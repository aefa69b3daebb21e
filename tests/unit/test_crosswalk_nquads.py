"""The N-Quads view: parses as N-Quads (rdflib), holds the record's triples in its named graph,
is deterministic, and never fetches a context."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from rdflib import Dataset, Literal, URIRef
from rdflib.namespace import RDF

from cdif_harvester.domain.views.nquads import NQuadsError, record_nquads

GOLDEN = Path(__file__).parent / "golden" / "crosswalk"
SCHEMA = "http://schema.org/"
RESOURCE = URIRef("https://doi.org/10.5072/fjord-ctd")
METADATA = URIRef("https://data.example.org/metadata/fjord-ctd")


def _record() -> dict[str, Any]:
    data = json.loads((GOLDEN / "landing.record.jsonld").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _parse(text: str) -> Dataset:
    dataset = Dataset()
    with warnings.catch_warnings():
        # rdflib's N-Quads parser calls its own deprecated Dataset API (not our concern).
        warnings.simplefilter("ignore", DeprecationWarning)
        dataset.parse(data=text, format="nquads")
    return dataset


def test_the_nquads_parse_and_hold_the_records_statements_in_its_graph() -> None:
    text = record_nquads(_record(), graph=str(METADATA))
    dataset = _parse(text)
    quads = list(dataset.quads((None, None, None, None)))
    # one quad per line, all in the record's named graph
    assert len(quads) == len(text.splitlines()) == 92
    assert {str(graph) for *_, graph in quads} == {str(METADATA)}
    graph = dataset.graph(METADATA)
    assert (RESOURCE, RDF.type, URIRef(SCHEMA + "Dataset")) in graph
    assert (RESOURCE, URIRef(SCHEMA + "subjectOf"), METADATA) in graph
    assert (METADATA, URIRef(SCHEMA + "about"), RESOURCE) in graph
    assert (RESOURCE, URIRef(SCHEMA + "name"), Literal("Fjord CTD casts 2023")) in graph
    assert (
        METADATA,
        URIRef("http://purl.org/dc/terms/conformsTo"),
        URIRef("https://w3id.org/cdif/core/1.0"),
    ) in graph
    # the creators keep their order (an RDF list)
    creators = graph.value(RESOURCE, URIRef(SCHEMA + "creator"))
    first = graph.value(creators, RDF.first)
    assert first == URIRef("https://orcid.org/0000-0002-1825-0097")


def test_without_a_graph_name_the_triples_are_in_the_default_graph() -> None:
    text = record_nquads(_record())
    dataset = _parse(text)
    assert len(dataset.default_graph) == len(text.splitlines()) == 92
    assert (RESOURCE, RDF.type, URIRef(SCHEMA + "Dataset")) in dataset.default_graph
    assert record_nquads(_record(), graph="not an IRI") == text


def test_the_output_is_deterministic_sorted_and_ignores_key_order() -> None:
    record = _record()
    first = record_nquads(record, graph=str(METADATA))
    lines = first.splitlines()
    assert lines == sorted(set(lines)) and first.endswith(" .\n")
    assert record_nquads(record, graph=str(METADATA)) == first
    reordered = {key: record[key] for key in reversed(list(record))}
    assert record_nquads(reordered, graph=str(METADATA)) == first


def test_the_official_complete_example_converts(corpus: Path) -> None:
    record = json.loads(
        (corpus / "cdif-core-1.0/cdifCore/exampleCdifCoreComplete.json").read_text("utf-8")
    )
    text = record_nquads(record, graph="https://example.org/metadataRecord99001")
    graph = _parse(text).graph(URIRef("https://example.org/metadataRecord99001"))
    resource = URIRef("https://example.org/completeCoreDataset99001")
    assert (resource, RDF.type, URIRef(SCHEMA + "Dataset")) in graph
    assert (
        resource,
        URIRef(SCHEMA + "subjectOf"),
        URIRef("https://example.org/metadataRecord99001"),
    ) in graph
    assert len(graph) == len(text.splitlines())


def test_a_context_the_offline_loader_does_not_serve_is_never_fetched() -> None:
    record = _record()
    record["@context"] = "https://contexts.example.org/unknown.jsonld"
    with pytest.raises(NQuadsError) as raised:
        record_nquads(record)
    assert raised.value.reason == "nquads-failed"
