"""Stage 5: the indexer writes each record and its validation report to the object store and
the catalogue entry to the index, then records the URL's outcome.

The report is written before the record: the record landing under ``records/`` triggers the
crosswalk, which reads the report to know whether the record is valid.
"""

from __future__ import annotations

import json
from typing import Any

from cdif_harvester.contracts import IndexJob
from cdif_harvester.errors import PermanentError
from cdif_harvester.keys import content_hash, record_key, records_key, report_key, view_keys
from cdif_harvester.model import CatalogEntry, Outcome, RecordRef, UrlOutcome
from cdif_harvester.stages import Ports

__all__ = ["index_records"]


class StagedObjectMissing(PermanentError):
    """The extractor's hand-over object is gone (expired or never written)."""

    reason = "staged-object-missing"


def index_records(ports: Ports, job: IndexJob) -> UrlOutcome:
    """Store and index the records staged for one URL; return the recorded outcome.

    Raises StagedObjectMissing when the staged object cannot be found.
    """
    try:
        staged = json.loads(ports.store.get(job.staged_key))
    except KeyError as exc:
        raise StagedObjectMissing(f"no staged object {job.staged_key}") from exc
    now = ports.clock.now().isoformat(timespec="seconds")
    refs = [_index_one(ports, job, staged, item, now) for item in staged["records"]]
    outcome = UrlOutcome(
        run_id=job.run_id,
        source=job.source,
        url=job.url,
        outcome=Outcome.RECORD,
        pattern=job.pattern,
        records=tuple(refs),
        recorded_at=now,
    )
    ports.catalog.put_outcome(outcome)
    return outcome


def _index_one(
    ports: Ports, job: IndexJob, staged: dict[str, Any], item: dict[str, Any], now: str
) -> RecordRef:
    rkey = record_key(item["record_id"])
    authority = item.get("authority")
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
            "harvested_at": now,
        },
    }
    rep_key = report_key(job.source, rkey)
    ports.store.put(
        rep_key,
        json.dumps(report, indent=2, sort_keys=True).encode("utf-8"),
        content_type="application/json",
    )
    record = item["record"]
    rec_key = None
    digest = ""
    if record is not None:
        body = json.dumps(record, indent=2, ensure_ascii=False).encode("utf-8")
        digest = content_hash(json.dumps(record, sort_keys=True).encode("utf-8"))
        rec_key = records_key(job.source, rkey)
        ports.store.put(rec_key, body, content_type="application/ld+json")
    valid = bool(item["report"]["valid"]) and record is not None
    subject = (record or {}).get("schema:subjectOf") or {}
    title = (record or {}).get("schema:name")
    ports.catalog.put_record(
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
        )
    )
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
