"""The message contracts: round trips, and every kind of malformed message refused."""

from __future__ import annotations

import base64
import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from cdif_harvester.adapters.local import (
    DirectoryObjectStore,
    InProcessQueue,
    SqliteCatalog,
    SystemClock,
)
from cdif_harvester.contracts import (
    CONTRACT_VERSION,
    MAX_MESSAGE_BYTES,
    STAGED_VERSION,
    DocumentJob,
    DocumentRef,
    IndexJob,
    RecordStored,
    ReportIssue,
    SitemapJob,
    SkippedBlock,
    StagedRecord,
    StagedRecords,
    StagedReport,
    UrlJob,
    carries_state,
    decode,
    decode_staged,
    encode,
    encode_staged,
)
from cdif_harvester.errors import ContractError, PermanentError
from cdif_harvester.model import (
    Outcome,
    RequestValidator,
    TypedLink,
    UrlState,
    plain,
    url_state_from_dict,
    url_state_to_dict,
)
from cdif_harvester.stages.extract import document_body
from cdif_harvester.wiring import Wiring
from tests.support.fakes import TableFetcher

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


def test_a_message_of_non_ascii_text_is_measured_in_bytes() -> None:
    # characters of two bytes each: over the limit in bytes, though under it in characters
    text = "é" * (MAX_MESSAGE_BYTES // 2 + 1000)
    job = DocumentJob(
        run_id="r",
        source="s",
        url="u",
        pattern="p",
        documents=(DocumentRef(key="", url="u", media_type="text/html", body=text),),
    )
    assert len(text) < MAX_MESSAGE_BYTES < len(text.encode("utf-8"))
    with pytest.raises(ContractError, match=r"\d+ bytes") as info:
        encode(job)
    assert str(len(_encode_unchecked(job).encode("utf-8"))) in str(info.value)


def _encode_unchecked(job: DocumentJob) -> str:
    """The message of ``job`` as :func:`encode` writes it, whatever its size."""
    body = {"v": CONTRACT_VERSION, "kind": job.KIND, **plain(job)}
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


@pytest.mark.parametrize("state_read", [True, False])
@pytest.mark.parametrize(
    "page",
    [
        "<p>plain</p>",
        # the text the test looks for, inside the page: escaped there, so not the field
        '<script>{"state_read":true}</script>',
        '"state_read":true',
    ],
)
def test_whether_a_document_job_carries_its_state_is_told_without_parsing_it(
    state_read: bool, page: str
) -> None:
    job = DocumentJob(
        run_id="r",
        source="s",
        url="u",
        pattern="embedded-script",
        documents=(DocumentRef(key="", url="u", media_type="text/html", body=page),),
        state=None,
        state_read=state_read,
    )
    message = encode(job)
    assert decode(message, DocumentJob).state_read is state_read
    assert carries_state(message) is state_read


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


# --- the extractor's hand-over to the indexer (staged-records) ------------------------------

STAGED = StagedRecords(
    url="https://example.org/a",
    pattern="embedded-script",
    links=MESSAGES[2].links,  # type: ignore[attr-defined]
    documents=MESSAGES[2].documents,  # type: ignore[attr-defined]
    resolution_notes=("link-header: missing angle brackets repaired",),
    records=(
        StagedRecord(
            document="raw/x/y/z.html",
            block=2,
            via="self",
            authority="not-authoritative",
            record_id="https://example.org/a#metadata",
            resource_id="https://doi.org/10.5072/a",
            # Keys in an order sorting would change: a record keeps the order of its keys.
            record={"@id": "https://example.org/a#metadata", "@context": {"schema": "x"}},
            report=StagedReport(
                valid=False,
                conformance="https://w3id.org/cdif/core/1.0",
                rules="cdif-core-1.0",
                errors=(ReportIssue(pointer="/schema:name", message="é", keyword="required"),),
                warnings=(),
                shacl=True,
            ),
            repairs=("removed comments",),
            notes=("no @context: read with the schema.org context",),
            identity_fallback=False,
            item_list={"id": "https://example.org/list", "position": 2},
        ),
    ),
    skipped=(
        SkippedBlock(
            document="raw/x/y/z.html", block=0, via="self", authority=None, reason="no Dataset"
        ),
    ),
    sitemap="https://example.org/sitemap.xml",
    lastmod="2024-01-02T00:00:00Z",
    blocks=("abc",),
    sd_dates=("2024-01-01",),
)


def test_staged_records_round_trip_and_keep_the_order_of_a_record() -> None:
    raw = encode_staged(STAGED)
    data = json.loads(raw)
    assert (data["v"], data["kind"]) == (STAGED_VERSION, "staged-records")
    assert decode_staged(raw) == STAGED
    assert list(decode_staged(raw).records[0].record or {}) == ["@id", "@context"]


def test_a_staged_object_has_no_size_limit() -> None:
    record = replace(STAGED.records[0], notes=("n" * 1000,) * 300)
    big = replace(STAGED, records=(record,))
    assert len(encode_staged(big)) > MAX_MESSAGE_BYTES
    assert decode_staged(encode_staged(big)) == big


def test_a_staged_object_of_version_1_has_no_marks_and_optional_fields_missing() -> None:
    # As the extractor wrote it before the hand-over was a contract: no v, no kind; a record
    # that could not be normalised had no item_list, a report no shacl unless the shapes ran.
    v1 = json.loads(encode_staged(STAGED))
    del v1["v"], v1["kind"], v1["records"][0]["item_list"], v1["records"][0]["report"]["shacl"]
    staged = decode_staged(json.dumps(v1))
    assert staged.records[0].item_list is None and staged.records[0].report.shacl is False
    assert staged == replace(
        STAGED,
        records=(
            replace(
                STAGED.records[0],
                item_list=None,
                report=replace(STAGED.records[0].report, shacl=False),
            ),
        ),
    )


def _staged(path: str, value: object) -> dict[str, object]:
    """The staged object of STAGED with the value at ``path`` (dotted; ... deletes it)."""
    data = json.loads(encode_staged(STAGED))
    *parents, last = path.split(".")
    node = data
    for name in parents:
        node = node[int(name)] if isinstance(node, list) else node[name]
    if value is ...:
        del node[last]
    else:
        node[last] = value
    return data  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (
            _staged("v", STAGED_VERSION + 1),
            f"staged object version {STAGED_VERSION + 1} not supported",
        ),
        (_staged("v", ...), "staged object version None"),
        (_staged("kind", "index-job"), "expected a staged-records object, got 'index-job'"),
        (_staged("kind", ...), "expected a staged-records object, got None"),
    ],
)
def test_a_staged_object_of_another_version_or_kind_is_refused(
    data: dict[str, object], fragment: str
) -> None:
    with pytest.raises(ContractError, match=fragment):
        decode_staged(json.dumps(data))


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (_staged("records", {}), r"staged-records\.records: expected an array"),
        (_staged("documents.0.key", ...), r"staged-records\.documents\[0\]: missing .*'key'"),
        (_staged("records.0.record_id", 7), r"records\[0\]\.record_id: expected a string"),
        (_staged("records.0.record", [1]), r"records\[0\]\.record: \[1\] matches none"),
        (_staged("records.0.block", "2"), r"records\[0\]\.block: expected an integer"),
        (_staged("records.0.report.valid", "no"), r"report\.valid: expected a boolean"),
        (_staged("records.0.report.errors.0.message", None), r"errors\[0\]\.message: expected"),
        (_staged("records.0.reprot", {}), r"records\[0\]: unknown field\(s\) \['reprot'\]"),
        (_staged("links.0.rel", ...), r"staged-records\.links\[0\]: missing .*'rel'"),
        (_staged("records.0.notes", ["a", 3]), r"records\[0\]\.notes\[1\]: expected a string"),
        (_staged("blocks", "abc"), r"staged-records\.blocks: expected an array"),
        (_staged("records.0.record_id", None), r"records\[0\]\.record_id: expected a string"),
        (_staged("lastmod", 3), r"staged-records\.lastmod: 3 matches none of"),
    ],
)
def test_a_malformed_staged_object_is_refused_naming_the_field(
    data: dict[str, object], fragment: str
) -> None:
    with pytest.raises(ContractError, match=fragment):
        decode_staged(json.dumps(data))
    # The same fault in an object of version 1 (no v, no kind) is refused the same way.
    v1 = {k: v for k, v in data.items() if k not in ("v", "kind")}
    with pytest.raises(ContractError, match=fragment):
        decode_staged(json.dumps(v1))


