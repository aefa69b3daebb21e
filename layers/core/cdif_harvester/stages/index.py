"""Stage 5: the indexer writes each record and its validation report to the object store and
the catalogue entry to the index, then records the URL's outcome (with its state).

The report is written before the record. :func:`plan_index` decides what a job writes,
:func:`apply_index` writes it: on AWS a batch's reports and records can go into one segment
between the two (:mod:`cdif_harvester.stages.segments`, 0086-record-segments).

Versions: a record is written only when its digest (record, verdict and links, see
:func:`cdif_harvester.domain.discovery.incremental.record_digest`) differs from the catalogue
entry's ``content_hash``. Then the version it replaces is kept, content-addressed, under
``versions/<source>/<key>/`` and ``records/<source>/<key>.jsonld`` is replaced, so a changed record
keeps its history and an unchanged one writes nothing (no object, no catalogue entry). A URL
whose records are all unchanged ends ``unchanged`` (``content-hash``), unless the entry was
written by this same job (run and URL): a retry ends ``record`` as its first attempt would have
(docs/decisions/0054-exact-accounting-under-faults.md).

The extractor's hand-over is a :class:`~cdif_harvester.contracts.StagedRecords`, carried in the
job's message or named by its ``staged_key``, read with
:func:`~cdif_harvester.contracts.decode_staged`: a malformed one is a permanent ContractError
that names the bad field, recorded as the URL's outcome.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from cdif_harvester.contracts import (
    IndexJob,
    StagedRecord,
    StagedRecords,
    StagedReport,
    decode_staged,
)
from cdif_harvester.domain.discovery.incremental import fingerprint, record_digest
from cdif_harvester.domain.records.validation import profile_summary
from cdif_harvester.errors import PermanentError
from cdif_harvester.jsontext import pretty_json
from cdif_harvester.keys import (
    normalised_record_key,
    record_hash,
    record_report_key,
    version_key,
)
from cdif_harvester.model import (
    CatalogEntry,
    Outcome,
    RecordRef,
    UrlOutcome,
    UrlState,
    plain,
)
from cdif_harvester.ports import eventual, keeping_signposts
from cdif_harvester.stages.crosswalk import record_signposts, signposts_text
from cdif_harvester.stages.outcomes import put_outcome
from cdif_harvester.wiring import Wiring

__all__ = [
    "IndexPlan",
    "PlannedRecord",
    "PreparedIndex",
    "PreparedRecord",
    "StagedObjectMissing",
    "apply_index",
    "index_prepared",
    "index_records",
    "load_staged",
    "plan_index",
    "prepare_index",
]


class StagedObjectMissing(PermanentError):
    """The extractor's hand-over object is gone (expired or never written)."""

    reason = "staged-object-missing"


def index_records(wiring: Wiring, job: IndexJob) -> UrlOutcome:
    """Store and index the records staged for one URL; return the recorded outcome.

    Raises StagedObjectMissing when the staged object cannot be found, and ContractError when
    it is malformed (both permanent: the URL's outcome is recorded).
    """
    staged = load_staged(wiring, job)
    now = wiring.clock.now().isoformat(timespec="seconds")
    keep = keeping_signposts(wiring.catalog) is not None
    results = [
        _apply_one(wiring, job, _plan_one(wiring, job, staged, item, now, keep=keep), None, now)
        for item in staged.records
    ]
    return _conclude(wiring, job, staged, now, results)


@dataclass(frozen=True)
class PreparedRecord:
    """What indexing one record writes unless the catalogue holds it: made from the hand-over
    alone (its digest, its report's and its record's bytes, and what the Signmap lists of it
    when the catalogue keeps that: :func:`_signposts_of`)."""

    digest: str
    report: bytes
    record: bytes | None
    signposts: str | None = None


@dataclass(frozen=True)
class PreparedIndex:
    """An index job's work that needs no catalogue, done ahead of it (in another process): the
    hand-over read, the time it is indexed at, and each record's :class:`PreparedRecord`."""

    job: IndexJob
    staged: StagedRecords
    now: str
    records: tuple[PreparedRecord, ...]


