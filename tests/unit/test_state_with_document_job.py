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
from cdif_harvester.contracts import DocumentJob, IndexJob, UrlJob, decode, encode
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
        fetcher=TableFetcher({f"{BASE}/p.html": (200, HTML, PAGE)}),
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


def _earlier_harvest(wiring: Wiring) -> tuple[DocumentJob, UrlState]:
    """A document job of the URL, and a state of an earlier harvest (run r0) holding the
    blocks that job reads (not written to the catalogue)."""
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
    return first, held


def test_the_extractor_hands_records_on_without_reading_the_state(tmp_path: Path) -> None:
    # Given a job whose state (from the resolver) holds other blocks than its documents'
    wiring, catalog = _wiring(tmp_path)
    first, held = _earlier_harvest(wiring)
    other = replace(held, blocks=("0" * 64,))
    job = replace(first, run_id="r1", state=other, state_read=True)
    reads = catalog.url_reads

    # When the extractor runs it
    result = extract_documents(wiring, job)

    # Then its records are handed on, and no state was read
    assert isinstance(result, IndexJob)
    assert catalog.url_reads == reads
    # And a job that says nothing of its state (an older message) has it read
    extract_documents(wiring, replace(job, state=None, state_read=False))
    assert catalog.url_reads == reads + 1


def test_an_unchanged_url_is_judged_on_the_state_it_has_when_written(tmp_path: Path) -> None:
    # Given a job whose state (from the resolver) holds the blocks its documents hold
    wiring, catalog = _wiring(tmp_path)
    first, held = _earlier_harvest(wiring)
    job = replace(first, run_id="r1", state=held, state_read=True)

    # When the catalogue holds that state too, the URL is unchanged: its state rewritten with
    # the new documents' fingerprint
    catalog.put_url(held)
    result = extract_documents(wiring, job)
    assert isinstance(result, UrlOutcome) and result.outcome is Outcome.UNCHANGED
    written = catalog.get_url(first.url)
    assert written is not None and written.record_ids == ("x",)
    assert written.fingerprint not in (None, "old")

    # And when another harvest changed the state since the resolver read it (other blocks),
    # the documents are compared with that one: their records are handed on
    catalog.put_url(replace(held, blocks=("0" * 64,), harvest_run="r2"))
    assert isinstance(extract_documents(wiring, job), IndexJob)


def test_a_message_that_cannot_fit_with_the_state_goes_without_it(tmp_path: Path) -> None:
    from cdif_harvester.contracts import MAX_MESSAGE_BYTES
    from cdif_harvester.stages.resolve import _Resolver

    # Given a document job (no document body left to stage) that fits only without its state
    wiring, _catalog = _wiring(tmp_path)
    state = UrlState(url=f"{BASE}/p.html", source="s", fingerprint="f" * 64, record_ids=("x",))
    bare = DocumentJob(run_id="r1", source="s", url=f"{BASE}/p.html", pattern="p", documents=())
    room = MAX_MESSAGE_BYTES - len(encode(replace(bare, notes=("",))).encode()) - 10
    job = replace(bare, notes=("n" * room,), state=state, state_read=True)
    assert len(encode(replace(job, state=None, state_read=False)).encode()) <= MAX_MESSAGE_BYTES

    # When the resolver fits it to a message
    fitted, message = _Resolver(wiring, UrlJob(run_id="r1", source="s", url=job.url))._fitted(job)

    # Then it goes without the state, saying so: the extractor reads the state itself
    assert (fitted.state, fitted.state_read) == (None, False)
    assert decode(message, DocumentJob) == fitted
