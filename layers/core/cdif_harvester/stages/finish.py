"""The end of a harvest run: tombstones, the sources' Signmaps, the run's summary and report.

:func:`close_run` deals with a finished run once: it withdraws the URLs the publisher no longer
announces, or answered 410 Gone (``withdrawn_at``; nothing is deleted, and never on the strength
of a broken sitemap), rewrites the Signmap of each source whose records changed, writes
``runs/<run id>/summary.json``, ``outcomes.jsonl`` and ``report.html``, frees the source and
notes the run closed. It reads the run's outcomes and the catalogue's URLs and records as
streams, never holding them all: its memory does not grow with the run.

See docs/decisions/0006-tombstones.md, docs/decisions/0067-what-an-entry-url-is.md and
docs/decisions/0083-streaming-close-of-a-run.md.
"""

from __future__ import annotations

import heapq
import io
import itertools
import json
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from cdif_harvester.errors import HarvestError, StorageError
from cdif_harvester.external_sort import sorted_pairs
from cdif_harvester.keys import parse_segment_ref, signmap_key, site_discovery_prefix, source_of
from cdif_harvester.model import (
    CatalogEntry,
    Outcome,
    RunStatus,
    UrlOutcome,
    UrlState,
    outcome_to_dict,
)
from cdif_harvester.report.model import HeldRecord
from cdif_harvester.stages.crosswalk import build_source_signmap
from cdif_harvester.stages.outcomes import is_gone
from cdif_harvester.wiring import Wiring

__all__ = [
    "RunClosure",
    "RunCounts",
    "close_run",
    "count_outcomes",
    "held_records",
    "run_files_prefix",
    "run_summary",
    "site_discoveries",
    "withdraw_vanished",
]

SUMMARY_NAME = "summary.json"
OUTCOMES_NAME = "outcomes.jsonl"
REPORT_NAME = "report.html"


def run_files_prefix(run_id: str) -> str:
    """The key prefix of a run's summary, outcomes and report: ``runs/<run id>/``."""
    return f"runs/{run_id}/"


@dataclass
class RunCounts:
    """What the outcomes of a run add up to, counted one outcome at a time."""

    urls: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    patterns: Counter[str] = field(default_factory=Counter)
    records: int = 0
    valid_records: int = 0
    sources: set[str] = field(default_factory=set)
    # Sources with a URL that gave records in the run, and with a URL listing records at all.
    sources_with_new_records: set[str] = field(default_factory=set)
    sources_with_records: set[str] = field(default_factory=set)

    def add(self, outcome: UrlOutcome) -> None:
        """Count ``outcome``."""
        self.urls += 1
        self.sources.add(outcome.source)
        self.outcomes[outcome.outcome.value] += 1
        if outcome.pattern:
            self.patterns[outcome.pattern] += 1
        self.records += len(outcome.records)
        self.valid_records += sum(1 for r in outcome.records if r.valid)
        if outcome.outcome is Outcome.RECORD:
            self.sources_with_new_records.add(outcome.source)
        if outcome.records:
            self.sources_with_records.add(outcome.source)

    @property
    def invalid_records(self) -> int:
        """Records that failed validation."""
        return self.records - self.valid_records

    def outcome_counts(self) -> dict[str, int]:
        """URLs per outcome, every outcome named (0 for none)."""
        return {kind.value: self.outcomes.get(kind.value, 0) for kind in Outcome}

    def pattern_counts(self) -> dict[str, int]:
        """URLs per discovery pattern, by pattern."""
        return dict(sorted(self.patterns.items()))


def count_outcomes(outcomes: Iterable[UrlOutcome]) -> RunCounts:
    """Count ``outcomes`` (read once, as they come)."""
    counts = RunCounts()
    for outcome in outcomes:
        counts.add(outcome)
    return counts