def prepare_index(
    wiring: Wiring, job: IndexJob, staged: StagedRecords | None = None
) -> PreparedIndex:
    """Make what indexing ``job`` writes, reading no catalogue and writing nothing (see
    :func:`index_prepared`), from ``staged``, the hand-over ``job`` carries when the caller
    holds it already, or else from the hand-over read. Raises as :func:`load_staged` does."""
    staged = load_staged(wiring, job) if staged is None else staged
    now = wiring.clock.now().isoformat(timespec="seconds")
    keep = keeping_signposts(wiring.catalog) is not None
    made = tuple(_prepare_one(job, staged, item, now, keep=keep) for item in staged.records)
    # Of each record's tree, index_prepared reads only what its catalogue entry takes: the rest
    # stays here (the runner, which unpickles this, is the harvest's busiest process).
    slim = tuple(replace(item, record=_entry_part(item.record)) for item in staged.records)
    return PreparedIndex(job=job, staged=replace(staged, records=slim), now=now, records=made)


def index_prepared(wiring: Wiring, prepared: PreparedIndex) -> UrlOutcome:
    """Index ``prepared.job`` as :func:`index_records` does, with the work ``prepared`` did
    ahead: only the catalogue's reads and writes, and the objects' writes, are left."""
    job, staged, now = prepared.job, prepared.staged, prepared.now
    results = [
        _apply_one(wiring, job, _plan_one(wiring, job, staged, item, now, made=made), None, now)
        for item, made in zip(staged.records, prepared.records, strict=True)
    ]
    return _conclude(wiring, job, staged, now, results)


@dataclass(frozen=True)
class PlannedRecord:
    """One staged record and what indexing it does: nothing when ``held`` (the catalogue holds
    this very version), else write ``report`` and ``record`` (None for a record that could not
    be normalised) under ``report_key`` and ``record_key``, or where a segment holds them, and
    ``signposts`` with the entry when the catalogue keeps them."""

    item: StagedRecord
    digest: str
    valid: bool
    before: CatalogEntry | None
    held: CatalogEntry | None
    report_key: str
    record_key: str
    report: bytes = b""
    record: bytes | None = None
    signposts: str | None = None


@dataclass(frozen=True)
class IndexPlan:
    """What indexing one job will write, computed before anything is written (read-only)."""

    job: IndexJob
    staged: StagedRecords
    now: str
    records: tuple[PlannedRecord, ...]

    def writes(self) -> list[tuple[str, bytes]]:
        """The (key, body) of every report and record the plan writes, in order."""
        found: list[tuple[str, bytes]] = []
        for planned in self.records:
            if planned.held is None:
                found.append((planned.report_key, planned.report))
                if planned.record is not None:
                    found.append((planned.record_key, planned.record))
        return found


def plan_index(wiring: Wiring, job: IndexJob) -> IndexPlan:
    """Read what indexing ``job`` needs (its hand-over, each record's catalogue entry) and
    decide what it writes, writing nothing. Raises as :func:`index_records` does."""
    staged = load_staged(wiring, job)
    now = wiring.clock.now().isoformat(timespec="seconds")
    planned = tuple(_plan_one(wiring, job, staged, item, now) for item in staged.records)
    return IndexPlan(job=job, staged=staged, now=now, records=planned)


def apply_index(wiring: Wiring, plan: IndexPlan, placed: Mapping[str, str]) -> UrlOutcome:
    """Carry out ``plan``: the reports and records whose keys ``placed`` maps to a segment
    reference are already written there (the catalogue entry names the reference); the
    others are written as their own objects. Then the entries, the URL's state and outcome."""
    results = [_apply_one(wiring, plan.job, planned, placed, plan.now) for planned in plan.records]
    return _conclude(wiring, plan.job, plan.staged, plan.now, results)


