"""The pipeline stages: one function per stage, written against the ports only.

The same functions run inside the Lambda handlers (with the AWS adapters) and inside the local
runner (with the local adapters). Each takes a :class:`Ports` bundle and one validated message,
sends the next message(s) or records the URL's outcome, and raises a
:class:`~cdif_harvester.errors.HarvestError` when it cannot: permanent errors become a recorded
outcome through :func:`settle`, retryable ones are retried by whoever drives the stage, and
:class:`~cdif_harvester.errors.Deferred` (a host's politeness slot is busy) is put back by the
driver without counting an attempt.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable
from urllib.parse import urlsplit

from cdif_harvester.domain.discovery.robots import RobotsPolicy
from cdif_harvester.domain.resolution.rules import parse_retry_after
from cdif_harvester.errors import HarvestError, PermanentError
from cdif_harvester.model import (
    FetchResponse,
    Outcome,
    RunState,
    RunStatus,
    UrlOutcome,
    UrlState,
    plain,
)
from cdif_harvester.ports import (
    CatalogIndex,
    Clock,
    Fetcher,
    JobQueue,
    ObjectStore,
    SourceRegistry,
)

__all__ = [
    "retry_after_of",
    "Ports",
    "RobotsCache",
    "Settings",
    "finish_if_done",
    "held_state",
    "held_states",
    "job_key",
    "outcome_now",
    "record_outcome",
    "record_outcomes",
    "run_job",
    "settle",
]


@dataclass(frozen=True)
class Settings:
    """Tunables shared by the stages, with their documented defaults."""

    robots_user_agent: str = "cdif-harvester"
    # The token of the robots.txt group that announces CDIF sitemaps (CDIF discoverability,
    # "Find metadata"); its rules apply to the locations of those sitemaps too.
    cdif_user_agent: str = "CDIF1.0"
    max_sitemap_depth: int = 5
    # The sitemaps.org protocol limits: 50,000 URLs and 50 MiB uncompressed per sitemap.
    max_sitemap_urls: int = 50_000
    # URL jobs handed on per sitemap job; a bigger sitemap continues in follow-up jobs, so one
    # invocation always finishes well inside the expander's timeout.
    max_urls_per_job: int = 5_000
    # Crawl-delay is honoured up to this many seconds (a larger value is read as this).
    max_crawl_delay: float = 10.0
    max_document_bytes: int = 10 * 1024 * 1024
    max_sitemap_bytes: int = 50 * 1024 * 1024
    # Requests in flight at once per host (origin). Two: a person's browser opens up to six
    # connections to a site, so two keeps a harvest well below one visitor's load, yet a large
    # harvest takes half the time it would with one (a slow answer does not stall the host's
    # queue). Crawl-delay, when a host sets one, spaces the starts whatever this says.
    requests_per_host: int = 2
    # Per-host exceptions, keyed by origin (``https://data.example.org``) or by host name
    # (``data.example.org``, any scheme and port): e.g. 1 for a fragile publisher.
    requests_per_host_overrides: Mapping[str, int] = field(default_factory=dict)
    # A slot taken by a worker that never gives it back (a crashed Lambda) is free again after
    # this many seconds: longer than the fetcher's 30 s total limit on one request.
    host_slot_lease: float = 60.0
    # A Retry-After (429, 503) holds the host closed for at most this long: 15 minutes, the
    # longest SQS message delay, so one answer cannot park a host for days.
    max_retry_after: float = 900.0
    # Anti-spoofing (1997 metadata-linking draft): a self-asserted metadata document that claims
    # a resource on another origin is checked against that resource's own metadata links. It
    # costs one or two requests per such document; operators of trusted sources may turn it off.
    verify_claims: bool = True
    # Remote JSON-LD contexts that may be fetched (through the safe fetcher, at most
    # max_context_bytes, once per process): exact URLs, or prefixes ending in "/". Every other
    # remote context is never fetched; the record is processed without it and the report says so.
    trusted_contexts: tuple[str, ...] = ()
    max_context_bytes: int = 1024 * 1024
    # Incremental harvesting (cdif_harvester.domain.discovery.incremental): skip what has not
    # changed since the last harvest. Off means a full refresh: everything is fetched, normalised
    # and rewritten (conditional requests are still sent; a 304 is then read as the kept answer).
    incremental: bool = True
    # Optional SHACL validation (domain/records/shacl.py, needs the ``shacl`` extra): its violations
    # join the record's errors. Off by default: it costs far more per record than JSON Schema.
    shacl: bool = False

    def slots_for(self, origin: str) -> int:
        """Requests allowed in flight at once on ``origin`` (``scheme://host[:port]``)."""
        overrides = self.requests_per_host_overrides
        if overrides:
            for key in (origin, urlsplit(origin).hostname or ""):
                if key in overrides:
                    return max(1, int(overrides[key]))
        return max(1, self.requests_per_host)

    def crawl_delay_of(self, policy: RobotsPolicy) -> float:
        """The Crawl-delay ``policy`` sets for our user agent, capped (0 when it sets none)."""
        return min(policy.crawl_delay(self.robots_user_agent) or 0.0, self.max_crawl_delay)


class RobotsCache(dict[str, RobotsPolicy]):
    """Parsed robots.txt policies by origin; listeners hear of every policy stored.

    That is how a host's Crawl-delay reaches the politeness gate the moment the expander has
    read it, whichever process reads it (on AWS the resolver never parses robots.txt itself).
    """

    def __init__(self) -> None:
        super().__init__()
        self._listeners: list[Callable[[str, RobotsPolicy], None]] = []

    def subscribe(self, listener: Callable[[str, RobotsPolicy], None]) -> None:
        """Call ``listener(origin, policy)`` whenever a policy is stored from now on."""
        self._listeners.append(listener)

    def __setitem__(self, origin: str, policy: RobotsPolicy) -> None:
        super().__setitem__(origin, policy)
        for listener in self._listeners:
            listener(origin, policy)


@dataclass
class Ports:
    """Everything a stage talks to. ``robots`` caches parsed robots.txt by origin;
    ``sources`` is the registry of publishers (None where no registry is used)."""

    store: ObjectStore
    catalog: CatalogIndex
    queue: JobQueue
    fetcher: Fetcher
    clock: Clock
    settings: Settings = field(default_factory=Settings)
    robots: RobotsCache = field(default_factory=RobotsCache)
    sources: SourceRegistry | None = None


def record_outcome(
    ports: Ports,
    *,
    run_id: str,
    source: str,
    url: str,
    outcome: Outcome,
    reason: str | None = None,
    pattern: str | None = None,
) -> UrlOutcome:
    """Record (and return) the outcome of one URL in one run."""
    result = outcome_now(
        ports,
        run_id=run_id,
        source=source,
        url=url,
        outcome=outcome,
        reason=reason,
        pattern=pattern,
    )
    finish_if_done(ports, ports.catalog.put_outcome(result))
    return result


def outcome_now(
    ports: Ports,
    *,
    run_id: str,
    source: str,
    url: str,
    outcome: Outcome,
    reason: str | None = None,
    pattern: str | None = None,
) -> UrlOutcome:
    """The outcome of one URL in one run, stamped with the time now (not yet recorded)."""
    return UrlOutcome(
        run_id=run_id,
        source=source,
        url=url,
        outcome=outcome,
        reason=reason,
        pattern=pattern,
        recorded_at=ports.clock.now().isoformat(timespec="seconds"),
    )


def record_outcomes(ports: Ports, outcomes: Sequence[UrlOutcome]) -> None:
    """Record many outcomes of one run at once (one catalogue write for the run's counters)."""
    if outcomes:
        finish_if_done(ports, ports.catalog.put_outcomes(outcomes))


def held_state(ports: Ports, url: str) -> UrlState | None:
    """The URL's state when it last produced records and is still listed, else None: what
    incremental harvesting compares against (always None when it is off)."""
    if not ports.settings.incremental:
        return None
    state = ports.catalog.get_url(url)
    return state if state is not None and _holds_records(state) else None


def held_states(ports: Ports, urls: Sequence[str]) -> dict[str, UrlState]:
    """:func:`held_state` of many URLs at once (batched catalogue reads), by URL."""
    if not ports.settings.incremental or not urls:
        return {}
    return {
        url: state for url, state in ports.catalog.get_urls(urls).items() if _holds_records(state)
    }


def _holds_records(state: UrlState) -> bool:
    return bool(state.fingerprint and state.record_ids and not state.withdrawn_at)


def finish_if_done(ports: Ports, status: RunStatus | None) -> bool:
    """Mark the run finished when ``status`` (the run's counters just written) says every URL
    that entered has its outcome and no sitemap job is left; True only for the one caller
    that marked it (see :mod:`cdif_harvester.stages.runs`)."""
    if status is None or status.state is RunState.FINISHED or not status.done:
        return False
    return ports.catalog.finish_run(
        status.run_id, at=ports.clock.now().isoformat(timespec="seconds")
    )


def settle(ports: Ports, *, run_id: str, source: str, url: str, error: HarvestError) -> UrlOutcome:
    """Record the outcome a permanent (or finally given-up retryable) error ends a URL in.

    The reason is ``<code>: <details>`` so it is both machine-groupable and readable.
    """
    return record_outcome(
        ports,
        run_id=run_id,
        source=source,
        url=url,
        outcome=Outcome(error.outcome),
        reason=f"{error.reason}: {error}",
    )


class _UrlWork(Protocol):
    @property
    def run_id(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def url(self) -> str: ...


_J = TypeVar("_J", bound=_UrlWork)


@runtime_checkable
class _JobScoped(Protocol):
    def job_scope(
        self,
        *,
        run_id: str,
        job_key: str,
        resume: bool = False,
        requests_per_host: int | None = None,
        crawl_delay: float | None = None,
    ) -> AbstractContextManager[None]: ...


def job_key(stage: Callable[..., Any], job: object) -> str:
    """A stable key of one job of one stage: the same message always gives the same key."""
    data = plain(job) if dataclasses.is_dataclass(job) else repr(job)
    name = getattr(stage, "__qualname__", repr(stage))
    text = json.dumps([name, data], sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def run_job(
    ports: Ports, job: _J, stage: Callable[[Ports, _J], Any], *, resume: bool = False
) -> Any:
    """Run one stage on one job; a permanent error becomes the URL's recorded outcome.

    Retryable errors propagate: the driver (SQS redelivery, or the local runner's retry loop)
    decides when to give up and then calls :func:`settle` itself. So does
    :class:`~cdif_harvester.errors.Deferred`, which the driver puts back without counting an
    attempt.

    When the fetcher offers a job scope (the politeness fetcher does), the stage runs inside
    one: the requests of this job are journalled, and with ``resume`` (the job was deferred
    before) the answers it already got are replayed instead of being asked again; the job's
    source limits (``requests_per_host``, ``crawl_delay``) apply to its requests. Stages know
    nothing of it.
    """
    fetcher = ports.fetcher
    scope: AbstractContextManager[None] = (
        fetcher.job_scope(
            run_id=job.run_id,
            job_key=job_key(stage, job),
            resume=resume,
            # A registered source's own limits (sitemap and URL jobs carry them).
            requests_per_host=getattr(job, "requests_per_host", None),
            crawl_delay=getattr(job, "crawl_delay", None),
        )
        if isinstance(fetcher, _JobScoped)
        else nullcontext()
    )
    try:
        with scope:
            return stage(ports, job)
    except PermanentError as error:
        return settle(ports, run_id=job.run_id, source=job.source, url=job.url, error=error)


def retry_after_of(ports: Ports, response: FetchResponse) -> float | None:
    """Seconds a 429/503 answer asks to wait (``Retry-After``), capped by the settings."""
    value = response.header("retry-after")
    seconds = parse_retry_after(value, now=ports.clock.now()) if value else None
    return None if seconds is None else min(seconds, ports.settings.max_retry_after)