@dataclass
class RunClosure:
    """What closing a run did."""

    run_id: str
    withdrawn: list[str] = field(default_factory=list)
    signmaps: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    report_key: str | None = None
    counts: RunCounts = field(default_factory=RunCounts)
    # What each site root among the entry URLs led to (SiteDiscovery.to_dict()).
    sites: list[dict[str, Any]] = field(default_factory=list)


def close_run(wiring: Wiring, run_id: str, *, publish: bool = True) -> RunClosure:
    """Deal with the end of a finished run (see the module docstring); return what was done.

    With ``publish`` the run's summary, outcomes and publisher report are written to the object
    store under :func:`run_files_prefix`. A Signmap that cannot be written is reported in
    ``errors``, never raised: the rest of the closing still happens.
    """
    run = wiring.catalog.get_run(run_id)
    entry_urls: Sequence[str] = run.entry_urls if run else ()
    closure = RunClosure(run_id=run_id)
    closure.withdrawn = withdraw_vanished(
        wiring, run_id, sitemaps=wiring.catalog.run_sitemaps(run_id), entry_urls=entry_urls
    )
    closure.counts = count_outcomes(wiring.catalog.outcomes(run_id))
    closure.sites = site_discoveries(wiring, run_id)
    for source in _changed_sources(wiring, closure.counts, closure.withdrawn):
        try:
            closure.signmaps.append(build_source_signmap(wiring, source))
        except HarvestError as exc:
            closure.errors.append(f"signmap of {source}: {exc}")
    now = wiring.clock.now().isoformat(timespec="seconds")
    if publish and run is not None:
        closure.report_key = _publish(wiring, run, closure)
    if run is not None and run.source_id and wiring.sources is not None:
        wiring.sources.release_source(run.source_id, run_id)
    wiring.catalog.close_run(run_id, at=now, report_key=closure.report_key)
    return closure


def site_discoveries(wiring: Wiring, run_id: str) -> list[dict[str, Any]]:
    """What each site root of ``run_id`` led to, as the expander kept it (none unreadable)."""
    found: list[dict[str, Any]] = []
    for key in wiring.store.list(site_discovery_prefix(run_id)):
        try:
            found.append(json.loads(wiring.store.get(key)))
        except (KeyError, ValueError):  # gone meanwhile, or cut: the summary goes on without it
            continue
    return found


def _changed_sources(wiring: Wiring, counts: RunCounts, withdrawn: list[str]) -> list[str]:
    """Sources whose Signmap must be (re)written: records new or rewritten, URLs withdrawn,
    or records but no Signmap yet."""
    changed = set(counts.sources_with_new_records)
    changed |= {source_of(url) for url in withdrawn}
    with_records = counts.sources_with_records - changed
    changed |= {s for s in with_records if not wiring.store.exists(signmap_key(s))}
    return sorted(changed)


def run_summary(
    run: RunStatus, outcomes: Iterable[UrlOutcome] | RunCounts, closure: RunClosure | None = None
) -> dict[str, Any]:
    """The summary of a run, in the shape of the local runner's ``summary.json``, from its
    outcomes or what they add up to."""
    counts = outcomes if isinstance(outcomes, RunCounts) else count_outcomes(outcomes)
    return {
        "run_id": run.run_id,
        "source_id": run.source_id,
        "trigger": run.trigger,
        "entry_url": run.entry_urls[0] if run.entry_urls else "",
        "entry_urls": list(run.entry_urls),
        "started_at": run.started_at,
        "finished_at": run.finished_at or "",
        "urls": counts.urls,
        "outcomes": counts.outcome_counts(),
        "patterns": counts.pattern_counts(),
        "records": counts.records,
        "valid_records": counts.valid_records,
        "invalid_records": counts.invalid_records,
        "crosswalk_errors": list(closure.errors) if closure else [],
        "withdrawn": list(closure.withdrawn) if closure else [],
        "signmaps": list(closure.signmaps) if closure else [],
        "sites": list(closure.sites) if closure else [],
        "files": {"outcomes": OUTCOMES_NAME, "report": REPORT_NAME},
    }


