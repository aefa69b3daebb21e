"""Stage 4: the extractor pulls JSON-LD out of each document, normalises it to the CDIF 1.0
shape and validates it.

One broken script block never spoils its neighbours: each block is parsed, normalised and judged
on its own, and every block that yields nothing is listed with its reason. The records and their
reports go to the indexer as a :class:`~cdif_harvester.contracts.StagedRecords`, in the index
job's message or, when too large for it, in the object store (claim check; 0085). A document
comes in its message, from the run's staging area or, when bodies are kept, from ``raw/``
(docs/decisions/0080-bodies-kept-only-when-asked.md).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field, replace
from typing import Any

from cdif_harvester.contracts import (
    INDEX_QUEUE,
    MAX_MESSAGE_BYTES,
    DocumentJob,
    DocumentRef,
    IndexJob,
    PageScripts,
    ProfileStatus,
    ReportIssue,
    SkippedBlock,
    StagedRecord,
    StagedRecords,
    StagedReport,
    encode,
    encode_staged,
)
from cdif_harvester.domain.discovery.incremental import block_hash, fingerprint, sd_dates
from cdif_harvester.domain.records.extraction import (
    ExtractionError,
    JsonLdBlock,
    JsonLdScripts,
    ParsedJson,
    has_dataset,
    parse_jsonld,
    read_jsonld_scripts,
)
from cdif_harvester.domain.records.normalisation import (
    NormalisationError,
    NormalisedRecord,
    normalise,
)
from cdif_harvester.domain.records.shacl import shacl_issues
from cdif_harvester.domain.records.validation import (
    ProfileVerdict,
    ValidationIssue,
    validate_record,
)
from cdif_harvester.domain.resolution.rules import is_cdif_profile
from cdif_harvester.errors import ContractError, PermanentError, RetryableError
from cdif_harvester.keys import staging_key
from cdif_harvester.model import HTML_MEDIA_TYPES, Outcome, UrlOutcome, UrlState
from cdif_harvester.stages.outcomes import keep_validators, record_outcome
from cdif_harvester.wiring import Wiring

__all__ = [
    "Extraction",
    "HeldBlocks",
    "MalformedMetadata",
    "carried_state",
    "comparable_state",
    "document_body",
    "extract_documents",
    "hand_over",
    "held_blocks",
    "load_trusted_contexts",
    "read_documents",
    "settle_extraction",
    "settle_read",
]


class MalformedMetadata(PermanentError):
    """Every JSON-LD block of the URL was unreadable."""

    reason = "malformed-json"


@dataclass(frozen=True)
class _Where:
    """Where a JSON-LD block was found: its document's key, its index there, and how the
    document was reached (see :class:`~cdif_harvester.contracts.DocumentRef`)."""

    document: str
    block: int
    via: str | None
    authority: str | None

    def skipped(self, reason: str) -> SkippedBlock:
        """This block, listed as giving no record because of ``reason``."""
        return SkippedBlock(self.document, self.block, self.via, self.authority, reason)


def extract_documents(wiring: Wiring, job: DocumentJob) -> IndexJob | UrlOutcome:
    """Extract, normalise and validate every Dataset in the job's documents.

    Returns the IndexJob sent to the indexer, the recorded ``no-metadata`` outcome when no
    block holds a Dataset, or the recorded ``unchanged`` outcome when the Dataset blocks are
    those of the last harvest (see :mod:`cdif_harvester.domain.discovery.incremental`). Raises
    MalformedMetadata when every block was unreadable JSON.

    The two halves can run apart (the local runner reads documents in other processes):
    :func:`read_documents` touches no catalogue and writes nothing, :func:`settle_extraction`
    writes what it found.
    """
    if not job.state_read:
        held = comparable_state(wiring, job.url, job.run_id)
        return settle_extraction(wiring, job, read_documents(wiring, job, held), held)
    # The state the resolver read came with the job: the blocks are compared with it, and a
    # URL with records (the usual case) is handed on without reading it again.
    held = carried_state(job) if wiring.settings.incremental else None
    return settle_read(wiring, job, read_documents(wiring, job, held), held)


def carried_state(job: DocumentJob) -> UrlState | None:
    """The held state :func:`read_documents` compares ``job``'s blocks with, from the state
    the job carries (``state_read``: incremental harvesting is on); None when it carries none
    (the caller reads :func:`comparable_state` then)."""
    return _comparable(job.state, job.run_id) if job.state_read else None


def settle_read(
    wiring: Wiring, job: DocumentJob, extraction: Extraction, held: UrlState | None
) -> IndexJob | UrlOutcome:
    """:func:`settle_extraction` for documents read apart, compared with ``held``: the state
    the job carries when ``state_read``, else the one :func:`comparable_state` read.

    An unchanged URL's state is rewritten from the one held (its new fingerprint): that is read
    as it is now, as it always was, and when it changed since the resolver read it (another run
    harvested the URL meanwhile) the blocks are compared with it instead.
    """
    if job.state_read and extraction.unchanged is not None:
        now = comparable_state(wiring, job.url, job.run_id)
        if now != held:
            held, extraction = now, read_documents(wiring, job, now)
    return settle_extraction(wiring, job, extraction, held)


@dataclass(frozen=True)
class HeldBlocks:
    """What the held harvest of a URL says of its Dataset blocks: their ``blocks`` hashes and
    ``sd_dates`` (what :func:`read_documents` compares the blocks read with)."""

    blocks: tuple[str, ...]
    sd_dates: tuple[str, ...]


@dataclass(frozen=True)
class Extraction:
    """What reading a job's documents found: ``staged``, the records and the skipped blocks
    (no records: nothing usable), or ``unchanged``, why the blocks are the held harvest's."""

    staged: StagedRecords | None = None
    unchanged: str | None = None


