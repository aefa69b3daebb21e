"""The extractor's hand-over to the indexer (the staged-records contract), end to end.

``golden/staged/v1*.staged.json`` are staged objects exactly as the extractor wrote them before
the hand-over was a contract (captured from a run of that code on the documents built below, once
with SHACL and once without); ``v1*.indexed.json`` are the calls the indexer of that code made
on them, with every body it wrote: the first index job, then a second one (all unchanged). Since
docs/decisions/0081-views-derived-on-read.md they lack, and only lack, the copy of a first version
under ``versions/`` and the outcome's view keys (taken out of the captured calls, nothing added).
Since docs/decisions/0092-state-with-latest-outcome.md the URL's state, captured as a
``put_url`` just before the ``put_outcome``, is given to the ``put_outcome``
(:func:`captured_rounds` reads the captured calls so).
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.adapters.local import DirectoryObjectStore, InProcessQueue, SqliteCatalog
from cdif_harvester.contracts import (
    STAGED_VERSION,
    DocumentJob,
    DocumentRef,
    IndexJob,
    decode_staged,
    encode_staged,
)
from cdif_harvester.domain.records.validation import rules_for, validate_record
from cdif_harvester.model import (
    FetchResponse,
    Outcome,
    TypedLink,
    UrlState,
    plain,
    url_state_to_dict,
)
from cdif_harvester.stages.extract import extract_documents
from cdif_harvester.stages.index import StagedObjectMissing, index_records
from cdif_harvester.stages.jobs import run_job
from cdif_harvester.wiring import Wiring

GOLDEN = Path(__file__).parent / "golden"
STAGED = GOLDEN / "staged"
STAGED_KEY = "staging/r1/a.json"
JOB = IndexJob(
    run_id="r1",
    source="s",
    url="https://pub.example.org/a",
    pattern="embedded-script",
    staged_key=STAGED_KEY,
)


class FixedClock:
    """Always the same instant, so the reports written are the captured ones."""

    def now(self) -> datetime:
        return datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


class NoFetcher:
    """The documents are in the store already: nothing is fetched."""

    def fetch(self, url: str, **_options: Any) -> FetchResponse:
        raise AssertionError(f"fetched {url}")


class Recording:
    """An adapter that logs every call (name, plain arguments, bodies as text) and passes it on.

    An entry put with the signposts a catalogue keeps beside it (decision 0100, after these
    calls were captured) is logged as the ``put_record`` of the entry it is: the signposts are
    what the Signmap would read of the record, tested apart (tests/unit/test_kept_signposts.py).
    """

    def __init__(self, name: str, inner: Any, calls: list[Any]) -> None:
        self._name, self._inner, self._calls = name, inner, calls

    def __getattr__(self, attribute: str) -> Any:
        method = getattr(self._inner, attribute)

        def call(*args: Any, **kwargs: Any) -> Any:
            shown = [_shown(a) for a in args]
            named = {name: _shown(value) for name, value in kwargs.items()}
            if attribute == "put_record_with_signposts":
                self._calls.append([f"{self._name}.put_record", shown[:1], named])
            else:
                self._calls.append([f"{self._name}.{attribute}", shown, named])
            return method(*args, **kwargs)

        return call


def captured_rounds(case: str) -> Any:
    """The captured rounds of ``case`` (``v1*.indexed.json``), each URL state written before
    its outcome given with it instead (decision 0092: one call, the same state and outcome)."""
    rounds = json.loads((STAGED / f"{case}.indexed.json").read_text(encoding="utf-8"))
    for captured_round in rounds:
        calls: list[Any] = []
        for name, args, kwargs in captured_round["calls"]:
            if name == "catalog.put_outcome" and calls and calls[-1][0] == "catalog.put_url":
                kwargs = {**kwargs, "state": calls.pop()[1][0]}  # noqa: PLW2901
            calls.append([name, args, kwargs])
        captured_round["calls"] = calls
    return rounds


def _shown(argument: Any) -> Any:
    """An argument as logged: bytes as text, a URL's state in the form the catalogue stores
    (a field added since, at its empty default, is not stored), anything else as plain data."""
    if isinstance(argument, bytes):
        return argument.decode("utf-8")
    if isinstance(argument, UrlState):
        return plain(url_state_to_dict(argument))
    return plain(argument)


def _wiring(root: Path, *, shacl: bool = False) -> Wiring:
    wiring = Wiring(
        store=DirectoryObjectStore(root / "store"),
        catalog=SqliteCatalog(root / "c.sqlite"),
        queue=InProcessQueue(),
        fetcher=NoFetcher(),
        clock=FixedClock(),
    )
    wiring.settings = replace(wiring.settings, shacl=shacl)
    return wiring


def _script(data: Any) -> str:
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f'<script type="application/ld+json">{text}</script>'


def _document_job(wiring: Wiring) -> DocumentJob:
    """The documents the golden staged objects were extracted from, stored; their job."""
    page = (
        "<html><head>"
        + _script({"@context": "https://schema.org", "@type": "WebSite", "name": "Site"})
        + _script("{ broken ")
        + _script(json.loads((GOLDEN / "normalisation/cdif_shaped.input.json").read_text()))
        + _script({"@context": {"@vocab": 5}, "@type": "Dataset", "name": "Fjörd"})
        + _script((GOLDEN / "repairs/comments.input.json").read_text())
        + "</head></html>"
    ).encode("utf-8")
    listing = (GOLDEN / "normalisation/itemlist.input.json").read_bytes()
    wiring.store.put("raw/s/a/page.html", page, content_type="text/html")
    wiring.store.put("raw/s/a/list.json", listing, content_type="application/ld+json")
    return DocumentJob(
        run_id="r1",
        source="s",
        url="https://pub.example.org/a",
        pattern="embedded-script",
        documents=(
            DocumentRef(
                key="raw/s/a/page.html",
                url="https://pub.example.org/a",
                media_type="text/html",
                via="self",
            ),
            DocumentRef(
                key="raw/s/a/list.json",
                url="https://pub.example.org/list.json",
                media_type="application/ld+json",
                via="describedby",
                authority="not-authoritative",
            ),
        ),
        links=(
            TypedLink(
                href="https://pub.example.org/list.json",
                rel="describedby",
                type="application/ld+json",
                found_in="http-header",
            ),
            TypedLink(
                href="https://doi.org/10.5072/x", rel="cite-as", title="Métadonnées", reverse=True
            ),
        ),
        notes=("link-header: missing angle brackets repaired",),
        sitemap="https://pub.example.org/sitemap.xml",
        lastmod="2024-05-06T00:00:00+00:00",
    )


CASES = ["v1", "v1-shacl"]


@pytest.mark.parametrize("rewritten", [False, True], ids=["as-written-then", "as-written-now"])
@pytest.mark.parametrize("case", CASES)
def test_the_indexer_does_what_it_did_with_a_staged_object_of_before_the_contract(
    tmp_path: Path, case: str, rewritten: bool
) -> None:
    # Same reads, same writes with the same bodies in the same order, same catalogue entries
    # and outcomes: whether the object is the captured one or the same records written now.
    raw = (STAGED / f"{case}.staged.json").read_bytes()
    if rewritten:
        raw = encode_staged(decode_staged(raw))
        assert json.loads(raw)["v"] == STAGED_VERSION
    expected = captured_rounds(case)
    wiring = _wiring(tmp_path)
    wiring.store.put(STAGED_KEY, raw, content_type="application/json")
    rounds = []
    for run_id in ("r1", "r2"):  # the first harvest, then the next run's
        calls: list[Any] = []
        recording = replace(
            wiring,
            store=Recording("store", wiring.store, calls),
            catalog=Recording("catalog", wiring.catalog, calls),
        )
        outcome = index_records(recording, replace(JOB, run_id=run_id))
        rounds.append({"calls": calls, "outcome": plain(outcome)})
    assert [r["outcome"]["outcome"] for r in rounds] == ["record", "unchanged"]
    assert rounds == expected


def test_a_retried_index_job_ends_as_its_first_attempt_did(tmp_path: Path) -> None:
    # Given an index job of a first harvest whose attempt wrote everything, its outcome too,
    # and then failed (a crash before the message was acknowledged)
    wiring = _wiring(tmp_path)
    wiring.store.put(STAGED_KEY, (STAGED / "v1.staged.json").read_bytes())
    first = index_records(wiring, JOB)
    written = sorted(wiring.store.list(""))
    # When the same job of the same run is tried again
    calls: list[Any] = []
    again = index_records(replace(wiring, store=Recording("store", wiring.store, calls)), JOB)
    # Then it ends as the first attempt did (the records are this harvest's news, not
    # unchanged since a last harvest that never was), writing nothing more
    assert first.outcome is Outcome.RECORD
    assert (again.outcome, again.reason, again.records) == (Outcome.RECORD, None, first.records)
    assert [call[0] for call in calls] == ["store.get"]
    assert sorted(wiring.store.list("")) == written


def test_a_document_job_delivered_twice_in_its_run_ends_as_the_first_copy(
    tmp_path: Path,
) -> None:
    # Given a document job of a first harvest, extracted and indexed (the URL's harvest state
    # is written)
    wiring = _wiring(tmp_path)
    job = _document_job(wiring)
    first = extract_documents(wiring, job)
    assert isinstance(first, IndexJob)
    assert index_records(wiring, first).outcome is Outcome.RECORD
    # When a second copy of the same job of the same run arrives (a send that was retried)
    again = extract_documents(wiring, job)
    # Then it is extracted again and handed on, not judged unchanged against its own run
    assert isinstance(again, IndexJob)
    assert index_records(wiring, again).outcome is Outcome.RECORD
    # while the next run's copy is unchanged, as incremental harvesting wants
    later = extract_documents(wiring, replace(job, run_id="r2"))
    assert not isinstance(later, IndexJob) and later.outcome is Outcome.UNCHANGED


@pytest.mark.skipif(
    importlib.util.find_spec("pyshacl") is None, reason="pyshacl (the shacl extra) not installed"
)
@pytest.mark.parametrize("case", CASES)
def test_the_extractor_writes_what_it_wrote_before_the_contract_and_its_marks(
    tmp_path: Path, case: str
) -> None:
    wiring = _wiring(tmp_path, shacl=case.endswith("shacl"))
    index_job = extract_documents(wiring, _document_job(wiring))
    assert isinstance(index_job, IndexJob)
    written = json.loads(index_job.staged)
    before = json.loads((STAGED / f"{case}.staged.json").read_bytes())
    # v2 adds v and kind, and writes the two fields v1 left out when empty (see contracts.py).
    for record in before["records"]:
        record.setdefault("item_list", None)
        record["report"].setdefault("shacl", False)
    # v3 writes each document's warnings (none here).
    for document in before["documents"]:
        document.setdefault("warnings", [])
    # v5 writes what the resolver did with each link (nothing: these links never went through it).
    for link in before["links"]:
        link.setdefault("used", None)
        link.setdefault("ignored", None)
    # v6 writes how each document was fetched and whether it is kept (these were kept, their
    # fetch unknown), never its body, and the resolution's validators (none were said here).
    for document in before["documents"]:
        document.update(
            kept=True,
            body=None,
            encoding=None,
            staged_key=None,
            status=None,
            redirects=[],
            headers={},
            fetched_at=None,
        )
    before["validators"] = []
    # A context entry pyld refuses is dropped and the document read again (decision 0061):
    # the block with "@vocab": 5 now says what was dropped, and that no Dataset was left.
    for record in before["records"]:
        if record["record_id"] == "https://pub.example.org/a#block-3":
            record["report"]["errors"] = [
                {
                    "pointer": "",
                    "message": "no schema:Dataset node found in the document "
                    '(context entry "@vocab" dropped: pyld refuses its value 5)',
                    "keyword": "no-dataset",
                }
            ]
    # v4 writes each report's profile verdicts: core's at the record's version first, with the
    # record's own verdict, then one per other profile the record claims.
    for record, now in zip(before["records"], written["records"], strict=True):
        profiles = now["report"]["profiles"]
        if record["record"] is None:
            assert profiles == []
        else:
            judged = validate_record(record["record"]).profiles
            assert [(p["profile"], p["version"]) for p in profiles] == [
                (v.profile, v.version) for v in judged
            ]
            assert profiles[0]["status"] == ("valid" if record["report"]["valid"] else "invalid")
            assert profiles[0]["errors"] == record["report"]["errors"]
            # the rules named are those that decide validity: core at the record's version
            record["report"]["rules"] = rules_for(record["record"]).name
        record["report"]["profiles"] = profiles
    assert written == {"v": STAGED_VERSION, "kind": "staged-records", **before}
    assert list(written) == ["v", "kind", *before]
    assert [list(r) for r in written["records"]] == [list(r) for r in before["records"]]


def test_a_malformed_staged_object_ends_its_url_failed_naming_the_field(tmp_path: Path) -> None:
    wiring = _wiring(tmp_path)
    staged = json.loads((STAGED / "v1.staged.json").read_bytes())
    staged["records"][2]["report"]["valid"] = "yes"
    wiring.store.put(STAGED_KEY, json.dumps(staged).encode(), content_type="application/json")
    outcome = run_job(wiring, JOB, index_records)
    assert outcome.outcome is Outcome.FAILED
    assert outcome.reason == (
        "bad-message: staged-records.records[2].report.valid: expected a boolean"
    )
    # Refused before anything was written: no report, no record, no catalogue entry.
    assert list(wiring.store.list("reports/")) == []
    assert wiring.catalog.get_record(staged["records"][0]["record_id"]) is None


def test_a_missing_staged_object_ends_its_url_failed(tmp_path: Path) -> None:
    wiring = _wiring(tmp_path)
    with pytest.raises(StagedObjectMissing):
        index_records(wiring, JOB)
    outcome = run_job(wiring, JOB, index_records)
    assert outcome.outcome is Outcome.FAILED
    assert outcome.reason == f"staged-object-missing: no staged object {STAGED_KEY}"
