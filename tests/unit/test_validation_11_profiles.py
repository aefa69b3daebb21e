"""Our CDIF 1.1 manifest, provenance, codelist and concept scheme rules agree with the official.

The official building blocks (``resolvedSchema.json`` of each profile, beside the repository) are
the oracle: every example and test document of the 1.1 building blocks and of the core 1.0
corpus, then targeted breakages of the valid examples (each one rejected by the official schema)
and every member of them dropped or replaced, get the same verdict from our rule set as from
the official schema; the Rust and Python engines agree on all of them. A few tests check that
typical errors read well. See docs/decisions/0059-cdif-11-manifest-provenance-codelist-rules.md.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from cdif_harvester.domain.records.validation import engine_verdicts, validate_record

Mutation = Callable[[Any], None]
# Rule set profile -> the folder of its official building block.
BLOCKS = {
    "manifest": "cdifManifest",
    "provenance": "cdifProvenance",
    "codelist": "cdifCodelist",
    "conceptscheme": "cdifConceptScheme",
}
REPLACEMENTS: tuple[Any, ...] = (None, 5, "text", [], {}, ["text"], [{}], {"@id": "ex:x"})


@cache
def _official(root: Path, profile: str) -> Draft202012Validator:
    schema = json.loads(
        (root / "cdifProfile" / BLOCKS[profile] / "resolvedSchema.json").read_text()
    )
    return Draft202012Validator(schema)


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _documents(root: Path) -> list[tuple[str, Any]]:
    """Every 1.1 example and test document, and the core 1.0 corpus ones when present."""
    corpus = root.parent / "corpus" / "cdif-core-1.0"
    paths = [
        *sorted(root.glob("*/*/example*.json")),
        *sorted(root.glob("*/*/tests/*.json")),
        *sorted(corpus.glob("*/example*.json")),
        *sorted(corpus.glob("*/tests/*.json")),
    ]
    return [(f"{path.parent.name}/{path.name}", _load(path)) for path in paths]


def _verdicts(root: Path, profile: str, document: Any) -> tuple[bool, bool, tuple[bool, bool]]:
    """Official verdict, our verdict, and the two engines' verdicts under our rule set."""
    rules = f"cdif-{profile}-1.1"
    official = _official(root, profile).is_valid(document)
    ours = validate_record(document, rules=rules).valid
    return official, ours, engine_verdicts(document, rules=rules)


def _assert_agreement(root: Path, profile: str, cases: list[tuple[str, Any]]) -> int:
    """Fails listing every case where a verdict differs; returns how many the official rejects."""
    disagreements, rejected = [], 0
    for name, document in cases:
        official, ours, engines = _verdicts(root, profile, document)
        rejected += not official
        if ours != official or engines != (official, official):
            disagreements.append(f"{name}: official {official}, ours {ours}, engines {engines}")
    assert not disagreements, "\n".join(disagreements)
    return rejected


# --- the official examples and tests -------------------------------------------------------


@pytest.mark.parametrize("profile", sorted(BLOCKS))
def test_every_official_document_gets_the_official_verdict(cdif_11: Path, profile: str) -> None:
    documents = _documents(cdif_11)
    assert len(documents) >= 33

    rejected = _assert_agreement(cdif_11, profile, documents)

    # Both verdicts occur: the profile's own examples pass, the other profiles' documents do not.
    assert 0 < rejected < len(documents)


# --- targeted breakages --------------------------------------------------------------------


def _at(document: Any, *path: Any) -> Any:
    for step in path:
        document = document[step]
    return document


def _drop(*path: Any) -> Mutation:
    return lambda doc: _at(doc, *path[:-1]).pop(path[-1])


def _put(value: Any, *path: Any) -> Mutation:
    def mutate(doc: Any) -> None:
        _at(doc, *path[:-1])[path[-1]] = copy.deepcopy(value)

    return mutate


def _record(uri: str) -> dict[str, Any]:
    return {
        "@id": "ex:record",
        "@type": ["schema:Dataset"],
        "schema:additionalType": [{"@id": "dcat:CatalogRecord"}],
        "dcterms:conformsTo": [{"@id": uri}],
    }