def comparable_state(wiring: Wiring, url: str, run_id: str) -> UrlState | None:
    """The held state of ``url`` when the blocks read in run ``run_id`` may be compared with it
    (incremental, an earlier harvest that held records and was not withdrawn); else None."""
    if not wiring.settings.incremental:
        return None
    return _comparable(wiring.catalog.get_url(url), run_id)


def _comparable(held: UrlState | None, run_id: str) -> UrlState | None:
    """``held`` when the blocks read in run ``run_id`` may be compared with it, else None."""
    # (what this run wrote is not an earlier harvest: a retried job ends as its first attempt)
    if held is None or not held.record_ids or held.withdrawn_at or held.harvest_run == run_id:
        return None
    return held


def held_blocks(held: UrlState | None) -> HeldBlocks | None:
    """The part of a held state that :func:`read_documents` reads."""
    return None if held is None else HeldBlocks(held.blocks, held.sd_dates)


def read_documents(
    wiring: Wiring, job: DocumentJob, held: UrlState | HeldBlocks | None
) -> Extraction:
    """Parse, normalise and validate the job's documents; write nothing.

    Reads the documents (from the message, or the object store) and, when the settings trust
    some, remote contexts; never the catalogue. ``held`` is what :func:`comparable_state`
    returned (or its :func:`held_blocks`): blocks the same as its are not normalised.
    """
    records: list[StagedRecord] = []
    skipped: list[SkippedBlock] = []
    parsed_blocks: list[tuple[_Where, ParsedJson]] = []
    scripts = {page.key: page for page in job.scripts}
    for ref in job.documents:
        blocks, unread = _blocks(wiring, ref, scripts.get(ref.key))
        if unread is not None:
            skipped.append(_Where(ref.key, len(blocks), ref.via, ref.authority).skipped(unread))
        for index, text in blocks:
            where = _Where(ref.key, index, ref.via, ref.authority)
            try:
                parsed = parse_jsonld(text)
            except ExtractionError as exc:  # malformed-json, json-too-deep
                skipped.append(where.skipped(f"{exc.reason}: {exc}"))
                continue
            if not has_dataset(parsed.data):
                skipped.append(where.skipped("no Dataset node in this block"))
                continue
            parsed_blocks.append((where, parsed))

    block_hashes = [block_hash(parsed.data) for _, parsed in parsed_blocks]
    hashes = tuple(sorted(set(block_hashes)))
    dates = tuple(sorted({d for _, parsed in parsed_blocks for d in sd_dates(parsed.data)}))
    unchanged = _unchanged_reason(held, parsed_blocks, hashes, dates)
    if unchanged is not None:
        return Extraction(unchanged=unchanged)

    seen = _Seen()
    for ref in job.documents:
        found = [
            _Block(where, parsed, digest)
            for (where, parsed), digest in zip(parsed_blocks, block_hashes, strict=True)
            if where.document == ref.key
        ]
        for block in _normalise_blocks(wiring, ref, found):
            _stage_block(wiring, ref, block, records, skipped, seen)

    return Extraction(
        staged=StagedRecords(
            url=job.url,
            pattern=job.pattern,
            links=job.links,
            # (the bodies have been read: the indexer needs only where they came from)
            documents=tuple(
                replace(ref, body=None, encoding=None, staged_key=None) for ref in job.documents
            ),
            resolution_notes=job.notes,
            records=tuple(records),
            skipped=tuple(skipped),
            sitemap=job.sitemap,
            lastmod=job.lastmod,
            blocks=hashes,
            sd_dates=dates,
            validators=job.validators,
        )
    )


