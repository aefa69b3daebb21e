"""Real-world JSON-LD context glitches: the record is kept, the repair and the drops noted.

See docs/decisions/0061-json-ld-glitches-and-several-datasets.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pyld import jsonld

from cdif_harvester.domain.records.context_repair import MAX_CONTEXT_NOTES
from cdif_harvester.domain.records.normalisation import NormalisedRecord, normalise

PAGE = "https://pub.example/page.html"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
DATASET = {"@type": "Dataset", "@id": "https://doi.org/10.5072/glitch", "name": "Glitched"}


def _both(document: dict[str, Any]) -> NormalisedRecord:
    """The one record of ``document``, checked to be the same on the fast path and by pyld."""
    (fast,) = normalise(document, document_url=PAGE)
    (slow,) = normalise(document, document_url=PAGE, fast_path=False)
    assert fast == slow
    return fast


@pytest.mark.parametrize(
    "iri", [f" {RDF}", f"{RDF} ", f"\t{RDF}\n"], ids=["leading", "trailing", "both"]
)
def test_white_space_around_a_term_iri_is_trimmed(iri: str) -> None:
    document = {
        "@context": {"@vocab": "https://schema.org/", "rdf": iri},
        **DATASET,
        "rdf:value": "kept",
    }
    result = _both(document)
    assert result.record_id == f"{PAGE}#record"
    assert result.record["schema:name"] == "Glitched"
    assert result.record[f"{RDF}value"] == "kept"  # the prefix works once trimmed
    assert any("rdf" in note and "trimmed" in note for note in result.notes)


@pytest.mark.parametrize(
    "context",
    [
        {"@vocab": " https://schema.org/ "},
        ["https://schema.org/", {"@base": " https://pub.example/ ", "x": {"@id": " ex:x "}}],
    ],
    ids=["vocab", "base-and-id"],
)
def test_white_space_around_vocab_base_and_id_is_trimmed(context: Any) -> None:
    result = _both({"@context": context, **DATASET})
    assert result.record["schema:name"] == "Glitched"
    assert any("trimmed" in note for note in result.notes)


# Term definitions pyld refuses (or whose IRI CDIF compaction refuses), by kind.
REFUSED = {
    "not-an-absolute-iri": ("bad", {"@id": "not an iri"}, "absolute IRI"),
    "relative-without-vocab": ("bad", "relative", "absolute IRI"),
    "iri-form-term": ("http://a.example/x", {"@id": "http://b.example/y"}, "term in form of IRI"),
    "bad-type": ("bad", {"@id": "http://a.example/x", "@type": "@bogus"}, "@type"),
    "bad-container": ("bad", {"@id": "http://a.example/x", "@container": "@bogus"}, "@container"),
    "not-a-string": ("bad", 5, "strings or objects"),
    "empty-term": ("", "http://a.example/x", "empty string"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_refused_term_is_dropped_with_a_note_and_the_record_kept(case: str) -> None:
    term, definition, why = REFUSED[case]
    context: dict[str, Any] = {"@vocab": "https://schema.org/", term: definition}
    if case == "relative-without-vocab":
        context = {
            "Dataset": "http://schema.org/Dataset",
            "name": "http://schema.org/name",
            term: definition,
        }
    document = {"@context": context, **DATASET, "description": "d"}
    result = _both(document)
    assert result.resource_id == DATASET["@id"]
    assert result.record["schema:name"] == "Glitched"
    (note,) = [note for note in result.notes if "dropped" in note]
    assert f'context term "{term}" dropped' in note and why in note


def test_a_keyword_entry_pyld_refuses_is_dropped_too() -> None:
    document = {"@context": [{"@vocab": 5}, "https://schema.org/"], **DATASET}
    result = _both(document)
    assert result.record["schema:name"] == "Glitched"
    assert any('context entry "@vocab" dropped' in note for note in result.notes)


def test_a_term_is_not_blamed_for_a_refused_prefix_it_uses() -> None:
    # "ex" is refused; "thing" uses it as a prefix, and once "ex" is gone "ex:thing" is an
    # absolute IRI of its own: only "ex" goes.
    context = [
        "https://schema.org/",
        {
            "ex": {"@id": "http://a.example/", "@container": "@bogus"},
            "thing": "ex:thing",
            "other": "http://a.example/other",
        },
    ]
    result = _both({"@context": context, **DATASET, "thing": "t", "other": "o"})
    dropped = [note for note in result.notes if "dropped" in note]
    assert len(dropped) == 1 and '"ex"' in dropped[0]
    assert result.record["ex:thing"] == "t"
    assert result.record["http://a.example/other"] == "o"


def test_a_refused_term_of_a_nested_context_is_dropped() -> None:
    document = {
        "@context": "https://schema.org/",
        **DATASET,
        "creator": {
            "@context": {"bad": {"@id": "not an iri"}},
            "@type": "Person",
            "name": "Ada",
        },
    }
    result = _both(document)
    assert result.record["schema:creator"] == {
        "@list": [{"@type": ["schema:Person"], "schema:name": "Ada"}]
    }
    assert any('context term "bad" dropped' in note for note in result.notes)


def test_a_document_pyld_accepts_is_never_repaired(monkeypatch: pytest.MonkeyPatch) -> None:
    def unexpected(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("repair pass run on a document pyld accepts")

    monkeypatch.setattr(
        "cdif_harvester.domain.records.normalisation.drop_refused_terms", unexpected
    )
    document = {"@context": {"@vocab": "https://schema.org/", "ex": "http://a.example/"}, **DATASET}
    assert _both(document).record["schema:name"] == "Glitched"


@pytest.fixture
def pyld_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """How many times pyld expanded a document and defined a term."""
    counts = {"expand": 0, "term": 0}
    expand = jsonld.expand
    define = jsonld.JsonLdProcessor._create_term_definition

    def counted_expand(*args: Any, **kwargs: Any) -> Any:
        counts["expand"] += 1
        return expand(*args, **kwargs)

    def counted_define(self: Any, *args: Any, **kwargs: Any) -> Any:
        counts["term"] += 1
        return define(self, *args, **kwargs)

    monkeypatch.setattr(jsonld, "expand", counted_expand)
    monkeypatch.setattr(jsonld.JsonLdProcessor, "_create_term_definition", counted_define)
    yield counts


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast", "pyld"])
def test_five_thousand_refused_terms_cost_a_bounded_number_of_pyld_calls(
    pyld_calls: dict[str, int], fast_path: bool
) -> None:
    bad = 5_000
    context: dict[str, Any] = {"@vocab": "https://schema.org/"}
    context.update({f"bad{i}": {"@id": f"not an iri {i}"} for i in range(bad)})
    context.update({f"ok{i}": f"http://a.example/ok{i}" for i in range(bad)})
    document = {"@context": context, **DATASET, "ok7": "seven"}
    (result,) = normalise(document, document_url=PAGE, fast_path=fast_path)
    assert result.record["http://a.example/ok7"] == "seven"
    # Two readings of the document at most, and each term defined a bounded number of times
    # (one pass, a second for the refused ones, and pyld's own processing of the kept context)
    assert pyld_calls["expand"] <= 2
    assert pyld_calls["term"] <= 3 * len(context)
    dropped = [note for note in result.notes if "dropped" in note]
    assert len(dropped) == MAX_CONTEXT_NOTES + 1
    assert (
        dropped[-1] == f"{bad - MAX_CONTEXT_NOTES} more refused context terms dropped (not listed)"
    )


def test_a_term_naming_an_undefined_cdif_prefix_is_read_with_that_prefix() -> None:
    # "schema:description" as a term's IRI, with "schema" undefined: pyld takes "schema" for
    # an IRI scheme, which CDIF compaction refuses ("Absolute IRI confused with prefix"). The
    # publisher's meaning is plain, so the prefix is read as CDIF's (decision 0064), named.
    document = {
        "@context": {"@vocab": "https://schema.org/", "description": "schema:description"},
        **DATASET,
        "description": "d",
    }
    result = _both(document)
    assert result.record["schema:description"] == "d"
    assert "prefix 'schema:' used without being declared: read as http://schema.org/ (1 IRI)" in (
        result.notes
    )


def test_a_property_and_a_type_written_with_an_undefined_cdif_prefix_are_kept() -> None:
    # Under a bare @vocab, "schema:description" is no schema.org IRI but the text itself; it is
    # read with CDIF's schema prefix, as the publisher meant, and the reading is named.
    document = {
        "@context": {"@vocab": "https://schema.org/"},
        **DATASET,
        "@type": ["Dataset", "schema:Thing"],
        "schema:description": "also kept",
        "description": "kept",
    }
    result = _both(document)
    assert result.record["@type"] == ["schema:Dataset", "schema:Thing"]
    assert sorted(result.record["schema:description"]) == ["also kept", "kept"]
    assert "prefix 'schema:' used without being declared: read as http://schema.org/ (2 IRIs)" in (
        result.notes
    )


def test_a_term_with_a_scoped_context_is_kept_or_dropped_as_pyld_judges_it() -> None:
    good = {"@id": "http://a.example/x", "@context": {"bar": "http://a.example/bar"}}
    bad = {"@id": "http://a.example/y", "@context": {"oops": 5}}
    context = ["https://schema.org/", {"good": good, "bad": bad, "worse": 5}]
    document = {"@context": context, **DATASET, "good": {"bar": "b"}, "bad": {"name": "n"}}
    result = _both(document)
    assert result.record["http://a.example/x"] == {"http://a.example/bar": "b"}
    assert result.record["schema:bad"] == {"schema:name": "n"}  # read with @vocab instead
    dropped = sorted(note.split(" dropped")[0] for note in result.notes if "dropped" in note)
    assert dropped == ['context term "bad"', 'context term "worse"']
    assert any("invalid scoped context" in note for note in result.notes)
