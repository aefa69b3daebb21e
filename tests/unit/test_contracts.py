"""The message contracts: round trips, and every kind of malformed message refused."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from cdif_harvester.contracts import (
    CONTRACT_VERSION,
    MAX_MESSAGE_BYTES,
    DocumentJob,
    DocumentRef,
    IndexJob,
    RecordStored,
    SitemapJob,
    UrlJob,
    decode,
    encode,
)
from cdif_harvester.errors import ContractError
from cdif_harvester.model import Outcome, TypedLink, plain

MESSAGES = [
    SitemapJob(run_id="r1", source="example.org", url="https://example.org/robots.txt"),
    UrlJob(
        run_id="r1",
        source="example.org",
        url="https://example.org/a",
        sitemap="https://example.org/sitemap.xml",
        lastmod="2024-01-02",
        requests_per_host=1,
        crawl_delay=2.5,
        links=(
            TypedLink(
                href="https://example.org/a.json", rel="describedby", type="application/ld+json"
            ),
        ),
    ),
    DocumentJob(
        run_id="r1",
        source="example.org",
        url="https://example.org/a",
        pattern="embedded-script",
        documents=(
            DocumentRef(key="raw/x/y/z.html", url="https://example.org/a", media_type="text/html"),
            DocumentRef(
                key="raw/x/y/m.json",
                url="https://example.org/m.json",
                media_type="application/ld+json",
                via="describedby",
                authority="authoritative",
            ),
        ),
        links=(
            TypedLink(
                href="https://example.org/m.json",
                rel="meta",
                scheme="DC",
                title="Métadonnées",
                hreflang="fr",
                reverse=True,
                found_in="html",
            ),
        ),
        notes=("link-header: missing angle brackets repaired",),
    ),
    IndexJob(
        run_id="r1",
        source="s",
        url="https://example.org/a",
        pattern="p",
        staged_key="staging/r1/x.json",
    ),
    RecordStored(key="records/s/abc.jsonld"),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: m.KIND)
def test_round_trip(message: object) -> None:
    text = encode(message)  # type: ignore[arg-type]
    data = json.loads(text)
    assert data["v"] == CONTRACT_VERSION
    assert data["kind"] == message.KIND  # type: ignore[attr-defined]
    assert decode(text, type(message)) == message


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: m.KIND)
def test_the_wire_form_holds_the_same_data_as_asdict(message: object) -> None:
    # encode() uses model.plain (no deep copies) instead of dataclasses.asdict: same JSON.
    body = json.loads(encode(message))  # type: ignore[arg-type]
    assert {k: v for k, v in body.items() if k not in ("v", "kind")} == json.loads(
        json.dumps(asdict(message))  # type: ignore[call-overload]
    )


def test_plain_data_of_enums_nesting_and_strangers() -> None:
    link = TypedLink(href="https://a.org/x", rel="item", reverse=True)
    value = {"o": Outcome.UNCHANGED, "links": (link, [link]), "n": None, "x": 1.5}
    assert plain(value) == {
        "o": "unchanged",
        "links": [asdict(link), [asdict(link)]],
        "n": None,
        "x": 1.5,
    }
    with pytest.raises(TypeError, match="not plain data"):
        plain({"bad": object()})


def _wire(**changes: object) -> str:
    data = json.loads(encode(MESSAGES[1]))
    data.update(changes)
    return json.dumps({k: v for k, v in data.items() if v is not ...})


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("not json", "not JSON"),
        ("[]", "not a JSON object"),
        (_wire(v=CONTRACT_VERSION + 1), "version"),
        (_wire(v=True), "version"),
        (_wire(v="3"), "version"),
        (_wire(v=[2]), "version"),
        (_wire(kind="nope"), "unknown message kind"),
        (_wire(url=...), "missing required field 'url'"),
        (_wire(url=5), "expected a string"),
        (_wire(cdif_agent="yes"), "expected a boolean"),
        (_wire(extra=1), "unknown field"),
        (_wire(links=[{"rel": "describedby"}]), "missing required field 'href'"),
        (_wire(links="x"), "expected an array"),
        (_wire(crawl_delay="2"), "matches none of float"),
        (_wire(crawl_delay=True), "matches none of float"),
        (_wire(requests_per_host=1.5), "matches none of int"),
    ],
)
def test_malformed_messages_are_refused(raw: str, fragment: str) -> None:
    with pytest.raises(ContractError, match=fragment):
        decode(raw, UrlJob)


def test_wrong_kind_for_the_queue_is_refused() -> None:
    with pytest.raises(ContractError, match="expected a url-job"):
        decode(encode(MESSAGES[0]), UrlJob)


def test_large_payloads_must_go_by_key() -> None:
    huge = DocumentJob(
        run_id="r",
        source="s",
        url="u",
        pattern="p",
        documents=tuple(DocumentRef(key="k" * 1000, url="u", media_type="t") for _ in range(300)),
    )
    with pytest.raises(ContractError, match="object store") as info:
        encode(huge)
    assert info.value.reason == "message-too-large"
    assert MAX_MESSAGE_BYTES < 256 * 1024


def test_version_1_messages_are_still_read() -> None:
    # A v1 sitemap job in flight during a deployment: the v2 fields take their defaults.
    v1 = {
        "v": 1,
        "kind": "sitemap-job",
        "run_id": "r",
        "source": "s",
        "url": "https://e.org/s.xml",
        "depth": 1,
        "cdif_agent": False,
        "parent": None,
    }
    job = decode(v1, SitemapJob)
    assert (job.offset, job.body_key, job.ancestors) == (0, None, ())


def test_version_2_document_jobs_are_still_read() -> None:
    # A v2 document job in flight during a deployment: the v3 fields take their defaults.
    v2 = {
        "v": 2,
        "kind": "document-job",
        "run_id": "r",
        "source": "s",
        "url": "https://e.org/a",
        "pattern": "content-type",
        "documents": [{"key": "raw/k.json", "url": "https://e.org/a", "media_type": "x/y"}],
        "links": [{"href": "https://e.org/c", "rel": "cite-as"}],
    }
    job = decode(v2, DocumentJob)
    assert job.notes == ()
    assert (job.documents[0].via, job.documents[0].authority) == (None, None)
    assert job.links[0].reverse is False


def test_a_whole_number_of_seconds_is_a_crawl_delay_too() -> None:
    data = json.loads(encode(MESSAGES[1]))
    data["crawl_delay"] = 3
    job = decode(json.dumps(data), UrlJob)
    assert job.crawl_delay == 3.0 and isinstance(job.crawl_delay, float)


def test_version_4_url_jobs_are_still_read_without_source_limits() -> None:
    data = json.loads(encode(MESSAGES[1]))
    data["v"] = 4
    del data["requests_per_host"], data["crawl_delay"]
    job = decode(json.dumps(data), UrlJob)
    assert (job.requests_per_host, job.crawl_delay) == (None, None)