def _conclude(
    wiring: Wiring,
    job: IndexJob,
    staged: StagedRecords,
    now: str,
    results: list[tuple[RecordRef, bool]],
) -> UrlOutcome:
    """Record the URL's outcome and its state, once its records are indexed: the state goes
    with the outcome, into one write of the URL's item (decision 0092)."""
    refs = tuple(ref for ref, _changed in results)
    changed = any(changed for _ref, changed in results)
    outcome = UrlOutcome(
        run_id=job.run_id,
        source=job.source,
        url=job.url,
        outcome=Outcome.RECORD if changed else Outcome.UNCHANGED,
        reason=None
        if changed
        else "content-hash: the normalised records are the same as the last harvest's",
        pattern=job.pattern,
        records=refs,
        recorded_at=now,
    )
    put_outcome(wiring, outcome, _url_state(job, staged, refs))
    return outcome


def load_staged(wiring: Wiring, job: IndexJob) -> StagedRecords:
    """The extractor's hand-over the job carries, or names by ``staged_key``.

    Raises StagedObjectMissing when a named one is not in the object store, ContractError when
    it is not a staged-records object of a readable version.
    """
    if job.staged is not None:
        return decode_staged(job.staged)
    assert job.staged_key is not None  # (an IndexJob has one or the other)
    try:
        raw = wiring.store.get(job.staged_key)
    except KeyError as exc:
        raise StagedObjectMissing(f"no staged object {job.staged_key}") from exc
    return decode_staged(raw)


def _url_state(job: IndexJob, staged: StagedRecords, refs: tuple[RecordRef, ...]) -> UrlState:
    """What the next harvest compares against: the URL's documents, blocks and records."""
    return UrlState(
        url=job.url,
        source=job.source,
        sitemap=staged.sitemap,
        lastmod=staged.lastmod,
        fingerprint=fingerprint(job.pattern, [ref.key for ref in staged.documents]),
        blocks=staged.blocks,
        sd_dates=staged.sd_dates,
        record_ids=tuple(ref.record_id for ref in refs),
        harvest_run=job.run_id,
        validators=staged.validators,
    )


def _prepare_one(
    job: IndexJob, staged: StagedRecords, item: StagedRecord, now: str, *, keep: bool
) -> PreparedRecord:
    """One record's digest and bytes (and its signposts when ``keep``), whatever the
    catalogue holds."""
    links = _links_read(staged)
    report, record = _bytes_of(job, staged, item, links, now)
    return PreparedRecord(
        digest=_digest_of(staged, item, links),
        report=report,
        record=record,
        signposts=_signposts_of(item, report, record) if keep else None,
    )


def _signposts_of(item: StagedRecord, report: bytes, record: bytes | None) -> str | None:
    """What the Signmap lists of a valid record, made from its report and record as written
    (so, as the Signmap would read them: decision 0100); None for a record not valid, or
    whose signposts cannot be made (the Signmap then reads it itself)."""
    if not item.report.valid or record is None:
        return None
    try:
        return signposts_text(record_signposts(json.loads(report), json.loads(record)))
    except Exception:  # noqa: BLE001 - the Signmap reads this record itself then
        return None


def _digest_of(staged: StagedRecords, item: StagedRecord, links: list[dict[str, Any]]) -> str:
    """The digest a record's version is known by (see :func:`record_digest`)."""
    # The resolver's warnings count with the verdict (a new reason rewrites the report); a
    # document without any hashes as before.
    said = _document_warnings(item, staged)
    authority: Any = [item.authority, *said] if said else item.authority
    return record_digest(item.record, _verdict(item.report), links, authority)


def _bytes_of(
    job: IndexJob, staged: StagedRecords, item: StagedRecord, links: Any, now: str
) -> tuple[bytes, bytes | None]:
    """A record's report and record as written (None for a record not normalised)."""
    report = _report(job, staged, item, links, now)
    return (
        pretty_json(report, sort_keys=True).encode("utf-8"),
        None
        if item.record is None
        else pretty_json(item.record, ensure_ascii=False).encode("utf-8"),
    )