CORE = "https://w3id.org/cdif/core/1.1"
CODELIST = "https://w3id.org/cdif/codelist/1.1"
CONCEPTSCHEME = "https://w3id.org/cdif/conceptscheme/1.1"
ARCHIVE = ("schema:distribution", 0, "schema:hasPart", 0)
PART = ("schema:hasPart", 0)
MANIFEST_BREAKS: dict[str, Mutation] = {
    "profile not declared": _put([{"@id": CORE}], "schema:subjectOf", "dcterms:conformsTo"),
    "no profile at all": _put([], "schema:subjectOf", "dcterms:conformsTo"),
    "profile as a string": _put([CORE], "schema:subjectOf", "dcterms:conformsTo"),
    "distribution not a list": lambda doc: doc.update(
        {"schema:distribution": doc["schema:distribution"][0]}
    ),
    "bundle without parts": _drop("schema:distribution", 0, "schema:hasPart"),
    "bundle parts not a list": _put({"@id": "#x"}, "schema:distribution", 0, "schema:hasPart"),
    "archive part without @type": _drop(*ARCHIVE, "@type"),
    "archive part without name": _drop(*ARCHIVE, "schema:name"),
    "archive part without encoding format": _drop(*ARCHIVE, "schema:encodingFormat"),
    "archive part not a MediaObject": _put(["schema:Thing"], *ARCHIVE, "@type"),
    "archive part a DataDownload": _put(
        ["schema:MediaObject", "schema:DataDownload"], *ARCHIVE, "@type"
    ),
    "archive part @type a string": _put("schema:MediaObject", *ARCHIVE, "@type"),
    "encoding format a string": _put("text/csv", *ARCHIVE, "schema:encodingFormat"),
    "size value a string": _put("245000", *ARCHIVE, "schema:size", "schema:value"),
    "size not a QuantitativeValue": _put(["schema:Thing"], *ARCHIVE, "schema:size", "@type"),
    "checksum without @type": _drop(*ARCHIVE, "spdx:checksum", "@type"),
    "sidecar about not a reference": _put(
        [{"@id": "#data-csv", "schema:name": "x"}],
        "schema:distribution",
        0,
        "schema:hasPart",
        1,
        "schema:about",
    ),
    "package part typed https schema.org": _put(["https://schema.org/Dataset"], *PART, "@type"),
    "package part not a creative work": _put(["schema:Person"], *PART, "@type"),
    "package part without a type": _put([], *PART, "@type"),
    "package part about a string": _put("#data", *PART, "schema:about"),
    "package parts not a list": lambda doc: doc.update(
        {"schema:hasPart": doc["schema:hasPart"][0]}
    ),
}