@pytest.mark.parametrize(("raw", "fragment"), [(b"{ no", "not JSON"), (b"[]", "not a JSON object")])
def test_a_staged_object_that_is_no_json_object_is_refused(raw: bytes, fragment: str) -> None:
    with pytest.raises(ContractError, match=f"staged object is {fragment}"):
        decode_staged(raw)


def test_a_staged_object_is_no_message() -> None:
    with pytest.raises(ContractError, match="unknown message kind 'staged-records'"):
        decode(json.dumps({**json.loads(encode_staged(STAGED)), "v": CONTRACT_VERSION}))


def test_version_7_document_jobs_are_still_read_from_where_their_documents_are_kept(
    tmp_path: Path,
) -> None:
    # A v7 document job in flight during a deployment: its document is under its raw key,
    # and the extractor reads it there.
    page = b'<script type="application/ld+json">{"@type": "Dataset", "name": "A"}</script>'
    v7 = {
        "v": 7,
        "kind": "document-job",
        "run_id": "r",
        "source": "s",
        "url": "https://e.org/a",
        "pattern": "embedded-script",
        "documents": [
            {
                "key": "raw/s/k/p.html",
                "url": "https://e.org/a",
                "media_type": "text/html",
                "via": "self",
                "authority": None,
                "warnings": [],
            }
        ],
        "links": [],
        "notes": [],
        "sitemap": None,
        "lastmod": None,
    }
    job = decode(json.dumps(v7), DocumentJob)
    (ref,) = job.documents
    assert ref.kept is True and (ref.body, ref.staged_key, ref.status) == (None, None, None)
    assert job.validators == ()
    store = DirectoryObjectStore(tmp_path)
    store.put(ref.key, page)
    wiring = Wiring(
        store=store,
        catalog=SqliteCatalog(tmp_path / "c.sqlite"),
        queue=InProcessQueue(),
        fetcher=TableFetcher({}),
        clock=SystemClock(),
    )
    assert document_body(wiring, ref) == page


