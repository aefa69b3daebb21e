"""The extractor's hand-over travels in the index job's message when it fits, and through the
run's staging area only when it does not (docs/decisions/0085-staged-records-in-the-message.md).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.contracts import (
    CONTRACT_VERSION,
    INDEX_QUEUE,
    MAX_MESSAGE_BYTES,
    DocumentJob,
    DocumentRef,
    IndexJob,
    decode,
    decode_staged,
    encode,
    encode_staged,
)
from cdif_harvester.errors import ContractError
from cdif_harvester.keys import staging_key
from cdif_harvester.model import Outcome, plain
from cdif_harvester.stages.extract import extract_documents
from cdif_harvester.stages.index import index_records
from tests.unit.test_handover import (
    JOB,
    STAGED,
    STAGED_KEY,
    Recording,
    _document_job,
    _wiring,
    captured_rounds,
)


def _sent(wiring: Any) -> list[IndexJob]:
    """The index jobs the extractor sent, decoded from their messages."""
    sent = []
    while (body := wiring.queue.receive(INDEX_QUEUE)) is not None:
        sent.append(decode(body, IndexJob))
    return sent


def test_a_small_hand_over_travels_in_the_message_and_nothing_is_staged(tmp_path: Path) -> None:
    wiring = _wiring(tmp_path)
    job = extract_documents(wiring, _document_job(wiring))
    assert isinstance(job, IndexJob)
    # the message carries the records; nothing waits in the staging area
    assert job.staged_key is None and job.staged is not None
    assert list(wiring.store.list("staging/")) == []
    (sent,) = _sent(wiring)
    assert sent == job
    staged = decode_staged(sent.staged or "")
    assert [item.record_id for item in staged.records]
    # and the indexer stores them
    outcome = index_records(wiring, sent)
    assert outcome.outcome is Outcome.RECORD
    assert len(outcome.records) == len(staged.records)


def test_the_indexer_does_with_records_in_the_message_what_it_did_with_a_staged_object(
    tmp_path: Path,
) -> None:
    # The captured calls of the staged object (test_handover), less the read of that object
    raw = encode_staged(decode_staged((STAGED / "v1.staged.json").read_bytes()))
    expected = captured_rounds("v1")
    for captured in expected:
        assert captured["calls"][0] == ["store.get", [STAGED_KEY], {}]
        captured["calls"] = captured["calls"][1:]
    wiring = _wiring(tmp_path)
    inline = replace(JOB, staged_key=None, staged=raw.decode("utf-8"))
    rounds = []
    for run_id in ("r1", "r2"):  # the first harvest, then the next run's
        calls: list[Any] = []
        recording = replace(
            wiring,
            store=Recording("store", wiring.store, calls),
            catalog=Recording("catalog", wiring.catalog, calls),
        )
        outcome = index_records(recording, decode(encode(replace(inline, run_id=run_id))))
        rounds.append({"calls": calls, "outcome": plain(outcome)})
    assert rounds == expected


def test_a_redelivered_index_job_with_its_records_ends_as_the_first_and_writes_nothing(
    tmp_path: Path,
) -> None:
    wiring = _wiring(tmp_path)
    job = extract_documents(wiring, _document_job(wiring))
    assert isinstance(job, IndexJob) and job.staged is not None
    first = index_records(wiring, job)
    written = {key: wiring.store.get(key) for key in wiring.store.list("")}
    calls: list[Any] = []
    again = index_records(replace(wiring, store=Recording("store", wiring.store, calls)), job)
    assert (again.outcome, again.reason, again.records) == (
        first.outcome,
        first.reason,
        first.records,
    )
    assert [call for call in calls if call[0] != "store.get"] == []
    assert {key: wiring.store.get(key) for key in wiring.store.list("")} == written


def _many_records_job(wiring: Any, count: int) -> DocumentJob:
    """A kept JSON-LD document of ``count`` Datasets (an ItemList-free @graph), with its job."""
    graph = [
        {
            "@type": "Dataset",
            "@id": f"https://pub.example.org/many#d{n}",
            "name": f"Dataset {n}",
            "description": f"Dataset number {n}. " + "Measured values. " * 100,
        }
        for n in range(count)
    ]
    body = json.dumps({"@context": "https://schema.org/", "@graph": graph}).encode()
    wiring.store.put("raw/s/many/doc.json", body, content_type="application/ld+json")
    return DocumentJob(
        run_id="r1",
        source="s",
        url="https://pub.example.org/many",
        pattern="embedded-script",
        documents=(
            DocumentRef(
                key="raw/s/many/doc.json",
                url="https://pub.example.org/many",
                media_type="application/ld+json",
                via="self",
            ),
        ),
    )


def test_a_hand_over_too_large_for_the_message_goes_through_the_staging_area(
    tmp_path: Path,
) -> None:
    wiring = _wiring(tmp_path)
    document_job = _many_records_job(wiring, 150)
    job = extract_documents(wiring, document_job)
    assert isinstance(job, IndexJob)
    # the records did not fit: they wait under the run's staging key, which the message names
    assert job.staged is None and job.staged_key == staging_key("r1", document_job.url)
    held = wiring.store.get(job.staged_key)
    assert len(held) > MAX_MESSAGE_BYTES
    (sent,) = _sent(wiring)
    assert sent == job
    outcome = index_records(wiring, sent)
    assert outcome.outcome is Outcome.RECORD and len(outcome.records) == 150  # noqa: PLR2004


def test_an_index_job_of_contract_version_8_is_still_read_and_indexed(tmp_path: Path) -> None:
    # An index job sent by the previous release, in flight during a deployment
    wiring = _wiring(tmp_path)
    wiring.store.put(STAGED_KEY, (STAGED / "v1.staged.json").read_bytes())
    older = json.dumps(
        {
            "v": 8,
            "kind": "index-job",
            "run_id": "r1",
            "source": "s",
            "url": "https://pub.example.org/a",
            "pattern": "embedded-script",
            "staged_key": STAGED_KEY,
        }
    )
    job = decode(older, IndexJob)
    assert job == JOB and job.staged is None
    assert index_records(wiring, job).outcome is Outcome.RECORD
    assert CONTRACT_VERSION > 8  # noqa: PLR2004 - this release speaks a newer version


@pytest.mark.parametrize(
    "fields",
    [{}, {"staged_key": STAGED_KEY, "staged": "{}"}],
    ids=["neither", "both"],
)
def test_an_index_job_carries_its_records_or_names_them_not_both(fields: dict[str, str]) -> None:
    body = {"v": CONTRACT_VERSION, "kind": "index-job", "run_id": "r", "source": "s"}
    body.update(url="https://e.org/a", pattern="p", **fields)
    with pytest.raises(ContractError, match="exactly one of"):
        decode(json.dumps(body), IndexJob)


def test_an_index_job_is_the_same_work_whether_its_records_travel_inline_or_staged() -> None:
    # (the idempotency of the AWS stages is keyed on it: a redelivery must find its work done)
    from cdif_harvester.aws_runtime import work_key

    staged = replace(JOB, staged_key=staging_key(JOB.run_id, JOB.url))
    inline = replace(staged, staged_key=None, staged="{}")
    assert work_key(inline) == work_key(staged)
    assert work_key(replace(inline, url="https://pub.example.org/b")) != work_key(inline)
    assert work_key(replace(inline, run_id="r2")) != work_key(inline)