ACTIVITY = ("prov:wasGeneratedBy", 0)
INSTRUMENT = (*ACTIVITY, "prov:used", 0, "schema:instrument", 0)
PROVENANCE_BREAKS: dict[str, Mutation] = {
    "profile not declared": _put([{"@id": CORE}], "schema:subjectOf", "dcterms:conformsTo"),
    "activities not a list": lambda doc: doc.update(
        {"prov:wasGeneratedBy": doc["prov:wasGeneratedBy"][0]}
    ),
    "activity without @type": _drop(*ACTIVITY, "@type"),
    "activity not a schema:Action": _put(["prov:Activity"], *ACTIVITY, "@type"),
    "activity not a prov:Activity": _put(
        ["schema:Action", "schema:CreateAction"], *ACTIVITY, "@type"
    ),
    "used item a number": _put([5], *ACTIVITY, "prov:used"),
    "used reference with more": _put([{"@id": "ex:x", "schema:name": "x"}], *ACTIVITY, "prov:used"),
    "used entity not a prov:Entity": _put(
        [{"@type": ["schema:Thing"], "schema:name": "Olivine"}], *ACTIVITY, "prov:used"
    ),
    "used not a list": _put({"@id": "ex:x"}, *ACTIVITY, "prov:used"),
    "instrument not a list": lambda doc: _at(doc, *ACTIVITY, "prov:used", 0).update(
        {"schema:instrument": _at(doc, *INSTRUMENT)}
    ),
    "instrument without name": _drop(*INSTRUMENT, "schema:name"),
    "instrument name too short": _put("SU", *INSTRUMENT, "schema:name"),
    "instrument not a schema:Product": _put(["schema:Thing", "schema:Place"], *INSTRUMENT, "@type"),
    "instrument category without @type": _drop(*INSTRUMENT, "schema:category", 0, "@type"),
    "agent without @type": _drop(*ACTIVITY, "schema:agent", "@type"),
    "agent without name or identifier": lambda doc: [
        _at(doc, *ACTIVITY, "schema:agent").pop(key) for key in ("schema:name", "schema:identifier")
    ],
    "contact point without email": _drop(
        *ACTIVITY, "schema:agent", "schema:contactPoint", "schema:email"
    ),
    "unknown action status": _put("done", *ACTIVITY, "schema:actionStatus"),
    "start time a number": _put(2025, *ACTIVITY, "schema:startTime"),
    "place without name or geometry": _put(
        {"@type": ["schema:Place"]}, *ACTIVITY, "schema:location"
    ),
    "latitude out of range": _put(
        {
            "@type": ["schema:Place"],
            "schema:geo": {
                "@type": ["schema:GeoCoordinates"],
                "schema:latitude": 100,
                "schema:longitude": 0,
            },
        },
        *ACTIVITY,
        "schema:location",
    ),
    "method without name or url": _put(
        {"@type": ["schema:HowTo"]}, *ACTIVITY, "schema:actionProcess"
    ),
    "property value without value": _put(
        [{"@type": ["schema:PropertyValue"], "schema:name": "x"}],
        *ACTIVITY,
        "schema:additionalProperty",
    ),
}

TOP = ("skos:hasTopConcept", 0)
NARROWER = (*TOP, "skos:narrower", 0)
CODELIST_BREAKS: dict[str, Mutation] = {
    "scheme without @id": _drop("@id"),
    "scheme without label": _drop("skos:prefLabel"),
    "scheme without identifier": _drop("schema:identifier"),
    "scheme without modification date": _drop("schema:dateModified"),
    "scheme without top concepts": _drop("skos:hasTopConcept"),
    "no top concepts": _put([], "skos:hasTopConcept"),
    "scheme without rights": _drop("schema:license"),
    "license a string": _put("https://creativecommons.org/licenses/by/4.0/", "schema:license"),
    "scheme not a skos:ConceptScheme": _put(["skos:Collection"], "@type"),
    "scheme label language-tagged": _put({"@value": "x", "@language": "en"}, "skos:prefLabel"),
    "concept without skos:notation": _drop(*TOP, "skos:notation"),
    "concept without skos:inScheme": _drop(*TOP, "skos:inScheme"),
    "concept without @id": _drop(*TOP, "@id"),
    "concept without label": _drop(*TOP, "skos:prefLabel"),
    "concept scheme reference not a list": _put({"@id": "mat:x"}, *TOP, "skos:inScheme"),
    "concept notation a number": _put(7, *TOP, "skos:notation"),
    "narrower concept without skos:broader": _drop(*NARROWER, "skos:broader"),
    "narrower concept without skos:notation": _drop(*NARROWER, "skos:notation"),
    "narrower reference with a label": _put({"@id": "mat:x", "skos:prefLabel": "x"}, *NARROWER),
    "record declaring another profile": _put(_record(CORE), "schema:subjectOf"),
    "record without additional type": lambda doc: doc.update(
        {
            "schema:subjectOf": {
                k: v for k, v in _record(CODELIST).items() if k != "schema:additionalType"
            }
        }
    ),
    "record not a catalogue record": lambda doc: doc.update(
        {"schema:subjectOf": {**_record(CODELIST), "schema:additionalType": ["dcat:Dataset"]}}
    ),
}
CONCEPTSCHEME_BREAKS: dict[str, Mutation] = {
    "scheme without @type": _drop("@type"),
    "scheme without label": _drop("skos:prefLabel"),
    "scheme without definition": _drop("skos:definition"),
    "scheme without top concepts": _drop("skos:hasTopConcept"),
    "no top concepts": _put([], "skos:hasTopConcept"),
    "scheme not a skos:ConceptScheme": _put(["skos:Concept"], "@type"),
    "scheme notation a string": _put("dt", "skos:notation"),
    "version a list": _put(["1.0"], "schema:version"),
    "label without @value": _put({"@language": "en"}, "skos:prefLabel"),
    "concept without @type": _drop(*TOP, "@type"),
    "concept without label": _drop(*TOP, "skos:prefLabel"),
    "concept not a skos:Concept": _put(["skos:Collection"], *TOP, "@type"),
    "concept notation a number": _put(7, *TOP, "skos:notation"),
    "concept scheme reference a string": _put("ex:datatypeScheme", *TOP, "skos:inScheme"),
    "narrower concept without label": _drop(*NARROWER, "skos:prefLabel"),
    "broader reference with more": _put([{"@id": "ex:numeric", "x": 1}], *NARROWER, "skos:broader"),
    "context binds skos elsewhere": _put({"skos": "http://example.org/skos#"}, "@context"),
    "record declaring another profile": _put(_record(CORE), "schema:subjectOf"),
    "record not typed schema:Dataset": lambda doc: doc.update(
        {"schema:subjectOf": {**_record(CONCEPTSCHEME), "@type": ["dcat:CatalogRecord"]}}
    ),
}