def test_a_document_not_kept_travels_in_its_message_as_text_or_base64(tmp_path: Path) -> None:
    wiring = Wiring(
        store=DirectoryObjectStore(tmp_path),
        catalog=SqliteCatalog(tmp_path / "c.sqlite"),
        queue=InProcessQueue(),
        fetcher=TableFetcher({}),
        clock=SystemClock(),
    )
    text = DocumentRef(
        key="raw/s/k/p.json", url="https://e.org/a", media_type="x/y", kept=False, body="é"
    )
    latin = replace(text, body=base64.b64encode("é".encode("latin-1")).decode(), encoding="base64")
    staged = replace(text, body=None, staged_key="staging/r/documents/k/p.json")
    wiring.store.put("staging/r/documents/k/p.json", b"{}")
    for ref, body in ((text, "é".encode()), (latin, b"\xe9"), (staged, b"{}")):
        job = replace(MESSAGES[2], documents=(ref,))
        (sent,) = decode(encode(job), DocumentJob).documents  # type: ignore[attr-defined]
        assert sent == ref and document_body(wiring, sent) == body
    # a staged body that expired ends the URL with why, not with an internal error
    gone = replace(staged, staged_key="staging/r/documents/k/gone.json")
    with pytest.raises(PermanentError) as caught:
        document_body(wiring, gone)
    assert caught.value.reason == "document-missing"


def test_a_urls_validators_are_stored_compactly_and_older_states_have_none() -> None:
    validators = (
        RequestValidator("GET", "", "text/html", '"abc"', ""),
        RequestValidator("HEAD", "https://e.org/m.json", "", "", "Wed, 01 Jan 2025 00:00:00 GMT"),
    )
    state = UrlState(url="https://e.org/a", source="s", fingerprint="f", validators=validators)
    stored = json.loads(json.dumps(url_state_to_dict(state)))
    assert stored["validators"][0] == ["GET", "", "text/html", '"abc"', ""]
    assert url_state_from_dict(stored) == state
    del stored["validators"]
    assert url_state_from_dict(stored).validators == ()
    assert "validators" not in url_state_to_dict(replace(state, validators=()))


def test_null_is_read_as_none_where_a_field_may_be_null() -> None:
    data = _staged("lastmod", None)
    data["records"][0]["item_list"] = None  # type: ignore[index]
    staged = decode_staged(json.dumps(data))
    assert staged.lastmod is None
    assert staged.records[0].item_list is None


def test_plain_data_gives_a_records_tree_as_it_is_and_walks_the_rest() -> None:
    staged = STAGED.records[0]
    data = plain(staged)
    # The record's JSON, held as parsed, is not copied value by value...
    assert data["record"] is staged.record
    # ...while the dataclasses beside it still become dicts and their tuples lists.
    assert isinstance(data["report"], dict)
    assert isinstance(data["notes"], list)
    # Whatever holds the JSON, the message written is the same as with deep copies.
    assert json.loads(encode_staged(STAGED))["records"][0] == json.loads(json.dumps(asdict(staged)))
