"""Harvest runs: one run id through every stage, counted as it goes, finished exactly once.

Sitemap jobs announce the jobs they send and count themselves done; URLs *enter* the run once;
every outcome *settles* its URL (counters in the catalogue,
:class:`~cdif_harvester.ports.CatalogIndex`). The worker whose write finishes the run marks it
(a conditional write) and :func:`cdif_harvester.stages.finish.close_run` deals with its end.
Steps are keyed on the work, so a job that runs twice counts once.

See docs/decisions/0004-run-counting.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from cdif_harvester.contracts import SitemapJob
from cdif_harvester.model import RunStatus, UrlOutcome
from cdif_harvester.stages.outcomes import finish_if_done
from cdif_harvester.wiring import Wiring

__all__ = [
    "begin_run",
    "enter_urls",
    "expect_sitemaps",
    "sitemap_done",
    "sitemap_step",
]


def begin_run(
    wiring: Wiring,
    run_id: str,
    entry_urls: Sequence[str],
    *,
    trigger: str = "manual",
    source_id: str | None = None,
) -> RunStatus:
    """Record a new run that starts with one sitemap job per entry URL; return its status."""
    now = wiring.clock.now().isoformat(timespec="seconds")
    run = RunStatus(
        run_id=run_id,
        entry_urls=tuple(entry_urls),
        started_at=now,
        source_id=source_id,
        trigger=trigger,
        sitemaps=len(entry_urls),
        updated_at=now,
    )
    wiring.catalog.start_run(run)
    return run


def sitemap_step(job: SitemapJob) -> str:
    """The key of one sitemap job's work: its sitemap and the part it reads."""
    text = f"{job.url}\n{job.offset}\n{job.body_key or ''}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def expect_sitemaps(wiring: Wiring, job: SitemapJob, count: int, *, what: str) -> None:
    """Count ``count`` sitemap jobs that ``job`` is about to send (``what``: ``children`` or
    ``follow-up``; each counted once per job, however often the job runs)."""
    if count:
        wiring.catalog.count_sitemaps(job.run_id, count, step=f"{sitemap_step(job)}:{what}")


def sitemap_done(wiring: Wiring, job: SitemapJob) -> bool:
    """Count ``job`` done (and its sitemap read by the run); True when that finished the run."""
    status = wiring.catalog.count_sitemaps(
        job.run_id, -1, step=f"{sitemap_step(job)}:done", sitemap=job.url
    )
    return finish_if_done(wiring, status)


def enter_urls(
    wiring: Wiring, job: SitemapJob, urls: Sequence[str], *, settled: Sequence[UrlOutcome] = ()
) -> set[str]:
    """Enter ``urls`` into ``job``'s run; return those to send (new to the run, or entered by
    this same job before). The URLs of ``settled`` enter with their outcome, never sent."""
    if not urls and not settled:
        return set()
    step = sitemap_step(job)
    return set(wiring.catalog.enter_urls(job.run_id, urls, step=step, settled=settled))