BREAKS = {
    "manifest": MANIFEST_BREAKS,
    "provenance": PROVENANCE_BREAKS,
    "codelist": CODELIST_BREAKS,
    "conceptscheme": CONCEPTSCHEME_BREAKS,
}


def _examples(root: Path, profile: str) -> list[tuple[str, Any]]:
    """The profile's own examples; the manifest one also gets independently accessible parts."""
    examples = [
        (path.name, _load(path))
        for path in sorted((root / "cdifProfile" / BLOCKS[profile]).glob("example*.json"))
    ]
    if profile == "manifest":
        for _, document in examples:
            document["schema:hasPart"] = [
                {
                    "@id": "ex:codebook",
                    "@type": ["schema:CreativeWork", "ex:Codebook"],
                    "schema:name": "Codebook",
                    "schema:url": "https://example.org/codebook.pdf",
                    "schema:about": [{"@id": "ex:data"}],
                }
            ]
    return examples


def _broken(root: Path, profile: str) -> Iterator[tuple[str, Any]]:
    """Each targeted breakage applied to each example it fits (the path it edits exists)."""
    for name, example in _examples(root, profile):
        for what, mutate in BREAKS[profile].items():
            document = copy.deepcopy(example)
            try:
                mutate(document)
            except (KeyError, IndexError, TypeError):
                continue
            yield f"{name}: {what}", document


@pytest.mark.parametrize("profile", sorted(BLOCKS))
def test_the_examples_pass_our_rules(cdif_11: Path, profile: str) -> None:
    for name, example in _examples(cdif_11, profile):
        assert _official(cdif_11, profile).is_valid(example), name
        report = validate_record(example, rules=f"cdif-{profile}-1.1")
        assert report.valid, (name, report.errors)


@pytest.mark.parametrize("profile", sorted(BLOCKS))
def test_targeted_breakages_get_the_official_verdict(cdif_11: Path, profile: str) -> None:
    cases = list(_broken(cdif_11, profile))
    applied = {name.split(": ", 1)[1] for name, _ in cases}
    assert applied == set(BREAKS[profile]), "every breakage fits some example"

    rejected = _assert_agreement(cdif_11, profile, cases)

    # Every breakage really breaks the document, by the official rules.
    assert rejected == len(cases)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, child in items:
        yield (*prefix, key)
        yield from _paths(child, (*prefix, key))


