"""The URL's harvest state travels with its document job: the resolver sends the state it read,
and the extractor compares against it without reading the catalogue again
(docs/decisions/0097-fewer-catalogue-reads.md)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from cdif_harvester.adapters.local import (
    DirectoryObjectStore,
    InProcessQueue,
    SqliteCatalog,
    SystemClock,
)
from cdif_harvester.contracts import DocumentJob, UrlJob, decode, encode
from cdif_harvester.model import Outcome, UrlOutcome, UrlState
from cdif_harvester.stages.extract import extract_documents
from cdif_harvester.stages.resolve import resolve_url
from cdif_harvester.wiring import Wiring
from tests.support.fakes import TableFetcher

BASE = "https://pub.example.org"
HTML = {"content-type": "text/html; charset=utf-8"}
PAGE = b"""<html><head>
<script type="application/ld+json">{"@context": "https://schema.org", "@type": "Dataset",
  "@id": "https://doi.org/10.5072/x", "name": "X"}</script>
</head></html>"""
NOTHING = b'<html><head><script type=\'application/ld+json\'>{"@type": "WebSite"}</script>'


class CountingCatalog(SqliteCatalog):
    """The local catalogue, counting the reads of URL states."""

    url_reads = 0

    def get_url(self, url: str) -> UrlState | None:
        self.url_reads += 1
        return super().get_url(url)


def _wiring(tmp_path: Path) -> tuple[Wiring, CountingCatalog]:
    catalog = CountingCatalog(tmp_path / "c.sqlite")
    wiring = Wiring(
        store=DirectoryObjectStore(tmp_path),
        catalog=catalog,
        queue=InProcessQueue(),
        fetcher=TableFetcher(
            {f"{BASE}/p.html": (200, HTML, PAGE), f"{BASE}/none.html": (200, HTML, NOTHING)}
        ),
        clock=SystemClock(),
    )
    return wiring, catalog


def test_the_resolver_sends_the_state_it_read_with_the_document_job(tmp_path: Path) -> None:
    # Given a URL whose state holds an earlier harvest's records (other documents)
    wiring, catalog = _wiring(tmp_path)
    held = UrlState(
        url=f"{BASE}/p.html", source="s", fingerprint="old", record_ids=("x",), harvest_run="r0"
    )
    catalog.put_url(held)

    # When the resolver hands the URL on
    job = resolve_url(wiring, UrlJob(run_id="r1", source="s", url=f"{BASE}/p.html"))

    # Then the job carries that state, as read, and keeps it through its message
    assert isinstance(job, DocumentJob)
    assert (job.state, job.state_read) == (catalog.get_url(f"{BASE}/p.html"), True)
    assert decode(encode(job), DocumentJob) == job
    # (without incremental harvesting nothing is read, and nothing is said to be)
    off = replace(wiring, settings=replace(wiring.settings, incremental=False))
    job = resolve_url(off, UrlJob(run_id="r1", source="s", url=f"{BASE}/p.html"))
    assert isinstance(job, DocumentJob) and (job.state, job.state_read) == (None, False)


def test_the_extractor_compares_with_the_state_of_its_job_without_reading_it(
    tmp_path: Path,
) -> None:
    # Given the blocks an earlier harvest (run r0) held for the URL, as a job's state only
    wiring, catalog = _wiring(tmp_path)
    first = resolve_url(wiring, UrlJob(run_id="r0", source="s", url=f"{BASE}/p.html"))
    assert isinstance(first, DocumentJob)
    staged = json.loads(extract_documents(wiring, first).staged)  # type: ignore[union-attr]
    held = UrlState(
        url=first.url,
        source="s",
        fingerprint="old",
        blocks=tuple(staged["blocks"]),
        record_ids=("x",),
        harvest_run="r0",
    )
    job = replace(first, run_id="r1", state=held, state_read=True)
    reads = catalog.url_reads

    # When the extractor runs the job of a later run
    result = extract_documents(wiring, job)

    # Then its blocks are found those of the held harvest, and no state was read
    assert isinstance(result, UrlOutcome) and result.outcome is Outcome.UNCHANGED
    assert catalog.url_reads == reads
    # and the state written is the job's, with the new documents' fingerprint
    written = catalog.get_url(first.url)
    assert written is not None and written.record_ids == ("x",)
    assert written.fingerprint not in (None, "old")

    # And a job that says nothing of its state (an older message) has it read
    extract_documents(wiring, replace(job, state=None, state_read=False))
    assert catalog.url_reads == reads + 2


def test_a_url_without_records_keeps_its_validators_from_the_state_of_its_job(
    tmp_path: Path,
) -> None:
    # Given a page without a Dataset, handed on with its state (none yet)
    wiring, catalog = _wiring(tmp_path)
    job = resolve_url(wiring, UrlJob(run_id="r1", source="s", url=f"{BASE}/p.html"))
    assert isinstance(job, DocumentJob) and job.state_read
    reads = catalog.url_reads
    documents = tuple(replace(ref, body=NOTHING.decode()) for ref in job.documents)

    # When the extractor finds no record in it
    result = extract_documents(wiring, replace(job, documents=documents))

    # Then the URL ends without metadata, and its state was not read again
    assert isinstance(result, UrlOutcome) and result.outcome is Outcome.NO_METADATA
    assert catalog.url_reads == reads
