"""Stage 5: the indexer writes each record and its validation report to the object store and
the catalogue entry to the index, then records the URL's outcome.

The report is written before the record: the record landing under ``records/`` triggers the
crosswalk, which reads the report to know whether the record is valid.

Versions: a record is written only when its digest (record, verdict and links, see
:func:`cdif_harvester.domain.discovery.incremental.record_digest`) differs from the catalogue
entry's ``content_hash``. Then ``records/<source>/<key>.jsonld`` is replaced and the new version is
also kept, content-addressed, under ``versions/<source>/<key>/``, so a changed record keeps its
history and an unchanged one writes nothing (no object, no catalogue entry, no views). A URL
whose records are all unchanged ends ``unchanged`` (``content-hash``). Redelivered index jobs
and reruns therefore change nothing.
"""

from __future__ import annotations

import json
from typing import Any

from cdif_harvester.contracts import IndexJob
from cdif_harvester.domain.discovery.incremental import fingerprint, record_digest
from cdif_harvester.errors import PermanentError
from cdif_harvester.keys import (
    normalised_record_key,
    record_hash,
    record_report_key,
    version_key,
    view_keys,
)
from cdif_harvester.model import CatalogEntry, Outcome, RecordRef, UrlOutcome, UrlState
from cdif_harvester.stages.outcomes import finish_if_done
from cdif_harvester.wiring import Wiring

__all__ = ["index_records"]


class StagedObjectMissing(PermanentError):
    """The extractor's hand-over object is gone (expired or never written)."""

    reason = "staged-object-missing"


def index_records(wiring: Wiring, job: IndexJob) -> UrlOutcome:
    """Store and index the records staged for one URL; return the recorded outcome.

    Raises StagedObjectMissing when the staged object cannot be found.
    """
    try:
        staged = json.loads(wiring.store.get(job.staged_key))
    except KeyError as exc:
        raise StagedObjectMissing(f"no staged object {job.staged_key}") from exc
    now = wiring.clock.now().isoformat(timespec="seconds")
    results = [_index_one(wiring, job, staged, item, now) for item in staged["records"]]
    refs = tuple(ref for ref, _changed in results)
    wiring.catalog.put_url(
        UrlState(
            url=job.url,
            source=job.source,
            sitemap=staged.get("sitemap"),
            lastmod=staged.get("lastmod"),
            fingerprint=fingerprint(job.pattern, [d["key"] for d in staged["documents"]]),
            blocks=tuple(staged.get("blocks") or ()),
            sd_dates=tuple(staged.get("sd_dates") or ()),
            record_ids=tuple(ref.record_id for ref in refs),
        )
    )
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
    finish_if_done(wiring, wiring.catalog.put_outcome(outcome))
    return outcome


def _index_one(
    wiring: Wiring, job: IndexJob, staged: dict[str, Any], item: dict[str, Any], now: str
) -> tuple[RecordRef, bool]:
    """Store one record unless it is unchanged; return its reference and whether it was."""
    rkey = record_hash(item["record_id"])
    authority = item.get("authority")
    record = item["record"]
    digest = record_digest(record, item["report"], staged.get("links", []), authority)
    held = wiring.catalog.get_record(item["record_id"])
    valid = bool(item["report"]["valid"]) and record is not None
    unchanged = held is not None and held.content_hash == digest and not held.withdrawn_at
    if held is not None and unchanged and wiring.settings.incremental:
        return _ref(job, item, held.record_key, held.report_key, valid=valid), False
    warnings = list(item["report"].get("warnings", []))
    if authority == "not-authoritative":
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
    report = {
        **item["report"],
        "warnings": warnings,
        "record_id": item["record_id"],
        "resource_id": item["resource_id"],
        "identity_fallback": item["identity_fallback"],
        "repairs": item["repairs"],
        "notes": item["notes"],
        "provenance": {
            "url": job.url,
            "pattern": job.pattern,
            "run_id": job.run_id,
            "document": item["document"],
            "block": item["block"],
            "via": item.get("via"),
            "authority": authority,
            "resolution_notes": staged.get("resolution_notes", []),
            "links": staged.get("links", []),
            # A record from a CDIF-list-1.0 ItemList keeps the list: its id, name, url, and
            # the element's position.
            "item_list": item.get("item_list"),
            "harvested_at": now,
        },
    }
    rep_key = record_report_key(job.source, rkey)
    wiring.store.put(
        rep_key,
        json.dumps(report, indent=2, sort_keys=True).encode("utf-8"),
        content_type="application/json",
    )
    rec_key = None
    if record is not None:
        body = json.dumps(record, indent=2, ensure_ascii=False).encode("utf-8")
        # The version first: once records/ changes, the crosswalk runs, and history is whole.
        wiring.store.put(
            version_key(job.source, rkey, digest), body, content_type="application/ld+json"
        )
        rec_key = normalised_record_key(job.source, rkey)
        wiring.store.put(rec_key, body, content_type="application/ld+json")
    subject = (record or {}).get("schema:subjectOf") or {}
    title = (record or {}).get("schema:name")
    wiring.catalog.put_record(
        CatalogEntry(
            record_id=item["record_id"],
            resource_id=item["resource_id"],
            source=job.source,
            url=job.url,
            title=title if isinstance(title, str) else None,
            pattern=job.pattern,
            valid=valid,
            conformance=item["report"].get("conformance"),
            date_modified=_text((record or {}).get("schema:dateModified")),
            sd_date_published=_text(
                subject.get("schema:sdDatePublished") if isinstance(subject, dict) else None
            ),
            content_hash=digest,
            record_key=rec_key,
            report_key=rep_key,
            run_id=job.run_id,
            harvested_at=now,
            extra={"authority": authority} if authority else {},
            changed_at=now,
        )
    )
    return _ref(job, item, rec_key, rep_key, valid=valid), True


def _ref(
    job: IndexJob, item: dict[str, Any], rec_key: str | None, rep_key: str, *, valid: bool
) -> RecordRef:
    rkey = record_hash(item["record_id"])
    return RecordRef(
        record_id=item["record_id"],
        resource_id=item["resource_id"],
        valid=valid,
        errors=tuple(str(e.get("message")) for e in item["report"].get("errors", [])),
        record_key=rec_key,
        report_key=rep_key,
        view_keys=view_keys(job.source, rkey) if valid else {},
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