def _publish(wiring: Wiring, run: RunStatus, closure: RunClosure) -> str:
    """Write the run's summary, outcomes and report; return the report's key."""
    from cdif_harvester.report import render_report  # noqa: PLC0415 - only when closing

    prefix = run_files_prefix(run.run_id)
    summary = run_summary(run, closure.counts, closure)
    wiring.store.put(
        prefix + SUMMARY_NAME,
        (json.dumps(summary, indent=2) + "\n").encode("utf-8"),
        content_type="application/json",
    )
    # The store takes a whole body: the lines are written to one buffer as they are read,
    # with no list of outcomes beside it.
    lines = io.BytesIO()
    for outcome in wiring.catalog.outcomes(run.run_id):
        text = json.dumps(outcome_to_dict(outcome), ensure_ascii=False) + "\n"
        lines.write(text.encode("utf-8"))
    wiring.store.put(prefix + OUTCOMES_NAME, lines.getvalue(), content_type="application/x-ndjson")
    del lines
    outcomes = (outcome_to_dict(o) for o in wiring.catalog.outcomes(run.run_id))
    report = render_report(
        summary,
        outcomes,
        held=held_records(wiring, run.run_id, closure.counts.sources, closure.withdrawn),
    )
    wiring.store.put(
        prefix + REPORT_NAME, report.encode("utf-8"), content_type="text/html; charset=utf-8"
    )
    return prefix + REPORT_NAME


def held_records(
    wiring: Wiring, run_id: str, sources: Iterable[str], withdrawn: Sequence[str]
) -> Iterator[HeldRecord]:
    """Yield the records the catalogue holds for the run's ``sources`` (those of its URLs)
    and those of the URLs ``withdrawn``, as the publisher report shows them: every one not
    withdrawn, and those withdrawn in this run, each marked with what the run did to it.

    The stored reports of at most ``settings.report_max_reports`` of them (the invalid
    first, then by URL and record id) are read for their errors and warnings, and those
    records come first, in that order; the others follow by source and record id, with the
    verdicts of their entries, marked not read. The catalogue is read twice, a record at a
    time: once to choose the reports to read (the choice is all that is held), once to yield.
    Raises StorageError when the catalogue cannot be read; a missing or unreadable report is
    read as none.
    """
    sources = sorted(set(sources) | {source_of(url) for url in withdrawn})
    gone = set(withdrawn)
    budget = max(0, wiring.settings.report_max_reports)
    # The first `budget` of the records not withdrawn by (valid, URL, record id): a heap of
    # the first seen so far, the last of them on top.
    chosen: list[_Last] = []
    for entry in _entries(wiring, sources, gone):
        if entry.withdrawn_at or budget == 0:
            continue
        item = _Last(entry)
        if len(chosen) < budget:
            heapq.heappush(chosen, item)
        elif chosen[0] < item:
            heapq.heapreplace(chosen, item)
    read = sorted((item.entry for item in chosen), key=_report_order)
    del chosen
    read_ids = {entry.record_id for entry in read}
    for entry in read:
        yield _held(entry, _change_of(entry, run_id), _read_report(wiring, entry.report_key))
    del read
    for entry in _entries(wiring, sources, gone):
        if entry.record_id not in read_ids:
            yield _held(entry, _change_of(entry, run_id), None)


def _report_order(entry: CatalogEntry) -> tuple[bool, str, str]:
    """The order in which the records' reports are read: the invalid first, then by URL."""
    return (entry.valid, entry.url, entry.record_id)


class _Last:
    """A catalogue entry in a heap that keeps the last in :func:`_report_order` on top."""

    __slots__ = ("entry", "key")

    def __init__(self, entry: CatalogEntry) -> None:
        self.entry = entry
        self.key = _report_order(entry)

    def __lt__(self, other: _Last) -> bool:
        return self.key > other.key


