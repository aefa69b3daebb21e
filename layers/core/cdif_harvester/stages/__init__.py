"""The pipeline stages: one function per stage, written against the ports only.

The same functions run inside the Lambda handlers (with the AWS adapters) and inside the local
runner (with the local adapters). Each takes a :class:`Ports` bundle and one validated message,
sends the next message(s) or records the URL's outcome, and raises a
:class:`~cdif_harvester.errors.HarvestError` when it cannot: permanent errors become a recorded
outcome through :func:`settle`, retryable ones are retried by whoever drives the stage.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from cdif_harvester.domain.robots import RobotsPolicy
from cdif_harvester.errors import HarvestError, PermanentError
from cdif_harvester.model import Outcome, UrlOutcome
from cdif_harvester.ports import CatalogIndex, Clock, Fetcher, JobQueue, ObjectStore

__all__ = ["Ports", "Settings", "record_outcome", "run_job", "settle"]


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


@dataclass
class Ports:
    """Everything a stage talks to. ``robots`` caches parsed robots.txt by origin."""

    store: ObjectStore
    catalog: CatalogIndex
    queue: JobQueue
    fetcher: Fetcher
    clock: Clock
    settings: Settings = field(default_factory=Settings)
    robots: dict[str, RobotsPolicy] = field(default_factory=dict)


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
    result = UrlOutcome(
        run_id=run_id,
        source=source,
        url=url,
        outcome=outcome,
        reason=reason,
        pattern=pattern,
        recorded_at=ports.clock.now().isoformat(timespec="seconds"),
    )
    ports.catalog.put_outcome(result)
    return result


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


def run_job(ports: Ports, job: _J, stage: Callable[[Ports, _J], Any]) -> Any:
    """Run one stage on one job; a permanent error becomes the URL's recorded outcome.

    Retryable errors propagate: the driver (SQS redelivery, or the local runner's retry loop)
    decides when to give up and then calls :func:`settle` itself.
    """
    try:
        return stage(ports, job)
    except PermanentError as error:
        return settle(ports, run_id=job.run_id, source=job.source, url=job.url, error=error)