def _plan_one(  # noqa: PLR0913 - the job, its hand-over, the record, and what was made ahead
    wiring: Wiring,
    job: IndexJob,
    staged: StagedRecords,
    item: StagedRecord,
    now: str,
    *,
    made: PreparedRecord | None = None,
    keep: bool = False,
) -> PlannedRecord:
    """Decide what indexing one record writes: nothing when it is unchanged, else its report
    and record (their bytes made now, unless ``made`` ahead), with its signposts when ``made``
    has them or ``keep`` asks for them."""
    links = _links_read(staged) if made is None else []  # (made: digest and bytes are there)
    digest = made.digest if made is not None else _digest_of(staged, item, links)
    valid = item.report.valid and item.record is not None
    # Asked even when not incremental: one read per record, whatever the settings. Eventually
    # consistent where the catalogue can (half the price): an entry a moment old is one the
    # record had, so what follows is what a job a moment earlier would have done (the same
    # record from two URLs at once may be written twice, as by two concurrent batches), and
    # the entry written is made from this job's record, not from the one read.
    catalog = wiring.catalog
    cheap = eventual(catalog)
    read = catalog.get_record if cheap is None else cheap.peek_record
    before = read(item.record_id)
    rkey = record_hash(item.record_id)
    planned = PlannedRecord(
        item=item,
        digest=digest,
        valid=valid,
        before=before,
        held=_held_unchanged(wiring, before, digest),
        report_key=record_report_key(job.source, rkey),
        record_key=normalised_record_key(job.source, rkey),
    )
    if planned.held is not None:
        return planned
    if made is not None:
        return replace(planned, report=made.report, record=made.record, signposts=made.signposts)
    report, record = _bytes_of(job, staged, item, links, now)
    signposts = _signposts_of(item, report, record) if keep else None
    return replace(planned, report=report, record=record, signposts=signposts)


def _apply_one(
    wiring: Wiring,
    job: IndexJob,
    planned: PlannedRecord,
    placed: Mapping[str, str] | None,
    now: str,
) -> tuple[RecordRef, bool]:
    """Store one record unless it is unchanged; return its reference and whether it changed.

    The report is written first, then the record (the version it replaces kept, then
    ``records/``), then the catalogue entry. A key ``placed`` maps is in a segment already.
    """
    item, held = planned.item, planned.held
    if held is not None:
        # A retry of this very job (same run, same URL) after its entry was written finds its
        # own work: the record is this run's news, not an earlier harvest's (the entry is
        # written last, so the report and the record are in place too).
        mine = held.run_id == job.run_id and held.url == job.url
        return _ref(job, item, held.record_key, held.report_key, valid=planned.valid), mine
    rep_key = _store_report(wiring, planned, placed or {})
    rec_key = _store_record(wiring, planned, placed or {})
    entry = _catalog_entry(
        job, item, planned.digest, rec_key, rep_key, valid=planned.valid, now=now
    )
    # What this harvest did to the record, for the publisher report of its run.
    entry = replace(entry, extra={**entry.extra, "change": _change(planned.before, planned.digest)})
    keeping = keeping_signposts(wiring.catalog)
    if planned.signposts is not None and keeping is not None:
        keeping.put_record_with_signposts(entry, planned.signposts)
    else:
        wiring.catalog.put_record(entry)
    return _ref(job, item, rec_key, rep_key, valid=planned.valid), True


def _links_read(staged: StagedRecords) -> list[dict[str, Any]]:
    """The report's list of the links the resolver read: each with its source (``found_in``),
    whether it was ``used`` and, when set aside, why (``ignored``). A link of an older
    hand-over, which said nothing of its use, is listed as it was then (so its record's digest
    is the same)."""
    listed: list[dict[str, Any]] = []
    for link in staged.links:
        item: dict[str, Any] = plain(link)
        for name in ("used", "ignored"):
            if item[name] is None:
                del item[name]
        listed.append(item)
    return listed


def _verdict(report: StagedReport) -> dict[str, Any]:
    """The staged verdict as the report object holds it and as the digest reads it (``shacl``
    only when the shapes were run, as the extractor has always written it)."""
    verdict: dict[str, Any] = plain(report)
    if not report.shacl:
        del verdict["shacl"]
    if not report.profiles:
        # a staged object of before the per-profile verdicts: its report as written then
        del verdict["profiles"]
    return verdict