def _swept(root: Path, profile: str) -> Iterator[tuple[str, Any]]:
    """Every member of every example dropped, and replaced by values of other shapes."""
    for name, example in _examples(root, profile):
        for path in _paths(example):
            parent = _at(example, *path[:-1])
            if isinstance(parent, dict):
                document = copy.deepcopy(example)
                del _at(document, *path[:-1])[path[-1]]
                yield f"{name}: drop {path}", document
            for replacement in REPLACEMENTS:
                document = copy.deepcopy(example)
                _at(document, *path[:-1])[path[-1]] = copy.deepcopy(replacement)
                yield f"{name}: {path} = {replacement!r}", document


@pytest.mark.parametrize("profile", sorted(BLOCKS))
def test_every_member_dropped_or_replaced_gets_the_official_verdict(
    cdif_11: Path, profile: str
) -> None:
    cases = list(_swept(cdif_11, profile))

    rejected = _assert_agreement(cdif_11, profile, cases)

    assert 0 < rejected < len(cases)


# --- messages ------------------------------------------------------------------------------


def _messages(root: Path, profile: str, what: str) -> list[tuple[str, str]]:
    """(pointer, message) of each error of one targeted breakage of the profile's first example."""
    document = copy.deepcopy(_examples(root, profile)[0][1])
    BREAKS[profile][what](document)
    report = validate_record(document, rules=f"cdif-{profile}-1.1")
    assert not report.valid
    return [(issue.pointer, issue.message) for issue in report.errors]


def _errors(root: Path, profile: str, what: str) -> dict[str, str]:
    """Pointer -> message, for breakages with at most one error per pointer."""
    messages = _messages(root, profile, what)
    errors = dict(messages)
    assert len(errors) == len(messages), messages
    return errors


def test_a_bundle_without_parts_is_told_to_list_them(cdif_11: Path) -> None:
    errors = _errors(cdif_11, "manifest", "bundle without parts")

    assert errors["/schema:distribution/0/schema:hasPart"].startswith(
        "schema:distribution/0/schema:hasPart is required"
    )


def test_an_undeclared_profile_names_the_profile_uri(cdif_11: Path) -> None:
    errors = _errors(cdif_11, "provenance", "profile not declared")

    assert errors == {
        "/schema:subjectOf/dcterms:conformsTo": "schema:subjectOf/dcterms:conformsTo must include "
        "https://w3id.org/cdif/provenance/1.1 (Metadata profile identifier, 1..*)"
    }


def test_a_used_entity_of_the_wrong_type_names_the_type_it_lacks(cdif_11: Path) -> None:
    errors = _errors(cdif_11, "provenance", "used entity not a prov:Entity")

    message = errors["/prov:wasGeneratedBy/0/prov:used/0/@type"]
    assert message.startswith("prov:wasGeneratedBy/0/prov:used/0/@type must include prov:Entity")


def test_an_activity_missing_a_type_names_it(cdif_11: Path) -> None:
    messages = _messages(cdif_11, "provenance", "activity not a schema:Action")

    assert (
        "/prov:wasGeneratedBy/0/@type",
        "prov:wasGeneratedBy/0/@type must include schema:Action "
        "(Provenance (instruments, software), 0..*)",
    ) in messages


def test_a_codelist_concept_without_notation_is_pointed_at(cdif_11: Path) -> None:
    errors = _errors(cdif_11, "codelist", "concept without skos:notation")

    assert errors == {
        "/skos:hasTopConcept/0/skos:notation": "skos:hasTopConcept/0/skos:notation is required"
    }


def test_an_inline_narrower_concept_is_told_to_point_back(cdif_11: Path) -> None:
    errors = _errors(cdif_11, "codelist", "narrower concept without skos:broader")

    assert list(errors) == ["/skos:hasTopConcept/0/skos:narrower/0/skos:broader"]
    assert errors["/skos:hasTopConcept/0/skos:narrower/0/skos:broader"].endswith("is required")


def test_a_codelist_without_rights_names_both_ways_to_give_them(cdif_11: Path) -> None:
    errors = _errors(cdif_11, "codelist", "scheme without rights")

    assert errors["/schema:license"] == (
        "schema:license or schema:conditionsOfAccess is required (Rights, 1..*)"
    )