def settle_extraction(
    wiring: Wiring, job: DocumentJob, extraction: Extraction, held: UrlState | None
) -> IndexJob | UrlOutcome:
    """Write what :func:`read_documents` found for ``job`` (``held``: the state it compared
    with): the ``unchanged`` or ``no-metadata`` outcome, or the index job sent to the indexer.
    Raises MalformedMetadata when every block was unreadable JSON."""
    if extraction.unchanged is not None:
        assert held is not None  # (only a held harvest makes blocks unchanged)
        # The documents did change (or the resolver would have stopped): remember them, so the
        # next harvest stops at the resolver.
        wiring.catalog.put_url(
            replace(
                held,
                fingerprint=fingerprint(job.pattern, [ref.key for ref in job.documents]),
                lastmod=job.lastmod or held.lastmod,
                validators=job.validators,
            )
        )
        return record_outcome(
            wiring,
            run_id=job.run_id,
            source=job.source,
            url=job.url,
            outcome=Outcome.UNCHANGED,
            reason=extraction.unchanged,
            pattern=job.pattern,
        )
    staged = extraction.staged
    assert staged is not None  # (an extraction is one or the other)
    if not staged.records:
        skipped = staged.skipped
        if skipped and all(item.reason.startswith(_UNREADABLE) for item in skipped):
            raise MalformedMetadata("; ".join(item.reason for item in skipped))
        reasons = "; ".join(item.reason for item in skipped) or "no JSON-LD found"
        if wiring.settings.incremental and not any(ref.kept for ref in job.documents):
            # (as the resolver does for a page without metadata: asked conditionally next time)
            keep_validators(
                wiring,
                wiring.catalog.get_url(job.url),
                url=job.url,
                source=job.source,
                validators=job.validators,
            )
        return record_outcome(
            wiring,
            run_id=job.run_id,
            source=job.source,
            url=job.url,
            outcome=Outcome.NO_METADATA,
            reason=f"no-dataset: {reasons}",
            pattern=job.pattern,
        )
    index_job, message = hand_over(wiring, job, staged)
    wiring.queue.send(INDEX_QUEUE, [message])
    return index_job


def hand_over(wiring: Wiring, job: DocumentJob, staged: StagedRecords) -> tuple[IndexJob, str]:
    """The job handing ``staged`` to the indexer, and its message (not sent).

    Writes nothing but, for a hand-over too large for a message, its staged object.
    """
    return _index_job(wiring, job, encode_staged(staged))


def _index_job(wiring: Wiring, job: DocumentJob, staged: bytes) -> tuple[IndexJob, str]:
    """The job handing ``staged`` to the indexer, and its message.

    The records travel in the message when it stays within MAX_MESSAGE_BYTES: SQS bills each
    64 KiB of a message as one request ($0.40 per million), far less than the PUT and GET
    ($5.40 per million) of a staged object. Larger ones wait under the run's staging key.
    """
    common = {"run_id": job.run_id, "source": job.source, "url": job.url, "pattern": job.pattern}
    if len(staged) < MAX_MESSAGE_BYTES:  # (else the message cannot fit: skip encoding it)
        inline = IndexJob(**common, staged=staged.decode("utf-8"))
        try:
            return inline, encode(inline)
        except ContractError:  # over the cap once escaped in the message
            pass
    key = staging_key(job.run_id, job.url)
    wiring.store.put(key, staged, content_type="application/json")
    by_key = IndexJob(**common, staged_key=key)
    return by_key, encode(by_key)