def _entries(wiring: Wiring, sources: Sequence[str], gone: set[str]) -> Iterator[CatalogEntry]:
    """The catalogue entries of ``sources`` the report shows: not withdrawn, or withdrawn in
    this run (their URL is ``gone``)."""
    for source in sources:
        for entry in wiring.catalog.records(source):
            if not entry.withdrawn_at or entry.url in gone:
                yield entry


def _change_of(entry: CatalogEntry, run_id: str) -> str:
    """What run ``run_id`` did to the record of ``entry``."""
    if entry.withdrawn_at:
        return "withdrawn"
    if entry.run_id != run_id:
        return "unchanged"
    change = entry.extra.get("change")
    return change if change in ("new", "changed", "unchanged") else "changed"


def _read_report(wiring: Wiring, key: str) -> dict[str, Any] | None:
    """A record's stored report, or None when it is missing or not a JSON object."""
    try:
        report = json.loads(wiring.store.get(key))
    except (KeyError, ValueError):
        return None
    return report if isinstance(report, dict) else None


def _held(entry: CatalogEntry, change: str, report: dict[str, Any] | None) -> HeldRecord:
    """The record of ``entry`` for the report: its verdicts from the entry, its messages from
    its stored ``report`` (None: not read)."""
    errors: dict[str, int] = {}
    for verdict in (report or {}).get("profiles") or ():
        if isinstance(verdict, dict):
            name = f"{verdict.get('profile')}/{verdict.get('version')}"
            errors[name] = len(verdict.get("errors") or ())
    profiles = tuple(
        (key.replace("/", " ", 1), status, errors.get(key, 0))
        for key, status in entry.profiles.items()
    )
    if report is None:
        return HeldRecord(
            entry.record_id, entry.url, entry.valid, change, profiles=profiles, read=False
        )
    return HeldRecord(
        record_id=entry.record_id,
        url=entry.url,
        valid=entry.valid,
        change=change,
        errors=tuple(_messages(report.get("errors"))),
        warnings=tuple(
            (str(w.get("keyword") or ""), str(w.get("message") or ""))
            for w in report.get("warnings") or ()
            if isinstance(w, dict)
        ),
        profiles=profiles,
    )


def _messages(issues: Any) -> list[str]:
    """The messages of a report's list of issues (dicts with a ``message``, or plain text)."""
    return [
        str(issue.get("message") or "") if isinstance(issue, dict) else str(issue)
        for issue in issues or ()
    ]


_SITEMAP_FAILURES = frozenset({Outcome.FAILED, Outcome.BLOCKED, Outcome.DISALLOWED})


def withdraw_vanished(
    wiring: Wiring, run_id: str, *, sitemaps: Iterable[str], entry_urls: Iterable[str]
) -> list[str]:
    """Mark the URLs the run shows as vanished withdrawn; return them, sorted.

    ``sitemaps`` are the URLs of every sitemap job the run processed, ``entry_urls`` the run's
    entry URLs. A URL that answered 410 Gone in the run (a tombstone by HTTP, listed or entry)
    is withdrawn too, when it held records. The run's outcomes are read twice and the sources'
    URLs once, as streams (see :func:`_without_outcome`); what is held is per sitemap, per
    source and per URL withdrawn or gone, not per URL of the run.
    """
    processed = set(sitemaps)
    failed: set[str] = set()
    sources: set[str] = set()
    gone: list[str] = []
    in_order, last = True, ""
    for outcome in wiring.catalog.outcomes(run_id):
        sources.add(outcome.source)
        if outcome.url in processed and outcome.outcome in _SITEMAP_FAILURES:
            failed.add(outcome.url)
        if is_gone(outcome):
            gone.append(outcome.url)
        in_order, last = in_order and last <= outcome.url, outcome.url
    whole = processed - failed
    entry_sources = {
        source_of(url) for url in entry_urls if urlsplit(url).path == "/robots.txt" and not failed
    }
    sources |= entry_sources
    now = wiring.clock.now().isoformat(timespec="seconds")
    withdrawn: list[str] = []
    for state in _without_outcome(wiring, run_id, sorted(sources), in_order=in_order):
        if state.withdrawn_at or not state.sitemap:
            continue
        if state.sitemap not in whole and state.source not in entry_sources:
            continue
        _withdraw(wiring, state, now)
        withdrawn.append(state.url)
    for start in range(0, len(gone), _GONE_CHUNK):
        for url, state in wiring.catalog.get_urls(gone[start : start + _GONE_CHUNK]).items():
            if state.record_ids and not state.withdrawn_at:
                _withdraw(wiring, state, now)
                withdrawn.append(url)
    return sorted(withdrawn)


