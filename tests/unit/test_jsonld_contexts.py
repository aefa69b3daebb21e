"""The JSON-LD contexts a harvester serves live on an object, not in the process.

What :func:`normalise` returns depends on its arguments only: the document, its URL and the
:class:`JsonLdContexts` it is given. Two instances never see each other's registered contexts or
remembered failures, and nothing normalised before changes what is normalised next.
"""

from __future__ import annotations

from typing import Any

import pytest

from cdif_harvester.domain.records.contexts import JsonLdContexts, shipped_contexts
from cdif_harvester.domain.records.normalisation import normalise
from cdif_harvester.domain.views.nquads import record_nquads

URL = "https://vocab.example.org/terms.jsonld"
PAGE = "https://data.example.org/page.html"


def _document(number: int = 1) -> dict[str, Any]:
    return {
        "@context": ["https://schema.org/", URL],
        "@type": "Dataset",
        "@id": f"https://data.example.org/ds/{number}",
        "title": f"Dataset {number}",
    }


def _contexts(term_iri: str) -> JsonLdContexts:
    contexts = JsonLdContexts()
    contexts.register(URL, {"@context": {"title": term_iri}})
    return contexts


def _record(document: dict[str, Any], contexts: JsonLdContexts | None, fast: bool) -> Any:
    (item,) = normalise(document, document_url=PAGE, contexts=contexts, fast_path=fast)
    return item.record, item.notes


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "pyld"])
def test_two_instances_serve_their_own_document_at_the_same_url(fast: bool) -> None:
    names = _contexts("http://schema.org/name")
    descriptions = _contexts("http://schema.org/description")
    for _ in range(2):  # and again, after the other has been used
        named, _ = _record(_document(), names, fast)
        described, _ = _record(_document(), descriptions, fast)
        assert named["schema:name"] == "Dataset 1" and "schema:description" not in named
        assert described["schema:description"] == "Dataset 1" and "schema:name" not in described


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "pyld"])
def test_a_registration_is_seen_by_its_instance_only(fast: bool) -> None:
    before, before_notes = _record(_document(), None, fast)
    _contexts("http://schema.org/name")  # registered on an instance of its own
    after, after_notes = _record(_document(), None, fast)
    fresh, fresh_notes = _record(_document(), JsonLdContexts(), fast)
    assert before == after == fresh
    assert before_notes == after_notes == fresh_notes
    assert f"remote context {URL} not loaded" in before_notes
    assert "schema:name" not in before


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "pyld"])
def test_what_was_normalised_before_does_not_change_the_next_record(fast: bool) -> None:
    first = {"@type": "Dataset", "@id": "https://data.example.org/ds/0", "name": "No context"}
    used = _contexts("http://schema.org/name")
    _record(first, used, fast)
    _record(_document(2), used, fast)
    after_others = _record(_document(3), used, fast)
    alone = _record(_document(3), _contexts("http://schema.org/name"), fast)
    assert after_others == alone


def test_a_remembered_failure_stays_with_its_instance() -> None:
    failing, other = JsonLdContexts(), JsonLdContexts()
    failing.remember_failure(URL, "answered 404")
    assert failing.failure(URL) == "answered 404"
    assert other.failure(URL) is None
    assert shipped_contexts().failure(URL) is None


def test_the_shipped_contexts_take_no_registration_and_no_failure() -> None:
    shipped = shipped_contexts()
    with pytest.raises(RuntimeError):
        shipped.register(URL, {"@context": {"title": "http://schema.org/name"}})
    with pytest.raises(RuntimeError):
        shipped.remember_failure(URL, "answered 404")
    assert not shipped.is_served(URL)
    assert shipped.is_served("https://schema.org/")


def test_registering_checks_the_document_and_copies_it() -> None:
    contexts = JsonLdContexts()
    with pytest.raises(ValueError, match="not a JSON-LD context document"):
        contexts.register(URL, {"name": "no context"})
    assert not contexts.is_served(URL)
    document = {"@context": {"title": "http://schema.org/name"}}
    contexts.register(f" {URL} ", document)
    document["@context"]["title"] = "http://schema.org/changed"
    assert contexts.served_document(URL) == {"@context": {"title": "http://schema.org/name"}}
    loaded = contexts.document_loader(URL)["document"]
    loaded["@context"]["title"] = "http://schema.org/changed"  # pyld's copy, not ours
    assert contexts.served_document(URL) == {"@context": {"title": "http://schema.org/name"}}


def test_nquads_read_remote_contexts_through_the_instance_given() -> None:
    record = {"@context": ["https://schema.org/", URL], "@id": "urn:x", "title": "T"}
    named = record_nquads(record, contexts=_contexts("http://schema.org/name"))
    described = record_nquads(record, contexts=_contexts("http://schema.org/description"))
    assert named == '<urn:x> <http://schema.org/name> "T" .\n'
    assert described == '<urn:x> <http://schema.org/description> "T" .\n'