def _held_unchanged(wiring: Wiring, held: CatalogEntry | None, digest: str) -> CatalogEntry | None:
    """``held``, the record's catalogue entry, when it holds this very version (same digest,
    not withdrawn) and the harvest is incremental: then nothing is written. Otherwise None."""
    unchanged = held is not None and held.content_hash == digest and not held.withdrawn_at
    return held if unchanged and wiring.settings.incremental else None


def _change(before: CatalogEntry | None, digest: str) -> str:
    """What writing this version does to the record: ``new`` (none held, or withdrawn),
    ``changed`` (another version held) or ``unchanged`` (the same one, rewritten because the
    harvest is not incremental)."""
    if before is None or before.withdrawn_at:
        return "new"
    return "unchanged" if before.content_hash == digest else "changed"


def _document_warnings(item: StagedRecord, staged: StagedRecords) -> tuple[str, ...]:
    """What the resolver warned about the document the record comes from."""
    for ref in staged.documents:
        if ref.key == item.document:
            return ref.warnings
    return ()


def _warnings(item: StagedRecord, staged: StagedRecords) -> list[dict[str, Any]]:
    """The report's warnings: the validator's, after the resolver's about the record's document
    (an unverified claim, a page cut at its cap) and the anti-spoofing one when it applies."""
    warnings: list[dict[str, Any]] = plain(item.report.warnings)
    for position, text in enumerate(_document_warnings(item, staged)):
        keyword, _, message = text.partition(": ")
        warnings.insert(position, {"pointer": "", "message": message, "keyword": keyword})
    if item.authority == "not-authoritative":
        # Anti-spoofing verdict (1997 metadata-linking draft): the resource this record claims
        # names other metadata as its own.
        warnings.insert(
            0,
            {
                "pointer": "",
                "message": "not authoritative: the resource this record describes names "
                "other metadata as its own (see provenance.resolution_notes)",
                "keyword": "not-authoritative",
            },
        )
    return warnings


def _report(
    job: IndexJob, staged: StagedRecords, item: StagedRecord, links: Any, now: str
) -> dict[str, Any]:
    """The record's report object: its verdict, identities, repairs, notes and provenance."""
    return {
        **_verdict(item.report),
        "warnings": _warnings(item, staged),
        "record_id": item.record_id,
        "resource_id": item.resource_id,
        "identity_fallback": item.identity_fallback,
        "repairs": list(item.repairs),
        "notes": list(item.notes),
        "provenance": {
            "url": job.url,
            "pattern": job.pattern,
            "run_id": job.run_id,
            "document": item.document,
            "block": item.block,
            "via": item.via,
            "authority": item.authority,
            "resolution_notes": list(staged.resolution_notes),
            "links": links,
            # A record from a CDIF-list-1.0 ItemList keeps the list: its id, name, url, and
            # the element's position.
            "item_list": item.item_list,
            "harvested_at": now,
            **_fetched(item, staged),
        },
    }


def _fetched(item: StagedRecord, staged: StagedRecords) -> dict[str, Any]:
    """How the record's document was fetched, and whether it is kept under ``document``
    (nothing for a hand-over written before the resolver said: its documents were all kept)."""
    for ref in staged.documents:
        if ref.key == item.document and ref.status is not None:
            fetched = {
                "url": ref.url,
                "status": ref.status,
                "redirects": list(ref.redirects),
                "headers": dict(ref.headers),
                "at": ref.fetched_at,
                "kept": ref.kept,
            }
            return {"fetched": fetched}
    return {}


def _store_report(wiring: Wiring, planned: PlannedRecord, placed: Mapping[str, str]) -> str:
    """Write the report under ``reports/`` (unless a segment holds it); return its key.

    It goes before the record: the record landing under ``records/`` triggers the crosswalk,
    which reads the report.
    """
    if planned.report_key in placed:
        return placed[planned.report_key]
    wiring.store.put(planned.report_key, planned.report, content_type="application/json")
    return planned.report_key


