"""The publisher's checker: one document or one landing page judged as a harvest would judge it.

:func:`check_document` takes a metadata document (JSON-LD, or an HTML page with embedded
JSON-LD) given whole; :func:`check_url` reads a URL as the resolver does (Signposting, linksets,
describedby, embedded scripts ...). Both run the real resolver and extractor stages on the
wiring they are given (the in-memory one of ``local_runtime.check_wiring``: nothing is kept)
and answer a :class:`CheckReport`: the verdict, each record's errors and warnings with their
fixes (the publisher report's, :func:`~cdif_harvester.report.model.classify_error`), and the
verdict of every CDIF profile the record claims.

See docs/decisions/0072-the-publisher-checker.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from cdif_harvester.contracts import (
    DocumentJob,
    DocumentRef,
    ProfileStatus,
    ReportIssue,
    StagedRecord,
    UrlJob,
)
from cdif_harvester.domain.records.validation import profile_summary
from cdif_harvester.errors import HarvestError, PermanentError, RetryableError
from cdif_harvester.keys import source_of
from cdif_harvester.model import UrlOutcome
from cdif_harvester.report.model import classify_error, classify_reason
from cdif_harvester.stages.extract import MalformedMetadata, extract_documents
from cdif_harvester.stages.index import load_staged
from cdif_harvester.stages.resolve import resolve_url
from cdif_harvester.wiring import Wiring

__all__ = [
    "FAILED",
    "INVALID",
    "MALFORMED",
    "NO_METADATA",
    "VALID",
    "VERDICTS",
    "CheckReport",
    "CheckedIssue",
    "CheckedProfile",
    "CheckedRecord",
    "check_document",
    "check_url",
    "sniff_media_type",
]

#: Every record found is valid, for core and for every CDIF profile it claims.
VALID = "valid"
#: A record found breaks core or a profile it claims.
INVALID = "invalid"
#: The document or page holds no Dataset (or the URL leads to none).
NO_METADATA = "no-metadata"
#: No JSON-LD block could be read at all (JSON beyond repair).
MALFORMED = "malformed"
#: The URL could not be read (refused address, HTTP error, network fault): nothing was judged.
FAILED = "failed"
VERDICTS = (VALID, INVALID, NO_METADATA, MALFORMED, FAILED)

# The run and source a check's jobs carry: they are written nowhere but the check's own memory.
_RUN = "check"
_DOCUMENT_KEY = "check/document"


@dataclass(frozen=True)
class CheckedIssue:
    """One error or warning: where (JSON Pointer), what, the rule's keyword, and what kind of
    problem it is with its plain-language fix (as the publisher report groups it)."""

    pointer: str
    message: str
    keyword: str
    title: str
    fix: str

    def to_dict(self) -> dict[str, str]:
        """The issue as a JSON-ready dict."""
        return {
            "pointer": self.pointer,
            "message": self.message,
            "keyword": self.keyword,
            "title": self.title,
            "fix": self.fix,
        }


@dataclass(frozen=True)
class CheckedProfile:
    """The verdict of one CDIF profile at one version (``valid``, ``invalid``, ``unknown``)."""

    profile: str
    version: str
    status: str
    declared: bool
    summary: str  # "core 1.1 valid", "discovery 1.1: 3 errors"
    errors: tuple[CheckedIssue, ...]

    def to_dict(self) -> dict[str, Any]:
        """The profile verdict as a JSON-ready dict."""
        return {
            "profile": self.profile,
            "version": self.version,
            "status": self.status,
            "declared": self.declared,
            "summary": self.summary,
            "errors": [issue.to_dict() for issue in self.errors],
        }


@dataclass(frozen=True)
class CheckedRecord:
    """One record found: its ids, ``valid`` as the harvester counts it (core at the record's
    version), its ``verdict`` (core and every profile it claims), and why."""

    record_id: str
    resource_id: str
    document: str  # the URL (or file) the record's JSON-LD came from
    block: int
    valid: bool
    verdict: str
    conformance: str | None
    profiles: tuple[CheckedProfile, ...]
    errors: tuple[CheckedIssue, ...]
    warnings: tuple[CheckedIssue, ...]
    repairs: tuple[str, ...]
    notes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """The record's verdict as a JSON-ready dict."""
        return {
            "record_id": self.record_id,
            "resource_id": self.resource_id,
            "document": self.document,
            "block": self.block,
            "valid": self.valid,
            "verdict": self.verdict,
            "conformance": self.conformance,
            "profiles": [profile.to_dict() for profile in self.profiles],
            "errors": [issue.to_dict() for issue in self.errors],
            "warnings": [issue.to_dict() for issue in self.warnings],
            "repairs": list(self.repairs),
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class CheckReport:
    """What a check found: the ``verdict`` (one of :data:`VERDICTS`), the records judged, the
    blocks that gave none, how the metadata was found (``pattern``) and, when nothing was
    judged, the ``reason`` with its ``fix``."""

    target: str
    verdict: str
    records: tuple[CheckedRecord, ...] = ()
    skipped: tuple[str, ...] = ()
    pattern: str | None = None
    notes: tuple[str, ...] = ()
    reason: str | None = None
    fix: str | None = None
    shacl: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready dict (what ``check --json`` prints and ``POST /check``
        answers)."""
        return {
            "target": self.target,
            "verdict": self.verdict,
            "reason": self.reason,
            "fix": self.fix,
            "pattern": self.pattern,
            "shacl": self.shacl,
            "counts": {
                "records": len(self.records),
                "invalid": sum(record.verdict == INVALID for record in self.records),
                "errors": sum(len(record.errors) for record in self.records),
                "profile_errors": sum(
                    len(profile.errors)
                    for record in self.records
                    for profile in record.profiles[1:]
                ),
                "warnings": sum(len(record.warnings) for record in self.records),
            },
            "records": [record.to_dict() for record in self.records],
            "skipped": list(self.skipped),
            "notes": list(self.notes),
        }


def sniff_media_type(body: bytes) -> str:
    """Whether ``body`` is JSON(-LD) or HTML, from its first character: a JSON document opens
    with ``{`` or ``[`` (after a byte order mark and white space); anything else is read as a
    page, which is where embedded JSON-LD is looked for."""
    start = body.lstrip(b"\xef\xbb\xbf").lstrip()[:1]
    return "application/ld+json" if start in (b"{", b"[") else "text/html"


def check_document(
    wiring: Wiring, body: bytes, *, url: str, media_type: str | None = None
) -> CheckReport:
    """Judge one metadata document given whole, as the extractor judges a fetched one.

    ``url`` is where the document is (or will be) published: relative ids resolve against it
    and records without an id are named after it. ``media_type`` None sniffs JSON or HTML
    (:func:`sniff_media_type`). Writes only to ``wiring``'s store, queue and catalogue; raises
    what they raise (StorageError).
    """
    media = media_type or sniff_media_type(body)
    wiring.store.put(_DOCUMENT_KEY, body, content_type=media)
    html = media in ("text/html", "application/xhtml+xml")
    job = DocumentJob(
        run_id=_RUN,
        source=source_of(url),
        url=url,
        pattern="embedded-script" if html else "content-type",
        documents=(DocumentRef(key=_DOCUMENT_KEY, url=url, media_type=media, via="self"),),
    )
    # (How a harvest would have found a document given whole is not this check's to say.)
    return replace(_extracted(wiring, job, target=url), pattern=None)


def check_url(wiring: Wiring, url: str) -> CheckReport:
    """Judge what ``url`` leads to, resolved as a harvest resolves it (every pattern, in the
    resolver's order, through ``wiring.fetcher``: its address policy applies).

    A URL that cannot be read (a refused address, a 4xx or 5xx answer, a network fault) gives
    the verdict :data:`FAILED` with the reason; never raises for the URL's faults.
    """
    job = UrlJob(run_id=_RUN, source=source_of(url), url=url)
    # A check keeps nothing and hands nothing on: never to a renderer elsewhere.
    alone = replace(wiring, settings=replace(wiring.settings, render_queue=False))
    try:
        found = resolve_url(alone, job)
    except (PermanentError, RetryableError) as exc:
        return _failed(url, exc)
    if isinstance(found, UrlOutcome):
        return _nothing(url, found)
    if isinstance(found, UrlJob):  # not with ``render_queue`` off; a verdict all the same
        return _failed(url, PermanentError("the page needs a browser", reason="rendering"))
    return _extracted(alone, found, target=url)


def _extracted(wiring: Wiring, job: DocumentJob, *, target: str) -> CheckReport:
    """Run the extractor on ``job`` and report what it staged."""
    shacl = wiring.settings.shacl
    try:
        result = extract_documents(wiring, job)
    except MalformedMetadata as exc:
        reason = _reason(exc)
        kind = classify_reason(reason, exc.outcome)
        return CheckReport(
            target, MALFORMED, pattern=job.pattern, notes=job.notes, reason=reason,
            fix=kind.fix, shacl=shacl,
        )  # fmt: skip
    if isinstance(result, UrlOutcome):
        return _nothing(target, result, notes=job.notes, shacl=shacl)
    staged = load_staged(wiring, result)
    urls = {ref.key: ref.url for ref in staged.documents}
    records = tuple(_record(item, urls.get(item.document, target)) for item in staged.records)
    verdict = VALID if all(record.verdict == VALID for record in records) else INVALID
    return CheckReport(
        target,
        verdict,
        records=records,
        skipped=tuple(item.reason for item in staged.skipped),
        pattern=staged.pattern,
        notes=staged.resolution_notes,
        shacl=shacl,
    )


def _nothing(
    target: str, outcome: UrlOutcome, *, notes: tuple[str, ...] = (), shacl: bool = False
) -> CheckReport:
    kind = classify_reason(outcome.reason, outcome.outcome.value)
    return CheckReport(
        target, NO_METADATA, pattern=outcome.pattern, notes=notes, reason=outcome.reason,
        fix=kind.fix, shacl=shacl,
    )  # fmt: skip


def _reason(exc: HarvestError) -> str:
    """``<code>: <details>``, the code said once."""
    text = str(exc)
    return text if text.startswith(f"{exc.reason}: ") else f"{exc.reason}: {text}"


def _failed(target: str, exc: HarvestError) -> CheckReport:
    reason = _reason(exc)
    return CheckReport(target, FAILED, reason=reason, fix=classify_reason(reason, exc.outcome).fix)


def _issue(issue: ReportIssue) -> CheckedIssue:
    if issue.keyword == "recommended":
        # A warning: the property is missing but the record stays valid without it.
        path = issue.message.partition(" ")[0]
        fix = f"Recommended, not required: add {path} when you can."
        return CheckedIssue(issue.pointer, issue.message, issue.keyword, issue.message, fix)
    kind = classify_error(issue.message)
    # (A message of no known kind has the report's general advice, which points at files a
    # check does not write: the message itself is then the advice.)
    fix = "" if kind.key.startswith("other:") else kind.fix
    return CheckedIssue(issue.pointer, issue.message, issue.keyword, kind.title, fix)


def _profile(status: ProfileStatus) -> CheckedProfile:
    return CheckedProfile(
        profile=status.profile,
        version=status.version,
        status=status.status,
        declared=status.declared,
        summary=profile_summary(status.profile, status.version, status.status, len(status.errors)),
        errors=tuple(_issue(issue) for issue in status.errors),
    )


def _record(item: StagedRecord, document: str) -> CheckedRecord:
    report = item.report
    profiles = tuple(_profile(status) for status in report.profiles)
    # A record that claims a profile and breaks it is not ready to publish, although the
    # harvester keeps it as valid (core decides that): the publisher claimed the profile.
    good = report.valid and all(profile.status != "invalid" for profile in profiles)
    return CheckedRecord(
        record_id=item.record_id,
        resource_id=item.resource_id,
        document=document,
        block=item.block,
        valid=report.valid,
        verdict=VALID if good else INVALID,
        conformance=report.conformance,
        profiles=profiles,
        errors=tuple(_issue(issue) for issue in report.errors),
        warnings=tuple(_issue(issue) for issue in report.warnings),
        repairs=item.repairs,
        notes=item.notes,
    )