def _unchanged_reason(
    held: UrlState | HeldBlocks | None,
    parsed_blocks: list[tuple[_Where, ParsedJson]],
    hashes: tuple[str, ...],
    dates: tuple[str, ...],
) -> str | None:
    """Why the Dataset blocks are those of the held harvest, or None when they are not."""
    if held is None or not parsed_blocks:
        return None
    if hashes == held.blocks:
        return "content-hash: the JSON-LD blocks are the same as the last harvest's"
    if (
        dates
        and held.sd_dates
        and dates == held.sd_dates
        and all(sd_dates(parsed.data) for _, parsed in parsed_blocks)
    ):
        return (
            f"sd-date-published: the records declare the same sdDatePublished "
            f"({', '.join(dates)}) as the last harvest's"
        )
    return None


# Skipped blocks that leave the URL with nothing readable: every block failed to parse (the
# blocks past the per-page cap were not read at all).
_UNREADABLE = ("malformed-json", "json-too-deep", "too-many-scripts")


def _blocks(
    wiring: Wiring, ref: DocumentRef, page: PageScripts | None
) -> tuple[list[tuple[int, str | bytes]], str | None]:
    """The blocks of a document (of ``page``, the JSON-LD read from it already, when given),
    and why some were left unread (None when none was)."""
    if page is not None:  # (decision 0101)
        scripts = JsonLdScripts(
            blocks=tuple(JsonLdBlock(b.index, b.text, b.profile) for b in page.blocks),
            unread=page.unread,
        )
    else:
        body = document_body(wiring, ref)
        if ref.media_type not in HTML_MEDIA_TYPES:
            return [(0, body)], None
        scripts = read_jsonld_scripts(body)
    # Blocks that declare a CDIF profile go first (CDIF metadata publication, Option 1), so
    # when two blocks describe the same record, the CDIF one is kept.
    ordered = sorted(scripts.blocks, key=lambda block: not is_cdif_profile(block.profile))
    return [(block.index, block.text) for block in ordered], scripts.note()


def document_body(wiring: Wiring, ref: DocumentRef) -> bytes:
    """The bytes of a document: from its message, the staging area or where it is kept.

    Raises PermanentError (``document-missing``) when the object is gone (a staged body
    expires with its run's staging area), ``malformed-body`` for a body that is not base64 as
    its message says, and StorageError on store faults.
    """
    if ref.body is not None:
        if ref.encoding != "base64":
            return ref.body.encode("utf-8")
        try:
            return base64.b64decode(ref.body, validate=True)
        except binascii.Error as exc:
            raise PermanentError(f"{ref.url}: {exc}", reason="malformed-body") from exc
    key = ref.staged_key or ref.key
    try:
        return wiring.store.get(key)
    except KeyError as exc:
        raise PermanentError(
            f"the document {ref.url} is no longer under {key}", reason="document-missing"
        ) from exc


@dataclass
class _Block:
    """A Dataset block of a document, and what normalising it gave (records, or why none)."""

    where: _Where
    parsed: ParsedJson
    digest: str  # its block_hash: what tells two identical blocks
    context_notes: tuple[str, ...] = ()
    result: list[NormalisedRecord] | NormalisationError | None = None

    def identities(self) -> list[str]:
        """What each record of the block describes: the resource's id, or for a resource
        that nothing identifies, the block's content and the Dataset's place in it."""
        if not isinstance(self.result, list):
            return []
        return [
            f"{self.digest}:{number}" if item.resource_fallback else item.resource_id
            for number, item in enumerate(self.result, start=1)
        ]


@dataclass
class _Seen:
    """The records of a URL staged so far: their ids, and what each describes where nothing
    identifies the resource (see :meth:`_Block.identities`) with the record kept for it."""

    record_ids: set[str] = field(default_factory=set)
    unidentified: dict[str, str] = field(default_factory=dict)