def _store_record(wiring: Wiring, planned: PlannedRecord, placed: Mapping[str, str]) -> str | None:
    """Write the record under ``records/`` (its latest version; unless a segment holds it),
    after keeping the version it replaces under ``versions/``; return the record's key (None
    for a record that could not be normalised: nothing to write).

    The latest version is not copied to ``versions/`` as well (one object per version, not
    two): the history of a record is ``versions/<source>/<record-hash>/`` and the latest.
    """
    if planned.record is None:
        return None
    before = planned.before
    if before is not None and before.record_key and before.content_hash != planned.digest:
        # Before the latest changes, so that history stays whole whatever fails next: a retry
        # of this job finds the version kept (the entry still names it) and keeps nothing again.
        _keep_version(wiring, before, record_hash(planned.item.record_id))
    if planned.record_key in placed:
        return placed[planned.record_key]
    wiring.store.put(planned.record_key, planned.record, content_type="application/ld+json")
    return planned.record_key


def _keep_version(wiring: Wiring, before: CatalogEntry, rkey: str) -> None:
    """Keep the version ``before`` names under ``versions/`` (named by its digest), unless it is
    there already (written by an earlier layout, or by a retried attempt of this job)."""
    target = version_key(before.source, rkey, before.content_hash)
    if before.record_key is None or wiring.store.exists(target):
        return
    try:
        body = wiring.store.get(before.record_key)
    except KeyError:  # nothing left to keep (the object was removed by hand)
        return
    wiring.store.put(target, body, content_type="application/ld+json")


def _catalog_entry(  # noqa: PLR0913 - the entry is made of all of them
    job: IndexJob,
    item: StagedRecord,
    digest: str,
    rec_key: str | None,
    rep_key: str,
    *,
    valid: bool,
    now: str,
) -> CatalogEntry:
    """The record's catalogue entry: what the listings, the API and the next harvest read."""
    record = item.record or {}
    subject = record.get("schema:subjectOf") or {}
    title = record.get("schema:name")
    return CatalogEntry(
        record_id=item.record_id,
        resource_id=item.resource_id,
        source=job.source,
        url=job.url,
        title=title if isinstance(title, str) else None,
        pattern=job.pattern,
        valid=valid,
        conformance=item.report.conformance,
        date_modified=_text(record.get("schema:dateModified")),
        sd_date_published=_text(
            subject.get("schema:sdDatePublished") if isinstance(subject, dict) else None
        ),
        content_hash=digest,
        record_key=rec_key,
        report_key=rep_key,
        run_id=job.run_id,
        harvested_at=now,
        extra={"authority": item.authority} if item.authority else {},
        changed_at=now,
        profiles={f"{p.profile}/{p.version}": p.status for p in item.report.profiles},
    )


def _entry_part(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """What :func:`_catalog_entry` reads of ``record``: its name, dateModified and the
    sdDatePublished of its subjectOf (None stays None: a record not normalised)."""
    if record is None:
        return None
    part: dict[str, Any] = {
        key: record[key] for key in ("schema:name", "schema:dateModified") if key in record
    }
    subject = record.get("schema:subjectOf")
    if isinstance(subject, dict) and "schema:sdDatePublished" in subject:
        part["schema:subjectOf"] = {"schema:sdDatePublished": subject["schema:sdDatePublished"]}
    return part


def _ref(
    job: IndexJob, item: StagedRecord, rec_key: str | None, rep_key: str, *, valid: bool
) -> RecordRef:
    """The record as the URL's outcome lists it (no view keys: views are made on read)."""
    return RecordRef(
        record_id=item.record_id,
        resource_id=item.resource_id,
        valid=valid,
        errors=tuple(issue.message for issue in item.report.errors),
        record_key=rec_key,
        report_key=rep_key,
        profiles=tuple(
            profile_summary(p.profile, p.version, p.status, len(p.errors))
            for p in item.report.profiles
        ),
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
