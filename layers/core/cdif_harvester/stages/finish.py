"""The end of a harvest run: tombstones, the sources' Signmaps, the run's summary and report.

:func:`close_run` deals with a finished run once: it withdraws the URLs the publisher no longer
announces, or answered 410 Gone (``withdrawn_at``; nothing is deleted, and never on the strength
of a broken sitemap), rewrites the Signmap of each source whose records changed, writes
``runs/<run id>/summary.json``, ``outcomes.jsonl`` and ``report.html``, frees the source and
notes the run closed.

See docs/decisions/0006-tombstones.md and docs/decisions/0067-what-an-entry-url-is.md.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from cdif_harvester.errors import HarvestError
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
    "close_run",
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
class RunClosure:
    """What closing a run did."""

    run_id: str
    withdrawn: list[str] = field(default_factory=list)
    signmaps: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    report_key: str | None = None
    outcomes: list[UrlOutcome] = field(default_factory=list)
    held: list[HeldRecord] = field(default_factory=list)  # read only when the report is written
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
    closure.outcomes = list(wiring.catalog.outcomes(run_id))
    closure.sites = site_discoveries(wiring, run_id)
    for source in _changed_sources(wiring, closure.outcomes, closure.withdrawn):
        try:
            closure.signmaps.append(build_source_signmap(wiring, source))
        except HarvestError as exc:
            closure.errors.append(f"signmap of {source}: {exc}")
    now = wiring.clock.now().isoformat(timespec="seconds")
    if publish and run is not None:
        closure.held = held_records(wiring, run_id, closure.outcomes, closure.withdrawn)
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


def _changed_sources(wiring: Wiring, outcomes: list[UrlOutcome], withdrawn: list[str]) -> list[str]:
    """Sources whose Signmap must be (re)written: records new or rewritten, URLs withdrawn,
    or records but no Signmap yet."""
    changed = {o.source for o in outcomes if o.outcome is Outcome.RECORD}
    changed |= {source_of(url) for url in withdrawn}
    with_records = {o.source for o in outcomes if o.records} - changed
    changed |= {s for s in with_records if not wiring.store.exists(signmap_key(s))}
    return sorted(changed)


def run_summary(
    run: RunStatus, outcomes: Sequence[UrlOutcome], closure: RunClosure | None = None
) -> dict[str, Any]:
    """The summary of a run, in the shape of the local runner's ``summary.json``."""
    counts = Counter(o.outcome.value for o in outcomes)
    records = [r for o in outcomes for r in o.records]
    valid = sum(1 for r in records if r.valid)
    return {
        "run_id": run.run_id,
        "source_id": run.source_id,
        "trigger": run.trigger,
        "entry_url": run.entry_urls[0] if run.entry_urls else "",
        "entry_urls": list(run.entry_urls),
        "started_at": run.started_at,
        "finished_at": run.finished_at or "",
        "urls": len(outcomes),
        "outcomes": {kind.value: counts.get(kind.value, 0) for kind in Outcome},
        "patterns": dict(sorted(Counter(o.pattern for o in outcomes if o.pattern).items())),
        "records": len(records),
        "valid_records": valid,
        "invalid_records": len(records) - valid,
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
    summary = run_summary(run, closure.outcomes, closure)
    lines = [outcome_to_dict(o) for o in closure.outcomes]
    wiring.store.put(
        prefix + SUMMARY_NAME,
        (json.dumps(summary, indent=2) + "\n").encode("utf-8"),
        content_type="application/json",
    )
    wiring.store.put(
        prefix + OUTCOMES_NAME,
        "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode("utf-8"),
        content_type="application/x-ndjson",
    )
    report = render_report(summary, lines, held=closure.held)
    wiring.store.put(
        prefix + REPORT_NAME, report.encode("utf-8"), content_type="text/html; charset=utf-8"
    )
    return prefix + REPORT_NAME


def held_records(
    wiring: Wiring, run_id: str, outcomes: Sequence[UrlOutcome], withdrawn: Sequence[str]
) -> list[HeldRecord]:
    """The records the catalogue holds for the run's sources, as the publisher report shows
    them: every one not withdrawn, and those withdrawn in this run, each marked with what the
    run did to it.

    Reads each source's catalogue entries once, then the stored reports of at most
    ``settings.report_max_reports`` of them (the invalid first, then by URL) for their errors
    and warnings; the others keep the verdicts of their entries and are marked not read.
    Raises StorageError when the catalogue cannot be read; a missing or unreadable report is
    read as none.
    """
    sources = sorted({o.source for o in outcomes} | {source_of(url) for url in withdrawn})
    gone = set(withdrawn)
    entries = [
        entry
        for source in sources
        for entry in wiring.catalog.records(source)
        if not entry.withdrawn_at or entry.url in gone
    ]
    entries.sort(key=lambda e: (bool(e.withdrawn_at), e.valid, e.url, e.record_id))
    budget = max(0, wiring.settings.report_max_reports)
    held: list[HeldRecord] = []
    for entry in entries:
        report = None
        if not entry.withdrawn_at and budget > 0:
            budget -= 1
            report = _read_report(wiring, entry.report_key)
        held.append(_held(entry, _change_of(entry, run_id), report))
    return held


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
    is withdrawn too, when it held records.
    """
    outcomes = {o.url: o for o in wiring.catalog.outcomes(run_id)}
    processed = set(sitemaps)
    failed = {
        url for url in processed if url in outcomes and outcomes[url].outcome in _SITEMAP_FAILURES
    }
    whole = processed - failed
    entry_sources = {
        source_of(url) for url in entry_urls if urlsplit(url).path == "/robots.txt" and not failed
    }
    sources = {o.source for o in outcomes.values()} | entry_sources
    now = wiring.clock.now().isoformat(timespec="seconds")
    withdrawn: list[str] = []
    for source in sorted(sources):
        for state in wiring.catalog.urls(source):
            if state.url in outcomes or state.withdrawn_at or not state.sitemap:
                continue
            if state.sitemap not in whole and source not in entry_sources:
                continue
            _withdraw(wiring, state, now)
            withdrawn.append(state.url)
    gone = [url for url, outcome in outcomes.items() if is_gone(outcome)]
    for url, state in (wiring.catalog.get_urls(gone) if gone else {}).items():
        if state.record_ids and not state.withdrawn_at:
            _withdraw(wiring, state, now)
            withdrawn.append(url)
    return sorted(withdrawn)


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