def _normalise(wiring: Wiring, ref: DocumentRef, block: _Block, position: int | None) -> None:
    try:
        block.result = normalise(
            block.parsed.data, document_url=ref.url, contexts=wiring.contexts, block=position
        )
    except NormalisationError as exc:
        block.result = exc


def _normalise_blocks(wiring: Wiring, ref: DocumentRef, blocks: list[_Block]) -> list[_Block]:
    """Normalise the Dataset blocks of one document.

    When the blocks describe several Datasets, each is normalised as one of several (its record
    id, when made up, is then derived from its resource; see ``normalise``'s ``block``); when
    they describe one Dataset, as the page's only one (ids as for a page of one block).
    """
    several = len(blocks) > 1
    for block in blocks:
        block.context_notes = tuple(load_trusted_contexts(wiring, block.parsed.data))
        _normalise(wiring, ref, block, block.where.block + 1 if several else None)
    if several and len({i for block in blocks for i in block.identities()}) <= 1:
        # Several blocks, one Dataset (a CDIF block and a schema.org one, say): the page's
        # record keeps the id of a page of one block. Normalising a small block
        # again costs some tens of microseconds.
        for block in blocks:
            if isinstance(block.result, list):
                _normalise(wiring, ref, block, None)
    return blocks


def _stage_block(  # noqa: PLR0913, PLR0917 - private helper filling two accumulators
    wiring: Wiring,
    ref: DocumentRef,
    block: _Block,
    records: list[StagedRecord],
    skipped: list[SkippedBlock],
    seen: _Seen,
) -> None:
    where, parsed, context_notes = block.where, block.parsed, block.context_notes
    index = where.block
    if not isinstance(block.result, list):
        exc = block.result
        assert exc is not None
        # The raw document is kept; the record is listed, unnormalised, with why.
        records.append(
            StagedRecord(
                document=where.document,
                block=where.block,
                via=where.via,
                authority=where.authority,
                record_id=f"{ref.url}#block-{index}",
                resource_id=f"{ref.url}#block-{index}",
                record=None,
                report=StagedReport(
                    valid=False,
                    conformance=None,
                    rules=None,
                    errors=(ReportIssue(pointer="", message=str(exc), keyword=exc.reason),),
                    warnings=(),
                ),
                repairs=parsed.repairs,
                notes=context_notes,
                identity_fallback=True,
            )
        )
        return
    for item, identity in zip(block.result, block.identities(), strict=True):
        # The same record id twice is one catalogue entry; a resource nothing identifies is
        # the same resource when its block is the same, whatever id its position gave it.
        first = item.record_id if item.record_id in seen.record_ids else None
        if item.resource_fallback:
            first = first or seen.unidentified.get(identity)
        if first is not None:
            skipped.append(where.skipped(f"duplicate of record {first}"))
            continue
        seen.record_ids.add(item.record_id)
        if item.resource_fallback:
            seen.unidentified[identity] = item.record_id
        records.append(
            StagedRecord(
                document=where.document,
                block=where.block,
                via=where.via,
                authority=where.authority,
                record_id=item.record_id,
                resource_id=item.resource_id,
                record=item.record,
                report=_judge(wiring, item.record),
                repairs=parsed.repairs,
                notes=(*context_notes, *item.notes),
                identity_fallback=item.identity_fallback,
                item_list=item.item_list,
            )
        )


def _judge(wiring: Wiring, record: dict[str, Any]) -> StagedReport:
    """The record's validation report: JSON Schema, plus SHACL when the settings ask for it.

    Each profile verdict gets the violations of that profile's shapes (and becomes invalid with
    any); core's also count against the record (an operator who turns SHACL on wants them to).
    """
    report = validate_record(record)
    profiles = [_profile(verdict) for verdict in report.profiles]
    errors = tuple(_issue(issue) for issue in report.errors)
    shacl = wiring.settings.shacl
    if shacl:
        if not profiles:  # not judged per profile: core 1.0's shapes, as always
            errors = (*errors, *_shacl(wiring, record, "core", "1.0"))
        for i, verdict in enumerate(profiles):
            issues = _shacl(wiring, record, verdict.profile, verdict.version)
            if issues:
                profiles[i] = replace(verdict, status="invalid", errors=(*verdict.errors, *issues))
                if i == 0:  # core, at the record's version: the record's own validity
                    errors = (*errors, *issues)
    return StagedReport(
        valid=not errors,
        conformance=report.conformance,
        rules=report.rules,
        errors=errors,
        warnings=tuple(_issue(issue) for issue in report.warnings),
        shacl=shacl,
        profiles=tuple(profiles),
    )


