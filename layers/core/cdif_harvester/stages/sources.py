"""Registered sources: checking them, starting their runs, and the scheduler's tick.

A source (:class:`~cdif_harvester.model.Source`) is a publisher an operator registered.
:func:`tick` (every few minutes on AWS, ``cdif-harvest schedule`` locally) starts the runs that
are due, closes the runs that finished and recounts, or marks ``stalled``, the runs that stopped
moving.

See docs/decisions/0005-sources-and-scheduler.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from cdif_harvester.errors import HarvestError, PermanentError
from cdif_harvester.model import RunState, RunStatus, Source
from cdif_harvester.ports import SourceRegistry
from cdif_harvester.stages.finish import close_run
from cdif_harvester.stages.intake import check_entry_url, check_options, new_run_id, start_run
from cdif_harvester.stages.outcomes import finish_if_done
from cdif_harvester.wiring import Wiring

__all__ = [
    "HostNotAllowed",
    "InvalidSource",
    "SourceBusy",
    "TickResult",
    "UnknownSource",
    "check_source",
    "claim_source_run",
    "host_allowed",
    "is_due",
    "parse_schedule",
    "registry_of",
    "start_source_run",
    "tick",
]

_SOURCE_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_SCHEDULE = re.compile(r"^\s*(\d{1,4})\s*([mhdw])\s*$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_HOST = re.compile(
    r"^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*"
    r"(:\d{1,5})?$"
)
_EMAIL = re.compile(r"^[^@\s]{1,64}@[^@\s]{1,255}$")
#: Harvesting one source more often than this is refused: it would only load the publisher.
MIN_SCHEDULE = timedelta(minutes=15)
#: A run with no progress for this long is recounted, then marked stalled.
STALL_AFTER = timedelta(hours=6)


class InvalidSource(PermanentError):
    """A source registration that cannot be used (the message says which field and why)."""

    reason = "invalid-source"


class UnknownSource(PermanentError):
    """No source is registered under that id."""

    reason = "unknown-source"


class SourceBusy(PermanentError):
    """The source has a run under way already (one run per source at a time)."""

    reason = "source-busy"


class HostNotAllowed(PermanentError):
    """A URL on a host the source is not registered for."""

    reason = "host-not-allowed"


def parse_schedule(text: str) -> timedelta:
    """Return the interval of a schedule such as ``30m``, ``6h``, ``1d`` or ``2w``.

    Raises InvalidSource for another form, or an interval under 15 minutes.
    """
    match = _SCHEDULE.match(text)
    if match is None:
        raise InvalidSource(
            f"schedule must be a number and a unit (m, h, d, w), e.g. 6h or 1d; got {text!r}"
        )
    interval = timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    if interval < MIN_SCHEDULE:
        raise InvalidSource(f"schedule {text!r} is more often than every 15 minutes")
    return interval


def check_source(source: Source) -> Source:
    """Return ``source`` checked and normalised (hosts lower-cased, the entry URL's host
    included), or raise InvalidSource naming the field that is wrong."""
    if not _SOURCE_ID.match(source.source_id):
        raise InvalidSource(
            "source_id must be 1-64 lower-case letters, digits, '.', '_' or '-', starting with "
            f"a letter or digit; got {source.source_id!r}"
        )
    try:
        entry = check_entry_url(source.entry_url)
        options = check_options(source.options)
    except PermanentError as exc:
        raise InvalidSource(f"{exc.reason}: {exc}") from exc
    hosts = [host.strip().lower() for host in source.hosts if host.strip()]
    for host in hosts:
        if not _HOST.match(host):
            raise InvalidSource(f"hosts: {host!r} is not a host name (with an optional port)")
    entry_host = _host_of(entry)
    if entry_host not in hosts:
        hosts.insert(0, entry_host)
    if source.schedule is not None:
        parse_schedule(source.schedule)
    if source.requests_per_host is not None and not 1 <= source.requests_per_host <= 16:
        raise InvalidSource("requests_per_host must be between 1 and 16")
    if source.crawl_delay is not None and not 0 <= source.crawl_delay <= 60:
        raise InvalidSource("crawl_delay must be between 0 and 60 seconds")
    if source.contact is not None and not (
        _EMAIL.match(source.contact) or source.contact.startswith(("https://", "http://"))
    ):
        raise InvalidSource("contact must be an e-mail address or an http(s) URL")
    return replace(source, entry_url=entry, hosts=tuple(dict.fromkeys(hosts)), options=options)


def host_allowed(source: Source, url: str) -> bool:
    """True when ``url`` is on one of the hosts ``source`` is registered for (a host
    registered without a port allows any port)."""
    allowed = set(source.hosts) | {_host_of(source.entry_url)}
    return _host_of(url) in allowed or (urlsplit(url).hostname or "").lower() in allowed


def is_due(source: Source, now: datetime) -> bool:
    """True when ``source`` has a schedule and its last run started at least one interval ago
    (or it never ran)."""
    if source.schedule is None:
        return False
    if source.last_run_at is None:
        return True
    last = datetime.fromisoformat(source.last_run_at)
    return now - last >= parse_schedule(source.schedule)


def registry_of(wiring: Wiring) -> SourceRegistry:
    """The sources registry of ``wiring``; raises UnknownSource when there is none."""
    if wiring.sources is None:
        raise UnknownSource("no sources registry is configured")
    return wiring.sources


def claim_source_run(
    wiring: Wiring, source_id: str, *, entry_url: str | None = None
) -> tuple[Source, str, str]:
    """Check that a run of a registered source may start, and claim the source for it.

    Returns the source, the URL the run starts from (its entry URL, or ``entry_url``: a
    sitemap or robots.txt its publisher posted, which must be on one of its hosts) and the new
    run id, which now holds the source. Raises UnknownSource, HostNotAllowed, SourceBusy (a run
    of it is under way), or InvalidEntryUrl for an unusable posted URL.
    """
    registry = registry_of(wiring)
    source = registry.get_source(source_id)
    if source is None:
        raise UnknownSource(f"no source {source_id!r} is registered")
    url = check_entry_url(entry_url) if entry_url is not None else source.entry_url
    if not host_allowed(source, url):
        raise HostNotAllowed(
            f"{_host_of(url)} is not a host of source {source_id!r} "
            f"(registered hosts: {', '.join(source.hosts) or _host_of(source.entry_url)})"
        )
    run_id = new_run_id(wiring.clock)
    now = wiring.clock.now().isoformat(timespec="seconds")
    if not registry.claim_source(source_id, run_id, at=now):
        raise SourceBusy(f"source {source_id!r} has a run under way: {source.active_run}")
    return source, url, run_id


def start_source_run(
    wiring: Wiring, source_id: str, *, trigger: str, entry_url: str | None = None
) -> RunStatus:
    """Start a run of a registered source (see :func:`claim_source_run` for what is checked
    and raised): record it and queue its sitemap job."""
    source, url, run_id = claim_source_run(wiring, source_id, entry_url=entry_url)
    try:
        run, _jobs = start_run(
            wiring,
            [url],
            run_id=run_id,
            options=source.options,
            trigger=trigger,
            source_id=source_id,
            requests_per_host=source.requests_per_host,
            crawl_delay=source.crawl_delay,
        )
    except HarvestError:
        registry_of(wiring).release_source(source_id, run_id)
        raise
    return run


@dataclass
class TickResult:
    """What one scheduler tick did."""

    started: list[RunStatus] = field(default_factory=list)
    busy: list[str] = field(default_factory=list)
    closed: list[str] = field(default_factory=list)
    stalled: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def tick(wiring: Wiring, *, stall_after: timedelta = STALL_AFTER) -> TickResult:
    """One scheduler tick (see the module docstring). One failing source or run never stops
    the others: its error is listed in the result. Raises UnknownSource when ``wiring`` has no
    sources registry."""
    registry = registry_of(wiring)
    result = TickResult()
    now = wiring.clock.now()
    at = now.isoformat(timespec="seconds")
    for listed in wiring.catalog.runs(limit=500):
        run = listed
        try:
            if run.state is RunState.RUNNING and _stale(run, now, stall_after):
                fresh = wiring.catalog.recount_run(run.run_id, at=at)
                if not finish_if_done(wiring, fresh):
                    wiring.catalog.finish_run(run.run_id, at=at, state=RunState.STALLED)
                    if run.source_id:
                        registry.release_source(run.source_id, run.run_id)
                    result.stalled.append(run.run_id)
                    continue
                run = wiring.catalog.get_run(run.run_id) or run
            if run.state is RunState.FINISHED and run.closed_at is None:
                close_run(wiring, run.run_id)
                result.closed.append(run.run_id)
        except HarvestError as exc:
            result.errors.append(f"run {run.run_id}: {exc}")
    for source in registry.sources():
        if not is_due(source, now):
            continue
        try:
            result.started.append(start_source_run(wiring, source.source_id, trigger="schedule"))
        except SourceBusy:
            result.busy.append(source.source_id)
        except HarvestError as exc:
            result.errors.append(f"source {source.source_id}: {exc}")
    return result


def _stale(run: RunStatus, now: datetime, stall_after: timedelta) -> bool:
    last = run.updated_at or run.started_at
    return now - datetime.fromisoformat(last) >= stall_after


def _host_of(url: str) -> str:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    return f"{host}:{parts.port}" if parts.port else host
