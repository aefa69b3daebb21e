"""Remote JSON-LD contexts: fetched only when trusted, through the safe fetcher, capped, once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.adapters.http import FetchPolicy, SafeFetcher
from cdif_harvester.adapters.local import (
    DirectoryObjectStore,
    InProcessQueue,
    SqliteCatalog,
    SystemClock,
)
from cdif_harvester.contracts import DocumentJob, DocumentRef
from cdif_harvester.domain.records.contexts import JsonLdContexts
from cdif_harvester.stages.extract import extract_documents
from cdif_harvester.wiring import Wiring
from tests.support.httpserver import LocalHTTPServer, Route

pytestmark = pytest.mark.network

CONTEXT = {"@context": {"title": "http://schema.org/name", "ex": "https://example.org/terms/"}}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[LocalHTTPServer, Wiring]]:
    with LocalHTTPServer() as server, SafeFetcher(FetchPolicy(allow_loopback=True)) as fetcher:
        catalog = SqliteCatalog(tmp_path / "c.sqlite")
        wiring = Wiring(
            store=DirectoryObjectStore(tmp_path / "out"),
            catalog=catalog,
            queue=InProcessQueue(),
            fetcher=fetcher,
            clock=SystemClock(),
        )
        yield server, wiring
        catalog.close()


def _extract(wiring: Wiring, context_url: str) -> dict[str, Any]:
    document = {
        "@context": ["https://schema.org/", context_url],
        "@type": "Dataset",
        "@id": "urn:example:trusted",
        "title": "Named through the remote context",
    }
    key = "raw/test/doc.json"
    wiring.store.put(key, json.dumps(document).encode(), content_type="application/ld+json")
    job = DocumentJob(
        run_id="r",
        source="s",
        url="https://e.org/doc.json",
        pattern="content-type",
        documents=(
            DocumentRef(key=key, url="https://e.org/doc.json", media_type="application/ld+json"),
        ),
    )
    index_job = extract_documents(wiring, job)
    staged = json.loads(index_job.staged)  # type: ignore[union-attr]
    (record,) = staged["records"]
    return record  # type: ignore[no-any-return]


def test_a_trusted_context_is_fetched_once_and_used(
    served: tuple[LocalHTTPServer, Wiring],
) -> None:
    server, wiring = served
    server.route(
        "/ctx/v1.jsonld",
        headers=[("Content-Type", "application/ld+json")],
        body=json.dumps(CONTEXT).encode(),
    )
    wiring.settings = replace(wiring.settings, trusted_contexts=(server.url("/ctx/"),))
    url = server.url("/ctx/v1.jsonld")
    first = _extract(wiring, url)
    second = _extract(wiring, url)
    assert first["record"]["schema:name"] == "Named through the remote context"
    assert second["record"]["schema:name"] == "Named through the remote context"
    assert not any("not loaded" in note for note in first["notes"])
    assert server.paths() == ["/ctx/v1.jsonld"]  # once per process


def test_an_untrusted_context_is_never_fetched(served: tuple[LocalHTTPServer, Wiring]) -> None:
    server, wiring = served
    server.route(
        "/other.jsonld",
        headers=[("Content-Type", "application/ld+json")],
        body=json.dumps(CONTEXT).encode(),
    )
    url = server.url("/other.jsonld")
    record = _extract(wiring, url)
    assert server.requests == []
    assert f"remote context {url} not loaded" in record["notes"]
    assert "schema:name" not in record["record"]


@pytest.mark.parametrize(
    ("path", "answer", "why"),
    [
        (
            "/big.jsonld",
            {"body": b'{"@context": {"a": "' + b"x" * 2_000_000 + b'"}}'},
            "body-too-large",
        ),
        ("/missing.jsonld", {"status": 404}, "answered 404"),
        ("/broken.jsonld", {"body": b"{not json"}, "not a JSON-LD context"),
        ("/notctx.jsonld", {"body": b'{"name": "no context here"}'}, "not a JSON-LD context"),
        ("/deep.jsonld", {"body": b'{"@context": ' + b"[" * 5000}, "not a JSON-LD context"),
    ],
)
def test_a_trusted_context_that_cannot_be_used_is_noted_and_the_record_kept(
    served: tuple[LocalHTTPServer, Wiring], path: str, answer: dict[str, Any], why: str
) -> None:
    server, wiring = served
    server.route(path, **answer)
    url = server.url(path)
    wiring.settings = replace(wiring.settings, trusted_contexts=(url,))
    record = _extract(wiring, url)
    assert any(
        note.startswith(f"trusted context {url} could not be loaded") and why in note
        for note in record["notes"]
    ), record["notes"]
    assert f"remote context {url} not loaded" in record["notes"]
    assert record["record"] is not None


def test_a_passing_failure_is_not_remembered(served: tuple[LocalHTTPServer, Wiring]) -> None:
    server, wiring = served
    answers = iter([Route(status=503), Route(body=json.dumps(CONTEXT).encode())])
    server.route("/flaky.jsonld", respond=lambda _request: next(answers))
    url = server.url("/flaky.jsonld")
    wiring.settings = replace(wiring.settings, trusted_contexts=(url,))
    first = _extract(wiring, url)
    second = _extract(wiring, url)
    assert any("answered 503" in note for note in first["notes"])
    assert second["record"]["schema:name"] == "Named through the remote context"
    assert server.paths() == ["/flaky.jsonld", "/flaky.jsonld"]


def test_what_one_wiring_learnt_about_a_context_is_not_anothers(
    served: tuple[LocalHTTPServer, Wiring], tmp_path: Path
) -> None:
    server, wiring = served
    answers = iter([Route(status=404), Route(body=json.dumps(CONTEXT).encode())])
    server.route("/moved.jsonld", respond=lambda _request: next(answers))
    url = server.url("/moved.jsonld")
    wiring.settings = replace(wiring.settings, trusted_contexts=(url,))
    failed = _extract(wiring, url)
    assert any("answered 404" in note for note in failed["notes"])
    again = _extract(wiring, url)  # remembered by this wiring: not asked again
    assert any("answered 404" in note for note in again["notes"])
    assert server.paths() == ["/moved.jsonld"]

    # Another wiring (another process) asks for itself, and loads the context now served
    other = replace(
        wiring, store=DirectoryObjectStore(tmp_path / "other"), contexts=JsonLdContexts()
    )
    loaded = _extract(other, url)
    assert loaded["record"]["schema:name"] == "Named through the remote context"
    assert server.paths() == ["/moved.jsonld", "/moved.jsonld"]
    # ... and what it registered is not served by the first
    assert not wiring.contexts.is_served(url)