def _shacl(
    wiring: Wiring, record: dict[str, Any], profile: str, version: str
) -> tuple[ReportIssue, ...]:
    issues = shacl_issues(record, profile=profile, version=version, contexts=wiring.contexts)
    return tuple(_issue(issue) for issue in issues)


def _profile(verdict: ProfileVerdict) -> ProfileStatus:
    return ProfileStatus(
        profile=verdict.profile,
        version=verdict.version,
        status=verdict.status,
        rules=verdict.rules,
        declared=verdict.declared,
        errors=tuple(_issue(issue) for issue in verdict.errors),
    )


def _issue(issue: ValidationIssue) -> ReportIssue:
    return ReportIssue(pointer=issue.pointer, message=issue.message, keyword=issue.keyword)


def _remote_contexts(data: Any) -> list[str]:
    nodes = data if isinstance(data, list) else [data]
    found: list[str] = []
    for node in nodes:
        context = node.get("@context") if isinstance(node, dict) else None
        for entry in context if isinstance(context, list) else [context]:
            if isinstance(entry, str) and entry.startswith(("http://", "https://")):
                found.append(entry.strip())
    return found


def _trusted(url: str, trusted: tuple[str, ...]) -> bool:
    return any(url == item or (item.endswith("/") and url.startswith(item)) for item in trusted)


def load_trusted_contexts(wiring: Wiring, data: Any) -> list[str]:
    """Fetch the remote ``@context`` documents of ``data`` that the settings trust.

    Each is fetched once per wiring (``wiring.contexts``: once per process) through the safe
    fetcher (``max_context_bytes``) and registered on ``wiring.contexts``; returns notes on
    trusted contexts that could not be loaded (the normaliser notes every remote context it
    still cannot use). Contexts not in ``Settings.trusted_contexts`` are never fetched.
    """
    notes: list[str] = []
    for url in _remote_contexts(data):
        if wiring.contexts.is_served(url) or not _trusted(url, wiring.settings.trusted_contexts):
            continue
        failure = wiring.contexts.failure(url) or _fetch_context(wiring, url)
        if failure is not None:
            notes.append(f"trusted context {url} could not be loaded: {failure}")
    return notes


def _fetch_context(wiring: Wiring, url: str) -> str | None:
    """Fetch and register one trusted context; return why it failed, or None.

    A permanent failure is remembered on ``wiring.contexts`` (for the life of the process); a
    passing one (timeout, 5xx) is not, so the next record asks again.
    """
    try:
        response = wiring.fetcher.fetch(
            url,
            headers={"Accept": "application/ld+json, application/json;q=0.9"},
            max_bytes=wiring.settings.max_context_bytes,
        )
    except RetryableError as exc:  # (a Deferred job is retried whole: it is not caught here)
        return f"{exc.reason}: {exc}"
    except PermanentError as exc:
        return _failed(wiring, url, f"{exc.reason}: {exc}")
    if response.status >= 500 or response.status == 429:
        return f"answered {response.status}"
    if response.status != 200:
        return _failed(wiring, url, f"answered {response.status}")
    try:
        wiring.contexts.register(url, json.loads(response.body))
    except ValueError as exc:  # malformed JSON, or not a context document
        return _failed(wiring, url, f"not a JSON-LD context: {exc}")
    except RecursionError:  # json.loads gives up near 1000 levels: a fault of the document
        return _failed(wiring, url, "not a JSON-LD context: JSON nested too deeply to be parsed")
    return None


def _failed(wiring: Wiring, url: str, reason: str) -> str:
    """Remember a permanent failure to load ``url``; return the reason."""
    wiring.contexts.remember_failure(url, reason)
    return reason