_GONE_CHUNK = 500


def _without_outcome(
    wiring: Wiring, run_id: str, sources: Sequence[str], *, in_order: bool
) -> Iterator[UrlState]:
    """The states of the URLs of ``sources`` the run has no outcome for, in URL order.

    The sources' URLs (each source's in URL order, merged) are walked beside the run's
    outcomes (in URL order too, as the catalogue yields them, ``in_order`` says whether it
    did): neither is held. Were the outcomes not in URL order, their URLs are held instead.
    Only the URLs without an outcome have their state read, :data:`STATE_CHUNK` at a time: on
    DynamoDB a state is a read unit, and a run usually has an outcome for nearly every URL.
    Raises StorageError when the catalogue yields a source's URLs out of order (withdrawing
    by a wrong walk would withdraw what the run did read).
    """
    listed = heapq.merge(*(wiring.catalog.source_urls(source) for source in sources))
    missing = _missing(wiring, run_id, listed, in_order=in_order)
    while chunk := list(itertools.islice(missing, STATE_CHUNK)):
        states = wiring.catalog.get_urls(chunk)
        yield from (states[url] for url in chunk if url in states)


#: URLs whose states closing a run reads at once (the most a DynamoDB BatchGetItem takes).
STATE_CHUNK = 100


def _missing(
    wiring: Wiring, run_id: str, listed: Iterator[str], *, in_order: bool
) -> Iterator[str]:
    """The URLs of ``listed`` (in URL order) the run has no outcome for, each once.

    Outcomes not in URL order (DynamoDB yields them by URL hash) are put in order first, on
    local disk past 10,000 (external_sort), rather than held in a set: a run of a million URLs
    would need hundreds of megabytes for it (decision 0104).
    """
    outcomes: Iterator[str] = (o.url for o in wiring.catalog.outcomes(run_id))
    if not in_order:
        outcomes = (url for url, _ in sorted_pairs(((url, None) for url in outcomes), unique=True))
    next_url: str | None = next(outcomes, None)
    last = ""
    for url in listed:
        if url < last:
            raise StorageError(
                f"the catalogue listed {url} after {last}: not in URL order",
                reason="catalogue-order",
            )
        if url == last:
            continue  # (listed by two sources: one state, walked once)
        last = url
        while next_url is not None and next_url < url:
            next_url = next(outcomes, None)
        if next_url != url:
            yield url


def _withdraw(wiring: Wiring, state: UrlState, now: str) -> None:
    """Mark ``state``'s URL, the catalogue entries of its records and their reports withdrawn."""
    wiring.catalog.put_url(replace(state, withdrawn_at=now))
    for record_id in state.record_ids:
        entry = wiring.catalog.get_record(record_id)
        if entry is not None and entry.url == state.url and not entry.withdrawn_at:
            _mark_report(wiring, entry.report_key, now)
            wiring.catalog.put_record(replace(entry, withdrawn_at=now))


def _mark_report(wiring: Wiring, key: str, when: str) -> None:
    if parse_segment_ref(key) is not None:
        return  # a segment is never rewritten: the catalogue entry carries the mark
    try:
        report = json.loads(wiring.store.get(key))
    except (KeyError, ValueError):
        return  # no readable report: the catalogue entry still carries the mark
    report["withdrawn_at"] = when
    body = json.dumps(report, indent=2, sort_keys=True).encode("utf-8")
    wiring.store.put(key, body, content_type="application/json")
